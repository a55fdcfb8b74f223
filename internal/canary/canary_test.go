package canary

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

func TestBucketGolden(t *testing.T) {
	// Pinned once; also what Python gives for
	// int.from_bytes(hashlib.sha256(k.encode()).digest()[:8], "big") / 2**64 * 100.
	golden := map[string]float64{
		"":            88.94159948913374,
		"alice":       17.12650529798836,
		"bob":         50.66866783861982,
		"user-42":     42.78761530135858,
		"203.0.113.7": 99.51957104877242,
		"用户":          5.099645413035059,
	}
	for k, want := range golden {
		if got := Bucket(k); got != want {
			t.Errorf("Bucket(%q) = %v, want %v", k, got, want)
		}
	}
}

func TestBucketUniform(t *testing.T) {
	const n = 100_000
	buckets := make([]float64, n)
	for i := range n {
		b := Bucket(fmt.Sprintf("key-%d", i))
		if b < 0 || b >= 100 || math.IsNaN(b) {
			t.Fatalf("Bucket(key-%d) = %v, out of [0, 100)", i, b)
		}
		buckets[i] = b
	}
	for _, p := range []float64{1, 5, 50} {
		in := 0
		for _, b := range buckets {
			if b < p {
				in++
			}
		}
		frac := float64(in) / n
		q := p / 100
		sigma := math.Sqrt(q * (1 - q) / n)
		if d := math.Abs(frac - q); d > 4*sigma {
			t.Errorf("p=%v%%: fraction %v, off by %.2f sigma", p, frac, d/sigma)
		} else {
			t.Logf("p=%v%%: fraction %.5f (%.2f sigma)", p, frac, d/sigma)
		}
	}
}

func TestSelectsMatchesShare(t *testing.T) {
	for _, share := range []float64{0, 1, 5, 37.5, 100} {
		c := New("m", []float64{share}, Guard{}, 0, t0)
		if c.Share() != share {
			t.Fatalf("Share() = %v, want %v", c.Share(), share)
		}
		sel := 0
		const n = 20_000
		for i := range n {
			k := fmt.Sprintf("u%d", i)
			got := c.Selects(k)
			if want := Bucket(k) < share; got != want {
				t.Fatalf("share %v: Selects(%q) = %v, Bucket %v", share, k, got, Bucket(k))
			}
			if got {
				sel++
			}
		}
		frac := float64(sel) / n * 100
		if math.Abs(frac-share) > 1 {
			t.Errorf("share %v: selected %.2f%%", share, frac)
		}
	}
	if s := New("m", []float64{100}, Guard{}, 0, t0).State(); s != StatePromoted {
		t.Errorf("starting at 100%%: state %q, want promoted", s)
	}
}

// noneSelected checks Selects is false for a large set of keys.
func noneSelected(t *testing.T, c *Canary) {
	t.Helper()
	for i := range 10_000 {
		if k := fmt.Sprintf("k%d", i); c.Selects(k) {
			t.Fatalf("Selects(%q) true after rollback", k)
		}
	}
}

func at(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }

func TestRollbackRespectsMinSamples(t *testing.T) {
	c := New("m", []float64{50}, Guard{ErrorRate: 0.1, MinSamples: 20}, 0, t0)
	for i := range 19 {
		if ev := c.Record(Sample{At: at(i), OK: false}); ev != nil {
			t.Fatalf("sample %d: early event %+v", i, ev)
		}
		if c.Share() != 50 {
			t.Fatalf("sample %d: share %v", i, c.Share())
		}
	}
	ev := c.Record(Sample{At: at(19), OK: false})
	if ev == nil || ev.Kind != EventRollback || ev.From != 50 || ev.To != 0 || !ev.At.Equal(at(19)) {
		t.Fatalf("20th failure: event %+v, want rollback 50 -> 0 at %v", ev, at(19))
	}
	for _, want := range []string{"error rate 100% > 10%", "+90 points", "20 of 20 attempts failed", "first failure in window at 2026-01-02T15:04:05.000Z", "share was 50%"} {
		if !strings.Contains(ev.Reason, want) {
			t.Errorf("reason %q lacks %q", ev.Reason, want)
		}
	}
	if c.Share() != 0 || c.State() != StateRolledBack {
		t.Fatalf("after rollback: share %v state %q", c.Share(), c.State())
	}
	noneSelected(t, c)
	// Late samples and checks change nothing.
	for i := range 200 {
		if ev := c.Record(Sample{At: at(100 + i), OK: true, TTFT: time.Millisecond}); ev != nil {
			t.Fatalf("late sample: event %+v", ev)
		}
	}
	if ev := c.Check(t0.Add(24 * time.Hour)); ev != nil {
		t.Fatalf("Check after rollback: %+v", ev)
	}
	s := c.Snapshot(at(30))
	if s.State != StateRolledBack || s.Share != 0 || s.RollbackReason != ev.Reason || s.LateSamples != 200 || !s.Since.Equal(at(19)) || s.AgeMs != 11000 {
		t.Errorf("snapshot %+v", s)
	}
	noneSelected(t, c)
}

