package smoothness

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unsafe"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func ms(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }
func at(x float64) time.Time     { return t0.Add(ms(x)) }

// within reports whether got is within rel of want (relative error).
func within(got, want time.Duration, rel float64) bool {
	return math.Abs(float64(got-want)) <= rel*float64(want)+float64(time.Microsecond)
}

func TestSteadyCVZero(t *testing.T) {
	r := New()
	// 10 runes every 10 ms for 1 s, in and out 2 ms later.
	for i := range 100 {
		r.Input(at(float64(i*10)), 10)
		r.Output(at(float64(i*10)+2), 10)
		r.Lag(ms(2), 10)
	}
	rep := r.Report()
	if rep.InRateCV > 1e-9 || rep.OutRateCV > 1e-9 {
		t.Fatalf("steady CV = %v / %v, want 0", rep.InRateCV, rep.OutRateCV)
	}
	if rep.EventsIn != 100 || rep.EventsOut != 100 || rep.RunesIn != 1000 || rep.RunesOut != 1000 {
		t.Fatalf("counts: %+v", rep)
	}
	for _, d := range []Dist{rep.InGap, rep.OutGap} {
		if !within(d.P50, ms(10), 0.035) || !within(d.P99, ms(10), 0.035) || d.Max != ms(10) {
			t.Fatalf("gap dist %+v, want ~10ms", d)
		}
	}
	if rep.Stalls != 0 || rep.BridgeableStalls != 0 {
		t.Fatalf("stalls: %+v", rep)
	}
	if rep.TailFlush != ms(2) {
		t.Fatalf("tail = %v, want 2ms", rep.TailFlush)
	}
	if rep.Lag.Max != ms(2) || !within(rep.Lag.P50, ms(2), 0.035) {
		t.Fatalf("lag %+v", rep.Lag)
	}
}

func TestPeriodicBurstsCV(t *testing.T) {
	r := New()
	// 20 runes within 5 ms every 300 ms, 10 bursts, in 10 ms bins 0,
	// 30, … 270. Windows start at bins 0 … 261 (262 windows, each ten
	// bins up to the last event's). Bursts 1 to 8 lie in 10 windows each,
	// the first and the last in one: 82 windows of 20 runes, 180 empty.
	// CV = sqrt(p(1-p))/p with p = 82/262, sqrt(180/82).
	for b := range 10 {
		for k := range 5 {
			r.Input(at(float64(b*300+k)), 4)
		}
	}
	rep := r.Report()
	if want := math.Sqrt(180.0 / 82); math.Abs(rep.InRateCV-want) > 1e-9 {
		t.Fatalf("bursty CV = %v, want %v", rep.InRateCV, want)
	}
	if rep.OutRateCV != 0 || rep.EventsOut != 0 {
		t.Fatalf("no output expected: %+v", rep)
	}
	if rep.TailFlush != 0 {
		t.Fatalf("tail without output = %v", rep.TailFlush)
	}
}

// The sliding windows against a brute-force count: every window of
// slideSteps bins from the first event's bin to the last event's, its
// value the runes of the events in it.
func TestSlidingWindowsMatchBruteForce(t *testing.T) {
	testSlidingWindows(t, time.Hour) // no silence left out
}

// With silences: the windows that start after the text before a silence,
// at most half a window before its unfillable part and before its end,
// are left out.
func TestSlidingWindowsWithSilencesMatchBruteForce(t *testing.T) {
	testSlidingWindows(t, 150*time.Millisecond)
}

