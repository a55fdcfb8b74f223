package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// ToChatStream translates a Gemini stream (streamGenerateContent?alt=sse:
// data events, each a GenerateContentResponse) into a Chat Completions
// stream (chat.completion.chunk data events, then [DONE]).
//
// opt.Model is the chunks' "model" ("" takes the first chunk's
// modelVersion), opt.Created their "created"; opt.IncludeUsage adds the
// final usage chunk (the client's stream_options.include_usage).
//
// Nothing is yielded before the first content: the first text, thought
// or function call comes after the role chunk. Thought parts (thought:
// true) go to delta.reasoning_content, text parts to delta.content, each
// functionCall (Gemini sends a call whole, in one part) to a tool call:
// its first chunk with the id (the call's, else CallID(0, n) for the
// n-th call; its thoughtSignature rides in the id, see SplitCallID), the
// name and empty arguments, then one chunk with all of its arguments,
// checked to be a JSON object.
//
// A Gemini stream has no [DONE]: it ends on the chunk that carries the
// finishReason, which may be followed by a chunk of usage only, and
// every chunk's usageMetadata is the running total (the last one counts).
// So the finishReason becomes the finish chunk at once (tool_calls when
// the stream called functions), and the end of src after it becomes the
// usage chunk (with IncludeUsage) and [DONE]. src ending before a
// finishReason, or in the middle of a chunk, ends the stream without
// [DONE] (the relay reads that as truncation). An error, as a data event
// ({"error":{...}}) or as the bare JSON object the Gemini API writes in
// a stream, becomes an in-band Chat error chunk (its code Google's
// status name), and ends the stream: the next call returns io.EOF. src's
// other errors are returned as they are once the events made before them
// are out. The returned Source forwards BeforeRead to src.
//
// A chunk that cannot be translated faithfully ends the stream with a
// *chat.UnreadableError, after the events made before it: data that is
// not a JSON object, more than one candidate, a part Chat cannot carry
// (inline data, code execution, a call without a name or whose args are
// not an object), content after the finishReason. Comments and data-less
// blocks pass unsaid, as do thought signatures on other parts than calls.
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
	begun    bool // the chunks' id and model are known
	started  bool // the role chunk is out
	finished bool // the finish chunk is out
	ended    bool // the stream's end (usage, [DONE]) or its error is out
	calls    int  // function calls so far: the next one's index
	usage    UsageMetadata

	fc      fastChunk // the hot path's chunk, its slices reused
	scratch []byte    // the hot path's decoded texts
}

// Next returns the next Chat event.
func (s *chatStream) Next() (sse.Event, error) {
	for {
		ev, err := s.Pull(s)
		if err == io.EOF && s.finished && !s.ended {
			// The Gemini stream's end after its finishReason: the
			// Chat stream's end.
			s.ended = true
			if s.opt.IncludeUsage {
				s.push(s.w.Usage(s.usage.chatUsage()))
			}
			s.push([]byte("[DONE]"))
			continue
		}
		return ev, err
	}
}

// geminiChunk is one chunk of a Gemini stream as read: a
// GenerateContentResponse, or an error.
type geminiChunk struct {
	generateResponse
	Error json.RawMessage `json:"error"`
}

// Handle translates one upstream event into s.Q.
func (s *chatStream) Handle(ev *sse.Event) {
	if s.ended {
		return
	}
	data := ev.Data
	if !ev.HasData {
		if ev.IsComment() {
			return // the relay sends its own keep-alives
		}
		// A bare JSON line, not an SSE field: how the Gemini API writes
		// an error in a stream.
		raw := bytes.TrimSpace(ev.Raw)
		if len(raw) == 0 || raw[0] != '{' && raw[0] != '[' {
			return
		}
		data = raw
	}
	if isBlank(data) {
		return
	}
	if ev.Unterminated && !json.Valid(data) {
		// Cut off by EOF anywhere: dropped, so the stream ends as
		// truncated, after the finishReason too (no [DONE]): the chunk
		// cut may be the usage one.
		s.ended = true
		return
	}
	if s.fast(data) {
		s.handleFast(ev)
		return
	}
	var c geminiChunk
	if err := json.Unmarshal(data, &c); err != nil || !isJSONObject(data) {
		if bytes.HasPrefix(bytes.TrimSpace(data), []byte("[")) && bytes.Contains(data, []byte(`"error"`)) {
			s.fail(data)
			return
		}
		s.unreadable(ev, "the data is not a JSON object of the expected shape")
		return
	}
	if !isNullOrAbsent(c.Error) {
		s.fail(data)
		return
	}
	if !s.begun {
		s.begun = true
		model := s.w.Model()
		if model == "" {
			model = c.ModelVersion
		}
		s.w.Begin(c.ResponseID, model, s.opt.Created)
	}
	if c.UsageMetadata != nil {
		s.usage = *c.UsageMetadata // running totals: the last one counts
	}
	switch {
	case len(c.Candidates) > 1:
		s.unreadable(ev, "more than the one candidate the relay asks for")
		return
	case len(c.Candidates) == 0:
		if c.PromptFeedback != nil && c.PromptFeedback.BlockReason != "" {
			s.finish("SAFETY")
		}
		return
	}
	cand := &c.Candidates[0]
	if cand.Index != nil && *cand.Index != 0 {
		s.unreadable(ev, "candidate %d, not the one the relay asks for", *cand.Index)
		return
	}
	if cand.Content != nil {
		for i := range cand.Content.Parts {
			if s.part(ev, &cand.Content.Parts[i]); s.Err != nil {
				return
			}
		}
	}
	if cand.FinishReason != "" {
		s.finish(cand.FinishReason)
	}
}

