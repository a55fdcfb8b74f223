package tagged

import (
	"slices"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
)

// Answer rewrites a whole chat.completion whose choice 0's message.content
// holds its reasoning inline: the reasoning goes into field (after any
// reasoning the message already has there), the answer stays in content.
// Every other byte of the body is kept: other choices, members, their
// order. changed is false, and body returned as it is, when there was no
// block to move (no tag, or a body that is not a chat.completion); st is
// the parser's final state (Unclosed: the reasoning never ended).
func Answer(body []byte, syn *thinktag.Syntax, field string) (out []byte, st thinktag.State, changed bool) {
	var l locator
	if !l.run(body, "message", field) || l.choice < 0 || l.lit[1]-l.lit[0] <= 2 {
		return body, st, false
	}
	text, ok := unquote(nil, body[l.lit[0]:l.lit[1]])
	if !ok {
		return body, st, false
	}
	reasoning, answer, st := thinktag.Split(syn, text)
	if st.Blocks == 0 {
		return body, st, false
	}
	// The field's member: the last of its name (as a JSON reader keeps
	// the last), its string value first in the reasoning.
	type edit struct {
		at   span
		with []byte
	}
	var edits []edit
	if n := len(l.fields); n > 0 {
		f := l.fields[n-1]
		prev, ok := unquote(nil, body[f.val.s:f.val.e])
		if !ok || body[f.val.s] != '"' {
			prev = nil // null, or not a string
		}
		edits = append(edits, edit{f.val, pace.AppendString(nil, append(prev, reasoning...))})
	} else {
		// A new member, before content.
		m := append([]byte{'"'}, field...)
		m = append(pace.AppendString(append(m, '"', ':'), reasoning), ',')
		edits = append(edits, edit{span{l.key[0], l.key[0]}, m})
	}
	edits = append(edits, edit{span{l.lit[0], l.lit[1]}, pace.AppendString(nil, answer)})
	slices.SortFunc(edits, func(a, b edit) int { return a.at.s - b.at.s })
	at := 0
	for _, e := range edits {
		out = append(append(out, body[at:e.at.s]...), e.with...)
		at = e.at.e
	}
	return append(out, body[at:]...), st, true
}
