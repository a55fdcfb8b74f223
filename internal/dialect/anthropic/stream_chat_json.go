package anthropic

import (
	"encoding/json"
	"strconv"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
)

// msgStreamEvent is the union of the Messages stream events ChatStream
// reads off its slow path (everything but text and thinking deltas). A
// struct, not a map: encoding/json fills only the members named here.
type msgStreamEvent struct {
	Type    string `json:"type"`
	Index   *int   `json:"index"`
	Message struct {
		ID    string         `json:"id"`
		Model string         `json:"model"`
		Usage msgStreamUsage `json:"usage"`
	} `json:"message"`
	ContentBlock struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		Thinking string          `json:"thinking"`
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Input    json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage msgStreamUsage `json:"usage"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// msgStreamUsage is a Messages usage object; nil members were absent.
type msgStreamUsage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
}

// overlay takes the members u has: message_delta repeats or corrects
// some of message_start's counts.
func (c *chatStreamUsage) overlay(u *msgStreamUsage) {
	set := func(dst *int, p *int) {
		if p != nil {
			*dst = *p
		}
	}
	set(&c.input, u.InputTokens)
	set(&c.output, u.OutputTokens)
	set(&c.cacheRead, u.CacheReadInputTokens)
	set(&c.cacheCreation, u.CacheCreationInputTokens)
}

// streamErrorStatus is the HTTP status Anthropic documents for an error
// type: the key to ChatErrorType, so that an error in the middle of a
// stream gets the OpenAI type the same error gets before it.
func streamErrorStatus(typ string) int {
	switch typ {
	case "invalid_request_error":
		return 400
	case "authentication_error":
		return 401
	case "billing_error":
		return 402
	case "permission_error":
		return 403
	case "not_found_error":
		return 404
	case "request_too_large":
		return 413
	case "rate_limit_error":
		return 429
	case "timeout_error":
		return 504
	case "overloaded_error":
		return StatusOverloaded
	}
	return 500 // api_error, anything new
}

// chunkHead is `{"id":…,"object":"chat.completion.chunk","created":…,
// "model":…,"choices":[`, the start of every chunk, built once.
func (s *chatStream) chunkHead() []byte {
	if s.head == nil {
		h := append([]byte(`{"id":`), pace.AppendString(nil, []byte(s.id))...)
		h = append(h, `,"object":"chat.completion.chunk","created":`...)
		h = strconv.AppendInt(h, s.opt.Created, 10)
		h = append(h, `,"model":`...)
		h = pace.AppendString(h, []byte(s.model))
		s.head = append(h, `,"choices":[`...)
	}
	return s.head
}

// openChoice starts a chunk in s.buf, up to the inside of the delta.
func (s *chatStream) openChoice() {
	s.buf = append(append(s.buf[:0], s.chunkHead()...), `{"index":0,"delta":{`...)
}

// closeChoice ends the chunk in s.buf and queues it; finish "" is null.
func (s *chatStream) closeChoice(finish string) {
	s.buf = append(s.buf, `},"logprobs":null,"finish_reason":`...)
	if finish == "" {
		s.buf = append(s.buf, "null"...)
	} else {
		s.buf = pace.AppendString(s.buf, []byte(finish))
	}
	s.buf = append(s.buf, "}]}"...)
	s.q.Push(newStreamEvent("", s.buf))
}

func (s *chatStream) emitRole() {
	s.openChoice()
	s.buf = append(s.buf, `"role":"assistant","content":""`...)
	s.closeChoice("")
}

// emitContent queues a chunk of the shape pace.Classify takes for text:
// the relay re-paces it.
func (s *chatStream) emitContent(field string, text []byte) {
	s.openChoice()
	s.buf = append(s.buf, '"')
	s.buf = append(s.buf, field...)
	s.buf = append(s.buf, `":`...)
	s.buf = pace.AppendString(s.buf, text)
	s.closeChoice("")
}

// emitTool queues a tool call's first chunk (id != "": id, name, empty
// arguments) or an arguments fragment.
func (s *chatStream) emitTool(call int, id, name string, args []byte) {
	s.openChoice()
	s.buf = append(s.buf, `"tool_calls":[{"index":`...)
	s.buf = strconv.AppendInt(s.buf, int64(call), 10)
	if id != "" || args == nil {
		s.buf = append(s.buf, `,"id":`...)
		s.buf = pace.AppendString(s.buf, []byte(id))
		s.buf = append(s.buf, `,"type":"function","function":{"name":`...)
		s.buf = pace.AppendString(s.buf, []byte(name))
		s.buf = append(s.buf, `,"arguments":""}}]`...)
	} else {
		s.buf = append(s.buf, `,"function":{"arguments":`...)
		s.buf = pace.AppendString(s.buf, args)
		s.buf = append(s.buf, "}}]"...)
	}
	s.closeChoice("")
}

func (s *chatStream) emitFinish(reason string) {
	s.openChoice()
	s.closeChoice(reason)
}

// emitUsage queues the usage chunk. Messages counts cache reads and
// writes apart from input_tokens; Chat's prompt_tokens includes both.
func (s *chatStream) emitUsage() {
	u := s.usage
	prompt := u.input + u.cacheRead + u.cacheCreation
	b := append(s.buf[:0], s.chunkHead()...)
	b = append(b, `],"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.output), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+u.output), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(u.cacheRead), 10)
	b = append(b, '}')
	if u.cacheCreation > 0 {
		b = append(b, `,"cache_creation_input_tokens":`...)
		b = strconv.AppendInt(b, int64(u.cacheCreation), 10)
	}
	s.buf = append(b, "}}"...)
	s.q.Push(newStreamEvent("", s.buf))
}

// emitError queues an OpenAI-shaped in-band error; code keeps
// Anthropic's own type.
func (s *chatStream) emitError(typ, code, msg string) {
	b := append(s.buf[:0], `{"error":{"message":`...)
	b = pace.AppendString(b, []byte(msg))
	b = append(b, `,"type":`...)
	b = pace.AppendString(b, []byte(typ))
	b = append(b, `,"param":null,"code":`...)
	b = pace.AppendString(b, []byte(code))
	s.buf = append(b, "}}"...)
	s.q.Push(newStreamEvent("", s.buf))
}
