package canary

import (
	"math"
	"strings"
	"testing"
	"time"
)

func floorCanary(floor float64) *Canary {
	return New("c", []float64{10}, Guard{ReasoningFloor: floor, MinSamples: 5, Window: 10}, 0, t0)
}

// feed records n answers of one side at one effort, a second apart from
// the i-th second on; it returns the first event.
func feed(c *Canary, i, n int, effort string, tokens int, canary bool) *Event {
	var first *Event
	for k := range n {
		if ev := c.RecordReasoning(ReasoningSample{At: at(i + k), Effort: effort, Tokens: tokens, Canary: canary}); ev != nil && first == nil {
			first = ev
		}
	}
	return first
}

func TestReasoningFloorRollsBack(t *testing.T) {
	c := floorCanary(0.5)
	if ev := feed(c, 0, 4, "high", 200, true); ev != nil {
		t.Fatalf("canary answers alone rolled back: %+v", ev)
	}
	if ev := feed(c, 0, 5, "high", 1000, false); ev != nil {
		t.Fatalf("rolled back on 4 canary answers, min_samples 5: %+v", ev)
	}
	ev := feed(c, 9, 1, "high", 200, true)
	if ev == nil || ev.Kind != EventRollback || c.Share() != 0 || c.State() != StateRolledBack {
		t.Fatalf("event %+v, share %v, state %v: want a rollback", ev, c.Share(), c.State())
	}
	for _, want := range []string{"reasoning 20% of the stable targets' at effort high", "1000 → 200 tokens per answer", "last 5 answers against the stable targets' 5", "< floor 0.50"} {
		if !strings.Contains(ev.Reason, want) {
			t.Errorf("reason %q lacks %q", ev.Reason, want)
		}
	}
	s := c.Snapshot(at(10))
	if len(s.Reasoning) != 1 || s.Reasoning[0].Ratio == nil || *s.Reasoning[0].Ratio != 0.2 ||
		s.Reasoning[0].CanaryTokens != 200 || s.Reasoning[0].StableTokens != 1000 || s.GuardReasoningFloor != 0.5 {
		t.Fatalf("snapshot reasoning %+v floor %v", s.Reasoning, s.GuardReasoningFloor)
	}
	if s.RollbackReason != c.reason || !strings.Contains(s.RollbackReason, "reasoning 20%") {
		t.Fatalf("rollback reason %q", s.RollbackReason)
	}
	// After the rollback nothing is recorded.
	if ev := feed(c, 11, 5, "high", 0, true); ev != nil || c.Snapshot(at(20)).Reasoning[0].CanarySamples != 5 {
		t.Fatal("answers after the rollback were recorded")
	}
}

func TestReasoningFloorHolds(t *testing.T) {
	c := floorCanary(0.5)
	feed(c, 10, 10, "high", 1000, false)
	if ev := feed(c, 10, 10, "high", 600, true); ev != nil {
		t.Fatalf("60%% of the stable reasoning, floor 0.5: %+v", ev)
	}
	// Exactly at the floor holds too.
	c = floorCanary(0.5)
	feed(c, 10, 10, "high", 1000, false)
	if ev := feed(c, 10, 10, "high", 500, true); ev != nil {
		t.Fatalf("at the floor: %+v", ev)
	}
	if c.State() != StateActive {
		t.Fatal(c.State())
	}
}

// Answers are compared at the same effort only: a canary whose clients
// send "low" is not judged against stable answers at "high".
func TestReasoningFloorPerEffort(t *testing.T) {
	c := floorCanary(0.5)
	feed(c, 20, 10, "high", 4000, false)
	feed(c, 20, 10, "low", 300, false)
	if ev := feed(c, 20, 10, "low", 250, true); ev != nil {
		t.Fatalf("low against high: %+v", ev)
	}
	s := c.Snapshot(at(30))
	if len(s.Reasoning) != 2 || s.Reasoning[0].Effort != "high" || s.Reasoning[0].Ratio != nil || s.Reasoning[1].Effort != "low" || s.Reasoning[1].Ratio == nil || s.Reasoning[1].CanaryTokens != 250 {
		t.Fatalf("views %+v", s.Reasoning)
	}
	// The same canary reasoning little at "high" is rolled back.
	ev := feed(c, 25, 5, "high", 100, true)
	if ev == nil || !strings.Contains(ev.Reason, "at effort high") {
		t.Fatalf("event %+v", ev)
	}
}

// The stable answers older than the canary window's oldest do not count:
// both means cover the same period.
func TestReasoningFloorSamePeriod(t *testing.T) {
	c := floorCanary(0.5)
	feed(c, 0, 10, "medium", 5000, false) // before the canary answered at all
	feed(c, 100, 5, "medium", 200, true)
	if s := c.Snapshot(at(200)); s.Reasoning[0].StableSamples != 0 || s.Reasoning[0].Ratio != nil {
		t.Fatalf("stable answers before the canary window counted: %+v", s.Reasoning)
	}
	if ev := feed(c, 105, 5, "medium", 300, false); ev != nil {
		t.Fatalf("200 against 300 over the same period, floor 0.5: %+v", ev)
	}
	if s := c.Snapshot(at(200)); s.Reasoning[0].StableTokens != 300 || *s.Reasoning[0].Ratio != 200.0/300 {
		t.Fatalf("views %+v", s.Reasoning)
	}
}

