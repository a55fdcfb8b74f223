package responses

import (
	"encoding/json"
	"io"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// FromChatStream translates a Chat Completions stream (chunks, then
// [DONE]) into a Responses stream (typed events, sequence_number counting
// from 0). opt.Created is the response's created_at (0 takes the first
// chunk's "created"); opt.Request is the client's Responses request,
// echoed in the response objects as FromChatResponse does.
//
// Nothing is yielded before the first content (text, reasoning, a refusal
// or a tool call) but response.created and response.in_progress, which
// come right before it, so the relay can still fail over an upstream that
// says nothing. Each run of reasoning (reasoning_content or reasoning, or
// content parts of type thinking) is a reasoning item; each run of text
// (content, or text parts) an output_text part and each run of refusal a
// refusal part (streamed with response.refusal.delta and .done, as OpenAI
// does) of a message item, one message holding the parts that follow one
// another; each tool call a function_call item, whose arguments are "{}"
// when none came. A Chat stream may interleave tool calls by index and
// text between them, while output items come one after another (Codex CLI
// and the SDKs expect that): a chat.Sequencer puts them in order, holding
// back what cannot be written yet (see there), so every call gets all of
// its arguments.
//
// The finish_reason closes the items; [DONE] ends with
// response.completed, or response.incomplete when finish_reason was
// length or content_filter; the final response is FromChatResponse's for
// the same answer. An in-band Chat error becomes an error event then
// response.failed. After either end the next call returns io.EOF. A chunk
// that cannot be translated faithfully (not JSON, a second choice, a
// member of the wrong type: see chat.ReadDelta and chat.Sequencer) ends
// the stream with a *chat.UnreadableError after the events made before
// it. A stream cut short ends without a terminator (the relay reads that
// as truncation), src's error returned as it is. The returned Source
// forwards BeforeRead to src.
func FromChatStream(src sse.Source, opt chat.Options) sse.Source {
	s := &respStream{Pump: sse.Pump{Src: src}, opt: opt}
	s.order.Sink = s
	return s
}

// item kinds
const (
	kindNone = iota
	kindReasoning
	kindMessage
	kindCall
)

type respStream struct {
	sse.Pump
	opt chat.Options

	r       *result // nil until the first chunk that names the response
	started bool    // response.created is out
	seq     int64
	order   chat.Sequencer

	// the open item
	kind                 int
	itemID               []byte // its id, JSON-quoted
	itemIDStr            string
	nReasoning, nMessage int               // items of each kind opened (see uniqueID)
	outIdx               int               // its output_index
	text                 []byte            // the open part's text, the reasoning, or the call's arguments
	part                 chat.ItemKind     // a message's open part: ItemText, ItemRefusal, or 0
	parts                []json.RawMessage // a message's parts done
	callID, callName     string            // a call's
	output               []json.RawMessage // the items done

	first   chat.FirstChoice // the fast path's check of the choice index
	delta   chat.Delta       // the slow path's chunk, its slices reused
	scratch []byte
	lit     []byte // a JSON literal written for WriteItem
	buf     []byte
}

// Next returns the next Responses event.
func (s *respStream) Next() (sse.Event, error) { return s.Pull(s) }

// Handle translates one upstream chunk into s.Q (sse.Handler).
func (s *respStream) Handle(ev *sse.Event) {
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
		if s.r != nil && s.first.IsZero(ev.Data, c.Prefix, c.Suffix) {
			// The hot path: the literal is copied as it came, already JSON.
			lit := ev.Data[len(c.Prefix) : len(ev.Data)-len(c.Suffix)]
			s.textDelta(c.Channel == pace.ChanReasoning, lit, c.Text)
			return
		}
	}
	if c.Kind != pace.KindError && isBlank(ev.Data) {
		return // an empty data line: a keep-alive, nothing to translate
	}
	var m chunkIn
	if err := json.Unmarshal(ev.Data, &m); (err != nil || !isJSONObject(ev.Data)) && c.Kind != pace.KindError {
		// A member of an unexpected type outside the choices (a created
		// that is not an integer) is not worth failing the stream for:
		// the choices are checked below.
		if _, ok := err.(*json.UnmarshalTypeError); !ok || !isJSONObject(ev.Data) {
			s.unreadable(ev, &chat.UnreadableError{Reason: "the chunk is not a JSON object"})
			return
		}
	}
	if c.Kind == pace.KindError {
		if s.r == nil {
			s.r = newResult(m.ID, m.Model, m.Created, s.opt)
		}
		s.fail(&m)
		return
	}
	if err := chat.ReadDelta(m.Choices, &s.delta); err != nil {
		s.unreadable(ev, err)
		return
	}
	if d := &s.delta; s.r == nil && (m.ID != "" || m.Model != "" || len(d.Pieces) > 0 || len(d.Calls) > 0 || d.Finish != "") {
		// Not at a chunk that names nothing: Azure's first chunk holds
		// only prompt_filter_results, with "" for id and model, which
		// come with the next.
		s.r = newResult(m.ID, m.Model, m.Created, s.opt)
	}
	if s.r == nil {
		return
	}
	if m.Usage != nil {
		s.r.usage = m.Usage
	}
	d := &s.delta
	for _, p := range d.Pieces {
		if err := s.order.Text(chat.ItemKind(p.Channel), []byte(p.Text)); err != nil {
			s.unreadable(ev, err)
			return
		}
	}
	for i := range d.Calls {
		if err := s.order.Call(&d.Calls[i]); err != nil {
			s.unreadable(ev, err)
			return
		}
	}
	if d.Finish != "" {
		s.order.Flush()
		s.r.finish = d.Finish
	}
}

