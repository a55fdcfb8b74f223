package tagged

import (
	"bytes"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
)

// Source is a Chat Completions stream with its inline reasoning moved into
// a reasoning field (see the package doc). It is not safe for concurrent
// use.
type Source struct {
	src   sse.Source
	p     thinktag.Parser
	field string
	first chat.FirstChoice

	scratch []byte             // a delta's decoded text
	join    []byte             // segments of one kind joined into one event's text
	segs    []thinktag.Segment // what the parser made of it
	buf     []byte             // the rewritten events' bytes
	queue   []sse.Event        // events ready, from one upstream event
	qi      int
	err     error // the source's end, returned once the queue is out

	// env is the envelope of the last content delta of choice 0: the
	// text the parser releases at the end goes out in it, and the next
	// delta in it is read without being classified again.
	env envelope

	loc, eloc  locator // other's, setEnvelope's
	doc        []byte  // an envelope with an empty text, for setEnvelope
	head, tail []byte  // envelopeOf's members before and after choices

	// seen is whether any content of choice 0 was fed since the parser
	// last started; ended is the parser's state when it last ended.
	seen  bool
	ended thinktag.State
	// native is set once choice 0 sent reasoning in a field before any
	// content text: the upstream parses reasoning itself, and the rest
	// of the stream passes as it came.
	native bool
}

// envelope is a content delta of choice 0 without its text: the event's
// data is pre, the text as a JSON string, then suf. rpre and rsuf are the
// same delta with the text in the reasoning field.
type envelope struct {
	pre, suf   []byte
	rpre, rsuf []byte // in rbuf
	rbuf       []byte
	// role is whether the delta carries the role (the first chunk).
	role bool
	// upstream is whether pre and suf are an upstream event's own, one
	// pace.Classify found a plain text delta of choice 0 (or, with its
	// text not valid UTF-8, other did): an event with the same bytes
	// around a string is one too, and is read without a classification.
	upstream bool
}

// NewSource returns src with the inline reasoning of choice 0 parsed by
// syn and sent in field (chat.FieldReasoningContent or
// chat.FieldReasoning).
func NewSource(src sse.Source, syn *thinktag.Syntax, field string) *Source {
	return &Source{src: src, p: syn.Parser(), field: field}
}

// State is what the parser has seen so far: the blocks, and, once the
// stream ended, whether the last one was never closed. A stream with no
// content text of choice 0 has no block, even with StartsInReasoning.
func (s *Source) State() thinktag.State {
	if !s.seen {
		return s.ended
	}
	st := s.p.State()
	st.Blocks += s.ended.Blocks
	return st
}

// BeforeRead forwards the pacer's per-read hook (see sse.BeforeReader).
func (s *Source) BeforeRead(f func()) { sse.ForwardBeforeRead(s.src, f) }

// Next returns the next event of the rewritten stream.
func (s *Source) Next() (sse.Event, error) {
	for {
		if s.qi < len(s.queue) {
			ev := s.queue[s.qi]
			s.qi++
			return ev, nil
		}
		if s.err != nil {
			return sse.Event{}, s.err
		}
		s.queue, s.qi, s.buf = s.queue[:0], 0, s.buf[:0]
		ev, err := s.src.Next()
		if err != nil {
			// A stream that ends without a finish chunk (cut short, or a
			// server that sends none): what was held goes out first.
			s.flush()
			s.err = err
			continue
		}
		if s.native || s.p.Plain() {
			return ev, nil // no tag will ever come: the cheapest path
		}
		s.push(ev)
	}
}

// push queues what ev becomes.
func (s *Source) push(ev sse.Event) {
	if !ev.Unterminated {
		s.pushEvent(ev)
		return
	}
	// The stream's last block (a reader says so only at its end), cut
	// before its blank line: nothing may follow it, or it would run into
	// the next event. Text still held goes out before it.
	n := len(s.queue)
	s.pushEvent(ev)
	if last := len(s.queue) - 1; last >= n && s.queue[last].Unterminated {
		u := s.queue[last]
		s.queue = s.queue[:last]
		s.flush()
		s.queue = append(s.queue, u)
	}
}

// pushEvent queues what ev becomes.
func (s *Source) pushEvent(ev sse.Event) {
	if !ev.HasData {
		s.queue = append(s.queue, ev)
		return
	}
	if ev.IsDone() {
		s.flush()
		s.queue = append(s.queue, ev)
		return
	}
	if text, ok := s.sameEnvelope(&ev); ok {
		s.text(ev, text)
		return
	}
	c, scratch := pace.Classify(&ev, s.scratch[:0])
	s.scratch = scratch[:0]
	switch {
	case c.Kind == pace.KindText && c.Channel == pace.ChanAnswer:
		if !s.first.IsZero(ev.Data, c.Prefix, c.Suffix) || !s.setEnvelope(c.Prefix, c.Suffix, c.HasRole) {
			s.other(ev) // another choice's: read whole
			return
		}
		s.text(ev, c.Text)
	case c.Kind == pace.KindOther:
		s.other(ev)
	case c.Kind == pace.KindText && !s.seen && s.ended.Blocks == 0 && s.first.IsZero(ev.Data, c.Prefix, c.Suffix):
		// Reasoning in a field, and no text yet: a reasoning parser
		// upstream. Its content is the answer, even to a Syntax that
		// starts in reasoning.
		s.native = true
		s.queue = append(s.queue, ev)
	default:
		// Reasoning in a field, an error event: as it came.
		s.queue = append(s.queue, ev)
	}
}

