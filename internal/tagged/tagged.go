package tagged

import (
	"bytes"
	"encoding/json"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
)

// contentKey is the key of a delta's answer text, as pace.Classify's
// Prefix ends with it (then a colon and optional whitespace).
var contentKey = []byte(`"content"`)

// Source is a Chat Completions stream with its inline reasoning moved into
// a reasoning field (see the package doc). It is not safe for concurrent
// use.
type Source struct {
	src   sse.Source
	p     thinktag.Parser
	field string
	first chat.FirstChoice

	scratch []byte             // a delta's decoded text
	segs    []thinktag.Segment // what the parser made of it
	buf     []byte             // the rewritten events' bytes
	queue   []sse.Event        // events ready, from one upstream event
	qi      int
	err     error // the source's end, returned once the queue is out

	// envPre and envSuf are the envelope of the last content delta of
	// choice 0: the text the parser releases at the end goes out in it.
	envPre, envSuf []byte
	// seen is whether any content of choice 0 was fed since the parser
	// last started; ended is the parser's state when it last ended.
	seen  bool
	ended thinktag.State
}

// NewSource returns src with the inline reasoning of choice 0 parsed by
// syn and sent in field (chat.FieldReasoningContent or
// chat.FieldReasoning).
func NewSource(src sse.Source, syn *thinktag.Syntax, field string) *Source {
	return &Source{src: src, p: syn.Parser(), field: field}
}

// State is what the parser has seen so far: the blocks, and, once the
// stream ended, whether the last one was never closed.
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
		if s.p.Plain() {
			return ev, nil // no tag will ever come: the cheapest path
		}
		s.push(ev)
	}
}

// push queues what ev becomes.
func (s *Source) push(ev sse.Event) {
	if !ev.HasData {
		s.queue = append(s.queue, ev)
		return
	}
	if ev.IsDone() {
		s.flush()
		s.queue = append(s.queue, ev)
		return
	}
	c, scratch := pace.Classify(&ev, s.scratch[:0])
	s.scratch = scratch[:0]
	switch {
	case c.Kind == pace.KindText && c.Channel == pace.ChanAnswer:
		if bytes.LastIndex(c.Prefix, contentKey) < 0 || !s.first.IsZero(ev.Data, c.Prefix, c.Suffix) {
			// A key spelled with escapes, or another choice: read whole.
			s.other(ev)
			return
		}
		s.keepEnvelope(c.Prefix, c.Suffix)
		s.seen = true
		s.segs = s.p.Feed(s.segs[:0], c.Text)
		switch {
		case len(s.segs) == 1 && s.segs[0].Kind == thinktag.Answer && len(s.segs[0].Text) == len(c.Text):
			s.queue = append(s.queue, ev) // as it came, byte for byte
		case len(s.segs) == 0 && c.HasRole:
			s.emit(thinktag.Answer, nil, c.Prefix, c.Suffix) // the role goes on
		default:
			for _, sg := range s.segs {
				s.emit(sg.Kind, sg.Text, c.Prefix, c.Suffix)
			}
		}
	case c.Kind == pace.KindOther:
		s.other(ev)
	default:
		// Reasoning in a field, an error event: as it came.
		s.queue = append(s.queue, ev)
	}
}

// keepEnvelope remembers the envelope of a content delta of choice 0.
func (s *Source) keepEnvelope(pre, suf []byte) {
	if !bytes.Equal(pre, s.envPre) {
		s.envPre = append(s.envPre[:0], pre...)
	}
	if !bytes.Equal(suf, s.envSuf) {
		s.envSuf = append(s.envSuf[:0], suf...)
	}
}

