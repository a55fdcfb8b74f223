package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
)

// Channel is the text of a Chat answer a piece belongs to.
type Channel uint8

const (
	// ChanText is the answer: content, or a content part of type text.
	ChanText Channel = iota + 1
	// ChanReasoning is reasoning_content, reasoning, or a content part of
	// type thinking (Mistral's) or reasoning.
	ChanReasoning
	// ChanRefusal is refusal, or a content part of type refusal.
	ChanRefusal
)

// Piece is one run of text of a delta or message, on its channel.
type Piece struct {
	Channel Channel
	Text    string
}

// CallDelta is one fragment of a tool call in a stream delta.
type CallDelta struct {
	// Index is the call's index; 0 when the provider omits it (Mistral
	// does: its calls are told apart by id).
	Index int
	ID    string
	Name  string
	// Args is this fragment of the arguments: a string's text, or the
	// JSON text of an object some providers send whole.
	Args string
}

// Delta is what the one choice of a stream chunk says, as ReadDelta reads
// it: its text pieces in order (reasoning, then content, whose parts keep
// their own order, then refusal), its tool call fragments, and its
// finish_reason ("" when none).
type Delta struct {
	Pieces []Piece
	Calls  []CallDelta
	Finish string
}

// The wire types the readers decode into. Pointers tell null and absent
// from a value, and every member a translator needs has a Go type, so that
// encoding/json reports a member of another JSON type (content: 5) as an
// error rather than the reader passing over it.
type (
	wireChoice struct {
		Index        *int         `json:"index"`
		Delta        *wireMessage `json:"delta"`
		Message      *wireMessage `json:"message"`
		FinishReason *string      `json:"finish_reason"`
	}
	wireMessage struct {
		Content          json.RawMessage `json:"content"`
		Refusal          *string         `json:"refusal"`
		ReasoningContent *string         `json:"reasoning_content"`
		Reasoning        *string         `json:"reasoning"`
		ToolCalls        []*wireToolCall `json:"tool_calls"`
		FunctionCall     json.RawMessage `json:"function_call"`
	}
	wireToolCall struct {
		Index    *int          `json:"index"`
		ID       *string       `json:"id"`
		Function *wireFunction `json:"function"`
	}
	wireFunction struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	wirePart struct {
		Type      string          `json:"type"`
		Text      *string         `json:"text"`
		Thinking  json.RawMessage `json:"thinking"`
		Reasoning *string         `json:"reasoning"`
		Refusal   *string         `json:"refusal"`
	}
	wireThinkingPart struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
)

// ReadDelta reads the choices member of a chat.completion.chunk (raw; nil
// or null for none) into d, reusing d's slices. A stream translator can
// read a chunk faithfully only if its choices are what the relay asked
// for and of the types the Chat format gives them, so anything else is an
// *UnreadableError: a choice other than index 0 (the relay's translators
// never ask for n > 1), a member of another type (content: 5), a content
// part of a type it cannot carry to the client, the legacy function_call.
// An empty choices array is fine: Azure's prompt_filter_results chunk and
// usage chunks have one.
func ReadDelta(raw json.RawMessage, d *Delta) error {
	d.Pieces, d.Calls, d.Finish = d.Pieces[:0], d.Calls[:0], ""
	if isNull(raw) {
		return nil
	}
	var choices []*wireChoice
	if err := json.Unmarshal(raw, &choices); err != nil {
		return unreadable("choices", err)
	}
	for _, c := range choices {
		if c == nil {
			return &UnreadableError{Reason: "choices holds a null"}
		}
		if c.Index != nil && *c.Index != 0 {
			return &UnreadableError{Reason: fmt.Sprintf("a choice with index %d, which the relay never asks for", *c.Index)}
		}
		if c.Delta != nil {
			var err error
			if d.Pieces, err = c.Delta.pieces(d.Pieces, "choices[0].delta"); err != nil {
				return err
			}
			for _, tc := range c.Delta.ToolCalls {
				cd, err := tc.read("choices[0].delta.tool_calls")
				if err != nil {
					return err
				}
				d.Calls = append(d.Calls, cd)
			}
		}
		if c.FinishReason != nil {
			d.Finish = *c.FinishReason
		}
	}
	return nil
}

// Answer is the one choice of a non-stream chat.completion, as ReadAnswer
// reads it: its text pieces in order (as for Delta), its tool calls, its
// finish_reason.
type Answer struct {
	Pieces []Piece
	Calls  []ToolCall
	Finish string
}

