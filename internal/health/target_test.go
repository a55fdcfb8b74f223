package health

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// clock is a made-up clock: every call to tick moves it on.
type clock struct{ now time.Time }

func newClock() *clock { return &clock{now: t0} }

func (c *clock) tick(d time.Duration) time.Time {
	c.now = c.now.Add(d)
	return c.now
}

func okAt(at time.Time, ttft time.Duration) Sample {
	return Sample{At: at, TTFT: ttft, Duration: 3 * ttft, OK: true}
}

func badAt(at time.Time) Sample { return Sample{At: at, Duration: time.Second} }

// wantChange fails unless c is a change from → to whose reason contains sub.
func wantChange(t *testing.T, c *Change, from, to Status, sub string) {
	t.Helper()
	if c == nil {
		t.Fatalf("no change, want %s -> %s", from, to)
	}
	if c.From != from || c.To != to || !strings.Contains(c.Reason, sub) {
		t.Fatalf("change %v, want %s -> %s with reason containing %q", c, from, to, sub)
	}
}

func wantNoChange(t *testing.T, c *Change) {
	t.Helper()
	if c != nil {
		t.Fatalf("unexpected change %v", c)
	}
}

func TestStatusString(t *testing.T) {
	for _, tc := range []struct {
		s    Status
		want string
	}{
		{Healthy, "healthy"}, {Degraded, "degraded"}, {Ejected, "ejected"}, {HalfOpen, "half-open"}, {Status(9), "status(9)"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("%d: %q, want %q", tc.s, got, tc.want)
		}
		if b, _ := tc.s.MarshalText(); string(b) != tc.want {
			t.Errorf("%d: MarshalText %q", tc.s, b)
		}
	}
}

func TestDefaults(t *testing.T) {
	s := SLO{}.WithDefaults()
	if s.Window != 50 || s.MinSamples != 10 || s.MaxAge != 10*time.Minute || s.TTFT != 0 || s.Success != 0 {
		t.Errorf("SLO defaults %+v", s)
	}
	p := Policy{}.WithDefaults()
	if p.FailuresToEject != 3 || p.BaseCooldown != 10*time.Second || p.MaxCooldown != 5*time.Minute || p.TrialTimeout != time.Minute {
		t.Errorf("Policy defaults %+v", p)
	}
	p = Policy{BaseCooldown: time.Minute, MaxCooldown: time.Second}.WithDefaults()
	if p.MaxCooldown != time.Minute || p.TrialTimeout != 2*time.Minute {
		t.Errorf("Policy %+v", p)
	}
}

