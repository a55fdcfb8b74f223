package tagged

import (
	"math/rand/v2"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
)

// configs are the configurations the property and fuzz tests run under.
var configs = []thinktag.Config{
	{},
	{KeepNewlines: true},
	{StartsInReasoning: true},
	{AtStart: true},
	{StartsInReasoning: true, EndMarkers: []string{thinktag.Qwen35ToolCall}},
	{Tags: []thinktag.Tag{thinktag.Kimi, thinktag.Think}},
	{Tags: []thinktag.Tag{thinktag.Think, thinktag.Thinking, thinktag.Kimi, thinktag.Seed}, AtStart: true},
}

var fields = []string{chat.FieldReasoningContent, chat.FieldReasoning}

// bits are the building blocks of random texts: tags, their prefixes and
// near misses, newlines, bytes JSON escapes, multi-byte characters.
var bits = []string{
	"<think>", "</think>", "<thinking>", "</thinking>", "◁think▷", "◁/think▷",
	"<seed:think>", "</seed:think>", thinktag.Qwen35ToolCall, "<tool_call>",
	"<", "</", "<th", "</thi", "◁", "\xe2\x97", "think", ">", "▷",
	"\n", "\r\n", "\n\n", " ", "\t", "\"", "\\", "\x01", "\u2028", "/",
	"x", "Okay", " so ", "日本", "é", "🙂", "<b>", "&amp;",
}

func randomText(rng *rand.Rand) []byte {
	var text []byte
	for range rng.IntN(30) {
		text = append(text, bits[rng.IntN(len(bits))]...)
	}
	return text
}

// randomCuts returns sorted cut offsets in [0, n], anywhere (inside tags,
// inside UTF-8 sequences), repeats allowed (an empty delta).
func randomCuts(rng *rand.Rand, n int) []int {
	var cuts []int
	at := 0
	for at < n {
		at += rng.IntN(9)
		if at > n {
			at = n
		}
		cuts = append(cuts, at)
	}
	return cuts
}

// TestChunkingInvariance is the property: for random tagged texts
// cut anywhere into the content deltas of a realistic stream, the
// reasoning field and the content carry byte for byte what
// thinktag.Split makes of the whole text, and the stream is otherwise
// the upstream's (see checkStream).
func TestChunkingInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 2))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for i := range n {
		text := randomText(rng)
		cfg := configs[i%len(configs)]
		field := fields[i/len(configs)%2]
		syn := thinktag.MustNew(cfg)
		stream := streamOf(cut(text, randomCuts(rng, len(text))))
		g := checkStream(t, stream, syn, field)
		checkSplit(t, g, syn, text)
	}
}

// TestEveryCut cuts a few texts at every pair of offsets.
func TestEveryCut(t *testing.T) {
	texts := []string{
		"<think>\nOkay, so.\n</think>\n\nHi <b>!",
		"◁think▷é◁/think▷日本",
		"a <thinking>b</thinking> c",
	}
	for _, text := range texts {
		for _, cfg := range configs {
			syn := thinktag.MustNew(cfg)
			for i := 0; i <= len(text); i++ {
				for j := i; j <= len(text); j++ {
					stream := streamOf(cut([]byte(text), []int{i, j}))
					checkSplit(t, checkStream(t, stream, syn, chat.FieldReasoningContent), syn, []byte(text))
				}
			}
		}
	}
}