func testSlidingWindows(t *testing.T, maxDelay time.Duration) {
	rng := rand.New(rand.NewPCG(1, 2))
	d := float64(maxDelay) / float64(time.Millisecond)
	for trial := range 300 {
		r := New()
		r.SetMaxDelay(maxDelay)
		type ev struct {
			at    float64
			runes int
		}
		var evs []ev
		x := 0.0
		for range 1 + rng.IntN(60) {
			x += float64(rng.IntN(400)) // gaps up to 400 ms, some 0
			evs = append(evs, ev{x, 1 + rng.IntN(30)})
		}
		for _, e := range evs {
			r.Input(at(e.at), e.runes)
		}
		binOf := func(ms float64) int { return int(ms / 10) }
		lastBin := binOf(evs[len(evs)-1].at - evs[0].at)
		type rng2 struct{ lo, hi int }
		var skips []rng2
		for i := 1; i < len(evs); i++ {
			s, e := evs[i-1].at-evs[0].at, evs[i].at-evs[0].at
			if e-s > d {
				lo := max(int(math.Ceil((s+d-50)/10)), binOf(s)+1, 0)
				skips = append(skips, rng2{lo, int(math.Ceil(e/10)) - 1})
			}
		}
		var xs []float64
	windows:
		for j := 0; j+slideSteps-1 <= lastBin; j++ {
			for _, sk := range skips {
				if j >= sk.lo && j <= sk.hi {
					continue windows
				}
			}
			n := 0
			for _, e := range evs {
				if b := binOf(e.at - evs[0].at); b >= j && b < j+slideSteps {
					n += e.runes
				}
			}
			xs = append(xs, float64(n))
		}
		want := 0.0
		if len(xs) >= 2 {
			want = cvOf(xs...)
		}
		if got := r.Report().InRateCV; math.Abs(got-want) > 1e-9*max(1, want) {
			t.Fatalf("trial %d: CV %v, brute force %v (%d windows, events %v)", trial, got, want, len(xs), evs)
		}
	}
}

func cvOf(xs ...float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	var v float64
	for _, x := range xs {
		v += (x - mean) * (x - mean)
	}
	return math.Sqrt(v/float64(len(xs))) / mean
}

func TestActiveIntervalIgnoresSilenceAndEmptyEvents(t *testing.T) {
	// Leading and trailing events without runes (role, finish, [DONE])
	// and the silence around them do not change the CV.
	r := New()
	r.Input(at(0), 0)
	for i := range 20 {
		r.Input(at(1000+float64(i*50)), 5)
	}
	r.Input(at(5000), 0)
	r.Input(at(9000), 0)
	rep := r.Report()
	if rep.InRateCV > 1e-9 {
		t.Fatalf("CV = %v, want 0", rep.InRateCV)
	}
	if rep.EventsIn != 23 || rep.RunesIn != 100 {
		t.Fatalf("counts %+v", rep)
	}
	if rep.InGap.Max != ms(4000) {
		t.Fatalf("gap max = %v, want 4s", rep.InGap.Max)
	}
}

func TestManyEmptyWindowsAtOnce(t *testing.T) {
	// Two events an hour apart: 36000 windows, closed in O(1). (A max
	// delay over an hour keeps the silence fillable, so no window is left
	// out.)
	r := New()
	r.SetMaxDelay(2 * time.Hour)
	r.Input(at(0), 7)
	r.Input(at(3600e3), 7)
	r.Input(at(3600e3+60), 0)
	// Windows start every 10 ms up to the one ending with the last
	// event's bin: the first and the last hold 7 runes, 359990 are empty.
	xs := make([]float64, 359992)
	xs[0], xs[len(xs)-1] = 7, 7
	want := cvOf(xs...)
	if got := r.Report().InRateCV; math.Abs(got-want) > 1e-6*want {
		t.Fatalf("CV = %v, want %v", got, want)
	}
}

func TestPercentilesWithinHistogramError(t *testing.T) {
	r := New()
	// Lags 1..1000 ms, one rune each, in a scrambled order.
	for i := range 1000 {
		v := (i*7919)%1000 + 1
		r.Lag(ms(float64(v)), 1)
	}
	rep := r.Report()
	if !within(rep.Lag.P50, ms(500), 0.035) || !within(rep.Lag.P99, ms(990), 0.035) {
		t.Fatalf("lag %+v, want p50 ~500ms p99 ~990ms", rep.Lag)
	}
	if rep.Lag.Max != ms(1000) {
		t.Fatalf("max = %v, want exactly 1s", rep.Lag.Max)
	}
	// Weighted: 99 runes at 10 ms, 1 rune at 5 s -> p99 10 ms, max 5 s.
	r = New()
	r.Lag(ms(10), 99)
	r.Lag(ms(5000), 1)
	r.Lag(ms(-3), 0) // ignored
	rep = r.Report()
	if !within(rep.Lag.P99, ms(10), 0.035) || rep.Lag.Max != ms(5000) {
		t.Fatalf("weighted lag %+v", rep.Lag)
	}
	// Negative lags count as 0.
	r = New()
	r.Lag(ms(-5), 3)
	if rep := r.Report(); rep.Lag != (Dist{}) {
		t.Fatalf("negative lag %+v", rep.Lag)
	}
}