func TestRollbackExactlyWhenWindowBreaks(t *testing.T) {
	c := New("m", []float64{5}, Guard{ErrorRate: 0.1, MinSamples: 20}, 0, t0)
	for i := range 30 {
		if ev := c.Record(Sample{At: at(i), OK: true, TTFT: 100 * time.Millisecond}); ev != nil {
			t.Fatalf("healthy sample %d: %+v", i, ev)
		}
	}
	// 3/33 = 9.1% holds; 4/34 = 11.8% breaks.
	for i := range 3 {
		if ev := c.Record(Sample{At: at(30 + i)}); ev != nil {
			t.Fatalf("failure %d: early event %+v", i+1, ev)
		}
	}
	ev := c.Record(Sample{At: at(33)})
	if ev == nil || ev.Kind != EventRollback {
		t.Fatalf("4th failure: event %+v, want rollback", ev)
	}
	if !strings.Contains(ev.Reason, "4 of 34 attempts failed") || !strings.Contains(ev.Reason, "first failure in window at 2026-01-02T15:04:35.000Z") {
		t.Errorf("reason %q", ev.Reason)
	}
	noneSelected(t, c)
}

func TestWindowSlides(t *testing.T) {
	c := New("m", []float64{5}, Guard{ErrorRate: 0.2, MinSamples: 20, Window: 20}, 0, t0)
	i := 0
	rec := func(ok bool) *Event {
		i++
		return c.Record(Sample{At: at(i), OK: ok, TTFT: time.Millisecond})
	}
	for range 4 {
		rec(false)
	}
	for range 36 { // 4/20 = 20% is not > 20%; then the failures age out
		if ev := rec(true); ev != nil {
			t.Fatalf("sample %d: %+v", i, ev)
		}
	}
	if s := c.Snapshot(at(i)); s.ErrorRate != 0 || s.Samples != 20 || s.TotalSamples != 40 || s.TotalFailed != 4 {
		t.Fatalf("snapshot %+v", s)
	}
	for range 4 {
		if ev := rec(false); ev != nil {
			t.Fatalf("sample %d: %+v", i, ev)
		}
	}
	if ev := rec(false); ev == nil || !strings.Contains(ev.Reason, "error rate 25% > 20%") {
		t.Fatalf("5th failure in window: %+v", ev)
	}
}

