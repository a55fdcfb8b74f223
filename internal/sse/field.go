package sse

import (
	"bytes"
	"math"
)

// parseLine applies the non-blank line buf[s:e] to the current block.
func (r *Reader) parseLine(s, e int) {
	line := r.buf[s:e]
	colon := bytes.IndexByte(line, ':')
	if colon == 0 {
		return // comment
	}
	r.hasField = true
	name, vs := line, e // no colon: whole line is the name, value empty
	if colon > 0 {
		name = line[:colon]
		vs = s + colon + 1
		if vs < e && r.buf[vs] == ' ' {
			vs++
		}
	}
	value := r.buf[vs:e]
	switch string(name) {
	case "data":
		r.addData(vs, e)
	case "event":
		if string(value) != r.lastType {
			r.lastType = string(value)
		}
		r.typ = r.lastType
	case "id":
		if bytes.IndexByte(value, 0) >= 0 {
			return
		}
		if string(value) != r.lastID {
			r.lastID = string(value)
		}
		r.id = r.lastID
		r.hasID = true
	case "retry":
		if n, ok := parseRetry(value); ok {
			r.retry = n
		}
	}
}

// addData records the data value buf[s:e]. A single value is kept as a
// position in buf; from the second one on, values are joined in dataBuf.
func (r *Reader) addData(s, e int) {
	switch r.dataN {
	case 0:
		r.dataS, r.dataE = s, e
	case 1:
		r.dataBuf = append(r.dataBuf[:0], r.buf[r.dataS:r.dataE]...)
		fallthrough
	default:
		r.dataBuf = append(r.dataBuf, '\n')
		r.dataBuf = append(r.dataBuf, r.buf[s:e]...)
	}
	r.dataN++
}

// parseRetry parses a non-empty string of ASCII digits that fits in an int.
func parseRetry(v []byte) (int, bool) {
	if len(v) == 0 {
		return 0, false
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int(c - '0')
		if n > (math.MaxInt-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}