func TestHistogramBuckets(t *testing.T) {
	// Every value from 0 to ~2 min lands in a bucket whose midpoint is
	// within 1/32 of it (exact below 32 µs), and buckets are monotone.
	prev := -1
	for us := uint64(0); us < 130e6; us = us*21/20 + 1 {
		i := bucketOf(us)
		if i < prev || i >= nBuckets {
			t.Fatalf("bucket(%d) = %d after %d", us, i, prev)
		}
		prev = i
		mid := bucketMid(i)
		if us < 2*subBuckets && mid != float64(us) {
			t.Fatalf("small value %d -> %v", us, mid)
		}
		if math.Abs(mid-float64(us)) > float64(us)/32+0.5 {
			t.Fatalf("value %d -> bucket %d mid %v", us, i, mid)
		}
	}
	if bucketOf(1<<40) != nBuckets-1 {
		t.Fatal("huge values must clamp to the last bucket")
	}
	var h hist
	h.add(time.Hour, 1)
	if d := h.dist(); d.P50 != time.Hour || d.Max != time.Hour {
		t.Fatalf("clamped %+v", d)
	}
}

func TestTailFlush(t *testing.T) {
	r := New()
	r.Input(at(0), 3)
	r.Output(at(1), 3)
	r.Input(at(100), 0) // [DONE] arrives
	r.Output(at(180), 0)
	if got := r.Report().TailFlush; got != ms(80) {
		t.Fatalf("tail = %v, want 80ms", got)
	}
	// An output stamped before the last input gives 0, not negative.
	r = New()
	r.Input(at(50), 1)
	r.Output(at(49), 1)
	if got := r.Report().TailFlush; got != 0 {
		t.Fatalf("tail = %v, want 0", got)
	}
}

func TestStalls(t *testing.T) {
	r := New()
	r.SetMaxDelay(ms(400))
	// Input steady every 100 ms from 0 to 2000: no silences.
	for i := 0; i <= 20; i++ {
		r.Input(at(float64(i*100)), 5)
	}
	// Output: 0, 100, then 400 (gap 300: stall), an empty event at 700
	// (does not end the stall), 1000 (gap 600: stall), 1200 (gap 200: no
	// stall), then exactly 250 ms later (not a stall: > threshold only).
	for _, x := range []float64{0, 100, 400} {
		r.Output(at(x), 5)
	}
	r.Output(at(700), 0)
	r.Output(at(1000), 5)
	r.Output(at(1200), 5)
	r.Output(at(1450), 5)
	rep := r.Report()
	if rep.Stalls != 2 || rep.BridgeableStalls != 2 {
		t.Fatalf("stalls %d bridgeable %d, want 2 and 2", rep.Stalls, rep.BridgeableStalls)
	}
}

func TestBridgeableVsNot(t *testing.T) {
	r := New()
	r.SetMaxDelay(ms(400))
	// Input: text at 0, a 1 s silence (unfillable 400..1000), text at
	// 1000, 1100, a 300 ms gap (< max delay: not a silence), 1400, 1500.
	for _, x := range []float64{0, 1000, 1100, 1400, 1500} {
		r.Input(at(x), 10)
	}
	// Pass-through output: the 1 s stall is the upstream's; the 300 ms
	// stall (1100..1400) could have been bridged.
	for _, x := range []float64{1, 1001, 1101, 1401, 1501} {
		r.Output(at(x), 10)
	}
	rep := r.Report()
	if rep.Stalls != 2 || rep.BridgeableStalls != 1 {
		t.Fatalf("stalls %d bridgeable %d, want 2 and 1", rep.Stalls, rep.BridgeableStalls)
	}

	// A stall entirely before the unfillable part of a silence (the
	// relay dumped its text early and then went quiet before the max
	// delay ran out) is bridgeable.
	r = New()
	r.SetMaxDelay(ms(400))
	r.Input(at(0), 10)
	r.Input(at(100), 10)
	r.Input(at(1000), 10)
	r.Output(at(0), 10)
	r.Output(at(410), 10) // stall (0, 410): silence (100, 1000) unfillable from 500
	r.Output(at(1000), 10)
	rep = r.Report()
	if rep.Stalls != 2 || rep.BridgeableStalls != 1 {
		t.Fatalf("stalls %d bridgeable %d, want 2 and 1", rep.Stalls, rep.BridgeableStalls)
	}
}

