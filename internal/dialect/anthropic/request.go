package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

func reqErr(param, format string, args ...any) *chat.RequestError {
	return &chat.RequestError{Param: param, Message: fmt.Sprintf(format, args...)}
}

// invalid is the chat.RequestError of a request that is not valid in its own
// dialect.
func invalid(param, format string, args ...any) *chat.RequestError {
	e := reqErr(param, format, args...)
	e.Invalid = true
	return e
}

// notValid is the chat.RequestError of a body that is not JSON of the expected
// shape at all; a member of the wrong type is named (without the indexes
// of the arrays it is in: encoding/json does not say them).
func notValid(dialect string, err error) *chat.RequestError {
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
		return invalid(te.Field, "the body is not a valid %s request: %s where %s belongs", dialect, te.Value, jsonKind(te.Type))
	}
	return invalid("", "the body is not a valid %s request: %v", dialect, err)
}

// jsonKind names the JSON a Go type decodes from, for a client's message
// (Go's own error names the relay's types).
func jsonKind(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == nil:
		return "a value"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		return "a value" // json.RawMessage
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		return "an array"
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map:
		return "an object"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "a boolean"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "an integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "a number"
	}
	return "a value"
}

// knownEffort reports whether effort is a reasoning effort some dialect
// names: OpenAI's (none to xhigh) and Anthropic's max.
func knownEffort(effort string) bool {
	switch effort {
	case "none", "minimal", "low", "medium", "high", "xhigh", "max":
		return true
	}
	return false
}

// emptyContent reports whether parts carry nothing: no part, or text
// parts with no text.
func emptyContent(parts []part) bool {
	for _, p := range parts {
		if p.Type != "text" || p.Text != "" {
			return false
		}
	}
	return true
}

// isNullOrAbsent reports whether raw is JSON null or was not there.
func isNullOrAbsent(raw json.RawMessage) bool {
	raw = trimJSON(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// text content: a JSON string, or an array of parts or blocks, each with a
// "type". contentParts decodes either form; a string is one "text" part.
type part struct {
	Type string `json:"type"`
	Text string `json:"text"`

	// Chat Completions parts.
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
	Refusal string `json:"refusal"`

	// Messages blocks.
	Source    *imageSource    `json:"source"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
}

// imageSource is a Messages image block's source.
type imageSource struct {
	Type      string `json:"type"` // base64 or url
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// contentParts decodes a string-or-array content member; null or absent
// is no parts.
func contentParts(raw json.RawMessage, param string) ([]part, error) {
	raw = trimJSON(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, invalid(param, "not a valid string: %v", err)
		}
		return []part{{Type: "text", Text: s}}, nil
	}
	var parts []part
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, invalid(param, "want a string or an array of content parts: %v", err)
	}
	return parts, nil
}

func trimJSON(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

// compactJSON is raw without insignificant space, or "{}" when raw is
// empty or null: tool inputs and arguments are objects.
func compactJSON(raw json.RawMessage) string {
	raw = trimJSON(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	var b strings.Builder
	b.Grow(len(raw))
	inString, escaped := false, false
	for _, c := range []byte(raw) {
		switch {
		case inString:
			b.WriteByte(c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
			b.WriteByte(c)
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	raw = trimJSON(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil
}

// marshal encodes v without escaping <, > and & (prompts are full of
// them, and \u003c is six bytes for one), with no trailing newline. It
// never fails for the relay's own types.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("anthropic: encoding the relay's own type: " + err.Error())
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// ToolUseID makes a Chat tool call id a valid Messages tool_use id, which
// must match ^[a-zA-Z0-9_-]+$: some Chat providers use other bytes (Kimi's
// "functions.get_weather:0"). Each other byte becomes '_', the same way for
// a call and for the result that answers it, so pairs still match; a
// valid id is kept as it is.
func ToolUseID(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}