var dataPrefix = []byte("data: ")

// sameEnvelope returns the text of ev when ev is a content delta in the
// envelope of the last one: the same bytes around one JSON string, on one
// data line. That is all pace.Classify would have checked again, at a
// fraction of its cost (the steady path).
func (s *Source) sameEnvelope(ev *sse.Event) ([]byte, bool) {
	e := &s.env
	d, raw := ev.Data, ev.Raw
	// One "data: " line and the blank line: no event type, id or retry
	// (a block with any other line is longer than its data plus 8).
	if !e.upstream || len(raw) != len(d)+8 || !bytes.HasPrefix(raw, dataPrefix) ||
		raw[len(raw)-2] != '\n' || raw[len(raw)-1] != '\n' {
		return nil, false
	}
	n := len(d) - len(e.suf)
	if n-len(e.pre) < 3 || !bytes.HasPrefix(d, e.pre) || !bytes.Equal(d[n:], e.suf) {
		return nil, false // a different envelope, or an empty text
	}
	lit := d[len(e.pre):n]
	if end, _ := jsonscan.ScanString(lit, 0); end != len(lit) {
		return nil, false
	}
	text, ok := unquote(s.scratch[:0], lit)
	if !ok {
		return nil, false
	}
	s.scratch = text[:0]
	return text, true
}

// text feeds the text of a content delta of choice 0 in s.env, and queues
// what the delta becomes.
func (s *Source) text(ev sse.Event, text []byte) {
	s.seen = true
	s.segs = s.p.Feed(s.segs[:0], text)
	switch {
	case whole(s.segs, text):
		s.queue = append(s.queue, ev) // all answer, as it came, byte for byte
	case len(s.segs) == 0:
		if s.env.role {
			s.emit(thinktag.Answer, nil) // the role goes on
		}
	default:
		s.emitSegs()
	}
}

// whole reports that segs is one answer segment that is text itself:
// nothing held, nothing released (the released bytes of an earlier piece
// may be as long as text, and not be text).
func whole(segs []thinktag.Segment, text []byte) bool {
	return len(segs) == 1 && segs[0].Kind == thinktag.Answer && len(text) > 0 &&
		len(segs[0].Text) == len(text) && &segs[0].Text[0] == &text[0]
}

// flush ends choice 0's text: what the parser held goes out in the last
// delta's envelope, and the parser starts afresh for any text after it.
func (s *Source) flush() {
	if !s.seen {
		return
	}
	s.segs = s.p.Flush(s.segs[:0])
	s.emitSegs()
	s.end()
}

// end starts the parser afresh, keeping what State reports of the text
// that ended.
func (s *Source) end() {
	st := s.p.State()
	s.ended.Blocks += st.Blocks
	s.ended.Unclosed = st.Unclosed
	s.ended.Reasoning = false
	s.p.Reset()
	s.seen = false
}

// emitSegs queues s.segs in s.env, one event per run of one kind: the
// bytes held back by one delta and released by the next go out with the
// next one's text, not in an event of their own.
func (s *Source) emitSegs() {
	segs := s.segs
	for i := 0; i < len(segs); {
		j := i + 1
		for j < len(segs) && segs[j].Kind == segs[i].Kind {
			j++
		}
		text := segs[i].Text
		if j > i+1 {
			s.join = s.join[:0]
			for _, sg := range segs[i:j] {
				s.join = append(s.join, sg.Text...)
			}
			text = s.join
		}
		s.emit(segs[i].Kind, text)
		i = j
	}
}

// emit queues a text event of kind k in s.env.
func (s *Source) emit(k thinktag.Kind, text []byte) {
	pre, suf := s.env.pre, s.env.suf
	if k == thinktag.Reasoning {
		pre, suf = s.env.rpre, s.env.rsuf
	}
	start := len(s.buf)
	s.buf = append(s.buf, dataPrefix...)
	s.buf = append(s.buf, pre...)
	s.buf = pace.AppendString(s.buf, text)
	s.buf = append(s.buf, suf...)
	s.buf = append(s.buf, '\n', '\n')
	end := len(s.buf)
	s.queue = append(s.queue, sse.DataEvent(s.buf[start:end:end]))
}