func TestEjectHalfOpenRecover(t *testing.T) {
	c := newClock()
	tg := NewTarget("a", 0)
	var slo SLO
	var pol Policy

	// Failures that are not consecutive do not eject.
	wantNoChange(t, tg.Record(badAt(c.tick(time.Second)), slo, pol))
	wantNoChange(t, tg.Record(badAt(c.tick(time.Second)), slo, pol))
	wantNoChange(t, tg.Record(okAt(c.tick(time.Second), 100*time.Millisecond), slo, pol))
	wantNoChange(t, tg.Record(badAt(c.tick(time.Second)), slo, pol))
	wantNoChange(t, tg.Record(badAt(c.tick(time.Second)), slo, pol))
	if s := tg.Status(c.now, slo); s != Healthy {
		t.Fatalf("status %s", s)
	}
	ejectAt := c.tick(time.Second)
	wantChange(t, tg.Record(badAt(ejectAt), slo, pol), Healthy, Ejected, "3 consecutive failures")

	// Cooling down: ejected, no trial, a late failure changes nothing.
	if s := tg.Status(c.tick(5*time.Second), slo); s != Ejected {
		t.Fatalf("status %s during cooldown", s)
	}
	if tg.ClaimTrial(c.now) {
		t.Fatal("trial claimed during cooldown")
	}
	wantNoChange(t, tg.Record(badAt(c.now), slo, pol))
	if got := tg.Check(c.now, slo); got != nil {
		t.Fatalf("Check during cooldown: %v", got)
	}
	if s := tg.Status(ejectAt.Add(10*time.Second-1), slo); s != Ejected {
		t.Fatalf("status %s just before the cooldown's end", s)
	}

	// Cooldown over: half-open, reported once by Check.
	c.now = ejectAt.Add(10 * time.Second)
	if s := tg.Status(c.now, slo); s != HalfOpen {
		t.Fatalf("status %s after the cooldown", s)
	}
	wantChange(t, tg.Check(c.now, slo), Ejected, HalfOpen, "cooldown 10s over")
	wantNoChange(t, tg.Check(c.tick(time.Second), slo))
	snap := tg.Snapshot(c.now, slo)
	if snap.Status != "half-open" || snap.Ejections != 1 || snap.ConsecutiveFailures != 4 || !strings.Contains(snap.Reason, "3 consecutive failures") {
		t.Fatalf("snapshot %+v", snap)
	}

	if !tg.ClaimTrial(c.now) {
		t.Fatal("no trial")
	}
	wantChange(t, tg.Record(okAt(c.tick(time.Second), 200*time.Millisecond), slo, pol), HalfOpen, Healthy, "trial succeeded")
	snap = tg.Snapshot(c.now, slo)
	if snap.Status != "healthy" || snap.ConsecutiveFailures != 0 || !snap.CooldownUntil.IsZero() || snap.Cooldown != 0 || !snap.Since.Equal(c.now) {
		t.Fatalf("snapshot after recovery %+v", snap)
	}
	if tg.ClaimTrial(c.now) {
		t.Fatal("trial claimed on a healthy target")
	}
}

func TestCooldownDoublesAndCaps(t *testing.T) {
	for _, tc := range []struct {
		name string
		pol  Policy
		want []time.Duration // cooldown after the ejection, then after each failed trial
	}{
		{"defaults", Policy{}, []time.Duration{10e9, 20e9, 40e9, 80e9, 160e9, 300e9, 300e9}},
		{"cap 1m", Policy{BaseCooldown: 10e9, MaxCooldown: 60e9}, []time.Duration{10e9, 20e9, 40e9, 60e9, 60e9}},
		{"base = max", Policy{BaseCooldown: 5e9, MaxCooldown: 5e9}, []time.Duration{5e9, 5e9, 5e9}},
		{"one failure ejects", Policy{FailuresToEject: 1, BaseCooldown: time.Second, MaxCooldown: 3 * time.Second}, []time.Duration{1e9, 2e9, 3e9, 3e9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			tg := NewTarget("a", 10)
			var ch *Change
			for ch == nil {
				ch = tg.Record(badAt(c.tick(time.Second)), SLO{}, tc.pol)
			}
			wantChange(t, ch, Healthy, Ejected, "consecutive failures")
			for i, want := range tc.want {
				s := tg.Snapshot(c.now, SLO{})
				if time.Duration(s.Cooldown) != want || !s.CooldownUntil.Equal(c.now.Add(want)) || s.Ejections != i+1 {
					t.Fatalf("ejection %d: cooldown %s until %s (ejections %d), want %s from %s", i, s.Cooldown, s.CooldownUntil, s.Ejections, want, c.now)
				}
				if i == len(tc.want)-1 {
					break
				}
				c.now = s.CooldownUntil
				if !tg.ClaimTrial(c.now) {
					t.Fatalf("ejection %d: no trial", i)
				}
				ch = tg.Record(badAt(c.now), SLO{}, tc.pol)
				wantChange(t, ch, HalfOpen, Ejected, "trial failed; cooldown "+fmtDur(tc.want[i+1]))
			}
			// A successful trial resets the cooldown to base.
			c.now = c.now.Add(tc.want[len(tc.want)-1])
			wantChange(t, tg.Record(okAt(c.now, time.Second), SLO{}, tc.pol), HalfOpen, Healthy, "trial succeeded")
			for ch = nil; ch == nil; {
				ch = tg.Record(badAt(c.tick(time.Second)), SLO{}, tc.pol)
			}
			if s := tg.Snapshot(c.now, SLO{}); time.Duration(s.Cooldown) != tc.want[0] {
				t.Fatalf("cooldown after recovery %s, want %s", s.Cooldown, tc.want[0])
			}
		})
	}
}

