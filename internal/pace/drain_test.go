package pace

import (
	"testing"
	"time"
)

// The stream: 20-token reasoning bursts every 300 ms, then the
// answer in the same bursts. In split-reasoning mode the reasoning lane
// holds up to 1.2 s of text when the answer starts; it must then drain at
// a steady rate within ReasoningDrain, not leave in one dump.
func TestReasoningDrainsSteadilyWhenAnswerStarts(t *testing.T) {
	const burst = 300 * time.Millisecond
	var arrs []arrival
	words := []string{" the", " relay", " stream", " model", " token"}
	for b := range 12 {
		field := "reasoning_content"
		if b >= 7 {
			field = "content"
		}
		for i := range 20 {
			arrs = append(arrs, arrival{at: time.Duration(b) * burst, ev: chunkEvent(field, words[i%len(words)])})
		}
	}
	answerAt := 7 * burst
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
		if first := rt.answer[0]; first > answerAt+limit+DefaultMaxDelay {
			t.Errorf("drain %v: first answer rune %v after it arrived", drain, first-answerAt)
		}
	}
}
