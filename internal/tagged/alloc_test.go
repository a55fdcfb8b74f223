package tagged

import (
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
)

// TestSteadyPathAllocs is the bound: once a stream is under way,
// a content delta costs no allocation, whether it is rewritten into the
// reasoning field, passes as answer after </think>, or is an answer with
// no tag. Each case reads the benchmarks' endless streams.
func TestSteadyPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	cases := []struct {
		name string
		cfg  thinktag.Config
		head string
	}{
		{"in reasoning", thinktag.Config{}, headOf("<think>", "\n")},
		{"in reasoning, R1", thinktag.Config{StartsInReasoning: true}, headOf("Okay")},
		{"answer after tags", thinktag.Config{}, headOf("<think>", "\n", "Okay", ".\n", "</think>", "\n\n")},
		{"no tags", thinktag.Config{}, headOf("Sure")},
		{"no tags, auto", thinktag.Config{AtStart: true}, headOf("Sure")},
		// A "<" at the end of a delta, held and released with the next.
		{"answer with held bytes", thinktag.Config{}, headOf("Sure") + sseData(vllmDelta([]byte(" a <"))) + sseData(vllmDelta([]byte("b>")))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := benchBody()
			if c.name == "answer with held bytes" {
				body += sseData(vllmDelta([]byte(" x <"))) + sseData(vllmDelta([]byte("y")))
			}
			rd := sse.NewReader(&loopReader{head: c.head, body: body}, 0)
			src := NewSource(rd, thinktag.MustNew(c.cfg), chat.FieldReasoningContent)
			next := func() {
				if _, err := src.Next(); err != nil {
					t.Fatal(err)
				}
			}
			for range 200 { // warm-up: the buffers grow to their size
				next()
			}
			if n := testing.AllocsPerRun(1000, next); n != 0 {
				t.Errorf("%v allocations per event", n)
			}
		})
	}
}
