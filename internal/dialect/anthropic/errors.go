package anthropic

import (
	"encoding/json"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// ToChatError translates an Anthropic error answer into OpenAI's error
// shape, keeping the status (the SDKs type errors by status):
//
//	{"type":"error","error":{"type":T,"message":M}}
//	→ {"error":{"message":M,"type":chat.ErrorType(status),"param":null,"code":T}}
//
// A body in no known shape (an HTML page from a proxy) becomes the
// message, cut short and stripped of markup-breaking bytes.
func ToChatError(status int, body []byte) (int, []byte) {
	typ, msg := readError(body)
	if msg == "" {
		msg = "the Anthropic upstream answered " + chat.StatusText(status)
	}
	out := chat.ErrorBody{Error: chat.ErrorObject{Message: msg, Type: chat.ErrorType(status)}}
	if typ != "" {
		out.Error.Code = &typ
	}
	return status, marshal(out)
}

// FromChatError translates an OpenAI-style error answer into Anthropic's
// shape, keeping the status:
//
//	{"error":{"message":M,...}} → {"type":"error","error":{"type":ErrorType(status),"message":M}}
func FromChatError(status int, body []byte) (int, []byte) {
	_, msg := readError(body)
	if msg == "" {
		msg = "the upstream answered " + chat.StatusText(status)
	}
	return status, MessagesError(ErrorType(status), msg)
}

// ErrorBody is Anthropic's error answer,
// {"type":"error","error":{"type","message"}}: the body of an error answer
// and the data of an in-band `event: error`. The Anthropic SDKs turn its
// type into their typed errors (by status) and show the message.
type ErrorBody struct {
	Type  string      `json:"type"` // "error"
	Error ErrorObject `json:"error"`
}

// ErrorObject is the error inside an ErrorBody: its type (ErrorType) and
// message.
type ErrorObject struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// MessagesError is the ErrorBody of an error of type typ, in JSON.
func MessagesError(typ, message string) []byte {
	return marshal(ErrorBody{Type: "error", Error: ErrorObject{Type: typ, Message: message}})
}

// readError finds an error's type and message in either dialect's shape
// ({"error":{"type","message"}}, with or without "type":"error" around
// it; {"error":"text"}; {"message":"text"}), else takes the body itself as
// the message.
func readError(body []byte) (typ, msg string) {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &e) == nil {
		var inner struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Code    any    `json:"code"`
		}
		var s string
		switch {
		case json.Unmarshal(e.Error, &inner) == nil && inner.Message != "":
			return inner.Type, inner.Message
		case json.Unmarshal(e.Error, &s) == nil && s != "":
			return "", s
		case e.Message != "":
			return "", e.Message
		}
	}
	return "", chat.Excerpt(body)
}
