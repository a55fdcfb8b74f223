package anthropic

import (
	"encoding/json"
	"io"
	"slices"
	"strconv"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// MessagesStreamOptions configures MessagesStream.
type MessagesStreamOptions struct {
	// Model is message_start's "model": the one the client asked for;
	// "" takes the first chunk's.
	Model string
	// InputTokens is message_start's input_tokens (the relay's estimate:
	// a Chat upstream reports usage only at the end, if at all).
	InputTokens int
}

// MessagesStream translates a Chat Completions stream (chunks, then
// [DONE]) into a Messages stream (message_start, content blocks,
// message_delta, message_stop).
//
// message_start comes at the first upstream chunk. Reasoning
// (reasoning_content or reasoning) becomes a thinking block, content a
// text block, each tool call a tool_use block; a block is closed when
// another kind of content begins, or at the finish_reason. Tool calls are
// taken as sequential, as every Chat provider streams them: a call index
// not seen before opens a new block, and an arguments fragment for a call
// whose block is already closed is dropped (a Messages stream cannot
// reopen a block); a call with a new id opens a new block whatever its
// index. Only the first choice is read: the relay's Messages to
// Chat translation never asks for more than one.
//
// [DONE] becomes message_delta (stop reason and usage) and message_stop;
// an in-band error chunk becomes an error event. Both end the stream: the
// next call returns io.EOF. A stream that ends without either ends
// without message_stop too (the relay reads that as truncation); src's
// errors, io.EOF included, are returned as they are once the events made
// before them are out. The returned Source forwards BeforeRead to src.
func MessagesStream(src Source, opt MessagesStreamOptions) Source {
	return &messagesStream{streamPump: streamPump{src: src}, opt: opt, open: streamBlockNone}
}

// streamBlock is the kind of the content block open in a MessagesStream.
type streamBlock uint8

const (
	streamBlockNone streamBlock = iota
	streamBlockThinking
	streamBlockText
	streamBlockTool
)

// messagesStream is MessagesStream's state.
type messagesStream struct {
	streamPump
	opt MessagesStreamOptions

	started bool        // message_start is out
	open    streamBlock // the block being written, if any
	next    int         // index of the next block
	// tool and toolID are the Chat index and id of the call in the open
	// tool_use block; seen lists every call index that got a block.
	tool   int
	toolID string
	seen   []int

	stopReason string // from finish_reason, "" until one came
	usage      chatStreamTotals

	scratch []byte // decoded text of the fast path
	buf     []byte // the data being built
}

// chatStreamTotals is the last usage a Chat stream reported.
type chatStreamTotals struct {
	known, cachedKnown         bool
	prompt, completion, cached int
}

// Next returns the next Messages event.
func (s *messagesStream) Next() (sse.Event, error) { return s.pull(s) }

// handle translates one upstream chunk into s.q.
func (s *messagesStream) handle(ev *sse.Event) {
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
	// The hot path: text and reasoning deltas, recognised without
	// allocating by the pacer's own classifier.
	if s.started {
		c, scratch := pace.Classify(ev, s.scratch[:0])
		s.scratch = scratch
		if c.Kind == pace.KindText {
			if c.Channel == pace.ChanReasoning {
				s.text(streamBlockThinking, c.Text)
			} else {
				s.text(streamBlockText, c.Text)
			}
			return
		}
	}

	var c chatStreamChunk
	if err := json.Unmarshal(ev.Data, &c); err != nil {
		if _, ok := err.(*json.UnmarshalTypeError); !ok && ev.Type != "error" {
			return // not JSON: nothing to translate
		}
	}
	if ev.Type == "error" || c.isError() {
		s.fail(&c)
		return
	}
	s.begin(c.ID, c.Model)
	if u := c.Usage; u != nil && (u.PromptTokens != nil || u.CompletionTokens != nil) {
		s.usage = chatStreamTotals{known: true, prompt: streamDeref(u.PromptTokens), completion: streamDeref(u.CompletionTokens)}
		if p := u.PromptTokensDetails.CachedTokens; p != nil {
			s.usage.cachedKnown, s.usage.cached = true, *p
		}
	}
	if len(c.Choices) == 0 {
		return
	}
	ch := &c.Choices[0]
	// Some providers send the same text as both reasoning_content and
	// reasoning: one of them is the reasoning.
	if r := ch.Delta.ReasoningContent; r != "" {
		s.text(streamBlockThinking, []byte(r))
	} else {
		s.text(streamBlockThinking, []byte(ch.Delta.Reasoning))
	}
	s.text(streamBlockText, []byte(ch.Delta.Content))
	for i := range ch.Delta.ToolCalls {
		s.toolCall(&ch.Delta.ToolCalls[i])
	}
	if ch.FinishReason != "" {
		s.closeBlock()
		s.stopReason = StopReason(ch.FinishReason)
	}
}

// text appends to a thinking or text block, opening one if another kind
// is open; empty text says nothing.
func (s *messagesStream) text(kind streamBlock, text []byte) {
	if len(text) == 0 {
		return
	}
	if s.open != kind {
		s.closeBlock()
		s.open = kind
		s.emitBlockStart(kind, "", "")
	}
	s.emitTextDelta(kind, text)
}

func (s *messagesStream) toolCall(tc *chatStreamToolCall) {
	same := s.open == streamBlockTool && tc.Index == s.tool
	// A different id is a different call even under the same index:
	// providers that omit "index" send every call as index 0. The same id
	// again (some repeat it in every fragment) is the same call.
	newID := tc.ID != "" && tc.ID != s.toolID
	if !same || newID {
		if !newID && slices.Contains(s.seen, tc.Index) {
			return // its block is closed: see MessagesStream
		}
		s.closeBlock()
		s.seen = append(s.seen, tc.Index)
		s.open, s.tool, s.toolID = streamBlockTool, tc.Index, tc.ID
		id := tc.ID
		if id == "" {
			// Messages requires one; the client echoes it in its
			// tool_result, which the request translator passes back.
			id = "toolu_relay_" + strconv.Itoa(s.next)
		}
		s.emitBlockStart(streamBlockTool, ToolUseID(id), tc.Function.Name)
	}
	if tc.Function.Arguments != "" {
		s.emitInputDelta([]byte(tc.Function.Arguments))
	}
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

func (s *messagesStream) closeBlock() {
	if s.open != streamBlockNone {
		s.emitBlockStop()
		s.open = streamBlockNone
		s.next++
	}
}

// done ends the stream at [DONE].
func (s *messagesStream) done() {
	s.begin("", "")
	s.closeBlock()
	stop := s.stopReason
	if stop == "" {
		stop = StopReason("") // [DONE] without finish_reason: a normal end
	}
	s.emitMessageDelta(stop)
	s.q.Push(newStreamEvent("message_stop", []byte(`{"type":"message_stop"}`)))
	s.err = io.EOF
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
	s.err = io.EOF
}
