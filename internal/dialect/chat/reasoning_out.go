package chat

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
)

// The two output forms of reasoning besides one field's name (see
// RenameReasoning): both names at once, or inline tags in content.
const (
	ReasoningBoth   = "both"
	ReasoningInline = "inline"
)

// DuplicateReasoning gives every choice of a chunk (delta) or response
// (message) that has its reasoning text under one name (reasoning_content
// or reasoning, a string) the other name too, with the same value, for
// clients that read either. The member is inserted right after the one
// there; every other byte is kept. changed is false (and data returned as
// is) when no choice has one name without the other, or data is not valid
// JSON.
func DuplicateReasoning(data []byte) (out []byte, changed bool) {
	type ins struct {
		vs, at int // the value's span
		key    string
	}
	var all []ins
	for _, p := range [][2]string{{FieldReasoningContent, FieldReasoning}, {FieldReasoning, FieldReasoningContent}} {
		if !bytes.Contains(data, []byte(`"`+p[0]+`"`)) {
			continue
		}
		spans, ok := findReasoningKeys(data, p[0], p[1])
		if !ok {
			return data, false
		}
		for _, s := range spans {
			// The value: after the key, whitespace and the colon.
			i := jsonscan.SkipWS(data, s[1])
			if i >= len(data) || data[i] != ':' {
				return data, false
			}
			vs := jsonscan.SkipWS(data, i+1)
			ve := jsonscan.SkipValue(data, vs, 4)
			if ve < 0 {
				return data, false
			}
			all = append(all, ins{vs: vs, at: ve, key: p[1]})
		}
	}
	if len(all) == 0 {
		return data, false
	}
	// Insert in order of position (the two passes may interleave across
	// choices).
	for i := 1; i < len(all); i++ {
		for j := i; j > 0 && all[j].at < all[j-1].at; j-- {
			all[j], all[j-1] = all[j-1], all[j]
		}
	}
	out = make([]byte, 0, len(data)+len(all)*64)
	last := 0
	for _, in := range all {
		out = append(out, data[last:in.at]...)
		out = append(out, ',', '"')
		out = append(out, in.key...)
		out = append(out, '"', ':')
		out = append(out, data[in.vs:in.at]...)
		last = in.at
	}
	return append(out, data[last:]...), true
}

// The tags an inline form writes reasoning between, as Qwen3 writes them.
const (
	inlineOpen  = "<think>\n"
	inlineClose = "\n</think>\n\n"
)

// Inliner writes a stream's reasoning back into its content, between
// <think> and </think>, for clients that render only tags (reasoning_field
// inline). Each chunk's choice 0 is rewritten: its reasoning text (either
// name) moves into content, after "<think>\n" at the first reasoning of a
// block; the block is closed ("\n</think>\n\n") by the first chunk after
// it that carries content, a tool call or a finish_reason. The zero value
// is ready; it is not safe for concurrent use.
type Inliner struct {
	open bool // a <think> block is open in the client's content
	nl   bool // the reasoning written so far ends with a newline
}

// Chunk rewrites one chat.completion.chunk's data. changed is false (data
// returned as is) when there was nothing to move or close, or data is not
// a chunk.
func (in *Inliner) Chunk(data []byte) (out []byte, changed bool) {
	if !in.open && !bytes.Contains(data, []byte(`"reasoning`)) {
		return data, false
	}
	return in.rewrite(data, "delta")
}

// Message rewrites a whole chat.completion (its choice 0's message).
func (in *Inliner) Message(data []byte) (out []byte, changed bool) {
	if !bytes.Contains(data, []byte(`"reasoning`)) {
		return data, false
	}
	out, changed = in.rewrite(data, "message")
	in.open = false
	return out, changed
}

func (in *Inliner) rewrite(data []byte, member string) ([]byte, bool) {
	var top map[string]json.RawMessage
	var choices []map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil || json.Unmarshal(top["choices"], &choices) != nil || len(choices) == 0 {
		return data, false
	}
	at := -1
	for i, ch := range choices {
		if idx, ok := ch["index"]; !ok || string(idx) == "0" || string(idx) == "null" {
			at = i
			break
		}
	}
	if at < 0 {
		return data, false
	}
	ch := choices[at]
	var msg map[string]json.RawMessage
	if json.Unmarshal(ch[member], &msg) != nil || msg == nil {
		return data, false
	}
	var reasoning, content string
	for _, k := range []string{FieldReasoningContent, FieldReasoning} {
		var r string
		if json.Unmarshal(msg[k], &r) == nil {
			if reasoning == "" {
				reasoning = r // both names with the same text: once
			}
			delete(msg, k)
		}
	}
	_ = json.Unmarshal(msg["content"], &content)
	calls := len(msg["tool_calls"]) > 0 && string(msg["tool_calls"]) != "null"
	finish := len(ch["finish_reason"]) > 0 && string(ch["finish_reason"]) != "null"
	var text string
	if reasoning != "" {
		if !in.open {
			text, in.open = inlineOpen, true
		}
		text += reasoning
		in.nl = strings.HasSuffix(reasoning, "\n")
	}
	if in.open && (content != "" || calls || finish || member == "message") {
		// The newline before </think>: the reasoning's own, when it
		// ends with one (as tagged reasoning does), else the tag's.
		close := inlineClose
		if in.nl {
			close = close[1:]
		}
		text += close
		in.open = false
	}
	if text == "" {
		return data, false
	}
	msg["content"], _ = marshal(text + content)
	ch[member], _ = marshal(msg)
	top["choices"], _ = marshal(choices)
	out, err := marshal(top)
	if err != nil {
		return data, false
	}
	return out, true
}

// marshal is json.Marshal without its HTML escaping: the text of an answer
// keeps its < and > (tags) as they are, as providers send them.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
