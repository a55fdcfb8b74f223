package anthropic

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// ToChatStream translates a Messages stream (Anthropic events) into a Chat
// Completions stream (chat.completion.chunk data events, then [DONE]).
//
// opt.Model is the chunks' "model" ("" keeps the one message_start
// names), opt.Created their "created"; opt.IncludeUsage adds the final
// usage chunk (the client's stream_options.include_usage);
// opt.KeepPauseTurn gives pause_turn the finish_reason
// chat.FinishPauseTurn instead of "length", for a stream that goes on to
// a Responses client, whose translator says it better.
//
// Nothing is yielded before the first content (text, thinking or a tool
// call): message_start and ping are the upstream saying hello, and the
// relay commits to an upstream at the first event it hands on, so an
// upstream that fails before answering can still be failed over
// invisibly. The first content is preceded by the role chunk.
//
// A tool_use block is a tool call: its first chunk has the id, the name
// and empty arguments, then each input_json_delta is a fragment. A block
// whose input never came in deltas gets one fragment when it ends: its
// start's input, "{}" when that is empty, as ToChatResponse says. The
// arguments are checked to be a JSON object when the block ends.
//
// message_stop becomes the usage chunk (with IncludeUsage) and [DONE];
// an error event becomes an in-band Chat error chunk. Both end the stream:
// the next call returns io.EOF. A stream that ends without either ends
// without [DONE] too (the relay reads that as truncation); src's errors,
// io.EOF included, are returned as they are once the events made before
// them are out. The returned Source forwards BeforeRead to src.
//
// An event that cannot be translated faithfully ends the stream with a
// *chat.UnreadableError, after the events made before it: data that is
// not a JSON object with a type, an event line its data contradicts, a
// block started twice or of a type ToChatStream does not know, a delta for
// a block that is not open or of another kind, content after
// message_delta, a second message_start, tool arguments that are not a
// JSON object. Pings, comments, data-less blocks and event types it does
// not know (Anthropic documents new ones may come) are read and pass
// unsaid, as are signature and citations deltas, redacted thinking and
// the server-side blocks (server_tool_use and the results of the tools
// Anthropic ran), which carry nothing a Chat client can be given.
func ToChatStream(src sse.Source, opt chat.Options) sse.Source {
	s := &chatStream{Pump: sse.Pump{Src: src}, opt: opt}
	s.w.Begin("", opt.Model, opt.Created)
	return s
}

// chatStream is ToChatStream's state.
type chatStream struct {
	sse.Pump
	opt chat.Options

	w        chat.ChunkWriter
	sawStart bool // message_start was read
	started  bool // the role chunk is out
	finished bool // the finish chunk is out
	usage    chatStreamUsage
	calls    int               // tool calls so far: the next one's index
	blocks   []chatStreamBlock // every block started, in order
	scratch  []byte            // decoded text of the fast path
}

// blockKind is what a content block carries to a Chat client.
type blockKind uint8

const (
	blockText     blockKind = iota // text deltas: delta.content
	blockThinking                  // thinking deltas: delta.reasoning_content
	blockTool                      // a tool call: input_json_delta fragments
	blockDropped                   // nothing a Chat client can be given
)

// chatStreamBlock is one content block of the upstream's message.
type chatStreamBlock struct {
	index int
	kind  blockKind
	open  bool
	call  int // blockTool: the tool call's index
	// args is a tool call's arguments so far (checked at its end); input
	// its start's input, the arguments when no delta brings any.
	args, input []byte
}

// chatStreamUsage is what message_start and message_delta say of usage.
type chatStreamUsage struct {
	input, output, cacheRead, cacheCreation int
}

// Next returns the next Chat event.
func (s *chatStream) Next() (sse.Event, error) { return s.Pull(s) }

// unreadable ends the stream at ev: what was made before it goes out,
// then the error.
func (s *chatStream) unreadable(ev *sse.Event, format string, args ...any) {
	s.Err = &chat.UnreadableError{Event: ev.Type, Reason: fmt.Sprintf(format, args...)}
}

// block is the newest block with this index (deltas follow their start).
func (s *chatStream) block(index int) *chatStreamBlock {
	for i := len(s.blocks) - 1; i >= 0; i-- {
		if s.blocks[i].index == index {
			return &s.blocks[i]
		}
	}
	return nil
}