func TestClaimTrialExactlyOne(t *testing.T) {
	c := newClock()
	tg := NewTarget("a", 0)
	pol := Policy{BaseCooldown: 10 * time.Second}
	for range 3 {
		tg.Record(badAt(c.tick(time.Millisecond)), SLO{}, pol)
	}
	c.tick(10 * time.Second)
	var wins atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 64 {
		wg.Go(func() {
			<-start
			if tg.ClaimTrial(c.now) {
				wins.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Fatalf("%d trials claimed, want 1", n)
	}
	claimed := c.now
	// Held until abandoned: TrialTimeout is max(60s, 2×10s) = 60s.
	if tg.ClaimTrial(claimed.Add(59 * time.Second)) {
		t.Fatal("trial claimed twice before the timeout")
	}
	if !tg.ClaimTrial(claimed.Add(60 * time.Second)) {
		t.Fatal("abandoned trial not claimable again")
	}
	if tg.ClaimTrial(claimed.Add(61 * time.Second)) {
		t.Fatal("re-claimed trial claimed twice")
	}
	// A failed trial re-ejects; after the next cooldown a new trial is open.
	wantChange(t, tg.Record(badAt(claimed.Add(62*time.Second)), SLO{}, pol), HalfOpen, Ejected, "trial failed; cooldown 20s")
	if tg.ClaimTrial(claimed.Add(81 * time.Second)) {
		t.Fatal("trial claimed while cooling down")
	}
	if !tg.ClaimTrial(claimed.Add(82 * time.Second)) {
		t.Fatal("no trial after the second cooldown")
	}
}

func TestDegradedByTTFTAndRecovery(t *testing.T) {
	c := newClock()
	tg := NewTarget("a", 50)
	slo := SLO{TTFT: 800 * time.Millisecond, Window: 20, MinSamples: 10}
	// Below MinSamples nothing is judged, however slow.
	for range 9 {
		wantNoChange(t, tg.Record(okAt(c.tick(time.Second), 5*time.Second), slo, Policy{}))
	}
	wantChange(t, tg.Record(okAt(c.tick(time.Second), 5*time.Second), slo, Policy{}), Healthy, Degraded, "ttft p90 5s > slo 800ms")
	// Fast samples push the slow ones out: p90 (rank 18 of 20) falls to a
	// fast one when at most 2 of the 20 are slow.
	for range 17 {
		wantNoChange(t, tg.Record(okAt(c.tick(time.Second), 300*time.Millisecond), slo, Policy{}))
	}
	wantChange(t, tg.Record(okAt(c.tick(time.Second), 300*time.Millisecond), slo, Policy{}), Degraded, Healthy, "ttft p90 300ms <= slo 800ms")
	s := tg.Snapshot(c.now, slo)
	if s.Samples != 20 || s.TTFTP50 != Duration(300*time.Millisecond) || s.TTFTP90 != Duration(300*time.Millisecond) || s.SuccessRatio != 1 {
		t.Fatalf("snapshot %+v", s)
	}
	// Latency climbs: a third slow sample in 20 breaks the p90.
	for _, ms := range []int{900, 1000} {
		wantNoChange(t, tg.Record(okAt(c.tick(time.Second), time.Duration(ms)*time.Millisecond), slo, Policy{}))
	}
	wantChange(t, tg.Record(okAt(c.tick(time.Second), 1200*time.Millisecond), slo, Policy{}), Healthy, Degraded, "ttft p90 900ms > slo 800ms")
	s = tg.Snapshot(c.now, slo)
	if s.Status != "degraded" || s.Reason != "ttft p90 900ms > slo 800ms" || !s.Since.Equal(c.now) {
		t.Fatalf("snapshot %+v", s)
	}
}

func TestPercentileBoundary(t *testing.T) {
	slo := SLO{TTFT: time.Second, Window: 10, MinSamples: 10}
	for _, tc := range []struct {
		slow int
		want Status
	}{{0, Healthy}, {1, Healthy}, {2, Degraded}, {10, Degraded}} {
		tg := NewTarget("a", 10)
		c := newClock()
		for i := range 10 {
			d := 100 * time.Millisecond
			if i < tc.slow {
				d = time.Second + 1
			}
			tg.Record(okAt(c.tick(time.Second), d), slo, Policy{})
		}
		// 10 samples: the p90 is the 9th smallest, so one slow sample is
		// tolerated and two are not.
		if got := tg.Status(c.now, slo); got != tc.want {
			t.Errorf("%d slow of 10: %s, want %s", tc.slow, got, tc.want)
		}
	}
}

func TestDegradedBySuccessAndEjection(t *testing.T) {
	c := newClock()
	tg := NewTarget("a", 20)
	slo := SLO{Success: 0.9, MinSamples: 10}
	// 9 good, then one failure in 10: 0.90 is not below 0.90.
	for range 9 {
		tg.Record(okAt(c.tick(time.Second), time.Second), slo, Policy{})
	}
	wantNoChange(t, tg.Record(badAt(c.tick(time.Second)), slo, Policy{}))
	wantChange(t, tg.Record(badAt(c.tick(time.Second)), slo, Policy{}), Healthy, Degraded, "success 0.82 < slo 0.90")
	// A degraded target that keeps failing is ejected.
	wantChange(t, tg.Record(badAt(c.tick(time.Second)), slo, Policy{}), Degraded, Ejected, "3 consecutive failures")

	// Ejection on a success ratio below half the SLO, without 3 in a row.
	tg = NewTarget("b", 20)
	var ch *Change
	n := 0
	for ch == nil {
		n++
		if n%3 == 0 {
			ch = tg.Record(okAt(c.tick(time.Second), time.Second), slo, Policy{})
		} else {
			ch = tg.Record(badAt(c.tick(time.Second)), slo, Policy{})
		}
	}
	// Judged from the 10th sample on: 3 of 10 is below 0.45.
	wantChange(t, ch, Healthy, Ejected, "success 0.30 < 0.45 (half the slo 0.90)")
	if n != 10 {
		t.Fatalf("ejected at sample %d, want 10", n)
	}
	// After a successful trial the window still breaks the SLO: degraded.
	c.tick(10 * time.Second)
	wantChange(t, tg.Record(okAt(c.now, time.Second), slo, Policy{}), HalfOpen, Degraded, "trial succeeded; success 0.36 < slo 0.90")
}

func TestMaxAge(t *testing.T) {
	for _, tc := range []struct {
		name   string
		maxAge time.Duration
		want   Status
	}{{"default", 0, Healthy}, {"no limit", -1, Degraded}, {"1h", time.Hour, Degraded}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			tg := NewTarget("a", 0)
			slo := SLO{TTFT: time.Second, MinSamples: 10, MaxAge: tc.maxAge}
			for range 10 {
				tg.Record(okAt(c.tick(time.Second), 2*time.Second), slo, Policy{})
			}
			if s := tg.Status(c.now, slo); s != Degraded {
				t.Fatalf("status %s", s)
			}
			// Idle for 10 minutes after the last sample: with the default
			// max age, 9 samples are out and the SLO is not judged.
			c.tick(10*time.Minute - 9*time.Second - 1)
			if s := tg.Status(c.now, slo); s != Degraded {
				t.Fatalf("status %s before max age", s)
			}
			c.tick(2)
			if s := tg.Status(c.now, slo); s != tc.want {
				t.Fatalf("status %s after max age, want %s", s, tc.want)
			}
			if tc.want == Healthy {
				wantChange(t, tg.Check(c.now, slo), Degraded, Healthy, "9 recent samples < 10: slo not judged")
				if s := tg.Snapshot(c.now, slo); s.Samples != 9 || s.Reason != "" {
					t.Fatalf("snapshot %+v", s)
				}
			}
		})
	}
}

func TestProbe(t *testing.T) {
	c := newClock()
	tg := NewTarget("a", 0)
	slo := SLO{TTFT: time.Second, MinSamples: 1}
	pol := Policy{}

	// A good probe feeds the latency, not the window.
	wantNoChange(t, tg.Probe(c.tick(time.Second), 5*time.Second, true, slo, pol))
	if l := tg.Latency(); l != 5*time.Second {
		t.Fatalf("latency %s", l)
	}
	if s := tg.Snapshot(c.now, slo); s.Samples != 0 || s.Status != "healthy" {
		t.Fatalf("snapshot %+v", s)
	}
	// A good probe does not reset consecutive failures.
	tg.Record(badAt(c.tick(time.Second)), slo, pol)
	tg.Probe(c.tick(time.Second), 100*time.Millisecond, true, slo, pol)
	tg.Record(badAt(c.tick(time.Second)), slo, pol)
	// A failed probe counts like a failed attempt.
	wantChange(t, tg.Probe(c.tick(time.Second), 0, false, slo, pol), Healthy, Ejected, "3 consecutive failures")
	// A good probe during the cooldown changes nothing.
	wantNoChange(t, tg.Probe(c.tick(5*time.Second), 100*time.Millisecond, true, slo, pol))
	if s := tg.Status(c.now, slo); s != Ejected {
		t.Fatalf("status %s", s)
	}
	// A failed probe after it fails the trial.
	c.tick(5 * time.Second)
	wantChange(t, tg.Probe(c.now, 0, false, slo, pol), HalfOpen, Ejected, "probe failed; cooldown 20s")
	// A good probe after the cooldown recovers it, trial claimed or not.
	c.tick(20 * time.Second)
	if !tg.ClaimTrial(c.now) {
		t.Fatal("no trial")
	}
	wantChange(t, tg.Probe(c.now, 100*time.Millisecond, true, slo, pol), HalfOpen, Healthy, "probe succeeded")
	if s := tg.Snapshot(c.now, slo); s.ConsecutiveFailures != 0 || s.Ejections != 2 || s.Samples != 2 {
		t.Fatalf("snapshot %+v", s)
	}
	// The trial's late answer is an ordinary sample.
	wantNoChange(t, tg.Record(okAt(c.tick(time.Second), 100*time.Millisecond), slo, pol))
}

func TestLateSuccessDuringCooldown(t *testing.T) {
	c := newClock()
	tg := NewTarget("a", 0)
	for range 3 {
		tg.Record(badAt(c.tick(time.Second)), SLO{}, Policy{})
	}
	wantNoChange(t, tg.Record(okAt(c.tick(time.Second), time.Second), SLO{}, Policy{}))
	if s := tg.Status(c.now, SLO{}); s != Ejected {
		t.Fatalf("status %s", s)
	}
}

func TestNeverEject(t *testing.T) {
	c := newClock()
	tg := NewTarget("a", 0)
	pol := Policy{FailuresToEject: -1}
	for range 100 {
		wantNoChange(t, tg.Record(badAt(c.tick(time.Second)), SLO{}, pol))
	}
}

func TestLatencyEWMA(t *testing.T) {
	c := newClock()
	tg := NewTarget("a", 0)
	if tg.Latency() != 0 {
		t.Fatal("latency known before any sample")
	}
	tg.Record(badAt(c.tick(time.Second)), SLO{}, Policy{})
	tg.Record(okAt(c.tick(time.Second), 0), SLO{}, Policy{}) // no TTFT: ignored
	if tg.Latency() != 0 {
		t.Fatalf("latency %s from samples without a TTFT", tg.Latency())
	}
	tg.Record(okAt(c.tick(time.Second), time.Second), SLO{}, Policy{})
	tg.Record(okAt(c.tick(time.Second), 2*time.Second), SLO{}, Policy{})
	if l := tg.Latency(); l != 1200*time.Millisecond {
		t.Fatalf("latency %s, want 1.2s", l)
	}
	tg.Probe(c.tick(time.Second), 200*time.Millisecond, true, SLO{}, Policy{})
	if l := tg.Latency(); l != 1000*time.Millisecond {
		t.Fatalf("latency %s, want 1s", l)
	}
	tg.Probe(c.tick(time.Second), 50*time.Second, false, SLO{}, Policy{}) // failed probe: ignored
	if l := tg.Latency(); l != 1000*time.Millisecond {
		t.Fatalf("latency %s, want 1s", l)
	}
}

func TestSLOWindowSmallerThanRing(t *testing.T) {
	c := newClock()
	tg := NewTarget("a", 100)
	slo := SLO{TTFT: time.Second, Window: 10, MinSamples: 5}
	for range 50 {
		tg.Record(okAt(c.tick(time.Second), 2*time.Second), slo, Policy{})
	}
	for range 10 {
		tg.Record(okAt(c.tick(time.Second), 100*time.Millisecond), slo, Policy{})
	}
	if s := tg.Status(c.now, slo); s != Healthy {
		t.Fatalf("status %s: judged more than SLO.Window samples", s)
	}
	if s := tg.Status(c.now, SLO{TTFT: time.Second, Window: 1000}); s != Degraded {
		t.Fatalf("status %s over the whole ring", s)
	}
	if s := tg.Snapshot(c.now, SLO{Window: 1000}); s.Samples != 60 {
		t.Fatalf("samples %d, want 60 (clamped to the ring's window)", s.Samples)
	}
}

func TestSnapshotJSON(t *testing.T) {
	c := newClock()
	tg := NewTarget("up/m", 0)
	slo := SLO{TTFT: 800 * time.Millisecond, MinSamples: 2}
	tg.Record(okAt(c.tick(time.Second), 850*time.Millisecond), slo, Policy{})
	tg.Record(okAt(c.tick(time.Second), 1234567891), slo, Policy{})
	b, err := json.Marshal(tg.Snapshot(c.now, slo))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"up/m","status":"degraded","samples":2,"success_ratio":1,"ttft_p50":"850ms","ttft_p90":"1.235s",` +
		`"latency_ewma":"927ms","consecutive_failures":0,"ejections":0,"since":"2025-06-01T12:00:02Z","reason":"ttft p90 1.235s \u003e slo 800ms"}` // json.Marshal escapes >
	if string(b) != want {
		t.Fatalf("json\n got %s\nwant %s", b, want)
	}
	for range 3 {
		tg.Record(badAt(c.tick(time.Second)), slo, Policy{})
	}
	b, _ = json.Marshal(tg.Snapshot(c.now, slo))
	for _, sub := range []string{`"status":"ejected"`, `"cooldown_until":"2025-06-01T12:00:15Z"`, `"cooldown":"10s"`, `"reason":"3 consecutive failures"`, `"ejections":1`} {
		if !strings.Contains(string(b), sub) {
			t.Errorf("json %s lacks %s", b, sub)
		}
	}
	var back struct{ Cooldown Duration }
	if err := json.Unmarshal(b, &back); err != nil || back.Cooldown != Duration(10*time.Second) {
		t.Fatalf("unmarshal: %v %v", back.Cooldown, err)
	}
}

func TestDurationString(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{0, "0s"}, {850 * time.Millisecond, "850ms"}, {1200 * time.Millisecond, "1.2s"}, {1234567891, "1.235s"}, {1500, "2µs"}, {-1500 * time.Microsecond, "-2ms"}} {
		if got := Duration(tc.d).String(); got != tc.want {
			t.Errorf("%d: %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestChangeString(t *testing.T) {
	c := &Change{Target: "a/m", From: Healthy, To: Ejected, Reason: "3 consecutive failures"}
	if got := c.String(); got != "a/m: healthy -> ejected (3 consecutive failures)" {
		t.Fatal(got)
	}
}

func TestRecordDoesNotAllocate(t *testing.T) {
	c := newClock()
	tg := NewTarget("a", 0)
	slo := SLO{TTFT: time.Second, Success: 0.5}
	n := testing.AllocsPerRun(1000, func() {
		tg.Record(okAt(c.tick(time.Second), 100*time.Millisecond), slo, Policy{})
		tg.Status(c.now, slo)
	})
	if n != 0 {
		t.Fatalf("%v allocations per Record+Status", n)
	}
}
