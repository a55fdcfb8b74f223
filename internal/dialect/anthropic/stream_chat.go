package anthropic

import (
	"encoding/json"
	"io"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// ChatStreamOptions configures ChatStream.
type ChatStreamOptions struct {
	// Model is the chunks' "model"; "" keeps the one message_start names.
	Model string
	// Created is the chunks' "created" (Unix seconds): the caller's clock.
	Created int64
	// IncludeUsage adds the final usage chunk (the client's
	// stream_options.include_usage).
	IncludeUsage bool
}

// ChatStream translates a Messages stream (Anthropic events) into a Chat
// Completions stream (chat.completion.chunk data events, then [DONE]).
//
// Nothing is yielded before the first content (text, thinking or a tool
// call): message_start and ping are the upstream saying hello, and the
// relay commits to an upstream at the first event it hands on, so an
// upstream that fails before answering can still be failed over
// invisibly. The first content is preceded by the role chunk.
//
// message_stop becomes the usage chunk (with IncludeUsage) and [DONE];
// an error event becomes an in-band Chat error chunk. Both end the stream:
// the next call returns io.EOF. A stream that ends without either ends
// without [DONE] too (the relay reads that as truncation); src's errors,
// io.EOF included, are returned as they are once the events made before
// them are out. The returned Source forwards BeforeRead to src.
func ChatStream(src Source, opt ChatStreamOptions) Source {
	return &chatStream{streamPump: streamPump{src: src}, opt: opt, model: opt.Model}
}

// chatStream is ChatStream's state.
type chatStream struct {
	streamPump
	opt ChatStreamOptions

	id, model string
	head      []byte // `{"id":…,"choices":[` (see chunkHead)
	started   bool   // the role chunk is out
	finished  bool   // the finish chunk is out
	usage     chatStreamUsage

	// tools maps the block index of each tool_use block to its tool call
	// index (counted from 0 in block order).
	tools []chatStreamTool

	scratch []byte // decoded text of the fast path
	buf     []byte // the data being built
}

type chatStreamTool struct{ block, call int }

// chatStreamUsage is what message_start and message_delta say of usage.
type chatStreamUsage struct {
	input, output, cacheRead, cacheCreation int
}

// Next returns the next Chat event.
func (s *chatStream) Next() (sse.Event, error) { return s.pull(s) }

// handle translates one upstream event into s.q.
func (s *chatStream) handle(ev *sse.Event) {
	if ev.Unterminated {
		// A block cut off by EOF may be cut anywhere: dropping it lets the
		// stream end as truncated. A whole message_stop missing only its
		// blank line is the end all the same, as the pacer sees it.
		if c, _ := pace.ClassifyMessages(ev, nil); c.Kind == pace.KindDone {
			s.stop()
		}
		return
	}
	if !ev.HasData {
		return // comments and data-less blocks: the relay sends its own keep-alives
	}
	// The hot path: text and thinking deltas, recognised without
	// allocating by the pacer's own classifier.
	c, scratch := pace.ClassifyMessages(ev, s.scratch[:0])
	s.scratch = scratch
	switch c.Kind {
	case pace.KindText:
		field := "content"
		if c.Channel == pace.ChanReasoning {
			field = "reasoning_content"
		}
		s.content(field, c.Text)
		return
	case pace.KindPing:
		return
	case pace.KindDone:
		s.stop()
		return
	}

	var m msgStreamEvent
	if err := json.Unmarshal(ev.Data, &m); err != nil {
		if _, ok := err.(*json.UnmarshalTypeError); !ok && ev.Type != "error" {
			return // not JSON: nothing to translate
		}
	}
	if ev.Type == "error" || m.Type == "error" {
		s.fail(&m)
		return
	}
	switch m.Type {
	case "message_start":
		s.id, s.head = m.Message.ID, nil
		if s.model == "" {
			s.model = m.Message.Model
		}
		s.usage.overlay(&m.Message.Usage)
	case "content_block_start":
		s.msgBlockStart(&m)
	case "content_block_delta":
		s.msgBlockDelta(&m)
	case "message_delta":
		s.usage.overlay(&m.Usage)
		s.finish(m.Delta.StopReason)
	case "message_stop":
		s.stop()
	}
	// content_block_stop, ping and unknown types: nothing to say.
}

func (s *chatStream) msgBlockStart(m *msgStreamEvent) {
	b := &m.ContentBlock
	switch b.Type {
	case "text":
		s.content("content", []byte(b.Text))
	case "thinking":
		s.content("reasoning_content", []byte(b.Thinking))
	case "tool_use":
		call := len(s.tools)
		s.tools = append(s.tools, chatStreamTool{block: m.Index, call: call})
		s.begin()
		s.emitTool(call, b.ID, b.Name, nil)
	}
	// redacted_thinking and server-side blocks have nothing a Chat
	// client can show.
}

func (s *chatStream) msgBlockDelta(m *msgStreamEvent) {
	d := &m.Delta
	switch d.Type {
	case "text_delta":
		s.content("content", []byte(d.Text))
	case "thinking_delta":
		s.content("reasoning_content", []byte(d.Thinking))
	case "input_json_delta":
		if d.PartialJSON == "" {
			return
		}
		// Search from the newest block: deltas follow their start.
		for i := len(s.tools) - 1; i >= 0; i-- {
			if s.tools[i].block == m.Index {
				s.begin()
				s.emitTool(s.tools[i].call, "", "", []byte(d.PartialJSON))
				return
			}
		}
		// A fragment for a block that never started as tool_use: there
		// is no call to attach it to.
	}
	// signature_delta: the thinking signature has no Chat counterpart.
}

// content emits one text or reasoning delta; empty text says nothing.
func (s *chatStream) content(field string, text []byte) {
	if len(text) == 0 {
		return
	}
	s.begin()
	s.emitContent(field, text)
}

// begin emits the role chunk before the first output.
func (s *chatStream) begin() {
	if !s.started {
		s.started = true
		s.emitRole()
	}
}

func (s *chatStream) finish(stopReason string) {
	if s.finished {
		return
	}
	s.begin()
	s.finished = true
	s.emitFinish(FinishReason(stopReason))
}

// stop ends the stream at message_stop. A Chat client expects a
// finish_reason before [DONE]: a message_stop without message_delta gets
// "stop".
func (s *chatStream) stop() {
	s.finish("")
	if s.opt.IncludeUsage {
		s.emitUsage()
	}
	s.q.Push(newStreamEvent("", []byte("[DONE]")))
	s.err = io.EOF
}

// fail turns an error event into a Chat error chunk, and ends the stream.
func (s *chatStream) fail(m *msgStreamEvent) {
	typ := m.Error.Type
	if typ == "" {
		typ = "api_error"
	}
	msg := m.Error.Message
	if msg == "" {
		msg = "upstream stream error: " + typ
	}
	s.emitError(ChatErrorType(streamErrorStatus(typ)), typ, msg)
	s.err = io.EOF
}
