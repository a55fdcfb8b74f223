package responses

import (
	"encoding/json"
	"io"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// StreamOptions configures ResponsesStream.
type StreamOptions struct {
	// Created is the response's created_at (Unix seconds): the caller's
	// clock. 0 takes the first chunk's "created".
	Created int64
	// Request is the client's Responses request, echoed in the response
	// objects as FromChatResponse does.
	Request []byte
}

// ResponsesStream translates a Chat Completions stream (chunks, then
// [DONE]) into a Responses stream (typed events, sequence_number counting
// from 0).
//
// Nothing is yielded before the first content (text, reasoning or a tool
// call) but response.created and response.in_progress, which come right
// before it, so the relay can still fail over an upstream that says
// nothing. Each run of reasoning, text or one tool call's arguments is an
// output item with its added, delta and done events; a change of kind (or
// of tool call) closes the open item. [DONE] closes it and ends with
// response.completed, or response.incomplete when finish_reason was
// length or content_filter; the final response is FromChatResponse's for
// the same answer. An in-band Chat error becomes an error event then
// response.failed. After either end the next call returns io.EOF; a
// stream cut short ends without one (the relay reads that as truncation),
// src's error returned as it is. The returned Source forwards BeforeRead
// to src.
//
// Known limits: a tool call's fragment that arrives after the next call
// started is dropped (its item is done); a refusal is streamed as text.
func ResponsesStream(src Source, opt StreamOptions) Source {
	return &respStream{src: src, opt: opt}
}

// item kinds
const (
	kindNone = iota
	kindReasoning
	kindMessage
	kindCall
)

type respStream struct {
	src Source
	opt StreamOptions
	q   sse.Queue
	err error // returned once q is empty
	cur sse.Event

	r       *result // nil until the first chunk that names the response
	started bool    // response.created is out
	seq     int64

	// the open item
	kind                 int
	call                 int    // index in r.calls (kindCall)
	itemID               []byte // its id, JSON-quoted
	itemIDStr            string
	nReasoning, nMessage int               // items of each kind opened (see uniqueID)
	outIdx               int               // its output_index
	text                 []byte            // its text so far (reasoning or message)
	output               []json.RawMessage // the items done

	scratch []byte
	buf     []byte
}

// BeforeRead forwards the relay's per-read hook to src.
func (s *respStream) BeforeRead(f func()) {
	if br, ok := s.src.(interface{ BeforeRead(func()) }); ok {
		br.BeforeRead(f)
	}
}

// Next returns the next Responses event.
func (s *respStream) Next() (sse.Event, error) {
	for {
		if ev, ok := s.q.Pop(); ok {
			return ev, nil
		}
		if s.err != nil {
			return sse.Event{}, s.err
		}
		var err error
		s.cur, err = s.src.Next()
		if err != nil {
			s.err = err
			continue
		}
		s.handle(&s.cur)
	}
}

func (s *respStream) handle(ev *sse.Event) {
	if ev.Unterminated {
		// A block cut off by EOF may be cut anywhere: dropping it lets the
		// stream end as truncated; a whole [DONE] is the end all the same.
		if ev.Type != "error" && ev.IsDone() {
			s.done()
		}
		return
	}
	if !ev.HasData {
		return
	}
	c, scratch := pace.Classify(ev, s.scratch[:0])
	s.scratch = scratch
	switch c.Kind {
	case pace.KindDone:
		s.done()
		return
	case pace.KindText:
		if s.r != nil {
			// The hot path: the literal is copied as it came, already JSON.
			lit := ev.Data[len(c.Prefix) : len(ev.Data)-len(c.Suffix)]
			s.textDelta(c.Channel == pace.ChanReasoning, lit, c.Text)
			return
		}
	}
	var m chunkIn
	if err := json.Unmarshal(ev.Data, &m); err != nil && c.Kind != pace.KindError {
		return // not JSON: nothing to translate
	}
	if s.r == nil {
		s.r = newResult(m.ID, m.Model, m.Created, ResponseOptions{Created: s.opt.Created, Request: s.opt.Request})
	}
	if c.Kind == pace.KindError {
		s.fail(&m)
		return
	}
	if m.Usage != nil {
		s.r.usage = m.Usage
	}
	for i := range m.Choices {
		ch := &m.Choices[i]
		if ch.Index != 0 {
			continue // a Responses client asked for one answer
		}
		d := &ch.Delta
		if r := d.ReasoningContent + d.Reasoning; r != "" {
			s.textDelta(true, marshal(r), []byte(r))
		}
		if t := d.Content + d.Refusal; t != "" {
			s.textDelta(false, marshal(t), []byte(t))
		}
		for j := range d.ToolCalls {
			s.toolDelta(&d.ToolCalls[j])
		}
		if ch.FinishReason != "" {
			s.r.finish = ch.FinishReason
		}
	}
}

// begin emits response.created and response.in_progress, once.
func (s *respStream) begin() {
	if s.started {
		return
	}
	s.started = true
	if s.r == nil {
		s.r = newResult("", "", 0, ResponseOptions{Created: s.opt.Created, Request: s.opt.Request})
	}
	resp := s.r.marshal("in_progress")
	s.emitResponse(evCreated, resp)
	s.emitResponse(evInProgress, resp)
}

// textDelta adds reasoning or answer text: lit is its JSON literal, text
// the decoded text.
func (s *respStream) textDelta(reasoning bool, lit, text []byte) {
	kind := kindMessage
	if reasoning {
		kind = kindReasoning
	}
	if s.kind != kind {
		s.closeItem()
		s.openText(kind)
	}
	s.text = append(s.text, text...) // the item's text (the stream's response is built from its items)
	if reasoning {
		s.emitDelta(evSummaryDelta, `,"summary_index":0,"delta":`, lit, "}")
	} else {
		s.emitDelta(evTextDelta, `,"content_index":0,"delta":`, lit, `,"logprobs":[]}`)
	}
}

func (s *respStream) toolDelta(tc *toolCallIn) {
	if tc.Index < 0 || tc.Index > len(s.r.calls)+64 {
		return // not an index a provider counts
	}
	for tc.Index >= len(s.r.calls) {
		s.r.calls = append(s.r.calls, callState{})
	}
	c := &s.r.calls[tc.Index]
	if !c.started {
		// A call starts at its first fragment, which carries its id and
		// name (OpenAI sends them there only).
		c.started = true
		c.id, c.name = s.r.chatCallID(tc.Index, tc.ID), tc.Function.Name
		s.closeItem()
		s.openCall(tc.Index)
	} else if s.kind != kindCall || s.call != tc.Index {
		return // its item is done (see Known limits)
	}
	if tc.Function.Arguments != "" {
		c.args.WriteString(tc.Function.Arguments)
		s.emitDelta(evArgsDelta, `,"delta":`, marshal(tc.Function.Arguments), "}")
	}
}

// done ends the stream at [DONE].
func (s *respStream) done() {
	s.begin()
	s.closeItem()
	resp := s.r.marshalOutput(s.output)
	typ := evCompleted
	if st, _ := s.r.status(); st == "incomplete" {
		typ = evIncomplete
	}
	s.emitResponse(typ, resp)
	s.err = io.EOF
}

// fail turns an in-band error into an error event and response.failed
// (openai-go raises on the first, Codex on the second), and ends the
// stream.
func (s *respStream) fail(m *chunkIn) {
	s.begin()
	code, msg := "server_error", "upstream stream error"
	if m.Error != nil {
		if c := m.Error.code(); c != "" {
			code = c
		}
		if m.Error.Message != "" {
			msg = m.Error.Message
		}
	}
	// The nested "error" is not in OpenAI's event: openai-python and
	// openai-node raise on an error event only when its data has one.
	s.emit(evError, marshal(struct {
		Code    string   `json:"code"`
		Message string   `json:"message"`
		Param   *string  `json:"param"`
		Error   errorObj `json:"error"`
	}{code, msg, nil, errorObj{Message: msg, Type: "server_error", Code: &code}}))
	s.emitResponse(evFailed, s.r.marshalFailed(s.output, code, msg))
	s.err = io.EOF
}
