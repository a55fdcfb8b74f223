package reasoninghealth

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)

func feed(tr *Tracker, c Config, n int, s Sample) (changes []*Change) {
	for i := range n {
		s.At = t0.Add(time.Duration(i) * time.Second)
		if ch := tr.Add(s, c); ch != nil {
			changes = append(changes, ch)
		}
	}
	return changes
}

func TestFloorDegradesAndTrialRecovers(t *testing.T) {
	tr := NewTracker()
	c := Config{Floor: 0.5}
	if ch := feed(tr, c, 30, Sample{Effort: "high", Reasoning: 1210}); len(ch) != 0 {
		t.Fatalf("steady reasoning changed the status: %+v", ch)
	}
	// Reasoning drops to 460 tokens: the recent window is full after 5.
	ch := feed(tr, c, 4, Sample{Effort: "high", Reasoning: 460})
	if len(ch) != 0 {
		t.Fatalf("degraded before the recent window was full: %+v", ch[0])
	}
	ch = feed(tr, c, 1, Sample{Effort: "high", Reasoning: 460})
	if len(ch) != 1 || !ch[0].Degraded || ch[0].Signal != SignalFloor {
		t.Fatalf("changes = %+v, want one degradation by the floor", ch)
	}
	want := "reasoning 38% of baseline (1,210 → 460 tokens, effort high)"
	if ch[0].Reason != want {
		t.Errorf("reason = %q, want %q", ch[0].Reason, want)
	}
	// A long degradation does not move the frozen baseline.
	feed(tr, c, 200, Sample{Effort: "high", Reasoning: 460})
	snap := tr.Snapshot()
	if len(snap.Efforts) != 1 || snap.Efforts[0].BaselineTokens != 1210 {
		t.Fatalf("baseline moved while degraded: %+v", snap.Efforts)
	}
	if !snap.Degraded || snap.Efforts[0].RecentEarlyStops != 0 {
		t.Errorf("snapshot = %+v", snap)
	}
	// A trial at the baseline recovers; the recent window starts afresh.
	ch = feed(tr, c, 1, Sample{Effort: "high", Reasoning: 1100})
	if len(ch) != 1 || ch[0].Degraded {
		t.Fatalf("trial at the baseline: changes = %+v, want a recovery", ch)
	}
	if d, _, _ := tr.Degraded(); d {
		t.Fatal("still degraded after a good trial")
	}
	if s := tr.Snapshot(); s.Efforts[0].RecentSamples != 1 || s.Degradations != 1 {
		t.Errorf("after recovery: %+v", s.Efforts[0])
	}
}

func TestEffortsAreSeparate(t *testing.T) {
	tr := NewTracker()
	c := Config{Floor: 0.5}
	feed(tr, c, 30, Sample{Effort: "high", Reasoning: 2000})
	// Low effort reasons far less: a new series, not a drop.
	if ch := feed(tr, c, 30, Sample{Effort: "low", Reasoning: 100}); len(ch) != 0 {
		t.Fatalf("a lower effort read as a degradation: %+v", ch)
	}
	if ch := feed(tr, c, 30, Sample{Reasoning: 5}); len(ch) != 0 {
		t.Fatalf("default effort read as a degradation: %+v", ch)
	}
	if s := tr.Snapshot(); len(s.Efforts) != 3 || s.Efforts[0].Effort != DefaultEffort {
		t.Fatalf("efforts = %+v", s.Efforts)
	}
}

func TestTooFewSamplesAreNotJudged(t *testing.T) {
	tr := NewTracker()
	c := Config{Floor: 0.9, ClusterRate: 0.1}
	feed(tr, c, MinBaseline-RecentWindow-1, Sample{Reasoning: 1000})
	if ch := feed(tr, c, RecentWindow, Sample{Reasoning: 1}); len(ch) != 0 {
		t.Fatalf("judged on a baseline of fewer than %d samples: %+v", MinBaseline, ch)
	}
	// No cluster rate known: the cluster rate is not judged.
	if d, _, _ := tr.Degraded(); d {
		t.Fatal("degraded")
	}
}

