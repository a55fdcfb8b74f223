package tagged

import (
	"bytes"
	"encoding/json"

	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
)

// Answer rewrites a whole chat.completion whose choice 0's message.content
// holds its reasoning inline: the reasoning goes into field (after any
// reasoning the message already has there), the answer stays in content.
// changed is false, and body returned as it is, when there was no block to
// move (no tag, or a body that is not a chat.completion); st is the
// parser's final state (Unclosed: the reasoning never ended).
func Answer(body []byte, syn *thinktag.Syntax, field string) (out []byte, st thinktag.State, changed bool) {
	if !bytes.Contains(body, contentKey) {
		return body, st, false
	}
	var top map[string]json.RawMessage
	var choices []map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil || json.Unmarshal(top["choices"], &choices) != nil {
		return body, st, false
	}
	i := choiceZero(choices)
	if i < 0 {
		return body, st, false
	}
	var msg map[string]json.RawMessage
	var text string
	if json.Unmarshal(choices[i]["message"], &msg) != nil || json.Unmarshal(msg["content"], &text) != nil || text == "" {
		return body, st, false
	}
	reasoning, answer, st := thinktag.Split(syn, []byte(text))
	if st.Blocks == 0 {
		return body, st, false
	}
	var prev string
	_ = json.Unmarshal(msg[field], &prev)
	msg[field], _ = json.Marshal(prev + string(reasoning))
	msg["content"], _ = json.Marshal(string(answer))
	choices[i]["message"], _ = json.Marshal(msg)
	top["choices"], _ = json.Marshal(choices)
	out, err := json.Marshal(top)
	if err != nil {
		return body, st, false
	}
	return out, st, true
}