// ReadAnswer reads the choices member of a chat.completion. There must be
// exactly the one choice the relay asked for, index 0, read as ReadDelta
// reads a delta; anything else is an *UnreadableError, which the relay
// answers with a 502 in the client's dialect rather than an answer with
// something missing. A tool call's arguments are kept as they came ("" when
// it had none).
func ReadAnswer(raw json.RawMessage) (Answer, error) {
	var a Answer
	var choices []*wireChoice
	if isNull(raw) {
		return a, &UnreadableError{Reason: "the answer has no choices"}
	}
	if err := json.Unmarshal(raw, &choices); err != nil {
		return a, unreadable("choices", err)
	}
	if len(choices) == 0 {
		return a, &UnreadableError{Reason: "the answer has no choices"}
	}
	for i, c := range choices {
		switch {
		case c == nil:
			return a, &UnreadableError{Reason: "choices holds a null"}
		case c.Index != nil && *c.Index != 0 || i > 0:
			idx := i
			if c.Index != nil {
				idx = *c.Index
			}
			return a, &UnreadableError{Reason: fmt.Sprintf("a choice with index %d, which the relay never asks for", idx)}
		}
	}
	c := choices[0]
	if c.FinishReason != nil {
		a.Finish = *c.FinishReason
	}
	m := c.Message
	if m == nil {
		return a, nil
	}
	var err error
	if a.Pieces, err = m.pieces(nil, "choices[0].message"); err != nil {
		return a, err
	}
	for _, tc := range m.ToolCalls {
		cd, err := tc.read("choices[0].message.tool_calls")
		if err != nil {
			return a, err
		}
		a.Calls = append(a.Calls, ToolCall{ID: cd.ID, Type: "function", Function: FunctionCall{Name: cd.Name, Arguments: cd.Args}})
	}
	return a, nil
}

// pieces appends m's text in order: reasoning, content, refusal. The same
// reasoning is sent by some providers under both names: reasoning_content
// is taken when it has text, else reasoning.
func (m *wireMessage) pieces(out []Piece, path string) ([]Piece, error) {
	if !isNull(m.FunctionCall) {
		return out, &UnreadableError{Reason: path + ".function_call, the legacy member the relay never asks for"}
	}
	if r := m.ReasoningContent; r != nil && *r != "" {
		out = append(out, Piece{ChanReasoning, *r})
	} else if r := m.Reasoning; r != nil && *r != "" {
		out = append(out, Piece{ChanReasoning, *r})
	}
	out, err := appendContent(out, m.Content, path+".content")
	if err != nil {
		return out, err
	}
	if r := m.Refusal; r != nil && *r != "" {
		out = append(out, Piece{ChanRefusal, *r})
	}
	return out, nil
}

// appendContent appends the pieces of a content member: a string, null, or
// an array of parts (Mistral's reasoning models send
// [{"type":"thinking","thinking":[{"type":"text","text":…}]},{"type":"text","text":…}]).
func appendContent(out []Piece, raw json.RawMessage, path string) ([]Piece, error) {
	raw = trimSpace(raw)
	switch {
	case isNull(raw):
		return out, nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return out, unreadable(path, err)
		}
		if s != "" {
			out = append(out, Piece{ChanText, s})
		}
		return out, nil
	case raw[0] != '[':
		return out, &UnreadableError{Reason: path + " is " + jsonKind(raw) + ", not a string or an array of parts"}
	}
	var parts []*wirePart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return out, unreadable(path, err)
	}
	for _, p := range parts {
		if p == nil {
			return out, &UnreadableError{Reason: path + " holds a null part"}
		}
		ch, text := Channel(0), ""
		switch p.Type {
		case "text":
			ch, text = ChanText, deref(p.Text)
		case "refusal":
			ch, text = ChanRefusal, deref(p.Refusal)
		case "reasoning":
			ch, text = ChanReasoning, deref(p.Reasoning)+deref(p.Text)
		case "thinking":
			var err error
			if text, err = thinkingText(p.Thinking, path); err != nil {
				return out, err
			}
			ch = ChanReasoning
		default:
			return out, &UnreadableError{Reason: path + " has a part of type " + safeName(p.Type) + ", which the relay cannot translate"}
		}
		if text != "" {
			out = append(out, Piece{ch, text})
		}
	}
	return out, nil
}

