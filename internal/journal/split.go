package journal

import (
	"bytes"
	"strconv"
)

// Block is one SSE event block as a client is sent it.
type Block struct {
	// Raw is the block's lines, any `id:` and `retry:` lines removed (the
	// journal writes its own), ending with the blank line that ends it.
	// It is valid only during the emit call that hands it.
	Raw []byte
	// Comment reports a block of comment lines only (a heartbeat, one of
	// the relay's `: relay-` notes) or a stray blank line: sent to a
	// connected client, never journaled.
	Comment bool
}

// Splitter cuts a byte stream into SSE blocks. Its zero value is ready.
// A block may arrive in pieces, and one write may hold several: Write
// keeps what is not a whole block yet until the rest comes.
type Splitter struct {
	pending []byte
	scratch []byte
}

// Write hands emit every block that b completes, in order.
func (s *Splitter) Write(b []byte, emit func(Block)) {
	buf := b
	if len(s.pending) > 0 {
		s.pending = append(s.pending, b...)
		buf = s.pending
	}
	used := s.scan(buf, false, emit)
	rest := buf[used:]
	switch {
	case len(rest) == 0:
		s.pending = s.pending[:0]
	case len(s.pending) > 0:
		// rest points into pending: move it to the front.
		n := copy(s.pending, rest)
		s.pending = s.pending[:n]
	default:
		s.pending = append(s.pending[:0], rest...)
	}
}

// Close ends the byte stream: it hands emit the blocks still pending (a
// \r at the very end ends its line, since no \n will follow it now) and
// returns what is left, the bytes of a block that never ended, as Rest.
func (s *Splitter) Close(emit func(Block)) []byte {
	if len(s.pending) > 0 {
		used := s.scan(s.pending, true, emit)
		n := copy(s.pending, s.pending[used:])
		s.pending = s.pending[:n]
	}
	return s.Rest()
}

// Rest returns the bytes of a block that never ended, and forgets them.
func (s *Splitter) Rest() []byte {
	r := bytes.Clone(s.pending)
	s.pending = s.pending[:0]
	return r
}

// scan emits the whole blocks at the front of buf and returns how many
// bytes they took. Lines end with \r\n, \n or \r, as the SSE spec says;
// a \r at the very end of buf waits, since a \n may follow it, unless
// the stream ended (eof).
func (s *Splitter) scan(buf []byte, eof bool, emit func(Block)) int {
	start, pos := 0, 0
	fields, strip := false, false
	for pos < len(buf) {
		i := bytes.IndexAny(buf[pos:], "\r\n")
		if i < 0 {
			break
		}
		end := pos + i + 1
		if buf[pos+i] == '\r' {
			if end == len(buf) && !eof {
				break // \r\n may be split across writes
			}
			if end < len(buf) && buf[end] == '\n' {
				end++
			}
		}
		line := buf[pos : pos+i]
		switch {
		case len(line) == 0:
			raw := buf[start:end]
			if strip {
				raw = s.stripped(raw)
			}
			emit(Block{Raw: raw, Comment: !fields})
			start, fields, strip = end, false, false
		case line[0] == ':':
		default:
			name := line
			if c := bytes.IndexByte(line, ':'); c >= 0 {
				name = line[:c]
			}
			if string(name) == "id" || string(name) == "retry" {
				strip = true
			} else {
				fields = true
			}
		}
		pos = end
	}
	return start
}

// stripped is raw without its id and retry lines.
func (s *Splitter) stripped(raw []byte) []byte {
	out := s.scratch[:0]
	for len(raw) > 0 {
		n := lineLen(raw)
		line := raw[:n]
		name := bytes.TrimRight(line, "\r\n")
		if c := bytes.IndexByte(name, ':'); c >= 0 {
			name = name[:c]
		}
		if string(name) != "id" && string(name) != "retry" {
			out = append(out, line...)
		}
		raw = raw[n:]
	}
	s.scratch = out
	return out
}

// lineLen is the length of b's first line with its ending.
func lineLen(b []byte) int {
	i := bytes.IndexAny(b, "\r\n")
	if i < 0 {
		return len(b)
	}
	if b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n' {
		return i + 2
	}
	return i + 1
}

// CommentLines is a comment block without its blank line. Once a stream
// carries ids, a blank line that ends a block with no data makes some
// SDKs dispatch an empty event (the Stainless-generated Python SDKs keep
// the last event id and emit an event for any blank line after one, then
// fail to parse its empty data as JSON): the comment lines alone keep a
// connection busy just as well, and every SSE parser skips them.
func CommentLines(block []byte) []byte {
	b := block
	for len(b) > 0 {
		n := lineLen(b)
		if len(bytes.TrimRight(b[:n], "\r\n")) == 0 {
			return block[:len(block)-len(b)]
		}
		b = b[n:]
	}
	return block
}

// Render appends a journaled event as a client is sent it: its id (the
// stream's id, a dot, its position), for the first event a retry hint in
// milliseconds (when retryMS > 0), then the block.
func Render(dst []byte, stream string, n uint64, retryMS int, block []byte) []byte {
	dst = append(dst, "id: "...)
	dst = append(dst, stream...)
	dst = append(dst, '.')
	dst = strconv.AppendUint(dst, n, 10)
	dst = append(dst, '\n')
	if retryMS > 0 && n == 1 {
		dst = append(dst, "retry: "...)
		dst = strconv.AppendInt(dst, int64(retryMS), 10)
		dst = append(dst, '\n')
	}
	return append(dst, block...)
}

// ParseID reads an event id Render wrote: the stream's id and the
// event's position.
func ParseID(id string) (stream string, n uint64, ok bool) {
	i := bytes.LastIndexByte([]byte(id), '.')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(id[i+1:], 10, 64)
	if err != nil || !ValidID(id[:i]) {
		return "", 0, false
	}
	return id[:i], n, true
}