// setEnvelope makes pre and suf, an upstream content delta of choice 0
// around its text, s.env, with its reasoning form; false (s.env
// unchanged) when the delta is not what locate reads as one.
func (s *Source) setEnvelope(pre, suf []byte, role bool) bool {
	e := &s.env
	if e.upstream && bytes.Equal(pre, e.pre) && bytes.Equal(suf, e.suf) {
		return true
	}
	// The delta with an empty text: the members around it, located.
	s.doc = append(append(append(s.doc[:0], pre...), '"', '"'), suf...)
	l := &s.eloc
	if !l.run(s.doc, "delta", s.field) || l.lit != [2]int{len(pre), len(pre) + 2} {
		return false
	}
	e.pre = append(e.pre[:0], pre...)
	e.suf = append(e.suf[:0], suf...)
	e.role, e.upstream = role, true
	// The reasoning form: the content key renamed to the field, and a
	// member of the field's name (SGLang's "reasoning_content":null)
	// renamed to content, so that no key is there twice (a reader keeps
	// the last of two, here the null).
	out := e.rbuf[:0]
	at, lit := 0, len(pre)
	for _, k := range l.keys() {
		out = append(out, s.doc[at:k.s]...)
		name := "content"
		if k.s == l.key[0] {
			name = s.field
		}
		out = append(append(append(out, '"'), name...), '"')
		if k.s < len(pre) {
			lit += len(name) + 2 - (k.e - k.s)
		}
		at = k.e
	}
	out = append(out, s.doc[at:]...)
	e.rbuf = out
	e.rpre = out[:lit:lit]
	e.rsuf = out[lit+2:]
	return true
}

// other handles an event that is not a plain text delta. A chunk whose
// choice 0 carries content text with something else (its finish_reason,
// tool calls, logprobs, another choice, usage) has that text parsed and
// sent as text events, then the chunk without its content; a
// finish_reason ends the text. A plain text delta that pace.Classify
// refused only for its text (not valid UTF-8: a delta cut inside a
// character) is read as one. Anything else passes as it came.
func (s *Source) other(ev sse.Event) {
	d := ev.Data
	l := &s.loc
	if !l.run(d, "delta", s.field) || l.choice < 0 {
		s.queue = append(s.queue, ev)
		return
	}
	if l.lit[1]-l.lit[0] <= 2 {
		// No text (a tool call, a finish chunk, the role with ""): held
		// text goes out before a finish.
		if l.finish {
			s.flush()
		}
		s.queue = append(s.queue, ev)
		return
	}
	text, ok := unquote(s.scratch[:0], d[l.lit[0]:l.lit[1]])
	if !ok {
		s.queue = append(s.queue, ev) // unreachable: the literal was scanned
		return
	}
	s.scratch = text[:0]
	if l.plain && len(ev.Raw) == len(d)+8 && bytes.HasPrefix(ev.Raw, dataPrefix) &&
		s.setEnvelope(d[:l.lit[0]], d[l.lit[1]:], l.role) {
		s.text(ev, text)
		return
	}
	s.envelopeOf(d)
	s.seen = true
	s.segs = s.p.Feed(s.segs[:0], text)
	if l.finish {
		s.segs = s.p.Flush(s.segs)
	}
	if whole(s.segs, text) {
		s.queue = append(s.queue, ev) // all answer, as it came
	} else {
		s.emitSegs()
		// The chunk without its content: the rest of its delta, its
		// finish_reason, tool calls, logprobs, other choices, usage.
		start := len(s.buf)
		s.buf = append(s.buf, d[:l.del[0]]...)
		s.buf = append(s.buf, d[l.del[1]:]...)
		s.queue = append(s.queue, sse.NewEvent(ev.Type, s.buf[start:]))
	}
	if l.finish {
		s.end()
	}
}

// envelopeOf makes s.env the envelope of the text events made of a chunk
// d that other reads (s.loc located it): its members in their order, byte
// for byte, but usage (which stays on the chunk) and choices, which is
// choice 0 reduced to its index and a delta of the text only.
func (s *Source) envelopeOf(d []byte) {
	l, e := &s.loc, &s.env
	head, tail := s.head[:0], s.tail[:0]
	after := false
	for _, m := range l.members {
		switch {
		case m.kind == memberChoices:
			after = true
		case m.kind == memberUsage:
		case after:
			tail = append(append(tail, ','), d[m.s:m.e]...)
		default:
			head = append(append(head, d[m.s:m.e]...), ',')
		}
	}
	s.head, s.tail = head, tail
	e.pre = s.open(e.pre[:0], d, "content")
	e.suf = append(append(append(e.suf[:0], "}}]"...), tail...), '}')
	e.rbuf = s.open(e.rbuf[:0], d, s.field)
	n := len(e.rbuf)
	e.rbuf = append(e.rbuf, e.suf...)
	e.rpre, e.rsuf = e.rbuf[:n:n], e.rbuf[n:]
	e.role, e.upstream = false, false
}

// open appends the start of a text event of envelopeOf, up to the text of
// the delta member key.
func (s *Source) open(dst, d []byte, key string) []byte {
	dst = append(append(dst, '{'), s.head...)
	dst = append(dst, `"choices":[{`...)
	if idx := s.loc.index; idx[1] > 0 {
		dst = append(append(append(dst, `"index":`...), d[idx[0]:idx[1]]...), ',')
	}
	dst = append(append(append(dst, `"delta":{"`...), key...), `":`...)
	return dst
}