// flush ends choice 0's text: what the parser held goes out in the last
// delta's envelope, and the parser starts afresh for any text after it.
func (s *Source) flush() {
	if !s.seen {
		return
	}
	s.segs = s.p.Flush(s.segs[:0])
	for _, sg := range s.segs {
		s.emit(sg.Kind, sg.Text, s.envPre, s.envSuf)
	}
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

// emit queues a text event: pre, text as a JSON string, suf; for
// reasoning, with the content key in pre renamed to the reasoning field.
func (s *Source) emit(k thinktag.Kind, text, pre, suf []byte) {
	start := len(s.buf)
	s.buf = append(s.buf, "data: "...)
	if k == thinktag.Reasoning {
		i := bytes.LastIndex(pre, contentKey)
		s.buf = append(s.buf, pre[:i]...)
		s.buf = append(s.buf, '"')
		s.buf = append(s.buf, s.field...)
		s.buf = append(s.buf, '"')
		s.buf = append(s.buf, pre[i+len(contentKey):]...)
	} else {
		s.buf = append(s.buf, pre...)
	}
	s.buf = pace.AppendString(s.buf, text)
	s.buf = append(s.buf, suf...)
	s.buf = append(s.buf, '\n', '\n')
	end := len(s.buf)
	s.queue = append(s.queue, sse.DataEvent(s.buf[start:end:end]))
}

// mark stands for the text in an envelope built from a decoded chunk: a
// string no provider sends, found again after json.Marshal.
const mark = `"\u0000tagged\u0000"`

// other handles an event that is not a plain text delta: a chunk whose
// choice 0 carries content with a finish_reason, tool calls or usage is
// decoded, its text parsed and sent as text events, then the chunk without
// its content; a finish_reason ends the text. Anything else passes as it
// came.
func (s *Source) other(ev sse.Event) {
	if !bytes.Contains(ev.Data, []byte(`"choices"`)) {
		s.queue = append(s.queue, ev)
		return
	}
	var top map[string]json.RawMessage
	var choices []map[string]json.RawMessage
	if json.Unmarshal(ev.Data, &top) != nil || json.Unmarshal(top["choices"], &choices) != nil {
		s.queue = append(s.queue, ev)
		return
	}
	i := choiceZero(choices)
	if i < 0 {
		s.queue = append(s.queue, ev)
		return
	}
	ch := choices[i]
	var delta map[string]json.RawMessage
	var text string
	_ = json.Unmarshal(ch["delta"], &delta)
	hasText := json.Unmarshal(delta["content"], &text) == nil && text != ""
	finish := len(ch["finish_reason"]) > 0 && string(ch["finish_reason"]) != "null"
	if !hasText {
		if finish {
			s.flush()
		}
		s.queue = append(s.queue, ev)
		return
	}
	pre, suf := envelope(top, ch)
	if pre == nil {
		s.queue = append(s.queue, ev) // unreachable: the chunk was just decoded
		return
	}
	s.seen = true
	s.segs = s.p.Feed(s.segs[:0], []byte(text))
	if finish {
		s.segs = s.p.Flush(s.segs)
		s.end()
	} else {
		s.keepEnvelope(pre, suf)
	}
	if len(s.segs) == 1 && s.segs[0].Kind == thinktag.Answer && len(s.segs[0].Text) == len(text) {
		s.queue = append(s.queue, ev)
		return
	}
	for _, sg := range s.segs {
		s.emit(sg.Kind, sg.Text, pre, suf)
	}
	delete(delta, "content")
	ch["delta"], _ = json.Marshal(delta)
	top["choices"], _ = json.Marshal(choices)
	data, _ := json.Marshal(top)
	s.queue = append(s.queue, sse.NewEvent(ev.Type, data))
}

// choiceZero is the position of the choice with index 0 (or none), -1
// when there is none.
func choiceZero(choices []map[string]json.RawMessage) int {
	for i, ch := range choices {
		idx, ok := ch["index"]
		if !ok || string(idx) == "null" || string(bytes.TrimSpace(idx)) == "0" {
			return i
		}
	}
	return -1
}

// envelope is a text delta's envelope made from a decoded chunk: its
// members (but usage, which stays on the chunk itself), with choice ch
// reduced to its index and a delta of content only.
func envelope(top map[string]json.RawMessage, ch map[string]json.RawMessage) (pre, suf []byte) {
	env := make(map[string]json.RawMessage, len(top))
	for k, v := range top {
		if k != "usage" {
			env[k] = v
		}
	}
	one := map[string]json.RawMessage{"delta": json.RawMessage(`{"content":` + mark + `}`)}
	if idx, ok := ch["index"]; ok {
		one["index"] = idx
	}
	env["choices"], _ = json.Marshal([]map[string]json.RawMessage{one})
	b, err := json.Marshal(env)
	at := bytes.Index(b, []byte(mark))
	if err != nil || at < 0 {
		return nil, nil
	}
	return b[:at], b[at+len(mark):]
}
