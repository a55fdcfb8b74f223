package pace

import (
	"bytes"
	"encoding/json"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// Hidden reasoning in a Responses stream also lives in its reasoning output
// items: an output_item event's "item", and the "output" of the response
// object that the lifecycle and final events carry, hold the summary text
// (and, from open models, the raw reasoning text). While reasoning is
// hidden those items are kept, because a client such as Codex CLI sends
// them back (with their encrypted_content) on the next turn, but their
// "summary" becomes [] and their "content" is removed.

var reasoningItemType = []byte(`"reasoning"`)

// hideReasoningItems returns a copy of the event ev with the text of its
// reasoning items removed, and whether there was any. Its data is
// re-encoded (members in sorted order, on one line).
func (p *Pacer) hideReasoningItems(ev *sse.Event, c *Chunk) (*sse.Event, bool) {
	switch c.rsp.typ {
	case rspItem, rspLifecycle, rspCompleted, rspIncomplete, rspFailed:
	default:
		return ev, false
	}
	if !bytes.Contains(ev.Data, reasoningItemType) {
		return ev, false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(ev.Data, &top) != nil {
		return ev, false
	}
	changed := false
	if item, ok := top["item"]; ok {
		if n, ok := stripReasoningItem(item); ok {
			top["item"], changed = n, true
		}
	}
	if resp, ok := top["response"]; ok {
		if n, ok := stripResponseOutput(resp); ok {
			top["response"], changed = n, true
		}
	}
	if !changed {
		return ev, false
	}
	data, err := json.Marshal(top)
	if err != nil {
		return ev, false
	}
	// The number moved: find it again, as the classifier would.
	var s rspScan
	s.run(data)
	c.rsp.seq, c.rsp.ss, c.rsp.se = -1, 0, 0
	if s.seen[rtSeq] == 1 && s.seq >= 0 {
		c.rsp.seq, c.rsp.ss, c.rsp.se = s.seq, s.ss, s.se
	}
	p.rsp.hidden = sse.NewEvent(ev.Type, data)
	return &p.rsp.hidden, true
}

// stripResponseOutput strips the reasoning items of a response object's
// "output" array.
func stripResponseOutput(resp json.RawMessage) (json.RawMessage, bool) {
	var r map[string]json.RawMessage
	if json.Unmarshal(resp, &r) != nil || r == nil {
		return nil, false
	}
	var out []json.RawMessage
	if json.Unmarshal(r["output"], &out) != nil {
		return nil, false
	}
	changed := false
	for i, item := range out {
		if n, ok := stripReasoningItem(item); ok {
			out[i], changed = n, true
		}
	}
	if !changed {
		return nil, false
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, false
	}
	r["output"] = b
	if b, err = json.Marshal(r); err != nil {
		return nil, false
	}
	return b, true
}

// stripReasoningItem empties the summary of a reasoning item and removes
// its content; other items are left alone.
func stripReasoningItem(item json.RawMessage) (json.RawMessage, bool) {
	var it map[string]json.RawMessage
	if json.Unmarshal(item, &it) != nil || it == nil {
		return nil, false
	}
	var typ string
	if json.Unmarshal(it["type"], &typ) != nil || typ != "reasoning" {
		return nil, false
	}
	_, hasContent := it["content"]
	summary, hasSummary := it["summary"]
	if !hasContent && (!hasSummary || string(bytes.TrimSpace(summary)) == "[]") {
		return nil, false
	}
	delete(it, "content")
	if _, ok := it["summary"]; ok {
		it["summary"] = json.RawMessage("[]")
	}
	b, err := json.Marshal(it)
	if err != nil {
		return nil, false
	}
	return b, true
}
