// Package responses translates between the OpenAI Responses API and Chat
// Completions, so that a Responses client (the OpenAI SDKs' responses
// resource, Codex CLI) can reach any Chat provider, and through the
// anthropic package an Anthropic one (Responses → Chat → Messages).
//
// The translation is stateless: anything that needs the provider to keep
// a response (previous_response_id, store, background, conversation) is
// refused rather than faked. The package is pure: no Caddy, no clock
// (times are parameters).
package responses

import (
	"encoding/json"
	"fmt"
)

// RequestError says why a request cannot be translated without changing
// what it asks for. It mirrors anthropic.RequestError: a request that is
// not valid Responses (Invalid) is answered 400 at once; for a valid one
// Chat cannot express, the relay skips the target and, when no target is
// left, answers 400 with Message.
type RequestError struct {
	// Param is the JSON path of the member at fault, such as
	// "input[2].type"; "" for the whole body.
	Param string
	// Message says what is wrong and what to do, for the client's user.
	Message string
	// Invalid says the request is not valid in its own dialect.
	Invalid bool
}

func (e *RequestError) Error() string {
	if e.Param == "" {
		return e.Message
	}
	return e.Param + ": " + e.Message
}

func reqErr(param, format string, args ...any) *RequestError {
	return &RequestError{Param: param, Message: fmt.Sprintf(format, args...)}
}

// FromChatError translates a Chat provider's error answer into a Responses
// error answer. OpenAI's error body ({"error":{message,type,param,code}})
// is already the Responses one, so a valid one is kept byte for byte;
// anything else (HTML from a proxy, a bare string) is wrapped so that the
// SDKs still find error.message.
func FromChatError(status int, body []byte) (int, []byte) {
	var e struct {
		Error *struct {
			Message *string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != nil && e.Error.Message != nil {
		return status, body
	}
	msg := string(body)
	if msg == "" {
		msg = fmt.Sprintf("upstream answered %d with no body", status)
	}
	out, _ := json.Marshal(errorBody{Error: errorObj{Message: msg, Type: errorType(status)}})
	return status, out
}

type errorBody struct {
	Error errorObj `json:"error"`
}

type errorObj struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// errorType is OpenAI's error type for an HTTP status.
func errorType(status int) string {
	switch {
	case status == 401:
		return "authentication_error"
	case status == 403:
		return "permission_error"
	case status == 404:
		return "not_found_error"
	case status == 429:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("responses: marshal %T: %v", v, err)) // only our own types
	}
	return b
}