// handle translates one upstream event into s.Q.
func (s *chatStream) Handle(ev *sse.Event) {
	if ev.Unterminated {
		// A block cut off by EOF may be cut anywhere: dropping it lets the
		// stream end as truncated. A whole message_stop missing only its
		// blank line is the end all the same, as the pacer sees it.
		if c, _ := pace.ClassifyMessages(ev, nil); c.Kind == pace.KindDone {
			s.stop(ev)
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
		kind, field := blockText, "content"
		if c.Channel == pace.ChanReasoning {
			kind, field = blockThinking, "reasoning_content"
		}
		if s.openBlock(ev, c.BlockIndex(), kind) {
			s.content(field, c.Text)
		}
		return
	case pace.KindPing:
		if ev.Type != "" && ev.Type != "ping" {
			s.unreadable(ev, "the data is a ping")
		}
		return
	case pace.KindDone:
		if ev.Type != "" && ev.Type != "message_stop" {
			s.unreadable(ev, "the data is a message_stop")
			return
		}
		s.stop(ev)
		return
	}

	var m msgStreamEvent
	err := json.Unmarshal(ev.Data, &m)
	if ev.Type == "error" || m.Type == "error" {
		s.fail(&m)
		return
	}
	switch {
	case err != nil:
		s.unreadable(ev, "the data is not a JSON object of the expected shape: %v", err)
		return
	case m.Type == "":
		s.unreadable(ev, "the data has no type")
		return
	case ev.Type != "" && ev.Type != m.Type:
		s.unreadable(ev, "the data is of type %q", m.Type)
		return
	}
	switch m.Type {
	case "message_start":
		if s.sawStart {
			s.unreadable(ev, "a second message_start")
			return
		}
		s.sawStart = true
		model := s.w.Model()
		if model == "" {
			model = m.Message.Model
		}
		s.w.Begin(m.Message.ID, model, s.opt.Created)
		s.usage.overlay(&m.Message.Usage)
	case "content_block_start":
		s.msgBlockStart(ev, &m)
	case "content_block_delta":
		s.msgBlockDelta(ev, &m)
	case "content_block_stop":
		if m.Index == nil {
			s.unreadable(ev, "no block index")
			return
		}
		// A stop for a block never started or already stopped loses
		// nothing: nothing to say.
		if b := s.block(*m.Index); b != nil && b.open {
			s.endBlock(ev, b)
		}
	case "message_delta":
		s.usage.overlay(&m.Usage)
		s.finish(ev, m.Delta.StopReason)
	case "message_stop":
		s.stop(ev)
	}
	// ping and unknown types: nothing to say.
}

// openBlock reports whether a delta for block index of kind may be
// translated; if not, the stream ends unreadable.
func (s *chatStream) openBlock(ev *sse.Event, index int, kind blockKind) bool {
	if s.finished {
		s.unreadable(ev, "content after message_delta")
		return false
	}
	b := s.block(index)
	switch {
	case index < 0:
		s.unreadable(ev, "no block index")
	case b == nil || !b.open:
		s.unreadable(ev, "a delta for block %d, which is not open", index)
	case b.kind != kind:
		s.unreadable(ev, "a delta of another kind than block %d's", index)
	default:
		return true
	}
	return false
}

func (s *chatStream) msgBlockStart(ev *sse.Event, m *msgStreamEvent) {
	if m.Index == nil || *m.Index < 0 {
		s.unreadable(ev, "no block index")
		return
	}
	if s.finished {
		s.unreadable(ev, "content after message_delta")
		return
	}
	if b := s.block(*m.Index); b != nil && b.open {
		s.unreadable(ev, "block %d started again", *m.Index)
		return
	}
	cb := &m.ContentBlock
	nb := chatStreamBlock{index: *m.Index, open: true}
	switch cb.Type {
	case "text":
		nb.kind = blockText
	case "thinking":
		nb.kind = blockThinking
	case "tool_use":
		nb.kind, nb.call, nb.input = blockTool, s.calls, cb.Input
		s.calls++
	default:
		if !serverBlocks[cb.Type] {
			s.unreadable(ev, "content block type %q has no Chat Completions counterpart", cb.Type)
			return
		}
		nb.kind = blockDropped
	}
	s.blocks = append(s.blocks, nb)
	switch nb.kind {
	case blockText:
		s.content("content", []byte(cb.Text))
	case blockThinking:
		s.content("reasoning_content", []byte(cb.Thinking))
	case blockTool:
		s.begin()
		s.push(s.w.ToolCall(nb.call, cb.ID, cb.Name, nil))
	}
}

// serverBlocks are the block types a Chat client is not given: redacted
// thinking (encrypted, for Anthropic alone) and the work of the tools
// Anthropic runs itself (their calls and results; the model's answer
// about them comes as text).
var serverBlocks = map[string]bool{
	"redacted_thinking": true, "server_tool_use": true, "mcp_tool_use": true, "mcp_tool_result": true,
	"web_search_tool_result": true, "web_fetch_tool_result": true, "code_execution_tool_result": true,
	"bash_code_execution_tool_result": true, "text_editor_code_execution_tool_result": true,
	"tool_search_tool_result": true, "container_upload": true,
}

func (s *chatStream) msgBlockDelta(ev *sse.Event, m *msgStreamEvent) {
	if m.Index == nil {
		s.unreadable(ev, "no block index")
		return
	}
	d := &m.Delta
	switch d.Type {
	case "signature_delta", "citations_delta":
		// A thinking block's signature, a text block's citation: Chat has
		// no place for either. Their block must still be open.
		if b := s.block(*m.Index); b == nil || !b.open {
			s.unreadable(ev, "a delta for block %d, which is not open", *m.Index)
		}
		return
	}
	if b := s.block(*m.Index); b != nil && b.open && b.kind == blockDropped {
		return // a server tool's input, or whatever a dropped block has
	}
	switch d.Type {
	case "text_delta":
		if s.openBlock(ev, *m.Index, blockText) {
			s.content("content", []byte(d.Text))
		}
	case "thinking_delta":
		if s.openBlock(ev, *m.Index, blockThinking) {
			s.content("reasoning_content", []byte(d.Thinking))
		}
	case "input_json_delta":
		if !s.openBlock(ev, *m.Index, blockTool) || d.PartialJSON == "" {
			return
		}
		b := s.block(*m.Index)
		b.args = append(b.args, d.PartialJSON...)
		s.begin()
		s.push(s.w.ToolCall(b.call, "", "", []byte(d.PartialJSON)))
	default:
		s.unreadable(ev, "delta type %q has no Chat Completions counterpart", d.Type)
	}
}

// endBlock closes b. A tool call whose arguments never came gets its
// start's input ("{}" when empty); its arguments must be a JSON object,
// or the client would be handed a call it cannot run.
func (s *chatStream) endBlock(ev *sse.Event, b *chatStreamBlock) {
	b.open = false
	if b.kind != blockTool {
		return
	}
	if len(b.args) == 0 {
		b.args = []byte(compactJSON(b.input))
		s.push(s.w.ToolCall(b.call, "", "", b.args))
	}
	if !isObject(b.args) {
		s.unreadable(ev, "tool call %d's arguments are not a JSON object", b.call)
	}
	b.args, b.input = nil, nil
}

// content emits one text or reasoning delta; empty text says nothing.
func (s *chatStream) content(field string, text []byte) {
	if len(text) == 0 {
		return
	}
	s.begin()
	s.push(s.w.Content(field, text))
}

// begin emits the role chunk before the first output.
func (s *chatStream) begin() {
	if !s.started {
		s.started = true
		s.push(s.w.Role())
	}
}

// finish emits the finish chunk, once; the blocks still open end first,
// so that every tool call is whole before it.
func (s *chatStream) finish(ev *sse.Event, stopReason string) {
	if s.finished {
		return
	}
	for i := range s.blocks {
		if b := &s.blocks[i]; b.open {
			s.endBlock(ev, b)
			if s.Err != nil {
				return
			}
		}
	}
	s.begin()
	s.finished = true
	reason := FinishReason(stopReason)
	if stopReason == "pause_turn" && s.opt.KeepPauseTurn {
		reason = chat.FinishPauseTurn
	}
	s.push(s.w.Finish(reason))
}

// stop ends the stream at message_stop. A Chat client expects a
// finish_reason before [DONE]: a message_stop without message_delta gets
// "stop".
func (s *chatStream) stop(ev *sse.Event) {
	s.finish(ev, "")
	if s.Err != nil {
		return
	}
	if s.opt.IncludeUsage {
		u := s.usage
		prompt := u.input + u.cacheRead + u.cacheCreation
		// Messages counts cache reads and writes apart from input_tokens;
		// Chat's prompt_tokens includes both.
		s.push(s.w.Usage(chat.ChunkUsage{Prompt: prompt, Completion: u.output, Total: prompt + u.output,
			Cached: u.cacheRead, CacheCreation: u.cacheCreation}))
	}
	s.push([]byte("[DONE]"))
	s.Err = io.EOF
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
	// code keeps Anthropic's own type.
	s.push(s.w.Error(chat.ErrorType(streamErrorStatus(typ)), typ, msg))
	s.Err = io.EOF
}

// push queues a Chat event of data.
func (s *chatStream) push(data []byte) { s.Q.Push(streamEvents.Event("", data)) }
