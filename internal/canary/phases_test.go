package canary

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

const day = 24 * time.Hour

// ok feeds n good samples at t.
func ok(c *Canary, t time.Time, n int, ttft time.Duration) *Event {
	var last *Event
	for range n {
		if ev := c.Record(Sample{At: t, OK: true, TTFT: ttft}); ev != nil {
			last = ev
		}
	}
	return last
}

func TestPhasesAdvanceAtTheirTimes(t *testing.T) {
	phases := []Phase{{5, 3 * day}, {50, 7 * day}, {100, 0}}
	c := NewPhases("m", phases, Guard{ErrorRate: 0.5, MinSamples: 4, Window: 10}, t0)
	s := c.Snapshot(t0)
	if !s.NextStepAt.Equal(t0.Add(3*day)) || s.SamplesToStep != 4 || len(s.Phases) != 3 || s.Phases[0].For != "3d" || s.Phases[1].ForMs != float64(7*day/time.Millisecond) || s.Phases[2].For != "" {
		t.Fatalf("snapshot at the start: %+v", s)
	}
	if ev := ok(c, t0.Add(time.Hour), 4, time.Millisecond); ev != nil {
		t.Fatalf("promoted after an hour: %+v", ev)
	}
	if ev := c.Check(t0.Add(3*day - time.Nanosecond)); ev != nil {
		t.Fatalf("promoted before 3d: %+v", ev)
	}
	ev := c.Check(t0.Add(3 * day))
	if ev == nil || ev.Kind != EventPromote || ev.From != 5 || ev.To != 50 {
		t.Fatalf("at 3d: %+v, want 5 -> 50", ev)
	}
	t1 := t0.Add(3 * day)
	if s := c.Snapshot(t1); s.Step != 1 || !s.NextStepAt.Equal(t1.Add(7*day)) || s.SamplesToStep != 4 {
		t.Fatalf("second phase: %+v", s)
	}
	// The second phase is 7 days, not the first's 3.
	ok(c, t1.Add(time.Minute), 4, time.Millisecond)
	if ev := c.Check(t1.Add(3 * day)); ev != nil {
		t.Fatalf("left the 7d phase after 3d: %+v", ev)
	}
	if ev := c.Check(t1.Add(7*day - time.Nanosecond)); ev != nil {
		t.Fatalf("left the 7d phase early: %+v", ev)
	}
	ev = c.Check(t1.Add(7 * day))
	if ev == nil || ev.To != 100 || c.State() != StatePromoted {
		t.Fatalf("at 3d+7d: %+v, state %q", ev, c.State())
	}
	if s := c.Snapshot(t1.Add(8 * day)); !s.NextStepAt.IsZero() || s.SamplesToStep != 0 {
		t.Fatalf("last phase has an end: %+v", s)
	}
	if p := c.Persist(); !p.EndsAt.IsZero() {
		t.Fatalf("last phase persisted with an end: %+v", p)
	}
}

func TestPhaseWaitsForSamples(t *testing.T) {
	c := NewPhases("m", []Phase{{10, time.Second}, {100, 0}}, Guard{MinSamples: 3}, t0)
	ok(c, t0, 2, time.Millisecond)
	if ev := c.Check(t0.Add(time.Hour)); ev != nil {
		t.Fatalf("promoted on 2 of 3 samples: %+v", ev)
	}
	if s := c.Snapshot(t0.Add(time.Hour)); s.SamplesToStep != 1 {
		t.Fatalf("samples to step %d, want 1", s.SamplesToStep)
	}
	if ev := ok(c, t0.Add(time.Hour), 1, time.Millisecond); ev == nil || ev.To != 100 {
		t.Fatalf("third sample after the phase's end: %+v", ev)
	}
}