func TestRollbackTTFT(t *testing.T) {
	g := Guard{TTFTP99: time.Second, MinSamples: 20} // window 100
	t.Run("min samples", func(t *testing.T) {
		c := New("m", []float64{10}, g, 0, t0)
		for i := range 19 {
			if ev := c.Record(Sample{At: at(i), OK: true, TTFT: 2 * time.Second}); ev != nil {
				t.Fatalf("sample %d: %+v", i, ev)
			}
		}
		// Failures do not count towards the TTFT figure (nor, with
		// ErrorRate 0, towards anything).
		for i := range 50 {
			if ev := c.Record(Sample{At: at(100 + i)}); ev != nil {
				t.Fatalf("failure %d: %+v", i, ev)
			}
		}
		ev := c.Record(Sample{At: at(200), OK: true, TTFT: 2 * time.Second})
		if ev == nil || ev.Kind != EventRollback || !strings.Contains(ev.Reason, "ttft p99 2s > 1s (+1s; 20 of 20 successful attempts over the limit; first at 2026-01-02T15:04:05.000Z)") {
			t.Fatalf("20th slow sample: %+v", ev)
		}
		noneSelected(t, c)
	})
	t.Run("p99 of full window", func(t *testing.T) {
		c := New("m", []float64{10}, g, 0, t0)
		for i := range 150 {
			if ev := c.Record(Sample{At: at(i), OK: true, TTFT: 300 * time.Millisecond}); ev != nil {
				t.Fatalf("sample %d: %+v", i, ev)
			}
		}
		// Window of 100: p99 is the 99th smallest, so one slow sample holds
		// and the second breaks.
		if ev := c.Record(Sample{At: at(150), OK: true, TTFT: 1500 * time.Millisecond}); ev != nil {
			t.Fatalf("1st slow: %+v", ev)
		}
		if s := c.Snapshot(at(150)); s.TTFTP99Ms != 300 {
			t.Fatalf("p99 after one slow sample: %v ms", s.TTFTP99Ms)
		}
		ev := c.Record(Sample{At: at(151), OK: true, TTFT: 1200 * time.Millisecond})
		if ev == nil || !strings.Contains(ev.Reason, "ttft p99 1.2s > 1s (+200ms; 2 of 100") {
			t.Fatalf("2nd slow: %+v", ev)
		}
	})
	t.Run("both", func(t *testing.T) {
		c := New("m", []float64{10}, Guard{TTFTP99: time.Second, ErrorRate: 0.5, MinSamples: 4}, 0, t0)
		c.Record(Sample{At: at(0), OK: true, TTFT: 3 * time.Second})
		c.Record(Sample{At: at(1), OK: true, TTFT: 3 * time.Second})
		c.Record(Sample{At: at(2)})
		c.Record(Sample{At: at(3), OK: true, TTFT: 3 * time.Second})
		c.Record(Sample{At: at(4)})
		c.Record(Sample{At: at(5)})
		ev := c.Record(Sample{At: at(6)}) // 4 of 7 failed, 3 ok: p99 not judged (< 4 ok)
		if ev == nil || !strings.Contains(ev.Reason, "error rate 57.14% > 50%") || strings.Contains(ev.Reason, "ttft") {
			t.Fatalf("event %+v", ev)
		}
	})
}

func TestNoGuardNeverRollsBack(t *testing.T) {
	c := New("m", []float64{5}, Guard{}, 0, t0)
	for i := range 1000 {
		if ev := c.Record(Sample{At: at(i)}); ev != nil {
			t.Fatalf("event %+v", ev)
		}
	}
	if c.Share() != 5 {
		t.Fatal(c.Share())
	}
}

func TestPromotion(t *testing.T) {
	every := 10 * time.Minute
	c := New("m", []float64{5, 50, 100}, Guard{ErrorRate: 0.5, MinSamples: 20}, every, t0)
	if s := c.Snapshot(t0); !s.NextStepAt.Equal(t0.Add(every)) {
		t.Fatalf("next step at %v", s.NextStepAt)
	}
	for i := range 20 {
		if ev := c.Record(Sample{At: t0.Add(time.Minute), OK: i%3 != 0, TTFT: time.Millisecond}); ev != nil {
			t.Fatalf("early event %+v", ev)
		}
	}
	if ev := c.Check(t0.Add(every - 1)); ev != nil {
		t.Fatalf("promoted before the interval: %+v", ev)
	}
	ev := c.Check(t0.Add(every))
	if ev == nil || ev.Kind != EventPromote || ev.From != 5 || ev.To != 50 || !ev.At.Equal(t0.Add(every)) {
		t.Fatalf("event %+v, want promote 5 -> 50", ev)
	}
	if !strings.Contains(ev.Reason, "guard held for 10m0s over 20 samples at 5%") {
		t.Errorf("reason %q", ev.Reason)
	}
	if c.Share() != 50 || c.State() != StateActive {
		t.Fatalf("share %v state %q", c.Share(), c.State())
	}
	// The next step needs the interval again and MinSamples new samples.
	if ev := c.Check(t0.Add(3 * every)); ev != nil {
		t.Fatalf("promoted without new samples: %+v", ev)
	}
	t1 := t0.Add(3 * every)
	for i := range 19 {
		if ev := c.Record(Sample{At: t1, OK: true, TTFT: time.Millisecond}); ev != nil {
			t.Fatalf("sample %d: promoted with too few samples: %+v", i, ev)
		}
	}
	ev = c.Record(Sample{At: t1, OK: true, TTFT: time.Millisecond})
	if ev == nil || ev.Kind != EventPromote || ev.From != 50 || ev.To != 100 {
		t.Fatalf("20th sample: event %+v, want promote 50 -> 100", ev)
	}
	if c.Share() != 100 || c.State() != StatePromoted {
		t.Fatalf("share %v state %q", c.Share(), c.State())
	}
	// Stops at the last step.
	for i := range 100 {
		if ev := c.Record(Sample{At: t1.Add(time.Duration(i) * every), OK: true}); ev != nil {
			t.Fatalf("after the last step: %+v", ev)
		}
	}
	if ev := c.Check(t1.Add(1000 * every)); ev != nil {
		t.Fatalf("after the last step: %+v", ev)
	}
	s := c.Snapshot(t1)
	if s.Step != 2 || !s.NextStepAt.IsZero() || s.State != StatePromoted {
		t.Errorf("snapshot %+v", s)
	}
	// The guard still runs at 100%.
	var rb *Event
	for i := 0; rb == nil && i < 200; i++ {
		rb = c.Record(Sample{At: t1.Add(time.Hour)})
	}
	if rb == nil || rb.From != 100 || c.Share() != 0 || c.State() != StateRolledBack {
		t.Fatalf("promoted canary not rolled back: %+v", rb)
	}
	noneSelected(t, c)
}

