package thinktag

import (
	"math/rand/v2"
	"testing"
)

// configs are the configurations the property and fuzz tests run under.
var configs = []Config{
	cfgTags,
	cfgKeep,
	cfgR1,
	{StartsInReasoning: true, KeepNewlines: true},
	cfgQwen35,
	cfgAuto,
	{AtStart: true, KeepNewlines: true, EndMarkers: []string{Qwen35ToolCall}},
	cfgKimi,
	cfgEveryone,
	{StartsInReasoning: true, Tags: []Tag{Think, Thinking, Kimi, Seed}},
	// Overlapping strings: a tag that is a prefix of a marker, a
	// family whose tags are equal, a one-byte tag.
	{Tags: []Tag{{"<a>", "</a>"}, {"<|t|>", "<|t|>"}, {"§", "¶"}}, EndMarkers: []string{"</a>b", "<|"}},
}

// bits are the building blocks of random texts: every tag and marker,
// their prefixes and near misses, newlines, whitespace, multi-byte runes.
var bits = []string{
	"<think>", "</think>", "<thinking>", "</thinking>", "◁think▷", "◁/think▷",
	"<seed:think>", "</seed:think>", Qwen35ToolCall, "<tool_call>", "<function=",
	"<a>", "</a>", "</a>b", "<|t|>", "<|", "§", "¶",
	"<", "</", "<th", "</thi", "◁", "\xe2\x97", "think", ">", "▷",
	"\n", "\r\n", "\n\n", " ", "\t",
	"x", "Okay", " so ", "日本", "é", "🙂",
}

// TestChunkingInvariance is the property the issue asks for: for random
// texts under every configuration, cut at random bytes (inside tags and
// inside runes), the reasoning and the answer are byte for byte those of
// the whole text, and those of the reference; and after every piece,
// everything but the held bytes has been emitted.
func TestChunkingInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for i := range n {
		var text []byte
		for range rng.IntN(30) {
			text = append(text, bits[rng.IntN(len(bits))]...)
		}
		cfg := configs[i%len(configs)]
		checkCuts(t, cfg, text, randomCuts(rng, len(text)))
	}
}

// randomCuts returns sorted cut offsets in [0, n], repeats allowed (an
// empty piece).
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

// checkCuts compares text fed whole, fed in the pieces between cuts, and
// the reference.
func checkCuts(t *testing.T, cfg Config, text []byte, cuts []int) {
	t.Helper()
	s := MustNew(cfg)
	want := reference(cfg, string(text))
	if got := feedCfg(t, s, &cfg, text); got != want {
		t.Fatalf("%+v, whole %q:\n got %+v\nwant %+v", cfg, text, got, want)
	}
	var pieces [][]byte
	last := 0
	for _, c := range cuts {
		pieces = append(pieces, text[last:c])
		last = c
	}
	pieces = append(pieces, text[last:])
	if got := feedCfg(t, s, &cfg, pieces...); got != want {
		t.Fatalf("%+v, pieces %q:\n got %+v\nwant %+v", cfg, pieces, got, want)
	}
}
