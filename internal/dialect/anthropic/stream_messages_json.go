package anthropic

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
)

// chatStreamChunk is the part of a Chat chunk FromChatStream reads off its
// slow path (everything but plain text and reasoning deltas). The choices
// are read by chat.ReadDelta, which checks them.
type chatStreamChunk struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Model   string          `json:"model"`
	Choices json.RawMessage `json:"choices"`
	Usage   *struct {
		PromptTokens        *int `json:"prompt_tokens"`
		CompletionTokens    *int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens *int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	// Error is OpenAI's in-band error member; any non-null value counts
	// (as for the pacer).
	Error json.RawMessage `json:"error"`
	// Top-level message, type and code: vLLM's {"object":"error",…}.
	chatStreamError
}

// isJSONObject reports whether data is a JSON object (what a chunk must
// be; encoding/json would decode an array into a struct as a type error).
func isJSONObject(data []byte) bool {
	data = bytes.TrimLeft(data, " \t\r\n")
	return len(data) > 0 && data[0] == '{'
}

// isBlank reports data with nothing but whitespace.
func isBlank(data []byte) bool { return len(bytes.TrimLeft(data, " \t\r\n")) == 0 }

// chatStreamError is an OpenAI error object.
type chatStreamError struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

func (c *chatStreamChunk) isError() bool {
	return len(c.Error) > 0 && !bytes.Equal(c.Error, []byte("null")) || c.Object == "error"
}

// errorBody is the error object of an error chunk; an "error" that is
// not an object (a bare string, say) is taken as the message.
func (c *chatStreamChunk) errorBody() chatStreamError {
	if len(c.Error) == 0 || bytes.Equal(c.Error, []byte("null")) {
		return c.chatStreamError
	}
	var e chatStreamError
	if json.Unmarshal(c.Error, &e) != nil {
		var msg string
		if json.Unmarshal(c.Error, &msg) == nil {
			e = chatStreamError{Message: msg}
		}
	}
	return e
}

// messagesType is the Messages error type for e: its code when that is
// already one (an error ToChatStream translated keeps it there), else by
// the OpenAI type or code, else api_error.
func (e *chatStreamError) messagesType() string {
	var code string
	json.Unmarshal(e.Code, &code) // a number or null leaves it ""
	for _, t := range []string{code, e.Type} {
		switch t {
		case "invalid_request_error", "authentication_error", "billing_error", "permission_error",
			"not_found_error", "request_too_large", "rate_limit_error", "api_error",
			"timeout_error", "overloaded_error":
			return t
		case "rate_limit_exceeded", "requests", "tokens":
			return "rate_limit_error"
		case "insufficient_quota":
			return "billing_error"
		case "server_error":
			return "api_error"
		}
	}
	return "api_error"
}

func streamDeref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// streamMessageID is message_start's id: "msg_" and the Chat id (kept as it is
// when it already has the prefix: a Messages id that went through Chat),
// or a random one when the upstream gave none.
func streamMessageID(chatID string) string {
	switch {
	case strings.HasPrefix(chatID, "msg_"):
		return chatID
	case chatID != "":
		return "msg_" + chatID
	}
	var b [12]byte
	rand.Read(b[:])
	return "msg_relay_" + hex.EncodeToString(b[:])
}

func (s *messagesStream) emitMessageStart(chatID, model string) {
	b := append(s.buf[:0], `{"type":"message_start","message":{"id":`...)
	b = pace.AppendString(b, []byte(streamMessageID(chatID)))
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = pace.AppendString(b, []byte(model))
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(s.opt.InputTokens), 10)
	s.buf = append(b, `,"output_tokens":0}}}`...)
	s.Q.Push(streamEvents.Event("message_start", s.buf))
}

// blockHead starts s.buf with `{"type":<typ>,"index":<open block>`.
func (s *messagesStream) blockHead(typ string) {
	b := append(s.buf[:0], `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","index":`...)
	s.buf = strconv.AppendInt(b, int64(s.next), 10)
}

func (s *messagesStream) emitBlockStart(kind chat.ItemKind, id, name string) {
	s.blockHead("content_block_start")
	switch kind {
	case chat.ItemReasoning:
		s.buf = append(s.buf, `,"content_block":{"type":"thinking","thinking":"","signature":""}}`...)
	case chat.ItemText, chat.ItemRefusal:
		s.buf = append(s.buf, `,"content_block":{"type":"text","text":""}}`...)
	default:
		s.buf = append(s.buf, `,"content_block":{"type":"tool_use","id":`...)
		s.buf = pace.AppendString(s.buf, []byte(id))
		s.buf = append(s.buf, `,"name":`...)
		s.buf = pace.AppendString(s.buf, []byte(name))
		s.buf = append(s.buf, `,"input":{}}}`...)
	}
	s.Q.Push(streamEvents.Event("content_block_start", s.buf))
}

// emitTextDelta queues a text_delta or thinking_delta of the shape
// pace.ClassifyMessages takes for text: the relay re-paces it.
func (s *messagesStream) emitTextDelta(kind chat.ItemKind, text []byte) {
	s.blockHead("content_block_delta")
	if kind == chat.ItemReasoning {
		s.buf = append(s.buf, `,"delta":{"type":"thinking_delta","thinking":`...)
	} else {
		s.buf = append(s.buf, `,"delta":{"type":"text_delta","text":`...)
	}
	s.buf = pace.AppendString(s.buf, text)
	s.buf = append(s.buf, "}}"...)
	s.Q.Push(streamEvents.Event("content_block_delta", s.buf))
}

func (s *messagesStream) emitInputDelta(partial []byte) {
	s.blockHead("content_block_delta")
	s.buf = append(s.buf, `,"delta":{"type":"input_json_delta","partial_json":`...)
	s.buf = pace.AppendString(s.buf, partial)
	s.buf = append(s.buf, "}}"...)
	s.Q.Push(streamEvents.Event("content_block_delta", s.buf))
}

func (s *messagesStream) emitBlockStop() {
	s.blockHead("content_block_stop")
	s.buf = append(s.buf, '}')
	s.Q.Push(streamEvents.Event("content_block_stop", s.buf))
}

// emitMessageDelta queues the stop reason and usage. Chat's prompt_tokens
// includes cached tokens; Messages' input_tokens does not.
func (s *messagesStream) emitMessageDelta(stop string) {
	u := s.usage
	b := append(s.buf[:0], `{"type":"message_delta","delta":{"stop_reason":`...)
	b = pace.AppendString(b, []byte(stop))
	b = append(b, `,"stop_sequence":null},"usage":{"output_tokens":`...)
	b = strconv.AppendInt(b, int64(u.completion), 10)
	if u.known {
		b = append(b, `,"input_tokens":`...)
		b = strconv.AppendInt(b, int64(max(u.prompt-u.cached, 0)), 10)
	}
	if u.known && u.cachedKnown {
		b = append(b, `,"cache_read_input_tokens":`...)
		b = strconv.AppendInt(b, int64(u.cached), 10)
	}
	s.buf = append(b, "}}"...)
	s.Q.Push(streamEvents.Event("message_delta", s.buf))
}

func (s *messagesStream) emitError(typ, msg string) {
	b := append(s.buf[:0], `{"type":"error","error":{"type":`...)
	b = pace.AppendString(b, []byte(typ))
	b = append(b, `,"message":`...)
	b = pace.AppendString(b, []byte(msg))
	s.buf = append(b, "}}"...)
	s.Q.Push(streamEvents.Event("error", s.buf))
}
