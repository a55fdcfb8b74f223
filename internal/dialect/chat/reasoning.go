package chat

import (
	"bytes"
	"encoding/json"
	"io"
)

// The two names providers give reasoning text in a chat completion:
// DeepSeek and vLLM send delta.reasoning_content, OpenRouter and Ollama
// delta.reasoning.
const (
	FieldReasoningContent = "reasoning_content"
	FieldReasoning        = "reasoning"
)

// RenameReasoning renames the reasoning text member of every choice of a
// chat completion chunk (choices[].delta) or response
// (choices[].message) to `to` (FieldReasoningContent or FieldReasoning).
// Only a member whose value is a string is renamed (OpenRouter's
// `reasoning_details` array, or an object, is left alone); when a choice
// already has a string member named `to`, the other one is left as it is,
// so nothing is duplicated or lost. Every other byte is kept: the key's
// quotes are the only thing rewritten. changed is false (and data
// returned as is) when there was nothing to rename or data is not valid
// JSON.
func RenameReasoning(data []byte, to string) (out []byte, changed bool) {
	from := FieldReasoning
	if to == FieldReasoning {
		from = FieldReasoningContent
	}
	if !bytes.Contains(data, []byte(`"`+from+`"`)) {
		return data, false
	}
	spans, ok := findReasoningKeys(data, from, to)
	if !ok || len(spans) == 0 {
		return data, false
	}
	quoted, _ := json.Marshal(to)
	out = make([]byte, 0, len(data)+len(spans)*(len(quoted)))
	last := 0
	for _, s := range spans {
		out = append(out, data[last:s[0]]...)
		out = append(out, quoted...)
		last = s[1]
	}
	return append(out, data[last:]...), true
}

// findReasoningKeys returns the byte spans of the `from` keys (quotes
// included) to rename: in choices[i].delta or choices[i].message, with a
// string value, in an object that has no string member `to`.
func findReasoningKeys(data []byte, from, to string) ([][2]int, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	// The path of keys down to the current value: "" for array elements.
	type frame struct {
		obj       bool
		expectKey bool
		key       string
		// In a delta/message object: the span of a string `from`, and
		// whether a string `to` was seen.
		fromSpan [2]int
		hasFrom  bool
		hasTo    bool
	}
	var stack []frame
	var spans [][2]int
	inTarget := func() bool {
		// top-level object > "choices" array > object > "delta"|"message" object
		if len(stack) != 4 {
			return false
		}
		return stack[0].obj && stack[0].key == "choices" && !stack[1].obj && stack[2].obj &&
			(stack[2].key == "delta" || stack[2].key == "message") && stack[3].obj
	}
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].obj {
			stack[n-1].expectKey = true
		}
	}
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, false
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if n := len(stack); n > 0 && stack[n-1].obj {
					stack[n-1].expectKey = false
				}
				stack = append(stack, frame{obj: v == '{', expectKey: v == '{'})
			default:
				if inTarget() {
					top := stack[3]
					if top.hasFrom && !top.hasTo {
						spans = append(spans, top.fromSpan)
					}
				}
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			n := len(stack)
			if n > 0 && stack[n-1].obj && stack[n-1].expectKey {
				stack[n-1].key = v
				stack[n-1].expectKey = false
				if inTarget() && (v == from) {
					start := before + int64(bytes.IndexByte(data[before:], '"'))
					stack[3].fromSpan = [2]int{int(start), int(dec.InputOffset())}
				}
				continue
			}
			// A string value.
			if inTarget() {
				switch stack[3].key {
				case from:
					stack[3].hasFrom = true
				case to:
					stack[3].hasTo = true
				}
			}
			valueDone()
		default:
			valueDone()
		}
	}
	return spans, len(stack) == 0
}
