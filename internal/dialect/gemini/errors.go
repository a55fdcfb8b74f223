package gemini

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// ErrorBody is Google's error answer, {"error":{"code","message",
// "status"}}: the body of an error answer, and (written bare, see
// FromChatStream) an in-band stream error. The @google/genai SDK raises it
// as an ApiError with the code as its status.
type ErrorBody struct {
	Error ErrorObject `json:"error"`
}

// ErrorObject is the error inside an ErrorBody: the HTTP status, the
// message, Google's status name (Status), and details such as RetryInfo.
type ErrorObject struct {
	Code    int               `json:"code"`
	Message string            `json:"message"`
	Status  string            `json:"status"`
	Details []json.RawMessage `json:"details,omitempty"`
}

// GeminiError is the ErrorBody of an error of HTTP status code, in JSON.
func GeminiError(code int, message string) []byte {
	return marshal(ErrorBody{Error: ErrorObject{Code: code, Message: message, Status: Status(code)}})
}

// ToChatError translates a Gemini error answer into OpenAI's error shape,
// keeping the status (the SDKs type errors by status):
//
//	{"error":{"code":C,"message":M,"status":S}}
//	→ {"error":{"message":M,"type":chat.ErrorType(status),"param":null,"code":S}}
//
// The Gemini API also answers a stream request's error as a JSON array
// of one such object: it is read the same. A body in no known shape (an
// HTML page from a proxy) becomes the message, cut short.
func ToChatError(status int, body []byte) (int, []byte) {
	e := readError(body)
	msg := e.Message
	if msg == "" {
		msg = "the Gemini upstream answered " + chat.StatusText(status)
	}
	out := chat.ErrorBody{Error: chat.ErrorObject{Message: msg, Type: chat.ErrorType(status)}}
	if e.Status != "" {
		out.Error.Code = &e.Status
	}
	return status, marshal(out)
}

// FromChatError translates an OpenAI-style (or any) error answer into
// Google's shape, keeping the status: {"error":{"message":M,...}} →
// {"error":{"code":status,"message":M,"status":Status(status)}}. A Google
// error passes with its own status name and details (a Gemini error
// translated to Chat and back keeps its RetryInfo only when it was never
// translated, as Chat has no place for it).
func FromChatError(status int, body []byte) (int, []byte) {
	e := readError(body)
	if e.Message == "" {
		e.Message = "the upstream answered " + chat.StatusText(status)
	}
	if e.Status == "" || StatusCode(e.Status) == 0 {
		e.Status = Status(status)
	}
	return status, marshal(ErrorBody{Error: ErrorObject{Code: status, Message: e.Message, Status: e.Status, Details: e.Details}})
}

// readError finds an error's message and status name in Google's shape
// (bare or in an array), OpenAI's (whose code may be a status name a
// translation put there), {"error":"text"} or {"message":"text"}, else
// takes the body itself as the message.
func readError(body []byte) ErrorObject {
	b := bytes.TrimSpace(body)
	if len(b) > 0 && b[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(b, &arr) == nil && len(arr) > 0 {
			b = arr[0]
		}
	}
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(b, &e) == nil {
		var inner struct {
			Message string            `json:"message"`
			Status  string            `json:"status"`
			Code    json.RawMessage   `json:"code"`
			Details []json.RawMessage `json:"details"`
		}
		var s string
		switch {
		case json.Unmarshal(e.Error, &inner) == nil && inner.Message != "":
			out := ErrorObject{Message: inner.Message, Status: inner.Status, Details: inner.Details}
			var code string
			if out.Status == "" && json.Unmarshal(inner.Code, &code) == nil && StatusCode(code) != 0 {
				out.Status = code // a Gemini error that went through Chat
			}
			return out
		case json.Unmarshal(e.Error, &s) == nil && s != "":
			return ErrorObject{Message: s}
		case e.Message != "":
			return ErrorObject{Message: e.Message}
		}
	}
	return ErrorObject{Message: chat.Excerpt(body)}
}

// RetryDelay reads the retryDelay of a Google error's RetryInfo detail
// ({"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}),
// which a 429 RESOURCE_EXHAUSTED carries, for the caller's Retry-After;
// ok is false when there is none. The body may be any error answer.
func RetryDelay(body []byte) (d time.Duration, ok bool) {
	if !bytes.Contains(body, []byte("RetryInfo")) {
		return 0, false
	}
	for _, raw := range readError(body).Details {
		var det struct {
			Type       string `json:"@type"`
			RetryDelay string `json:"retryDelay"`
		}
		if json.Unmarshal(raw, &det) != nil || !strings.HasSuffix(det.Type, "google.rpc.RetryInfo") {
			continue
		}
		// A protobuf Duration in JSON: decimal seconds, suffixed "s".
		secs, found := strings.CutSuffix(det.RetryDelay, "s")
		f, err := strconv.ParseFloat(secs, 64)
		if !found || err != nil || f < 0 || f > 1e9 {
			continue
		}
		return time.Duration(f * float64(time.Second)), true
	}
	return 0, false
}
