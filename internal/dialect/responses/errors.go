package responses

import (
	"encoding/json"
	"fmt"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

func reqErr(param, format string, args ...any) *chat.RequestError {
	return &chat.RequestError{Param: param, Message: fmt.Sprintf(format, args...)}
}

// FromChatRequest would translate a Chat Completions request into a
// Responses request, for an upstream that speaks only Responses. The relay
// has no such upstream (OpenAI, which speaks Responses, speaks Chat too),
// so the direction is not built: the error wraps chat.ErrNotSupported.
func FromChatRequest([]byte, chat.Options) ([]byte, error) {
	return nil, errNoRequest
}

var errNoRequest = fmt.Errorf("translating a Chat Completions request into a Responses one: %w", chat.ErrNotSupported)

// FromChatError translates a Chat provider's error answer into a Responses
// error answer. OpenAI's error body ({"error":{message,type,param,code}})
// is already the Responses one, so a valid one is kept byte for byte;
// anything else (HTML from a proxy, a bare string) is wrapped so that the
// SDKs still find error.message.
func FromChatError(status int, body []byte) (int, []byte) { return status, openAIError(status, body) }

// ToChatError translates a Responses error answer into a Chat one: the
// same shape, so as FromChatError.
func ToChatError(status int, body []byte) (int, []byte) { return status, openAIError(status, body) }

// openAIError is body if it is OpenAI's error shape, else an error of that
// shape whose message is body.
func openAIError(status int, body []byte) []byte {
	var e struct {
		Error *struct {
			Message *string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != nil && e.Error.Message != nil {
		return body
	}
	msg := string(body)
	if msg == "" {
		msg = fmt.Sprintf("upstream answered %d with no body", status)
	}
	out, _ := json.Marshal(chat.ErrorBody{Error: chat.ErrorObject{Message: msg, Type: chat.ErrorType(status)}})
	return out
}

func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("responses: marshal %T: %v", v, err)) // only our own types
	}
	return b
}