func TestPromotionNeedsHealthyWindow(t *testing.T) {
	every := time.Minute
	t.Run("too few samples", func(t *testing.T) {
		c := New("m", []float64{5, 50}, Guard{MinSamples: 20}, every, t0)
		for range 19 {
			c.Record(Sample{At: t0, OK: true})
		}
		if ev := c.Check(t0.Add(100 * every)); ev != nil {
			t.Fatalf("promoted on 19 samples: %+v", ev)
		}
	})
	t.Run("broken window rolls back, never promotes", func(t *testing.T) {
		c := New("m", []float64{5, 50}, Guard{ErrorRate: 0.2, MinSamples: 20}, every, t0)
		for i := range 20 {
			ev := c.Record(Sample{At: t0.Add(2 * every), OK: i%2 == 0})
			if ev != nil && ev.Kind == EventPromote {
				t.Fatalf("promoted a failing canary: %+v", ev)
			}
		}
		if c.State() != StateRolledBack {
			t.Fatalf("state %q", c.State())
		}
		if ev := c.Check(t0.Add(100 * every)); ev != nil {
			t.Fatalf("%+v", ev)
		}
	})
	t.Run("no schedule", func(t *testing.T) {
		c := New("m", []float64{5, 50}, Guard{}, 0, t0)
		for range 100 {
			c.Record(Sample{At: t0.Add(time.Hour), OK: true})
		}
		if ev := c.Check(t0.Add(1000 * time.Hour)); ev != nil || c.Share() != 5 {
			t.Fatalf("promoted without a schedule: %+v", ev)
		}
	})
}

func TestSnapshotJSON(t *testing.T) {
	c := New("gpt-4o/canary", []float64{5, 50}, Guard{TTFTP99: 800 * time.Millisecond, ErrorRate: 0.05}, time.Hour, t0)
	for i := range 10 {
		c.Record(Sample{At: at(i), OK: i != 3, TTFT: time.Duration(100+i) * time.Millisecond})
	}
	b, err := json.Marshal(c.Snapshot(at(60)))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"name": "gpt-4o/canary", "state": "active", "share": 5.0, "step": 0.0,
		"samples": 10.0, "error_rate": 0.1, "ttft_p99_ms": 109.0, "age_ms": 60000.0,
		"guard_error_rate": 0.05, "guard_ttft_p99_ms": 800.0, "min_samples": 20.0, "window": 100.0,
		"next_step_at": "2026-01-02T16:04:05Z",
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v (%s)", k, m[k], v, b)
		}
	}
	if _, ok := m["rollback_reason"]; ok {
		t.Errorf("rollback_reason present: %s", b)
	}
}

