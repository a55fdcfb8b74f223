package sse

import (
	"bytes"
	"strconv"
	"strings"
)

// refBlock is one block as parsed by refParse.
type refBlock struct {
	end    int // offset just past the block's terminating blank line
	minEnd int // end without the LF of a CRLF blank line (== end otherwise)

	Type         string
	Data         string
	HasData      bool
	ID           string
	HasID        bool
	Retry        int
	Unterminated bool
	Comment      bool
}

// refParse is a deliberately simple reference parser working on the whole
// input at once: strip one BOM, split into lines, group lines into blocks at
// blank lines, and interpret the fields with the strings package. Blank
// lines before a block's first line are skipped, and a trailing run of blank
// lines yields no block. A final block without a blank line is returned
// with Unterminated set.
func refParse(in []byte) []refBlock {
	pos := 0
	if bytes.HasPrefix(in, []byte("\xEF\xBB\xBF")) {
		pos = 3
	}
	var blocks []refBlock
	var lines []string
	flush := func(b refBlock) {
		var data []string
		b.Retry = -1
		b.Comment = true
		for _, l := range lines {
			if strings.HasPrefix(l, ":") {
				continue
			}
			b.Comment = false
			name, value, found := strings.Cut(l, ":")
			if found {
				value = strings.TrimPrefix(value, " ")
			}
			switch name {
			case "data":
				data = append(data, value)
			case "event":
				b.Type = value
			case "id":
				if !strings.Contains(value, "\x00") {
					b.ID, b.HasID = value, true
				}
			case "retry":
				if n, err := strconv.ParseUint(value, 10, 63); err == nil && strings.Trim(value, "0123456789") == "" {
					b.Retry = int(n)
				}
			}
		}
		b.HasData = data != nil
		b.Data = strings.Join(data, "\n")
		blocks = append(blocks, b)
		lines = nil
	}
	for pos < len(in) {
		i := pos
		for i < len(in) && in[i] != '\r' && in[i] != '\n' {
			i++
		}
		text := string(in[pos:i])
		if i == len(in) { // last line without a line ending
			lines = append(lines, text)
			pos = i
			break
		}
		end := i + 1
		if in[i] == '\r' && end < len(in) && in[end] == '\n' {
			end++
		}
		pos = end
		if text != "" {
			lines = append(lines, text)
			continue
		}
		if lines != nil {
			flush(refBlock{end: end, minEnd: i + 1})
		}
	}
	if lines != nil {
		flush(refBlock{end: len(in), minEnd: len(in), Unterminated: true})
	}
	return blocks
}