func TestMaxDelayPerChannel(t *testing.T) {
	// Reasoning text paced with 1.5 s, answer with 400 ms. A 1 s silence
	// after reasoning text is bridgeable; after answer text it is not.
	r := New()
	r.SetMaxDelay(ms(1500))
	r.Input(at(0), 10)
	r.Input(at(1000), 10) // silence judged with 1.5 s: none
	r.SetMaxDelay(ms(400))
	r.Input(at(1100), 10)
	r.Input(at(2100), 10) // the text at 1100 arrived under 400 ms: a silence
	for _, x := range []float64{0, 1000, 1100, 2100} {
		r.Output(at(x), 10)
	}
	rep := r.Report()
	if rep.Stalls != 2 || rep.BridgeableStalls != 1 {
		t.Fatalf("stalls %d bridgeable %d, want 2 and 1", rep.Stalls, rep.BridgeableStalls)
	}
}

func TestSilenceRingBounded(t *testing.T) {
	r := New()
	r.SetMaxDelay(0)
	// 200 silences; only the last 16 are kept.
	for i := range 200 {
		r.Input(at(float64(i*1000)), 1)
	}
	if r.nSil != 199 {
		t.Fatalf("silences = %d", r.nSil)
	}
	// A stall over the first silence (evicted) is bridgeable; one over
	// a recent silence is not.
	r.Output(at(0), 1)
	r.Output(at(900), 1)
	r.Output(at(190500), 1)
	rep := r.Report()
	if rep.Stalls != 2 || rep.BridgeableStalls != 1 {
		t.Fatalf("stalls %d bridgeable %d", rep.Stalls, rep.BridgeableStalls)
	}
}

func TestNoAllocations(t *testing.T) {
	r := New()
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		i++
		r.Input(at(float64(i*37)), i%7)
		r.Output(at(float64(i*37+5)), i%5)
		r.Lag(ms(float64(i%400)), i%3)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per call group, want 0", allocs)
	}
}

func TestSize(t *testing.T) {
	// Three histograms (gaps per side, lag) of 1.5 KiB; the text gaps'
	// two come only with TrackTextGaps.
	if n := unsafe.Sizeof(Recorder{}); n > 6<<10 {
		t.Fatalf("Recorder is %d bytes, want <= 6 KiB", n)
	} else {
		t.Logf("Recorder is %d bytes", n)
	}
}

func TestReportString(t *testing.T) {
	r := New()
	r.Input(at(0), 4)
	r.Output(at(3), 4)
	r.Lag(ms(3), 4)
	s := r.Report().String()
	for _, want := range []string{"events 1/1", "runes 4/4", "stalls 0", "lag 3ms/3ms/3ms", "tail 3ms"} {
		if !strings.Contains(s, want) {
			t.Fatalf("String() = %q, missing %q", s, want)
		}
	}
	if strings.Contains(s, "\n") {
		t.Fatalf("String() has a newline: %q", s)
	}
}

func BenchmarkRecord(b *testing.B) {
	r := New()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		t := at(float64(i))
		r.Input(t, 3)
		r.Output(t, 3)
		r.Lag(ms(float64(i%500)), 3)
	}
}

