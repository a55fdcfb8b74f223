package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// The helpers both request directions share.

func reqErr(param, format string, args ...any) *chat.RequestError {
	return &chat.RequestError{Param: param, Message: fmt.Sprintf(format, args...)}
}

// invalid is the chat.RequestError of a request that is not valid in its
// own dialect.
func invalid(param, format string, args ...any) *chat.RequestError {
	e := reqErr(param, format, args...)
	e.Invalid = true
	return e
}

// notValid is the chat.RequestError of a body that is not JSON of the
// expected shape; a member of the wrong type is named.
func notValid(dialect string, err error) *chat.RequestError {
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
		return invalid(te.Field, "the body is not a valid %s request: %s where another type belongs", dialect, te.Value)
	}
	return invalid("", "the body is not a valid %s request: %v", dialect, err)
}

// isNullOrAbsent reports whether raw is JSON null or was not there.
func isNullOrAbsent(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// isObject reports whether raw is a JSON object.
func isObject(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil
}

// compactJSON is raw without insignificant space, or "{}" when raw is
// empty or null (function arguments are objects). raw must be valid JSON
// when not empty.
func compactJSON(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// marshal encodes v without escaping <, > and & (prompts are full of
// them), with no trailing newline. It never fails for the package's own
// types.
func marshal(v any) []byte {
	e := encoders.Get().(*encoder)
	e.b.Reset()
	if err := e.enc.Encode(v); err != nil {
		panic("gemini: encoding the package's own type: " + err.Error())
	}
	out := bytes.Clone(bytes.TrimSuffix(e.b.Bytes(), []byte("\n")))
	if e.b.Cap() <= 64<<10 { // a large one is left to the collector
		encoders.Put(e)
	}
	return out
}

// encoder is a reusable encoder of marshal's, with its buffer: a request's
// translation marshals each message, and a new Encoder each time costs
// several allocations.
type encoder struct {
	b   bytes.Buffer
	enc *json.Encoder
}

var encoders = sync.Pool{New: func() any {
	e := &encoder{}
	e.enc = json.NewEncoder(&e.b)
	e.enc.SetEscapeHTML(false)
	return e
}}

// Tool call ids and thought signatures.
//
// Gemini's functionCall may have no id: a client pairs a functionResponse
// with its call by name and order. Chat needs an id on every call and the
// same one on its result, so a call without one gets CallID(content,
// part), the same every time the history is sent again, and a
// functionResponse without one takes the id of the first unanswered call
// of the same name before it.
//
// Gemini 3 also wants a functionCall's thoughtSignature back in later
// turns, and Chat has no member for it: it rides in the tool call id,
// which every dialect hands back verbatim, after sigSep: the count of its
// '=' padding, then the signature without it in the base64 URL alphabet
// (so that Anthropic's tool_use id rule, ^[a-zA-Z0-9_-]+$, keeps it
// whole). FromChatRequest takes it out again.

// sigSep separates a tool call id from the thought signature it carries.
const sigSep = "__sig_"

// CallID is the id minted for the functionCall without one at
// contents[content].parts[part] (or candidates[0]'s part, content 0).
func CallID(content, part int) string {
	return "call_g" + strconv.Itoa(content) + "_" + strconv.Itoa(part)
}

// withSignature is a tool call id carrying sig ("" carries nothing).
func withSignature(id, sig string) string {
	if sig == "" {
		return id
	}
	pad := len(sig) - len(strings.TrimRight(sig, "="))
	r := strings.NewReplacer("+", "-", "/", "_")
	return id + sigSep + strconv.Itoa(pad) + r.Replace(sig[:len(sig)-pad])
}

// splitSignature is the reverse of withSignature: the id the call had,
// and its signature in standard base64 ("" when it carries none).
func splitSignature(id string) (base, sig string) {
	base, enc, ok := strings.Cut(id, sigSep)
	if !ok || enc == "" || enc[0] < '0' || enc[0] > '9' {
		return id, ""
	}
	s := strings.NewReplacer("-", "+", "_", "/").Replace(enc[1:])
	return base, s + strings.Repeat("=", int(enc[0]-'0'))
}

// SplitCallID is splitSignature for the relay: a Chat tool call id's own
// part and the thoughtSignature it carries.
func SplitCallID(id string) (base, thoughtSignature string) { return splitSignature(id) }

// HasSignatures reports whether a Chat body may carry thought signatures
// in its tool call ids: a quick look at the bytes, for a caller that
// would rather not decode a body that has none (StripSignatures looks
// first too).
func HasSignatures(chatBody []byte) bool { return bytes.Contains(chatBody, []byte(sigSep)) }

// StripSignatures takes the thought signatures out of a Chat request's
// tool call ids (assistant tool_calls[].id and tool messages'
// tool_call_id), for a target that is not Gemini: the signature makes an
// id hundreds of bytes long, and OpenAI refuses a tool call id longer
// than 40 (its Responses API, an item id longer than 64). Both ids of a
// pair lose the same suffix, so they still match. A body without a
// signature is returned as it is; one that is not a Chat request too (the
// translation that follows says what is wrong with it).
func StripSignatures(chatBody []byte) []byte {
	if !HasSignatures(chatBody) {
		return chatBody
	}
	var req map[string]json.RawMessage
	var msgs []map[string]json.RawMessage
	if json.Unmarshal(chatBody, &req) != nil || json.Unmarshal(req["messages"], &msgs) != nil {
		return chatBody
	}
	strip := func(raw json.RawMessage) (json.RawMessage, bool) {
		var id string
		if json.Unmarshal(raw, &id) != nil {
			return raw, false
		}
		base, sig := splitSignature(id)
		if sig == "" {
			return raw, false
		}
		return marshal(base), true
	}
	changed := false
	for _, m := range msgs {
		if v, ok := strip(m["tool_call_id"]); ok {
			m["tool_call_id"], changed = v, true
		}
		var calls []map[string]json.RawMessage
		if json.Unmarshal(m["tool_calls"], &calls) != nil {
			continue
		}
		callsChanged := false
		for _, c := range calls {
			if v, ok := strip(c["id"]); ok {
				c["id"], callsChanged = v, true
			}
		}
		if callsChanged {
			m["tool_calls"], changed = marshal(calls), true
		}
	}
	if !changed {
		return chatBody
	}
	req["messages"] = marshal(msgs)
	return marshal(req)
}
