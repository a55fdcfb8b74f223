package anthropic

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ToChatError translates an Anthropic error answer into OpenAI's error
// shape, keeping the status (the SDKs type errors by status):
//
//	{"type":"error","error":{"type":T,"message":M}}
//	→ {"error":{"message":M,"type":ChatErrorType(status),"param":null,"code":T}}
//
// A body in no known shape (an HTML page from a proxy) becomes the
// message, cut short and stripped of markup-breaking bytes.
func ToChatError(status int, body []byte) (int, []byte) {
	typ, msg := readError(body)
	if msg == "" {
		msg = "the Anthropic upstream answered " + statusText(status)
	}
	out := struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}{}
	out.Error.Message = msg
	out.Error.Type = ChatErrorType(status)
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
		msg = "the upstream answered " + statusText(status)
	}
	return status, MessagesError(ErrorType(status), msg)
}

// MessagesError is the body of an Anthropic error (and the data of an
// in-band `event: error`).
func MessagesError(typ, message string) []byte {
	out := struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}{Type: "error"}
	out.Error.Type, out.Error.Message = typ, message
	return marshal(out)
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
	return "", excerpt(body)
}

// excerpt is a short, printable piece of a body of unknown shape.
func excerpt(body []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(body), "�"))
	if s == "" {
		return ""
	}
	s = strings.Join(strings.Fields(s), " ")
	const max = 200
	if utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max]) + "…"
	}
	return s
}

func statusText(status int) string { return "HTTP " + strconv.Itoa(status) }
