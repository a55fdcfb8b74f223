package thinktag

import (
	"strings"
	"testing"
)

// The bound: at most 0.2 µs per upstream event and no allocation
// on the steady path. One Feed is one event (one chunk's content). Each
// benchmark cycles through its pieces; ns/op is per Feed.

// benchFeed feeds pieces over and over, resetting the parser at the end
// of each round (Reset is part of the cost: it is once per stream).
func benchFeed(b *testing.B, cfg Config, pieces []string) {
	s := MustNew(cfg)
	p := s.Parser()
	bs := make([][]byte, len(pieces))
	n := 0
	for i, pc := range pieces {
		bs[i] = []byte(pc)
		n += len(pc)
	}
	dst := make([]Segment, 0, 8)
	b.SetBytes(int64(n / len(pieces)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		dst = p.Feed(dst[:0], bs[i])
		if i++; i == len(bs) {
			dst = p.Flush(dst[:0])
			p.Reset()
			i = 0
		}
	}
}

// tokens is typical streamed text: a word or two per chunk.
var tokens = strings.Fields("Okay , so the user is asking what the capital of France is . That is simple : Paris . Let me double check that nothing else is meant by the question")

func words(prefix string) []string {
	out := []string{}
	for _, w := range tokens {
		out = append(out, prefix+w)
	}
	return out
}

// BenchmarkFeedPlain is answer text with no tag at all, as from an
// upstream that writes none: the fast path.
func BenchmarkFeedPlain(b *testing.B) {
	b.Run("tags anywhere", func(b *testing.B) { benchFeed(b, cfgTags, words(" ")) })
	// auto, once the start was not a tag: nothing is looked at.
	b.Run("auto", func(b *testing.B) { benchFeed(b, cfgAuto, words(" ")) })
}

// BenchmarkFeedInBlock is reasoning text inside a block (R1: the whole
// stream until </think>), with the Qwen3.5 marker configured too.
func BenchmarkFeedInBlock(b *testing.B) {
	b.Run("R1", func(b *testing.B) { benchFeed(b, cfgR1, words(" ")) })
	b.Run("Qwen3.5", func(b *testing.B) { benchFeed(b, cfgQwen35, words(" ")) })
	b.Run("every family", func(b *testing.B) {
		benchFeed(b, Config{StartsInReasoning: true, Tags: []Tag{Think, Thinking, Kimi, Seed}}, words(" "))
	})
}

// BenchmarkFeedHold is the worst steady case: every piece ends inside a
// possible closing tag, held back, and the next one releases it.
func BenchmarkFeedHold(b *testing.B) {
	benchFeed(b, cfgR1, []string{"a <b> and </thi", "s is not a tag </", "thin > either </th"})
}

// BenchmarkFeedStream is a whole R1-style stream, tags split across
// chunks: the average per event.
func BenchmarkFeedStream(b *testing.B) {
	pieces := append([]string{"\n"}, words(" ")...)
	pieces = append(pieces, "\n</", "think>", "\n\n")
	pieces = append(pieces, words(" ")...)
	benchFeed(b, cfgR1, pieces)
}

// BenchmarkSplit is a non-stream answer of about 2 KiB.
func BenchmarkSplit(b *testing.B) {
	text := []byte("<think>\n" + strings.Repeat("Let me think about <this> step. ", 40) + "\n</think>\n\n" + strings.Repeat("The answer. ", 40))
	s := MustNew(cfgTags)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		Split(s, text)
	}
}