// handleFast translates a chunk the hot path read.
func (s *chatStream) handleFast(ev *sse.Event) {
	fc := &s.fc
	if !s.begun {
		s.begun = true
		model, id := s.w.Model(), ""
		if model == "" && fc.model != nil {
			_ = json.Unmarshal(fc.model, &model)
		}
		if fc.id != nil {
			_ = json.Unmarshal(fc.id, &id)
		}
		s.w.Begin(id, model, s.opt.Created)
	}
	if fc.hasUsage {
		s.usage = fc.usage
	}
	if fc.cands == 0 {
		return
	}
	if fc.index != 0 {
		s.unreadable(ev, "candidate %d, not the one the relay asks for", fc.index)
		return
	}
	for _, seg := range fc.segs {
		text := s.scratch[seg.start:seg.end]
		if len(text) == 0 {
			continue
		}
		if s.finished {
			s.unreadable(ev, "content after the finishReason")
			return
		}
		field := "content"
		if seg.thought {
			field = "reasoning_content"
		}
		s.begin()
		s.push(s.w.Content(field, text))
	}
	if len(fc.finish) > 0 {
		s.finish(string(fc.finish))
	}
}

// part translates one part of the candidate's content.
func (s *chatStream) part(ev *sse.Event, p *part) {
	hasContent := p.FunctionCall != nil || p.Text != nil && *p.Text != ""
	if s.finished && hasContent {
		s.unreadable(ev, "content after the finishReason")
		return
	}
	if why := answerPartRefusal(p); why != "" {
		s.unreadable(ev, "%s", why)
		return
	}
	switch {
	case p.FunctionCall != nil:
		call := toolCall(*p, 0, s.calls)
		s.begin()
		s.push(s.w.ToolCall(s.calls, call.ID, call.Function.Name, nil))
		s.push(s.w.ToolCall(s.calls, "", "", []byte(call.Function.Arguments)))
		s.calls++
	case p.Text != nil:
		field := "content"
		if p.Thought {
			field = "reasoning_content"
		}
		s.content(field, *p.Text)
	}
}

// content emits one text or reasoning delta; empty text says nothing.
func (s *chatStream) content(field, text string) {
	if text == "" {
		return
	}
	s.begin()
	s.push(s.w.Content(field, []byte(text)))
}

// begin emits the role chunk before the first output.
func (s *chatStream) begin() {
	if !s.started {
		s.started = true
		s.push(s.w.Role())
	}
}

// finish emits the finish chunk, once.
func (s *chatStream) finish(reason string) {
	if s.finished {
		return
	}
	s.begin()
	s.finished = true
	s.push(s.w.Finish(FinishReason(reason, s.calls > 0)))
}

// fail turns a Google error into a Chat error chunk, and ends the stream.
func (s *chatStream) fail(data []byte) {
	e := readError(data)
	status := e.Status
	if status == "" {
		status = "INTERNAL"
	}
	code := StatusCode(status)
	if code == 0 {
		code = 500
	}
	msg := e.Message
	if msg == "" {
		msg = "upstream stream error: " + status
	}
	s.push(s.w.Error(chat.ErrorType(code), status, msg))
	s.ended = true
	s.Err = io.EOF
}

// unreadable ends the stream at ev: what was made before it goes out,
// then the error.
func (s *chatStream) unreadable(ev *sse.Event, format string, args ...any) {
	s.ended = true
	s.Err = &chat.UnreadableError{Event: ev.Type, Reason: fmt.Sprintf(format, args...)}
}

// push queues a Chat event of data.
func (s *chatStream) push(data []byte) { s.Q.Push(streamEvents.Event("", data)) }

// isJSONObject reports whether data is a JSON object.
func isJSONObject(data []byte) bool {
	data = bytes.TrimLeft(data, " \t\r\n")
	return len(data) > 0 && data[0] == '{'
}

// isBlank reports data with nothing but whitespace.
func isBlank(data []byte) bool { return len(bytes.TrimLeft(data, " \t\r\n")) == 0 }
