package pace

import (
	"testing"
	"time"
)

// Reasoning in clusters 900 ms apart (bridgeable with the 1.5 s reasoning
// bound, so the reasoning lane holds most of a cluster), and the answer
// 100 ms after the last one. In split-reasoning mode the queued reasoning
// must then drain at a steady rate within ReasoningDrain, not leave in
// one dump, while the answer flows on its own lane.
func TestReasoningDrainsSteadilyWhenAnswerStarts(t *testing.T) {
	var arrs []arrival
	words := []string{" the", " relay", " stream", " model", " token"}
	for b := range 5 {
		for i := range 60 {
			arrs = append(arrs, arrival{at: time.Duration(b) * 900 * time.Millisecond, ev: chunkEvent("reasoning_content", words[i%len(words)])})
		}
	}
	answerAt := 3700 * time.Millisecond
	for b := range 5 {
		for i := range 20 {
			arrs = append(arrs, arrival{at: answerAt + time.Duration(b)*300*time.Millisecond, ev: chunkEvent("content", words[i%len(words)])})
		}
	}
	for _, drain := range []time.Duration{0, 150 * time.Millisecond} {
		cfg := Config{Mode: ModeSplit, ReasoningDrain: drain}
		ems, _ := simulate(t, cfg, arrs)
		rt := outputTimes(t, ems)
		limit := DefaultReasoningDrain
		if drain > 0 {
			limit = drain
		}
		// Reasoning runes per emission from the answer's arrival on.
		perAt := map[time.Duration]int{}
		var queued int
		for _, at := range rt.reasoning {
			if at >= answerAt {
				perAt[at]++
				queued++
			}
		}
		if queued < 100 {
			t.Fatalf("drain %v: only %d reasoning runes left when the answer started; the test needs a backlog", drain, queued)
		}
		last, most := time.Duration(0), 0
		for at, n := range perAt {
			last, most = max(last, at), max(most, n)
		}
		ticks := int(limit / tickInterval(DefaultMinInterval))
		if most > 2*queued/ticks {
			t.Errorf("drain %v: %d of the %d queued reasoning runes left in one emission: a dump (want at most %d)", drain, most, queued, 2*queued/ticks)
		}
		if last > answerAt+limit+tickInterval(DefaultMinInterval) {
			t.Errorf("drain %v: reasoning still leaving %v after the answer started, bound %v", drain, last-answerAt, limit)
		}
		// The answer flows beside the draining reasoning: its first
		// rune leaves within a tick, while reasoning is still leaving.
		first := rt.answer[0]
		if first > answerAt+tickInterval(DefaultMinInterval) {
			t.Errorf("drain %v: first answer rune %v after it arrived: it waited behind the reasoning", drain, first-answerAt)
		}
		if last <= first {
			t.Errorf("drain %v: reasoning done at %v, before the answer's first rune at %v: the lanes did not move together", drain, last-answerAt, first-answerAt)
		}
	}
}
