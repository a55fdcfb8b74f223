package pace

import (
	"bytes"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// ClassifyCount is Classify for a Chat stream that passes through as it
// came (ModeOff, no reasoning budget, nothing hidden): nothing is split,
// merged or rewritten, so only an event's kind (comment, done, error,
// text or other) and its visible runes matter, for the stream's
// smoothness figures. Instead of the whole chunk it reads the delta of a
// one-choice chunk: data with one `"delta":{` and no `"error"` anywhere
// (an unescaped quote cannot occur inside a JSON string, so these are
// keys). Any other event gets the full Classify. For the chunks providers
// send, the kind, channel and counts equal Classify's (see
// FuzzClassifyCount); Chunk.Text, Prefix, Suffix and Field stay empty.
// On a malformed chunk the counts may differ: they feed figures only.
func ClassifyCount(ev *sse.Event, scratch []byte) (Chunk, []byte) {
	if ev.HasData && ev.Type == "" && !ev.IsDone() {
		if c, ok := countDelta(ev.Data); ok {
			return c, scratch
		}
	}
	return Classify(ev, scratch)
}

var (
	deltaObject = []byte(`"delta":{`)
	errorKey    = []byte(`"error"`)
)

// countDelta counts the text of the one delta object in data.
func countDelta(data []byte) (Chunk, bool) {
	i := bytes.Index(data, deltaObject)
	if i < 0 || bytes.Contains(data[i+len(deltaObject):], deltaObject) || bytes.Contains(data, errorKey) {
		return Chunk{}, false
	}
	s := chunkScan{text: true}
	if s.delta(data, i+len(deltaObject)-1) < 0 {
		return Chunk{}, false
	}
	c := Chunk{Kind: KindOther, AnswerRunes: s.answer, ReasoningRunes: s.reasoning}
	if s.text {
		c.Kind, c.Channel, c.HasRole = KindText, ChanReasoning, s.hasRole
		if s.field == deltaContent {
			c.Channel = ChanAnswer
		}
	}
	return c, true
}