func TestRollbackOnClusterRate(t *testing.T) {
	g := Guard{ClusterRate: 0.65, MinSamples: 5, Window: 10}
	t.Run("min samples", func(t *testing.T) {
		c := New("m", []float64{5}, g, 0, t0)
		for i := range 4 {
			if ev := c.RecordCluster(at(i), 0.9); ev != nil {
				t.Fatalf("rate %d: %+v", i, ev)
			}
		}
		// Attempts alone (streams without reasoning) do not judge it.
		ok(c, at(5), 50, time.Millisecond)
		if c.State() != StateActive {
			t.Fatal(c.State())
		}
		ev := c.RecordCluster(at(6), 0.9)
		if ev == nil || ev.Kind != EventRollback || c.Share() != 0 {
			t.Fatalf("5th clustered stream: %+v", ev)
		}
		for _, want := range []string{"reasoning cluster rate 0.900 > 0.650", "mean of the last 5 streams with reasoning", "5 of them over the limit"} {
			if !strings.Contains(ev.Reason, want) {
				t.Errorf("reason %q lacks %q", ev.Reason, want)
			}
		}
		noneSelected(t, c)
		if ev := c.RecordCluster(at(7), 0.9); ev != nil {
			t.Fatalf("after the rollback: %+v", ev)
		}
	})
	t.Run("mean of the window", func(t *testing.T) {
		c := New("m", []float64{5}, g, 0, t0)
		for i := range 30 { // steady reasoning: about 0.5
			if ev := c.RecordCluster(at(i), 0.5); ev != nil {
				t.Fatalf("steady stream %d: %+v", i, ev)
			}
		}
		// One clustered stream does not break a mean of 10 ...
		for i := range 2 {
			if ev := c.RecordCluster(at(40+i), 0.95); ev != nil {
				t.Fatalf("clustered stream %d: %+v", i, ev)
			}
		}
		if s := c.Snapshot(at(42)); s.ClusterRate == nil || math.Abs(*s.ClusterRate-0.59) > 1e-9 || s.ClusterSamples != 10 || s.GuardClusterRate != 0.65 {
			t.Fatalf("snapshot %+v", s)
		}
		// ... (0.5*7 + 0.95*3)/10 = 0.635 holds; the fourth breaks it (0.68).
		if ev := c.RecordCluster(at(42), 0.95); ev != nil {
			t.Fatalf("third clustered: %+v", ev)
		}
		if ev := c.RecordCluster(at(43), 0.95); ev == nil || !strings.Contains(ev.Reason, "0.680 > 0.650") {
			t.Fatalf("fourth clustered: %+v", ev)
		}
	})
	t.Run("out of range ignored", func(t *testing.T) {
		c := New("m", []float64{5}, Guard{ClusterRate: 0.1, MinSamples: 1}, 0, t0)
		for _, r := range []float64{-1, 2} {
			if ev := c.RecordCluster(t0, r); ev != nil {
				t.Fatalf("rate %v: %+v", r, ev)
			}
		}
		if c.Snapshot(t0).ClusterSamples != 0 {
			t.Fatal("an out-of-range rate was kept")
		}
	})
	t.Run("not judged at 0", func(t *testing.T) {
		c := New("m", []float64{5}, Guard{MinSamples: 1}, 0, t0)
		for i := range 100 {
			if ev := c.RecordCluster(at(i), 1); ev != nil {
				t.Fatalf("%+v", ev)
			}
		}
	})
	t.Run("blocks promotion", func(t *testing.T) {
		c := New("m", []float64{5, 50}, Guard{ClusterRate: 0.65, MinSamples: 2}, time.Minute, t0)
		c.RecordCluster(t0, 0.9)
		ok(c, t0, 2, time.Millisecond) // the window of attempts is good
		if ev := c.RecordCluster(t0, 0.9); ev == nil || ev.Kind != EventRollback {
			t.Fatalf("%+v", ev)
		}
		if ev := c.Check(t0.Add(time.Hour)); ev != nil {
			t.Fatalf("promoted after a cluster rollback: %+v", ev)
		}
	})
}