func TestValidate(t *testing.T) {
	ok := []struct {
		steps []float64
		g     Guard
		every time.Duration
	}{
		{[]float64{5}, Guard{}, 0},
		{[]float64{5, 50, 100}, Guard{TTFTP99: time.Second, ErrorRate: 0.1, MinSamples: 20, Window: 100}, time.Hour},
		{[]float64{0.5}, Guard{MinSamples: 100}, 0},
	}
	for _, c := range ok {
		if err := Validate(c.steps, c.g, c.every); err != nil {
			t.Errorf("Validate(%v, %+v, %v): %v", c.steps, c.g, c.every, err)
		}
	}
	bad := []struct {
		steps []float64
		g     Guard
		every time.Duration
		want  string
	}{
		{nil, Guard{}, 0, "no share"},
		{[]float64{0}, Guard{}, 0, "(0, 100]"},
		{[]float64{101}, Guard{}, 0, "(0, 100]"},
		{[]float64{math.NaN()}, Guard{}, 0, "(0, 100]"},
		{[]float64{50, 50}, Guard{}, 0, "must increase"},
		{[]float64{50, 10}, Guard{}, 0, "must increase"},
		{[]float64{5}, Guard{ErrorRate: 1.5}, 0, "error_rate"},
		{[]float64{5}, Guard{TTFTP99: -1}, 0, "ttft_p99"},
		{[]float64{5}, Guard{MinSamples: 30, Window: 20}, 0, "larger than window"},
		{[]float64{5}, Guard{MinSamples: 200}, 0, "larger than window"},
		{[]float64{5}, Guard{}, -time.Second, "promote every"},
	}
	for _, c := range bad {
		err := Validate(c.steps, c.g, c.every)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%v, %+v, %v) = %v, want %q", c.steps, c.g, c.every, err, c.want)
		}
	}
}

func TestNewClamps(t *testing.T) {
	c := New("m", []float64{math.NaN(), -5, 150}, Guard{MinSamples: 500, Window: 10}, -time.Second, t0)
	s := c.Snapshot(t0)
	if s.Share != 0 || len(s.Steps) != 2 || s.Steps[1] != 100 || s.MinSamples != 10 || s.Window != 10 {
		t.Errorf("snapshot %+v", s)
	}
	if c := New("m", nil, Guard{}, 0, t0); c.Share() != 0 || c.Selects("x") {
		t.Errorf("no steps: share %v", c.Share())
	}
}

func TestConcurrent(t *testing.T) {
	c := New("m", []float64{5, 20, 50}, Guard{ErrorRate: 0.3, TTFTP99: time.Second, MinSamples: 20, Window: 50}, time.Second, t0)
	var rollbacks, promotes atomic.Int64
	var wg sync.WaitGroup
	var clock atomic.Int64 // shared made-up clock, in ms since t0
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				now := t0.Add(time.Duration(clock.Add(10)) * time.Millisecond)
				// Healthy for a while, then failing.
				ok := clock.Load() < 100_000 || i%2 == 0
				if ev := c.Record(Sample{At: now, OK: ok, TTFT: 50 * time.Millisecond}); ev != nil {
					switch ev.Kind {
					case EventRollback:
						rollbacks.Add(1)
					case EventPromote:
						promotes.Add(1)
					}
				}
				c.Selects(fmt.Sprintf("g%d-%d", g, i))
				if i%50 == 0 {
					if ev := c.Check(now); ev != nil && ev.Kind == EventPromote {
						promotes.Add(1)
					}
					_ = c.Snapshot(now)
				}
			}
		})
	}
	wg.Wait()
	if rollbacks.Load() != 1 {
		t.Errorf("%d rollback events, want 1", rollbacks.Load())
	}
	if p := promotes.Load(); p != 2 {
		t.Errorf("%d promote events, want 2", p)
	}
	if c.Share() != 0 || c.State() != StateRolledBack {
		t.Errorf("share %v state %q", c.Share(), c.State())
	}
	noneSelected(t, c)
}

func BenchmarkSelects(b *testing.B) {
	c := New("m", []float64{5}, Guard{}, 0, t0)
	b.ReportAllocs()
	for b.Loop() {
		c.Selects("user-1234567")
	}
}

func BenchmarkRecord(b *testing.B) {
	c := New("m", []float64{5}, Guard{ErrorRate: 0.5, TTFTP99: time.Hour}, 0, t0)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		c.Record(Sample{At: t0, OK: i%10 != 0, TTFT: time.Duration(i%997) * time.Millisecond})
	}
}
