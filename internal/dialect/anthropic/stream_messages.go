package anthropic

import (
	"encoding/json"
	"io"
	"strconv"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// FromChatStream translates a Chat Completions stream (chunks, then
// [DONE]) into a Messages stream (message_start, content blocks,
// message_delta, message_stop).
//
// message_start comes at the first upstream chunk, naming opt.Model (the
// one the client asked for; "" takes the first chunk's) and
// opt.InputTokens as its input_tokens (the relay's estimate: a Chat
// upstream reports usage only at the end, if at all). Reasoning
// (reasoning_content or reasoning, or a content part of type thinking)
// becomes a thinking block, content (a string, or text parts) and a
// refusal a text block, each tool call a tool_use block. A Chat stream may
// interleave tool calls by index and text between them, while a Messages
// stream has one block open at a time: a chat.Sequencer puts the blocks
// in order, holding back what cannot be written yet (see there), so every
// call gets all of its arguments. A call without an id gets a made-up one
// (Messages requires it). A refusal makes the stop reason "refusal".
//
// [DONE] closes the blocks and becomes message_delta (stop reason and
// usage) and message_stop; an in-band error chunk becomes an error event.
// Both end the stream: the next call returns io.EOF. A chunk that cannot
// be translated faithfully (not JSON, a second choice, a member of the
// wrong type: see chat.ReadDelta and chat.Sequencer) ends it with a
// *chat.UnreadableError after the events made before it. A stream that
// ends without either ends without message_stop too (the relay reads that
// as truncation); src's errors, io.EOF included, are returned as they
// are once the events made before them are out. The returned Source
// forwards BeforeRead to src.
func FromChatStream(src sse.Source, opt chat.Options) sse.Source {
	s := &messagesStream{Pump: sse.Pump{Src: src}, opt: opt}
	s.seq.Sink = s
	return s
}

// messagesStream is FromChatStream's state.
type messagesStream struct {
	sse.Pump
	opt chat.Options
	seq chat.Sequencer

	started bool // message_start is out
	next    int  // index of the open block, or of the next one
	refused bool // a refusal came

	stopReason string // from finish_reason, "" until one came
	usage      chatStreamTotals

	first   chat.FirstChoice // the fast path's check of the choice index
	delta   chat.Delta       // the slow path's chunk, its slices reused
	scratch []byte           // decoded text of the fast path
	buf     []byte           // the data being built
}

// chatStreamTotals is the last usage a Chat stream reported.
type chatStreamTotals struct {
	known, cachedKnown         bool
	prompt, completion, cached int
}

// Next returns the next Messages event.
func (s *messagesStream) Next() (sse.Event, error) { return s.Pull(s) }

// handle translates one upstream chunk into s.Q.
func (s *messagesStream) Handle(ev *sse.Event) {
	if !ev.HasData {
		return // comments and data-less blocks: the relay sends its own keep-alives
	}
	if ev.IsDone() && ev.Type != "error" {
		// Also when unterminated: llama.cpp ends with "data: [DONE]" and
		// no blank line, and the pacer takes that as the end. (An
		// "event: error" is an error whatever its data, as for the pacer.)
		s.done()
		return
	}
	if ev.Unterminated {
		return // cut anywhere: dropped, so the stream ends as truncated
	}
	// The hot path: text and reasoning deltas of the first choice,
	// recognised without allocating by the pacer's own classifier.
	if s.started {
		c, scratch := pace.Classify(ev, s.scratch[:0])
		s.scratch = scratch
		if c.Kind == pace.KindText && s.first.IsZero(ev.Data, c.Prefix, c.Suffix) {
			if c.Channel == pace.ChanReasoning {
				s.text(chat.ItemReasoning, c.Text)
			} else {
				s.text(chat.ItemText, c.Text)
			}
			return
		}
	}

	if ev.Type != "error" && isBlank(ev.Data) {
		return // an empty data line: a keep-alive, nothing to translate
	}
	var c chatStreamChunk
	if err := json.Unmarshal(ev.Data, &c); err != nil || !isJSONObject(ev.Data) {
		// A member of an unexpected type outside the choices (an id
		// that is a number) is not worth failing the stream for: the
		// choices are checked below.
		if _, ok := err.(*json.UnmarshalTypeError); (!ok || !isJSONObject(ev.Data)) && ev.Type != "error" {
			s.unreadable(ev, &chat.UnreadableError{Reason: "the chunk is not a JSON object"})
			return
		}
	}
	if ev.Type == "error" || c.isError() {
		s.fail(&c)
		return
	}
	if err := chat.ReadDelta(c.Choices, &s.delta); err != nil {
		s.unreadable(ev, err)
		return
	}
	if d := &s.delta; c.ID != "" || c.Model != "" || len(d.Pieces) > 0 || len(d.Calls) > 0 || d.Finish != "" {
		// Not at a chunk that names nothing: Azure's first chunk holds
		// only prompt_filter_results, with "" for id and model, which
		// come with the next.
		s.begin(c.ID, c.Model)
	}
	if u := c.Usage; u != nil && (u.PromptTokens != nil || u.CompletionTokens != nil) {
		s.usage = chatStreamTotals{known: true, prompt: streamDeref(u.PromptTokens), completion: streamDeref(u.CompletionTokens)}
		if p := u.PromptTokensDetails.CachedTokens; p != nil {
			s.usage.cachedKnown, s.usage.cached = true, *p
		}
	}
	d := &s.delta
	for _, p := range d.Pieces {
		kind := chat.ItemKind(p.Channel)
		if p.Channel == chat.ChanRefusal {
			// Messages has no refusal block: the refusal is the answer's
			// text, and the stop reason says what it is.
			s.refused, kind = true, chat.ItemText
		}
		if s.text(kind, []byte(p.Text)); s.Err != nil {
			return // unreadable: nothing after it
		}
	}
	for i := range d.Calls {
		if err := s.seq.Call(&d.Calls[i]); err != nil {
			s.unreadable(ev, err)
			return
		}
	}
	if d.Finish != "" {
		s.seq.Flush()
		s.stopReason = StopReason(d.Finish)
	}
}

// text adds thinking or text: written at once when its block is the one
// open and nothing waits behind it (the common case), else through the
// sequencer.
func (s *messagesStream) text(kind chat.ItemKind, text []byte) {
	if len(text) == 0 {
		return
	}
	if s.seq.Streaming(kind) {
		s.emitTextDelta(kind, text)
		return
	}
	if err := s.seq.Text(kind, text); err != nil {
		s.unreadable(nil, err)
	}
}

// unreadable ends the stream with err (a *chat.UnreadableError) once the
// events made before it are out.
func (s *messagesStream) unreadable(ev *sse.Event, err error) {
	if ue, ok := err.(*chat.UnreadableError); ok && ev != nil && ue.Event == "" {
		ue.Event = ev.Type
	}
	if s.Err == nil {
		s.Err = err
	}
}

// OpenItem starts the content block of it (chat.Sink).
func (s *messagesStream) OpenItem(it *chat.Item) {
	if it.Kind != chat.ItemCall {
		s.emitBlockStart(it.Kind, "", "")
		return
	}
	id := it.ID
	if id == "" {
		// Messages requires one; the client echoes it in its
		// tool_result, which the request translator passes back.
		id = "toolu_relay_" + strconv.Itoa(s.next)
	}
	s.emitBlockStart(chat.ItemCall, ToolUseID(id), it.Name)
}

// WriteItem writes text or arguments of the open block (chat.Sink).
func (s *messagesStream) WriteItem(it *chat.Item, b []byte) {
	if it.Kind == chat.ItemCall {
		s.emitInputDelta(b)
	} else {
		s.emitTextDelta(it.Kind, b)
	}
}

// CloseItem ends the open block (chat.Sink).
func (s *messagesStream) CloseItem(it, next *chat.Item) {
	s.emitBlockStop()
	s.next++
}

// begin emits message_start at the first chunk.
func (s *messagesStream) begin(chatID, model string) {
	if !s.started {
		s.started = true
		if s.opt.Model != "" {
			model = s.opt.Model
		}
		s.emitMessageStart(chatID, model)
	}
}

// done ends the stream at [DONE].
func (s *messagesStream) done() {
	s.begin("", "")
	s.seq.Flush()
	stop := s.stopReason
	if s.refused {
		stop = "refusal"
	} else if stop == "" {
		stop = StopReason("") // [DONE] without finish_reason: a normal end
	}
	s.emitMessageDelta(stop)
	s.Q.Push(streamEvents.Event("message_stop", []byte(`{"type":"message_stop"}`)))
	s.Err = io.EOF
}

// fail turns an in-band error chunk into an error event, and ends the
// stream.
func (s *messagesStream) fail(c *chatStreamChunk) {
	e := c.errorBody()
	msg := e.Message
	if msg == "" {
		msg = "upstream stream error"
	}
	s.emitError(e.messagesType(), msg)
	s.Err = io.EOF
}