// Windows inside the unfillable part of an input silence are left out of
// both sides' CV: two identical on-periods 10 s apart have the CV of one.
func TestUnfillableSilenceLeftOutOfCV(t *testing.T) {
	r := New() // max delay 400 ms
	one := New()
	for _, base := range []float64{0, 10000} {
		for i := range 10 {
			r.Input(at(base+float64(i)*100), 10)
			r.Output(at(base+float64(i)*100+50), 10)
			if base == 0 {
				one.Input(at(float64(i)*100), 10)
				one.Output(at(float64(i)*100+50), 10)
			}
		}
	}
	got, base := r.Report(), one.Report()
	// The silence is 9.1 s; 0.4 s of it is fillable, and the grid may
	// leave up to two partial windows: a few zero windows stay in.
	if got.InRateCV > 0.6 || got.OutRateCV > 0.6 {
		t.Fatalf("CV in %.2f out %.2f: the silence was counted (one period alone: %.2f)", got.InRateCV, got.OutRateCV, base.InRateCV)
	}
	r2 := New()
	r2.SetMaxDelay(time.Minute) // the same silence is now fillable: it counts
	for _, base := range []float64{0, 10000} {
		for i := range 10 {
			r2.Input(at(base+float64(i)*100), 10)
		}
	}
	if cv := r2.Report().InRateCV; cv < 2 {
		t.Fatalf("CV %.2f: a fillable silence must count", cv)
	}
}

// The windows left out for a silence are those of each side's own grid
// in its unfillable part: none that the relay could have filled stays in
// as a zero, and none that holds text is dropped.
func TestSilenceExclusionOnOwnGrid(t *testing.T) {
	r := New()
	r.SetMaxDelay(50 * time.Millisecond)
	// Input: 10 runes every 100 ms from 0 to 900, a silence, and again
	// from 3000 to 3900; the output at the same times. The silence's
	// unfillable part (950, 3000) holds windows 10 to 29 of the grid,
	// which its length in windows less one (19) would not all leave out.
	for _, base := range []float64{0, 3000} {
		for i := range 10 {
			r.Input(at(base+float64(i)*100), 10)
			r.Output(at(base+float64(i)*100), 10)
		}
	}
	got := r.Report()
	// Every counted window holds 10 runes: CV 0, steady 1, on both sides.
	if got.InRateCV > 0.01 || got.OutRateCV > 0.01 {
		t.Fatalf("CV in %.3f out %.3f: an empty window of the silence was counted", got.InRateCV, got.OutRateCV)
	}
	if got.InSteady != 1 || got.OutSteady != 1 {
		t.Fatalf("steady in %.3f out %.3f, want 1", got.InSteady, got.OutSteady)
	}
	if got.InStalls != 1 || got.Stalls != 1 || got.BridgeableStalls != 0 {
		t.Fatalf("stalls in %d out %d (%d bridgeable), want 1, 1, 0", got.InStalls, got.Stalls, got.BridgeableStalls)
	}
}

// The steady share counts windows with text, and a fillable pause is a
// window without.
func TestSteadyShare(t *testing.T) {
	r := New()
	r.SetMaxDelay(time.Second)
	// Text in bins 0, 10, 30, 40 and 45: windows start at bins 0 to 36,
	// and those starting at 11 to 20 hold none (the fillable pause).
	for _, x := range []float64{0, 100, 300, 400, 450} {
		r.Input(at(x), 5)
	}
	if got, want := r.Report().InSteady, 27.0/37; math.Abs(got-want) > 1e-9 {
		t.Fatalf("steady %.3f, want %.3f (27 of 37 windows)", got, want)
	}
}

// Text gaps leave out what an unfillable silence explains, on both sides.
func TestTextGaps(t *testing.T) {
	r := New() // max delay 400 ms
	r.TrackTextGaps()
	for _, x := range []float64{0, 50, 100, 2000, 2050} {
		r.Input(at(x), 3)
		r.Output(at(x+10), 3)
	}
	got := r.Report()
	if !within(got.InTextGap.Max, ms(50), 0.04) || !within(got.OutTextGap.Max, ms(50), 0.04) {
		t.Fatalf("text gaps in %v out %v: the 1.9 s silence was counted", got.InTextGap, got.OutTextGap)
	}
	if got.InGap.Max < ms(1800) {
		t.Fatalf("all-event gaps %v must still hold the silence", got.InGap)
	}
}