func TestReasoningFloorNotJudged(t *testing.T) {
	// No floor: nothing is kept.
	c := floorCanary(0)
	feed(c, 10, 10, "high", 1000, false)
	if ev := feed(c, 10, 10, "high", 0, true); ev != nil || c.Snapshot(at(20)).Reasoning != nil {
		t.Fatalf("no floor, event %+v", ev)
	}
	// A model that does not reason is never judged on it.
	c = floorCanary(0.5)
	feed(c, 10, 10, "default", 0, false)
	if ev := feed(c, 10, 10, "default", 0, true); ev != nil {
		t.Fatalf("no reasoning on either side: %+v", ev)
	}
	// Too few stable answers: not judged.
	c = floorCanary(0.5)
	feed(c, 10, 4, "high", 1000, false)
	if ev := feed(c, 10, 10, "high", 0, true); ev != nil {
		t.Fatalf("4 stable answers, min_samples 5: %+v", ev)
	}
	// Negative counts are dropped; efforts past the bound are not kept.
	if c.RecordReasoning(ReasoningSample{At: at(30), Effort: "high", Tokens: -1}) != nil {
		t.Fatal("negative")
	}
	for i := range 2 * maxEfforts {
		c.RecordReasoning(ReasoningSample{At: at(40), Effort: string(rune('a' + i)), Tokens: 1})
	}
	if n := len(c.Snapshot(at(50)).Reasoning); n != maxEfforts {
		t.Fatalf("%d efforts kept", n)
	}
}

// A floor that holds lets the canary be promoted.
func TestReasoningFloorHeldPromotes(t *testing.T) {
	c := New("c", []float64{10, 50}, Guard{ReasoningFloor: 0.9, MinSamples: 5, Window: 10}, time.Minute, t0)
	ok(c, at(1), 5, time.Millisecond)
	if s := c.Snapshot(at(1)); s.Share != 10 {
		t.Fatal(s.Share)
	}
	feed(c, 2, 5, "high", 1000, false)
	feed(c, 7, 5, "high", 950, true) // 95%: holds
	if ev := c.Check(t0.Add(2 * time.Minute)); ev == nil || ev.Kind != EventPromote {
		t.Fatalf("promotion: %+v", ev)
	}
}

func TestValidateReasoningFloor(t *testing.T) {
	for _, f := range []float64{-0.1, 1.5, math.NaN()} {
		if err := Validate([]float64{5}, Guard{ReasoningFloor: f}, 0); err == nil || !strings.Contains(err.Error(), "reasoning_floor") {
			t.Errorf("floor %v: %v", f, err)
		}
	}
	for _, f := range []float64{0, 0.5, 1} {
		if err := Validate([]float64{5}, Guard{ReasoningFloor: f}, 0); err != nil {
			t.Errorf("floor %v: %v", f, err)
		}
	}
}

// FuzzReasoningFloor feeds answers of both sides at a few efforts: a
// rollback comes only from an effort whose ratio is judged and below the
// floor, and the views stay within the window.
func FuzzReasoningFloor(f *testing.F) {
	f.Add(0.5, []byte{0, 10, 1, 2, 0, 10, 1, 2, 0, 10, 1, 2, 0, 10, 1, 2, 0, 10, 1, 2})
	f.Add(1.0, []byte{5, 255, 200, 3, 7})
	f.Fuzz(func(t *testing.T, floor float64, ops []byte) {
		c := New("f", []float64{10}, Guard{ReasoningFloor: floor, MinSamples: 2, Window: 4}, 0, t0)
		now := t0
		for i := 0; i+1 < len(ops); i += 2 {
			op, tok := ops[i], int(ops[i+1])*10
			now = now.Add(time.Duration(op>>3) * time.Second)
			effort := []string{"low", "high", "default"}[int(op>>1&3)%3]
			ev := c.RecordReasoning(ReasoningSample{At: now, Effort: effort, Tokens: tok, Canary: op&1 == 1})
			s := c.Snapshot(now)
			for _, v := range s.Reasoning {
				if v.CanarySamples > 4 || v.StableSamples > 4 || v.CanaryTokens < 0 || v.StableTokens < 0 {
					t.Fatalf("view %+v", v)
				}
				if v.Ratio != nil && (v.CanarySamples < 2 || v.StableSamples < 2 || v.StableTokens <= 0) {
					t.Fatalf("judged on too little: %+v", v)
				}
			}
			if ev != nil {
				if !(floor > 0) {
					t.Fatalf("rolled back with floor %v", floor)
				}
				below := false
				for _, v := range s.Reasoning {
					below = below || (v.Ratio != nil && *v.Ratio < floor)
				}
				if !below || s.Share != 0 || !strings.Contains(ev.Reason, "< floor") {
					t.Fatalf("rollback %+v, views %+v", ev, s.Reasoning)
				}
			}
		}
	})
}