func TestRollbackOnTTFTMean(t *testing.T) {
	g := Guard{TTFTMean: 500 * time.Millisecond, TTFTP99: 2 * time.Second, MinSamples: 10, Window: 20}
	t.Run("slow mean, fine p99", func(t *testing.T) {
		c := New("m", []float64{5}, g, 0, t0)
		for i := range 9 {
			if ev := c.Record(Sample{At: at(i), OK: true, TTFT: 700 * time.Millisecond}); ev != nil {
				t.Fatalf("sample %d of 10: %+v", i, ev)
			}
		}
		// Failures do not count towards the mean's minimum.
		for i := range 5 {
			if ev := c.Record(Sample{At: at(20 + i)}); ev != nil {
				t.Fatalf("failure %d: %+v", i, ev)
			}
		}
		ev := c.Record(Sample{At: at(30), OK: true, TTFT: 700 * time.Millisecond})
		if ev == nil || ev.Kind != EventRollback || !strings.Contains(ev.Reason, "ttft mean 700ms > 500ms (+200ms; over 10 successful attempts; p99 700ms)") || strings.Contains(ev.Reason, "ttft p99") {
			t.Fatalf("10th slow sample: %+v", ev)
		}
	})
	t.Run("fine mean, one slow", func(t *testing.T) {
		c := New("m", []float64{5}, Guard{TTFTMean: 500 * time.Millisecond, MinSamples: 10, Window: 20}, 0, t0)
		for i := range 40 {
			ttft := 100 * time.Millisecond
			if i%20 == 19 {
				ttft = 5 * time.Second // p99 of 20 is this one; the mean is 345ms
			}
			if ev := c.Record(Sample{At: at(i), OK: true, TTFT: ttft}); ev != nil {
				t.Fatalf("sample %d: %+v", i, ev)
			}
		}
		if s := c.Snapshot(at(40)); s.TTFTMeanMs != 345 || s.TTFTP99Ms != 5000 || s.GuardTTFTMeanMs != 500 {
			t.Fatalf("snapshot %+v", s)
		}
	})
}

