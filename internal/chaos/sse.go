package chaos

import "bytes"

// Event is one dispatched SSE event as an LF-only client sees it.
type Event struct {
	Type    string // the `event:` field, "" when absent
	Data    []byte // the `data:` lines joined with "\n"
	HasData bool   // at least one data line
}

// LFParser is a strict SSE parser of the kind the official OpenAI SDKs
// use (openai-go, openai-python): lines end at "\n" only, one trailing
// "\r" is dropped (so CRLF works), a bare "\r" is NOT a line end. A
// stream written with bare CRs is therefore one endless line to it, and
// bytes glued after a bare CR belong to the previous line: exactly the
// clients the relay must still serve correctly. Comments (":") are
// counted, not dispatched; an event is dispatched at an empty line when
// it has a data or event field. The zero value is ready to use.
type LFParser struct {
	line     []byte // the unfinished line
	typ      string
	data     []byte
	hasData  bool
	hasField bool

	Comments int // comment lines seen (heartbeats)
	Seams    int // of them, the relay's `: relay-continued` marks
	Lines    int // complete lines seen
}

// maxLine bounds the unfinished line kept: a CR-only stream is one line,
// and the parser must not grow without bound on it. Past the bound the
// line is still consumed, but only its first maxLine bytes are kept.
const maxLine = 1 << 20

// Feed parses p and returns the events it completed.
func (ps *LFParser) Feed(p []byte) []Event {
	var out []Event
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			ps.keep(p)
			return out
		}
		ps.keep(p[:i])
		line := ps.line
		ps.line = ps.line[:0]
		p = p[i+1:]
		line = bytes.TrimSuffix(line, []byte{'\r'})
		ps.Lines++
		if ev, ok := ps.processLine(line); ok {
			out = append(out, ev)
		}
	}
	return out
}

func (ps *LFParser) keep(b []byte) {
	if room := maxLine - len(ps.line); room > 0 {
		ps.line = append(ps.line, b[:min(len(b), room)]...)
	}
}

// Pending reports whether an unfinished line or event is held: bytes a
// strict client drops when the stream ends.
func (ps *LFParser) Pending() bool { return len(ps.line) > 0 || ps.hasField }

func (ps *LFParser) processLine(line []byte) (Event, bool) {
	if len(line) == 0 {
		if !ps.hasField {
			return Event{}, false
		}
		ev := Event{Type: ps.typ, Data: ps.data, HasData: ps.hasData}
		ps.typ, ps.data, ps.hasData, ps.hasField = "", nil, false, false
		return ev, true
	}
	if line[0] == ':' {
		ps.Comments++
		if bytes.HasPrefix(bytes.TrimPrefix(line[1:], []byte{' '}), []byte("relay-continued")) {
			ps.Seams++
		}
		return Event{}, false
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		value = bytes.TrimPrefix(value, []byte{' '})
	}
	switch string(name) {
	case "data":
		if ps.hasData {
			ps.data = append(ps.data, '\n')
		}
		ps.data = append(ps.data, value...)
		ps.hasData, ps.hasField = true, true
	case "event":
		ps.typ, ps.hasField = string(value), true
	default:
		// id:, retry: and unknown fields (such as "\rdata" glued after a
		// bare CR) carry nothing a chat client reads.
	}
	return Event{}, false
}