// thinkingText is the text of a thinking part's "thinking": an array of
// text parts (Mistral's), or a string.
func thinkingText(raw json.RawMessage, path string) (string, error) {
	raw = trimSpace(raw)
	switch {
	case isNull(raw):
		return "", nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", unreadable(path, err)
		}
		return s, nil
	case raw[0] != '[':
		return "", &UnreadableError{Reason: path + " has a thinking part whose thinking is " + jsonKind(raw)}
	}
	var parts []*wireThinkingPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", unreadable(path, err)
	}
	var b strings.Builder
	for _, p := range parts {
		if p == nil || p.Type != "text" {
			return "", &UnreadableError{Reason: path + " has a thinking part with a part that is not text"}
		}
		b.WriteString(deref(p.Text))
	}
	return b.String(), nil
}

// read checks one tool_calls entry.
func (tc *wireToolCall) read(path string) (CallDelta, error) {
	var cd CallDelta
	if tc == nil {
		return cd, &UnreadableError{Reason: path + " holds a null"}
	}
	if tc.Index != nil {
		if *tc.Index < 0 {
			return cd, &UnreadableError{Reason: path + " has a negative index"}
		}
		cd.Index = *tc.Index
	}
	cd.ID = deref(tc.ID)
	if f := tc.Function; f != nil {
		cd.Name = deref(f.Name)
		args := trimSpace(f.Arguments)
		switch {
		case isNull(args):
		case args[0] == '"':
			if err := json.Unmarshal(args, &cd.Args); err != nil {
				return cd, unreadable(path, err)
			}
		case args[0] == '{' || args[0] == '[':
			// Whole arguments as JSON (some providers): their text is the
			// arguments string the Chat format means.
			cd.Args = string(args)
		default:
			return cd, &UnreadableError{Reason: path + " has arguments that are " + jsonKind(args)}
		}
	}
	return cd, nil
}

// unreadable wraps a decoding error of the member at path. Its reason
// names the member and what it was, never the upstream's bytes: a syntax
// error's message quotes one.
func unreadable(path string, err error) *UnreadableError {
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		field := path
		if te.Field != "" {
			field = path + " member " + safeName(te.Field)
		}
		kind, _, _ := strings.Cut(te.Value, " ") // "number -5": the kind only
		return &UnreadableError{Reason: field + " is " + article(kind) + " of the wrong type"}
	}
	return &UnreadableError{Reason: path + " is not valid JSON"}
}

// jsonKind names the kind of the JSON value raw starts.
func jsonKind(raw []byte) string {
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

func article(kind string) string {
	switch kind {
	case "array", "object":
		return "an " + kind
	case "":
		return "a value"
	}
	return "a " + kind
}

// safeName is s when it looks like a name (a type or member name a client
// may read in an error), else a placeholder: an error message never
// carries arbitrary upstream bytes.
func safeName(s string) string {
	if len(s) == 0 || len(s) > 40 {
		return "(unnamed)"
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return "(unnamed)"
		}
	}
	return strconvQuote(s)
}

func strconvQuote(s string) string { return `"` + s + `"` }

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func trimSpace(b []byte) []byte {
	i := jsonscan.SkipWS(b, 0)
	return bytes.TrimRight(b[i:], " \t\r\n")
}

// isNull reports an absent member or a JSON null.
func isNull(raw []byte) bool {
	raw = trimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// FirstChoiceIsZero reports whether the first choice of a chunk has index
// 0 (or none, or null): the cheap check a translator's fast path makes on
// a text delta (pace.Classify's KindText, which has exactly one choice
// and no key that only case-folds to "choices" or "index") before taking
// its text as the answer's. false sends the chunk to ReadDelta, which
// says what is wrong with it.
func FirstChoiceIsZero(data []byte) bool {
	it := jsonscan.NewObjIter(data, jsonscan.SkipWS(data, 0), 1)
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			return false
		}
		if data[vs] != '[' || !jsonscan.KeyIs(data[ks:ke], "choices") {
			it.Skip()
			continue
		}
		arr := jsonscan.NewArrIter(data, vs, 2)
		cs, ok := arr.Next()
		if !ok || data[cs] != '{' {
			return false
		}
		ch := jsonscan.NewObjIter(data, cs, 3)
		for {
			ks, ke, vs, ok := ch.Next()
			if !ok {
				return !ch.Err // no index: the first choice
			}
			if !jsonscan.KeyIs(data[ks:ke], "index") {
				ch.Skip()
				continue
			}
			end := jsonscan.SkipValue(data, vs, 3)
			v := data[vs:max(end, vs)]
			return string(v) == "0" || string(v) == "null"
		}
	}
}