func TestPersistRoundTrip(t *testing.T) {
	phases := []Phase{{5, 3 * day}, {50, 7 * day}, {100, 0}}
	g := Guard{MinSamples: 1}
	a := NewPhases("m", phases, g, t0)

	// A restart an hour later: the new canary adopts the saved start of
	// its first phase, so the phase still ends 3 days after t0.
	b, err := json.Marshal(a.Persist())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"ends_at":"2026-01-05T15:04:05Z"`) {
		t.Fatalf("persisted %s", b)
	}
	var p Persisted
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	r := NewPhases("m", phases, g, t0.Add(time.Hour))
	if ev := r.Adopt(p); ev != nil {
		t.Fatalf("adopting the same phase's start: event %+v", ev)
	}
	if s := r.Snapshot(t0.Add(time.Hour)); !s.NextStepAt.Equal(t0.Add(3*day)) || !s.Since.Equal(t0) {
		t.Fatalf("after the restart: %+v", s)
	}
	// A later start of the same phase changes nothing.
	if ev := a.Adopt(r.Persist()); ev != nil || !a.Persist().Since.Equal(t0) {
		t.Fatalf("a later start was adopted")
	}
	if ev := a.Adopt(Persisted{State: StateActive, Step: 0, Since: t0.Add(time.Minute)}); ev != nil || !a.Persist().Since.Equal(t0) {
		t.Fatal("a later start was adopted")
	}

	// In the second phase, through JSON again.
	if ev := ok(r, t0.Add(3*day), 1, time.Millisecond); ev == nil || ev.To != 50 {
		t.Fatalf("promotion: %+v", ev)
	}
	b, _ = json.Marshal(r.Persist())
	p = Persisted{}
	if err := json.Unmarshal(b, &p); err != nil || p.Step != 1 || !p.EndsAt.Equal(t0.Add(10*day)) {
		t.Fatalf("persisted %s: %+v %v", b, p, err)
	}
	r2 := NewPhases("m", phases, g, t0.Add(4*day))
	if ev := r2.Adopt(p); ev == nil || ev.To != 50 {
		t.Fatalf("restart in phase 2: %+v", ev)
	}
	if s := r2.Snapshot(t0.Add(4 * day)); s.Step != 1 || !s.NextStepAt.Equal(t0.Add(10*day)) {
		t.Fatalf("restart in phase 2: %+v", s)
	}
}

// A state saved before phases (no ends_at) still loads and is adopted.
func TestPersistOldFormat(t *testing.T) {
	old := `{"state":"active","step":1,"share":50,"since":"2026-01-02T15:14:05Z","reason":"guard held for 10m0s over 20 samples at 5% (error rate 0%, ttft p99 1ms)"}`
	var p Persisted
	if err := json.Unmarshal([]byte(old), &p); err != nil {
		t.Fatal(err)
	}
	c := New("m", []float64{5, 50, 100}, Guard{}, 10*time.Minute, t0.Add(time.Hour))
	if ev := c.Adopt(p); ev == nil || ev.To != 50 || c.Share() != 50 {
		t.Fatalf("old state: %+v", ev)
	}
	if s := c.Snapshot(t0.Add(time.Hour)); !s.NextStepAt.Equal(t0.Add(20 * time.Minute)) {
		t.Fatalf("next step at %v", s.NextStepAt)
	}
	oldRollback := `{"state":"rolled_back","step":0,"share":0,"since":"2026-01-02T15:14:05Z","reason":"error rate 50% > 10%"}`
	p = Persisted{}
	if err := json.Unmarshal([]byte(oldRollback), &p); err != nil {
		t.Fatal(err)
	}
	if ev := c.Adopt(p); ev == nil || ev.Kind != EventRollback || c.Share() != 0 {
		t.Fatalf("old rollback: %+v", ev)
	}
}

func TestValidatePhases(t *testing.T) {
	if err := ValidatePhases([]Phase{{5, day}, {50, time.Second}, {100, 0}}, Guard{ClusterRate: 0.7, TTFTMean: time.Second}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		phases []Phase
		g      Guard
		want   string
	}{
		{nil, Guard{}, "no share"},
		{[]Phase{{50, day}, {10, 0}}, Guard{}, "must increase"},
		{[]Phase{{5, -time.Second}, {10, 0}}, Guard{}, "must not be negative"},
		{[]Phase{{5, day}, {10, day}}, Guard{}, "phase 2 (10%) is the last, and has a duration"},
		{[]Phase{{5, 0}}, Guard{ClusterRate: 1.5}, "cluster_rate 1.5"},
		{[]Phase{{5, 0}}, Guard{TTFTMean: -1}, "ttft_mean"},
	} {
		if err := ValidatePhases(c.phases, c.g); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ValidatePhases(%v, %+v) = %v, want %q", c.phases, c.g, err, c.want)
		}
	}
}

func TestFormatSpan(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "", 3 * day: "3d", 36 * time.Hour: "1d12h", 90 * time.Minute: "1h30m", time.Second: "1s",
		1500 * time.Millisecond: "1.5s", 10 * time.Minute: "10m", 61 * time.Second: "1m1s",
	} {
		if got := FormatSpan(d); got != want {
			t.Errorf("FormatSpan(%v) = %q, want %q", d, got, want)
		}
	}
}

// FuzzPhases: any roll-out, valid or not, makes a canary whose share is
// one of its (clamped) phases' and whose next step, when it has one, is
// its phase's start plus the phase's duration; promotions only move
// forward, never before the phase's end.
func FuzzPhases(f *testing.F) {
	f.Add(5.0, int64(3*day), 50.0, int64(7*day), 100.0, int64(0), uint8(30))
	f.Add(-1.0, int64(-5), 200.0, int64(1), math.NaN(), int64(9), uint8(3))
	f.Fuzz(func(t *testing.T, s1 float64, d1 int64, s2 float64, d2 int64, s3 float64, d3 int64, n uint8) {
		phases := []Phase{{s1, time.Duration(d1)}, {s2, time.Duration(d2)}, {s3, time.Duration(d3)}}
		_ = ValidatePhases(phases, Guard{})
		c := NewPhases("f", phases, Guard{MinSamples: 1, Window: 4}, t0)
		now, step := t0, 0
		for i := range int(n) {
			now = now.Add(time.Duration(i) * time.Minute)
			before := c.Snapshot(now)
			ev := c.Record(Sample{At: now, OK: true, TTFT: time.Millisecond})
			s := c.Snapshot(now)
			if s.Share < 0 || s.Share > 100 || s.Step < step || s.Step >= len(s.Phases) {
				t.Fatalf("snapshot %+v", s)
			}
			if ev != nil && ev.Kind == EventPromote && (before.NextStepAt.IsZero() || now.Before(before.NextStepAt)) {
				t.Fatalf("promoted at %v, the phase ended at %v", now, before.NextStepAt)
			}
			if d := s.Phases[s.Step].ForMs; !s.NextStepAt.IsZero() && math.Abs(ms(s.NextStepAt.Sub(s.Since))-d) > 1e-3*math.Max(1, d) {
				t.Fatalf("next step %v, since %v, for %v ms", s.NextStepAt, s.Since, d)
			}
			step = s.Step
		}
	})
}
