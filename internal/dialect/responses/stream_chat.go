package responses

import (
	"cmp"
	"encoding/json"
	"io"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// chatStream is ToChatStream's state.
type chatStream struct {
	sse.Pump
	opt     chat.Options
	r       outReader
	w       chat.ChunkWriter
	named   bool // the chunks' id is the response's
	started bool // the role chunk is out
}

// eventIn is the union of the members of the Responses events
// ToChatStream reads: where in the output, what text, what whole.
type eventIn struct {
	Type string `json:"type"`
	eventAt
	eventText
	Item     *outputItemIn `json:"item"`
	Part     *outputPartIn `json:"part"`
	Response *responseIn   `json:"response"`
	// An error event's.
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
	Error   *errorIn        `json:"error"`
}

// eventAt is where an event is: its item and part.
type eventAt struct {
	OutputIndex  *int   `json:"output_index"`
	ItemID       string `json:"item_id"`
	ContentIndex *int   `json:"content_index"`
	SummaryIndex *int   `json:"summary_index"`
}

// eventText is the text an event says: a delta, or a whole text.
type eventText struct {
	Delta     *string `json:"delta"`
	Text      *string `json:"text"`
	Refusal   *string `json:"refusal"`
	Arguments *string `json:"arguments"`
	Name      *string `json:"name"`
}

// ToChatStream translates a Responses stream (typed events) into a Chat
// Completions stream (chat.completion.chunk data events, then [DONE]),
// reading the items as ToChatResponse does; it keeps the contract of
// every stream translator (see chat.Codec). opt.Model names the chunks'
// model ("" keeps the response's), opt.Created their created (0 keeps
// created_at), opt.IncludeUsage adds the usage chunk when the response
// has usage, opt.KeepPauseTurn is as for ToChatResponse.
//
// response.created and the like name the chunks; the first content is
// preceded by the role chunk. Text deltas (output_text, refusal,
// reasoning_summary_text, reasoning_text) are said as they come; a
// function_call item is a tool call, its arguments deltas fragments.
// Whatever repeats a text whole (.done and part events, output_item.done,
// the final response's output) is checked against the deltas, and what
// they left out is said then (see outReader): an upstream that sends no
// deltas at all loses nothing. response.completed and .incomplete end
// with the finish chunk, the usage chunk and [DONE]; response.failed and
// an error event with an in-band Chat error chunk.
//
// Unreadable: data that is not a JSON object with a type, an event line
// its data contradicts, a known event whose members are of another type,
// an event for an item never added or of another kind, an item Chat
// cannot carry, a text that contradicts its deltas or would land before
// text already said. Comments, events of unknown types and those of the
// tools the provider runs itself pass unsaid.
func ToChatStream(src sse.Source, opt chat.Options) sse.Source {
	s := &chatStream{opt: opt}
	s.Src, s.r.sink = src, s
	s.w.Begin("", opt.Model, opt.Created)
	return s
}

// Next returns the next Chat event.
func (s *chatStream) Next() (sse.Event, error) { return s.Pull(s) }

// Handle translates one upstream event into s.Q (sse.Handler). An event
// that cannot be said faithfully ends the stream, once what was made
// before it is out.
func (s *chatStream) Handle(ev *sse.Event) {
	s.handle(ev)
	if s.r.err != nil && s.Err == nil {
		s.r.err.Event = ev.Type
		s.Err = s.r.err
	}
}

func (s *chatStream) handle(ev *sse.Event) {
	if ev.Unterminated {
		// A block cut off by EOF may be cut anywhere: dropping it lets the
		// stream end as truncated. A whole response.completed missing
		// only its blank line is the end all the same, as the pacer sees
		// it.
		if c, _ := pace.ClassifyResponses(ev, nil); c.Kind != pace.KindDone {
			return
		}
	}
	if !ev.HasData {
		return // comments and data-less blocks: the relay sends its own keep-alives
	}
	var head struct {
		Type string `json:"type"`
	}
	err := json.Unmarshal(ev.Data, &head)
	switch {
	case ev.Type == "error" || head.Type == "error":
		var e eventIn
		_ = json.Unmarshal(ev.Data, &e) // whatever it says: the stream failed
		s.fail(e.errorCode(), e.errorMessage())
		return
	case err != nil || !isJSONObject(ev.Data):
		s.unreadable("the data is not a JSON object with a type")
		return
	case head.Type == "":
		s.unreadable("the data has no type")
		return
	case ev.Type != "" && ev.Type != head.Type:
		s.unreadable("the data is of type %q", head.Type)
		return
	}
	h, ok := eventHandlers[head.Type]
	if !ok {
		return // lifecycle events the relay has no use for, the provider's tools, anything new
	}
	var e eventIn
	if err := json.Unmarshal(ev.Data, &e); err != nil {
		s.unreadable("the data is not an object of the expected shape: %v", err)
		return
	}
	h(s, &e)
}

// eventHandlers are the event types ToChatStream reads.
var eventHandlers = map[string]func(*chatStream, *eventIn){
	"response.created":     (*chatStream).begin,
	"response.in_progress": (*chatStream).begin,
	"response.queued":      (*chatStream).begin,
	"response.output_item.added": func(s *chatStream, e *eventIn) {
		if e.Item == nil || e.OutputIndex == nil {
			s.unreadable("no item, or no output_index")
			return
		}
		s.r.add(*e.OutputIndex, e.Item)
	},
	"response.output_item.done": func(s *chatStream, e *eventIn) {
		if e.Item == nil || e.OutputIndex == nil {
			s.unreadable("no item, or no output_index")
			return
		}
		s.r.done(*e.OutputIndex, e.Item)
	},
	"response.content_part.added":            func(s *chatStream, e *eventIn) { s.partEvent(e, false) },
	"response.content_part.done":             func(s *chatStream, e *eventIn) { s.partEvent(e, false) },
	"response.reasoning_summary_part.added":  func(s *chatStream, e *eventIn) { s.partEvent(e, true) },
	"response.reasoning_summary_part.done":   func(s *chatStream, e *eventIn) { s.partEvent(e, true) },
	"response.output_text.delta":             func(s *chatStream, e *eventIn) { s.textEvent(e, "output_text", e.Delta, true) },
	"response.output_text.done":              func(s *chatStream, e *eventIn) { s.textEvent(e, "output_text", e.Text, false) },
	"response.refusal.delta":                 func(s *chatStream, e *eventIn) { s.textEvent(e, "refusal", e.Delta, true) },
	"response.refusal.done":                  func(s *chatStream, e *eventIn) { s.textEvent(e, "refusal", e.Refusal, false) },
	"response.reasoning_summary_text.delta":  func(s *chatStream, e *eventIn) { s.textEvent(e, "summary_text", e.Delta, true) },
	"response.reasoning_summary_text.done":   func(s *chatStream, e *eventIn) { s.textEvent(e, "summary_text", e.Text, false) },
	"response.reasoning_text.delta":          func(s *chatStream, e *eventIn) { s.textEvent(e, "reasoning_text", e.Delta, true) },
	"response.reasoning_text.done":           func(s *chatStream, e *eventIn) { s.textEvent(e, "reasoning_text", e.Text, false) },
	"response.function_call_arguments.delta": func(s *chatStream, e *eventIn) { s.argsEvent(e, e.Delta, true) },
	"response.function_call_arguments.done":  func(s *chatStream, e *eventIn) { s.argsEvent(e, e.Arguments, false) },
	"response.completed":                     (*chatStream).complete,
	"response.incomplete":                    (*chatStream).complete,
	"response.failed": func(s *chatStream, e *eventIn) {
		code, msg := "", ""
		if e.Response != nil && e.Response.Error != nil {
			code, msg = e.Response.Error.Code, e.Response.Error.Message
		}
		s.fail(code, msg)
	},
}

// unreadable ends the stream at the event being read: what was made
// before it goes out, then the error (see Handle).
func (s *chatStream) unreadable(format string, args ...any) { s.r.fail(format, args...) }

// begin names the chunks after the response, at its first mention: the
// id chatcmpl-X of resp_X, its model unless opt.Model, its created_at
// unless opt.Created.
func (s *chatStream) begin(e *eventIn) {
	if s.named || e.Response == nil {
		return
	}
	s.named = true
	s.w.Begin(chatID(e.Response.ID), cmp.Or(s.opt.Model, e.Response.Model), cmp.Or(s.opt.Created, e.Response.CreatedAt))
}

// item is the item an event names by output_index (and item_id, when
// both say one), of kind; nil (the stream unreadable, or the item
// dropped) when there is none to say anything of.
func (s *chatStream) item(e *eventIn, kind itemKind) *outItem {
	if e.OutputIndex == nil {
		s.unreadable("no output_index")
		return nil
	}
	x := s.r.item(*e.OutputIndex)
	switch {
	case x == nil:
		s.unreadable("an event for item %d, which was not added", *e.OutputIndex)
	case e.ItemID != "" && x.id != "" && e.ItemID != x.id:
		s.unreadable("item %d is %q, not %q", x.index, x.id, e.ItemID)
	case x.kind == itemDropped:
	case x.kind != kind:
		s.unreadable("an event of another kind than item %d's", x.index)
	default:
		return x
	}
	return nil
}

// index is a part event's summary_index or content_index; 0 when absent.
func (e *eventIn) index(summary bool) int {
	p := e.ContentIndex
	if summary {
		p = e.SummaryIndex
	}
	if p == nil {
		return 0
	}
	return *p
}

// partEvent reads content_part and reasoning_summary_part events: the
// part, and any text it already holds.
func (s *chatStream) partEvent(e *eventIn, summary bool) {
	if e.Part == nil {
		s.unreadable("no part")
		return
	}
	kind := partTypes[e.Part.Type].kind
	if kind == 0 {
		kind = itemMessage // for the message: the part's type is refused below
	}
	x := s.item(e, kind)
	if x == nil {
		return
	}
	if p := s.r.part(x, summary, e.index(summary), e.Part.Type); p != nil {
		s.r.settle(p, e.Part.text())
	}
}

// textEvent reads a text delta (more of the part's text) or .done event
// (the part's whole text) of a part of type typ.
func (s *chatStream) textEvent(e *eventIn, typ string, text *string, delta bool) {
	pt := partTypes[typ]
	x := s.item(e, pt.kind)
	if x == nil {
		return
	}
	if text == nil {
		s.unreadable("no text")
		return
	}
	p := s.r.part(x, pt.summary, e.index(pt.summary), typ)
	switch {
	case p == nil:
	case delta:
		s.r.say(p, []byte(*text))
	default:
		s.r.settle(p, *text)
	}
}

// argsEvent reads a function call's arguments delta or .done event.
func (s *chatStream) argsEvent(e *eventIn, args *string, delta bool) {
	x := s.item(e, itemCall)
	switch {
	case x == nil:
	case args == nil:
		s.unreadable("no arguments")
	case e.Name != nil && *e.Name != x.name:
		s.unreadable("function call %d is named %q, then %q", x.call, x.name, *e.Name)
	case delta:
		s.r.sayArgs(x, []byte(*args))
	default:
		s.r.settleArgs(x, *args)
	}
}

// complete ends the stream at response.completed or .incomplete: the
// final output is checked against what was said (and what was missing
// said), then the finish chunk, the usage chunk and [DONE].
func (s *chatStream) complete(e *eventIn) {
	in := e.Response
	if in == nil {
		s.unreadable("no response")
		return
	}
	if in.Status == "" {
		in.Status = "completed"
		if e.Type == evIncomplete {
			in.Status = "incomplete"
		}
	}
	if in.Status != "completed" && in.Status != "incomplete" {
		s.unreadable("the response's status is %q", in.Status)
		return
	}
	s.begin(e)
	for i, raw := range in.Output {
		s.r.doneRaw(i, raw)
	}
	if s.r.err != nil {
		return
	}
	s.role()
	s.push(s.w.Finish(in.finish(s.r.calls > 0, s.opt)))
	if s.opt.IncludeUsage && in.Usage != nil {
		s.push(s.w.Usage(in.chatUsage()))
	}
	s.push([]byte("[DONE]"))
	s.Err = io.EOF
}

// fail turns an error event or response.failed into a Chat error chunk,
// and ends the stream.
func (s *chatStream) fail(code, msg string) {
	code = cmp.Or(code, "server_error")
	s.push(s.w.Error("server_error", code, cmp.Or(msg, "upstream stream error: "+code)))
	s.Err = io.EOF
}

// errorCode and errorMessage read an error event: its own members, else
// the nested error of the relay's own error events.
func (e *eventIn) errorCode() string {
	if c := (&errorIn{Code: e.Code}).code(); c != "" {
		return c
	}
	if e.Error != nil {
		return e.Error.code()
	}
	return ""
}

func (e *eventIn) errorMessage() string {
	if e.Message == "" && e.Error != nil {
		return e.Error.Message
	}
	return e.Message
}

// role emits the role chunk before the first output.
func (s *chatStream) role() {
	if !s.started {
		s.started = true
		s.push(s.w.Role())
	}
}

// push queues a Chat event of data.
func (s *chatStream) push(data []byte) { s.Q.Push(streamEvents.Event("", data)) }

// text, callStart and callArgs say the answer (outSink).
func (s *chatStream) text(ch chat.Channel, b []byte) {
	s.role()
	s.push(s.w.Content(chatFields[ch], b))
}

// chatFields are the delta members of the channels.
var chatFields = [...]string{chat.ChanText: "content", chat.ChanReasoning: "reasoning_content", chat.ChanRefusal: "refusal"}

func (s *chatStream) callStart(call int, id, name string) {
	s.role()
	s.push(s.w.ToolCall(call, id, name, nil))
}

func (s *chatStream) callArgs(call int, b []byte) { s.push(s.w.ToolCall(call, "", "", b)) }