// unreadable ends the stream with err (a *chat.UnreadableError) once the
// events made before it are out.
func (s *respStream) unreadable(ev *sse.Event, err error) {
	if ue, ok := err.(*chat.UnreadableError); ok && ev != nil && ue.Event == "" {
		ue.Event = ev.Type
	}
	if s.Err == nil {
		s.Err = err
	}
}

// begin emits response.created and response.in_progress, once.
func (s *respStream) begin() {
	if s.started {
		return
	}
	s.started = true
	if s.r == nil {
		s.r = newResult("", "", 0, s.opt)
	}
	resp := s.r.marshal("in_progress")
	s.emitResponse(evCreated, resp)
	s.emitResponse(evInProgress, resp)
}

// textDelta adds reasoning or answer text of the fast path: lit is its
// JSON literal, text the decoded text. It is written at once when its item
// is the one open and nothing waits behind it (the common case), else it
// goes through the sequencer.
func (s *respStream) textDelta(reasoning bool, lit, text []byte) {
	kind := chat.ItemText
	if reasoning {
		kind = chat.ItemReasoning
	}
	if !s.order.Streaming(kind) {
		if err := s.order.Text(kind, text); err != nil {
			s.unreadable(nil, err)
		}
		return
	}
	s.text = append(s.text, text...) // the item's text (the stream's response is built from its items)
	s.emitItemDelta(kind, lit)
}

// emitItemDelta emits the delta event of the open item or part.
func (s *respStream) emitItemDelta(kind chat.ItemKind, lit []byte) {
	switch kind {
	case chat.ItemReasoning:
		s.emitDelta(evSummaryDelta, `,"summary_index":`, 0, lit, "}")
	case chat.ItemText:
		s.emitDelta(evTextDelta, `,"content_index":`, len(s.parts), lit, `,"logprobs":[]}`)
	case chat.ItemRefusal:
		s.emitDelta(evRefusalDelta, `,"content_index":`, len(s.parts), lit, "}")
	default:
		s.emitDelta(evArgsDelta, "", 0, lit, "}")
	}
}

// OpenItem opens the output item of it, or a part of the open message
// (chat.Sink).
func (s *respStream) OpenItem(it *chat.Item) {
	s.text = s.text[:0]
	switch it.Kind {
	case chat.ItemReasoning:
		s.openReasoning()
	case chat.ItemCall:
		s.openCall(it)
	default:
		if s.kind != kindMessage {
			s.openMessage()
		}
		s.openPart(it.Kind)
	}
}

// WriteItem writes text or arguments of the open item (chat.Sink).
func (s *respStream) WriteItem(it *chat.Item, b []byte) {
	s.text = append(s.text, b...)
	s.lit = pace.AppendString(s.lit[:0], b)
	s.emitItemDelta(it.Kind, s.lit)
}

// CloseItem ends the open item (chat.Sink). A message's part is closed;
// the message too unless another part follows right away.
func (s *respStream) CloseItem(it, next *chat.Item) {
	switch it.Kind {
	case chat.ItemText, chat.ItemRefusal:
		s.closePart()
		if next != nil && (next.Kind == chat.ItemText || next.Kind == chat.ItemRefusal) {
			return
		}
	}
	s.closeItem()
}

// done ends the stream at [DONE].
func (s *respStream) done() {
	s.begin()
	s.order.Flush()
	resp := s.r.marshalOutput(s.output)
	typ := evCompleted
	if st, _ := s.r.status(); st == "incomplete" {
		typ = evIncomplete
	}
	s.emitResponse(typ, resp)
	s.Err = io.EOF
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
		Code    string           `json:"code"`
		Message string           `json:"message"`
		Param   *string          `json:"param"`
		Error   chat.ErrorObject `json:"error"`
	}{code, msg, nil, chat.ErrorObject{Message: msg, Type: "server_error", Code: &code}}))
	s.emitResponse(evFailed, s.r.marshalFailed(s.output, code, msg))
	s.Err = io.EOF
}
