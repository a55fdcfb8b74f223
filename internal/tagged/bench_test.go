package tagged

import (
	"strings"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
)

// The budget: the parser adds at most 0.2 µs per upstream event,
// and nothing is allocated on the steady path. Each benchmark reads an
// endless stream one event per op (so ns/op is per upstream event), once
// through a Source ("tagged") and once straight from the sse.Reader
// ("reader"): the difference is what the Source adds. "added" runs both
// in alternate batches and reports the difference itself, which a loaded
// machine disturbs less than two separate runs.

// benchWords are the deltas: a token or two each, some to escape.
var benchWords = strings.Fields(`Okay , so the user is asking what the "capital" of France is . That is simple : Paris , naïve 日本 . Let me double check that nothing else is meant by the question`)

// benchBody is the steady part of a stream: content deltas of the words.
func benchBody() string {
	var b strings.Builder
	for _, w := range benchWords {
		b.WriteString(sseData(vllmDelta([]byte(" " + w))))
	}
	return b.String()
}

// benchStream reads head then the body over and over, one event per op.
func benchStream(b *testing.B, cfg thinktag.Config, head string) {
	body := benchBody()
	b.Run("reader", func(b *testing.B) {
		rd := sse.NewReader(&loopReader{head: head, body: body}, 0)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := rd.Next(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tagged", func(b *testing.B) {
		rd := sse.NewReader(&loopReader{head: head, body: body}, 0)
		src := NewSource(rd, thinktag.MustNew(cfg), chat.FieldReasoningContent)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := src.Next(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Both at once, in alternate batches, so that a loaded machine slows
	// both alike: the difference is the Source's cost per event. An op
	// is a batch of each.
	b.Run("added", func(b *testing.B) {
		const batch = 64
		rd := sse.NewReader(&loopReader{head: head, body: body}, 0)
		rd2 := sse.NewReader(&loopReader{head: head, body: body}, 0)
		src := NewSource(rd2, thinktag.MustNew(cfg), chat.FieldReasoningContent)
		var plain, tagged time.Duration
		for b.Loop() {
			t0 := time.Now()
			for range batch {
				if _, err := rd.Next(); err != nil {
					b.Fatal(err)
				}
			}
			t1 := time.Now()
			for range batch {
				if _, err := src.Next(); err != nil {
					b.Fatal(err)
				}
			}
			plain += t1.Sub(t0)
			tagged += time.Since(t1)
		}
		n := float64(b.N * batch)
		b.ReportMetric(float64(plain.Nanoseconds())/n, "reader-ns/event")
		b.ReportMetric(float64(tagged.Nanoseconds())/n, "tagged-ns/event")
		b.ReportMetric(float64((tagged-plain).Nanoseconds())/n, "added-ns/event")
	})
}

// headOf is the role chunk then a delta of each piece.
func headOf(pieces ...string) string {
	h := sseData(deltaWith(`"role":"assistant","content":""`))
	for _, p := range pieces {
		h += sseData(vllmDelta([]byte(p)))
	}
	return h
}

// BenchmarkSourceNoTags is an answer with no tag: with tags looked for
// anywhere (every event scanned), and with AtStart (auto: once the text
// began with an answer, nothing is looked at).
func BenchmarkSourceNoTags(b *testing.B) {
	b.Run("anywhere", func(b *testing.B) { benchStream(b, thinktag.Config{}, headOf("Sure")) })
	b.Run("auto", func(b *testing.B) { benchStream(b, thinktag.Config{AtStart: true}, headOf("Sure")) })
}

// BenchmarkSourceInReasoning is inside a block: every event rewritten
// into the reasoning field.
func BenchmarkSourceInReasoning(b *testing.B) {
	b.Run("tags", func(b *testing.B) { benchStream(b, thinktag.Config{}, headOf("<think>", "\n")) })
	b.Run("R1", func(b *testing.B) { benchStream(b, thinktag.Config{StartsInReasoning: true}, headOf("Okay")) })
}

// BenchmarkSourceAnswerAfterTags is the answer after </think>: every
// event passes as it came, after its text was fed.
func BenchmarkSourceAnswerAfterTags(b *testing.B) {
	benchStream(b, thinktag.Config{}, headOf("<think>", "\n", "Okay", ".\n", "</think>", "\n\n"))
}