func TestFailedTrialStaysDegraded(t *testing.T) {
	tr := NewTracker()
	c := Config{Floor: 0.5}
	feed(tr, c, 30, Sample{Reasoning: 1000})
	feed(tr, c, RecentWindow, Sample{Reasoning: 100})
	if ch := feed(tr, c, 1, Sample{Reasoning: 499}); len(ch) != 0 {
		t.Fatalf("a trial under the floor changed the status: %+v", ch)
	}
	// A trial at an effort with no baseline is no evidence.
	if ch := feed(tr, c, 1, Sample{Effort: "low", Reasoning: 10}); len(ch) != 0 {
		t.Fatalf("a trial without a baseline recovered: %+v", ch)
	}
	if d, sig, why := tr.Degraded(); !d || sig != SignalFloor || !strings.Contains(why, "% of baseline (1,000 → ") {
		t.Fatalf("Degraded() = %v %q %q", d, sig, why)
	}
	if ch := feed(tr, c, 1, Sample{Reasoning: 500}); len(ch) != 1 || ch[0].Degraded {
		t.Fatalf("a trial at the floor: %+v", ch)
	}
}

func TestEarlyStops(t *testing.T) {
	tr := NewTracker()
	feed(tr, Config{}, 30, Sample{Reasoning: 1000})
	feed(tr, Config{}, 2, Sample{Reasoning: 240}) // under 25% of 1000
	feed(tr, Config{}, 1, Sample{Reasoning: 260})
	e := tr.Snapshot().Efforts[0]
	if e.RecentEarlyStops != 2 || e.BaselineEarlyPct != 0 {
		t.Fatalf("early stops = %+v", e)
	}
	feed(tr, Config{}, RecentWindow, Sample{Reasoning: 1000})
	if e := tr.Snapshot().Efforts[0]; e.RecentEarlyStops != 0 || e.BaselineEarlyPct <= 0 {
		t.Fatalf("early stops once out of the recent window = %+v", e)
	}
	if d, _, _ := tr.Degraded(); d {
		t.Fatal("Config{} judged")
	}
}

func TestClusterRate(t *testing.T) {
	tr := NewTracker()
	c := Config{ClusterRate: 0.8}
	if ch := feed(tr, c, RecentWindow-1, Sample{Reasoning: 100, Cluster: 0.91, ClusterKnown: true}); len(ch) != 0 {
		t.Fatalf("judged before the window was full: %+v", ch)
	}
	ch := feed(tr, c, 1, Sample{Reasoning: 100, Cluster: 0.91, ClusterKnown: true})
	if len(ch) != 1 || ch[0].Signal != SignalCluster || ch[0].Reason != "reasoning cluster rate 0.91 > 0.80" {
		for _, c := range ch {
			t.Logf("%+v", *c)
		}
		t.Fatalf("changes = %+v", ch)
	}
	// A trial without a known cluster rate cannot recover it.
	if ch := feed(tr, c, 1, Sample{Reasoning: 100}); len(ch) != 0 {
		t.Fatalf("%+v", ch)
	}
	if ch := feed(tr, c, 1, Sample{Reasoning: 100, Cluster: 0.85, ClusterKnown: true}); len(ch) != 0 {
		t.Fatalf("%+v", ch)
	}
	if ch := feed(tr, c, 1, Sample{Reasoning: 100, Cluster: 0.5, ClusterKnown: true}); len(ch) != 1 || ch[0].Degraded {
		t.Fatalf("a good trial: %+v", ch)
	}
	if s := tr.Snapshot(); s.ClusterSamples != 1 || s.RecentClusterRate != 0.5 {
		t.Fatalf("snapshot after recovery = %+v", s)
	}
}

func TestEffortsBounded(t *testing.T) {
	tr := NewTracker()
	for i := range 100 {
		tr.Add(Sample{Effort: string(rune('a' + i%50)), Reasoning: 1}, Config{})
	}
	if n := len(tr.Snapshot().Efforts); n != maxEfforts {
		t.Fatalf("efforts = %d, want %d", n, maxEfforts)
	}
}

func TestThousands(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1210.4: "1,210", 1234567: "1,234,567", -1500: "-1,500"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestClear(t *testing.T) {
	tr := NewTracker()
	c := Config{Floor: 0.5}
	feed(tr, c, 30, Sample{Reasoning: 1000})
	feed(tr, c, RecentWindow, Sample{Reasoning: 10})
	if !tr.Clear(t0) {
		t.Fatal("Clear found nothing to clear")
	}
	if d, _, _ := tr.Degraded(); d || tr.Clear(t0) {
		t.Fatal("still degraded after Clear")
	}
	if e := tr.Snapshot().Efforts[0]; e.BaselineTokens != 1000 || e.RecentSamples != 0 {
		t.Fatalf("after Clear: %+v", e)
	}
}
