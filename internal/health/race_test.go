package health

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Many goroutines record, probe, claim trials, snapshot and order the same
// targets at once (run with -race). Each goroutine has its own clock
// offset and its own rand.
func TestConcurrentRecordAndOrder(t *testing.T) {
	slo := SLO{TTFT: 800 * time.Millisecond, Success: 0.8, MinSamples: 5, Window: 20}
	pol := Policy{BaseCooldown: 50 * time.Millisecond, MaxCooldown: time.Second}
	targets := []*Target{NewTarget("a", 20), NewTarget("b", 20), NewTarget("c", 20), NewTarget("d", 20)}
	cands := make([]Candidate, len(targets))
	for i, tg := range targets {
		cands[i] = Candidate{T: tg, SLO: slo, Rank: i / 2, Weight: i + 1, Region: []string{"us", "eu"}[i%2]}
	}
	const workers, iters = 16, 2000
	var changes, trials atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			cands := slices.Clone(cands) // Order writes each candidate's Status
			rnd := seeded(uint64(w))
			hint := []string{"", HintAuto, "eu", "us"}[w%4]
			for i := range iters {
				now := t0.Add(time.Duration(i) * time.Millisecond)
				o := Order(cands, now, hint, rnd)
				if len(o) != len(cands) {
					t.Errorf("order %v", o)
					return
				}
				tg := targets[o[0]]
				if tg.Status(now, slo) == HalfOpen && tg.ClaimTrial(now) {
					trials.Add(1)
				}
				s := Sample{At: now, TTFT: time.Duration(rnd.IntN(1200)) * time.Millisecond, OK: rnd.IntN(10) < 7}
				if !s.OK {
					s.TTFT = 0
				}
				if tg.Record(s, slo, pol) != nil {
					changes.Add(1)
				}
				switch i % 50 {
				case 0:
					targets[rnd.IntN(len(targets))].Probe(now, 100*time.Millisecond, rnd.IntN(2) == 0, slo, pol)
				case 1:
					_ = targets[rnd.IntN(len(targets))].Snapshot(now, slo)
				case 2:
					if c := targets[rnd.IntN(len(targets))].Check(now, slo); c != nil {
						changes.Add(1)
					}
				case 3:
					_ = targets[rnd.IntN(len(targets))].Latency()
				}
			}
		})
	}
	wg.Wait()
	if changes.Load() == 0 || trials.Load() == 0 {
		t.Fatalf("%d changes, %d trials: the test exercised nothing", changes.Load(), trials.Load())
	}
	t.Logf("%d changes, %d trials", changes.Load(), trials.Load())
}
