// Package smoothness computes streaming-smoothness figures for one SSE
// stream passing through a relay: what arrived from the upstream (input),
// what was written to the client (output), and how long each character was
// held in between (lag).
//
// A [Recorder] is meant to live as long as its stream and to be kept for
// every open stream, so it has a fixed size (about 5.6 KiB, no per-event
// slices) and every recording call is O(1) and does not allocate.
// Percentiles come from log-linear histograms with a relative error of at
// most about 3 %; maxima are exact. A Recorder is not safe for concurrent
// use.
//
// # Definitions
//
// Times are what the caller passes; only differences matter. "Runes" are
// the visible characters an event carries (Unicode code points of its text
// fields); an event may carry none (role, finish, usage chunks, [DONE]).
//
//   - Gaps ([Report.InGap], [Report.OutGap]) are the times between
//     consecutive events of a side, whether or not they carry runes.
//     Events that arrive together give gaps of 0.
//   - The active interval of a side runs from its first to its last event
//     carrying runes; silence before and after it is ignored. Time is cut
//     into bins of 10 ms from the first such event, and a window is
//     [Window] (100 ms) of consecutive bins: one starts at every bin, from
//     the first event's up to the one whose window ends with the last
//     event's bin (sliding windows; see windows.go for why). A window's
//     value is the number of runes of the events that fell into it;
//     windows without events count as 0. The windowed-rate CV is the
//     population standard deviation of the window values divided by
//     their mean, 0 with fewer than 2 windows. Windows that lie wholly
//     inside the unfillable part of an input silence (below) are left
//     out, on both sides: no relay can put text there, so they measure
//     the upstream, not the relay's smoothness. So is a window more than
//     half inside it at its start that holds no text of its side.
//   - A stall is a gap longer than [StallThreshold] (250 ms) between two
//     consecutive output events that both carry runes (events without
//     runes in between do not end a stall).
//   - An input silence is a gap longer than the max delay between two
//     consecutive input events carrying runes. A pacer that holds text at
//     most the max delay cannot fill a silence (s, e) after s + max delay,
//     so (s + max delay, e) is unfillable. A stall (a, b) is unbridgeable
//     if it overlaps an unfillable interval of one of the last 16 input
//     silences, and bridgeable otherwise — a stall the relay could have
//     avoided. This is deliberately coarse: a stall that only partly
//     overlaps an unfillable interval counts as unbridgeable.
//   - The steady share of a side ([Report.InSteady], [Report.OutSteady])
//     is the share of its counted rate windows that hold at least one
//     event carrying runes: how much of the time a reader watching the
//     text saw it grow. [Report.InStalls] counts the input's gaps over
//     the stall threshold between events carrying runes, as Stalls does
//     for the output.
//   - Lag is reported by the caller per group of runes ([Recorder.Lag]);
//     its distribution is weighted by runes. Negative lags count as 0.
//   - The tail flush is the time from the last input event to the last
//     output event, at least 0.
package smoothness

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

const (
	// Window is the width of the rate windows.
	Window = 100 * time.Millisecond
	// StallThreshold is the output gap above which a gap is a stall.
	StallThreshold = 250 * time.Millisecond
	// DefaultMaxDelay is the max delay a new Recorder assumes, the
	// relay's default for answer text.
	DefaultMaxDelay = 400 * time.Millisecond

	silenceRing = 16 // input silences kept to judge stalls
)

// Dist summarises a distribution of durations.
type Dist struct{ P50, P99, Max time.Duration }

// Report holds the figures of one stream; see the package documentation
// for the definitions.
type Report struct {
	EventsIn, EventsOut int
	RunesIn, RunesOut   int
	// InGap and OutGap are the gaps between consecutive input (output)
	// events.
	InGap, OutGap Dist
	// InTextGap and OutTextGap (with TrackTextGaps; zero otherwise) are
	// the gaps between consecutive events carrying runes, less those an
	// unfillable silence explains: input
	// gaps longer than the max delay, output gaps overlapping the
	// unfillable part of one. They compare what a reader waits for
	// between pieces of text that a relay could have bridged.
	InTextGap, OutTextGap Dist
	// InRateCV and OutRateCV are the windowed delivery-rate CVs.
	InRateCV, OutRateCV float64
	// Stalls counts output gaps > StallThreshold between events carrying
	// runes; BridgeableStalls those of them that no unfillable input
	// silence explains. InStalls counts the same gaps in the input.
	Stalls, BridgeableStalls int
	InStalls                 int
	// InSteady and OutSteady are the share of the rate windows (those
	// the CV counts) that hold at least one event carrying runes: how
	// much of the time the reader's text grew.
	InSteady, OutSteady float64
	// Lag is the per-rune added lag.
	Lag Dist
	// TailFlush is the last output time minus the last input time, >= 0.
	TailFlush time.Duration
}

// span is an interval of Recorder time, in ns since the Recorder's base.
type span struct{ from, to int64 }

// side is the state of the input or the output.
type side struct {
	events, runes int
	seen          bool
	last          int64 // latest event
	seenRune      bool
	lastRune      int64 // latest event carrying runes
	gaps          hist
	textGaps      *hist // nil unless TrackTextGaps
	rate          rateWindows
}

// Recorder collects the figures of one stream. Create it with New.
type Recorder struct {
	based bool
	base  time.Time

	maxDelay     time.Duration // in force for input from now on
	lastRunDelay time.Duration // in force when the latest input text arrived

	in, out side
	lag     hist

	silences [silenceRing]span // unfillable parts of input silences
	nSil     int               // silences recorded in total

	stalls, bridgeable int
	inStalls           int
}

// New returns a Recorder with 100 ms rate windows, a 250 ms stall
// threshold and DefaultMaxDelay.
func New() *Recorder {
	r := recorders.Get().(*Recorder)
	*r = Recorder{maxDelay: DefaultMaxDelay, lastRunDelay: DefaultMaxDelay}
	return r
}

// Release hands r back for a later New to reuse: a Recorder is some 6 KB
// of histograms, made once per stream. r must not be used after.
func (r *Recorder) Release() { recorders.Put(r) }

var recorders = sync.Pool{New: func() any { return new(Recorder) }}

// SetMaxDelay sets the longest time the relay may hold text, which decides
// whether a stall is bridgeable. It applies to input text from the next
// Input on: an input silence is judged by the max delay in force when the
// text before it arrived, so a caller pacing channels with different max
// delays can set the delay of each input event's channel before reporting
// it. d < 0 counts as 0.
func (r *Recorder) SetMaxDelay(d time.Duration) {
	r.maxDelay = max(d, 0)
}

// at converts t to ns since the Recorder's base (the first time seen).
func (r *Recorder) at(t time.Time) int64 {
	if !r.based {
		r.based = true
		r.base = t
		return 0
	}
	return int64(t.Sub(r.base))
}

// Input records one upstream data event that arrived at t carrying runes
// visible characters (0 allowed).
func (r *Recorder) Input(t time.Time, runes int) {
	ns := r.at(t)
	runes = max(runes, 0)
	if runes > 0 && r.in.seenRune {
		s := r.in.lastRune
		gap := ns - s
		if gap > int64(StallThreshold) {
			r.inStalls++
		}
		if d := int64(r.lastRunDelay); gap <= d {
			r.in.addTextGap(gap)
		} else {
			// A silence: before this event's bin closes any window
			// of it, so that each side can leave its windows out.
			r.silences[r.nSil%silenceRing] = span{s + d, ns}
			r.nSil++
			r.in.rate.exclude(s+d, ns, s)
			r.out.rate.exclude(s+d, ns, r.out.rate.last)
		}
	}
	r.in.record(ns, runes)
	if runes == 0 {
		return
	}
	r.in.markRune(ns)
	r.lastRunDelay = r.maxDelay
}

// Output records one event written to the client at t carrying runes
// visible characters (0 allowed). Heartbeat comments are not events.
func (r *Recorder) Output(t time.Time, runes int) {
	ns := r.at(t)
	runes = max(runes, 0)
	r.out.record(ns, runes)
	if runes == 0 {
		return
	}
	if r.out.seenRune {
		a := r.out.lastRune
		if ns-a <= int64(StallThreshold) || !r.explained(a, ns) {
			r.out.addTextGap(ns - a)
		}
		if ns-a > int64(StallThreshold) {
			r.stalls++
			if !r.explained(a, ns) {
				r.bridgeable++
			}
		}
	}
	r.out.markRune(ns)
}

// explained reports whether the stall (a, b) overlaps an unfillable
// input silence.
func (r *Recorder) explained(a, b int64) bool {
	n := min(r.nSil, silenceRing)
	for i := range n {
		s := r.silences[i]
		if a < s.to && b > s.from {
			return true
		}
	}
	return false
}

// Lag records that runes characters left the relay d after they arrived.
func (r *Recorder) Lag(d time.Duration, runes int) {
	r.lag.add(d, runes)
}

// record counts an event at ns and its gap to the previous one.
func (s *side) record(ns int64, runes int) {
	if s.seen {
		s.gaps.add(time.Duration(ns-s.last), 1)
	}
	if !s.seen || ns > s.last {
		s.last = ns
	}
	s.seen = true
	s.events++
	s.runes += runes
	if runes > 0 {
		s.rate.add(ns, int64(runes))
	}
}

// TrackTextGaps makes the Recorder keep the text gap figures
// (Report.InTextGap, OutTextGap), which cost two more histograms (3 KiB):
// a tool comparing streams asks for them, and a relay keeping a Recorder
// for every open stream does not.
func (r *Recorder) TrackTextGaps() {
	r.in.textGaps, r.out.textGaps = new(hist), new(hist)
}

func (s *side) addTextGap(ns int64) {
	if s.textGaps != nil {
		s.textGaps.add(time.Duration(ns), 1)
	}
}

func (s *side) textGapDist() Dist {
	if s.textGaps == nil {
		return Dist{}
	}
	return s.textGaps.dist()
}

// markRune notes the latest event carrying runes.
func (s *side) markRune(ns int64) {
	if !s.seenRune || ns > s.lastRune {
		s.lastRune = ns
	}
	s.seenRune = true
}

// Report returns the figures so far. It does not change the Recorder.
func (r *Recorder) Report() Report {
	rep := Report{
		EventsIn:         r.in.events,
		EventsOut:        r.out.events,
		RunesIn:          r.in.runes,
		RunesOut:         r.out.runes,
		InGap:            r.in.gaps.dist(),
		OutGap:           r.out.gaps.dist(),
		InTextGap:        r.in.textGapDist(),
		OutTextGap:       r.out.textGapDist(),
		InRateCV:         r.in.rate.cv(),
		OutRateCV:        r.out.rate.cv(),
		Stalls:           r.stalls,
		InStalls:         r.inStalls,
		InSteady:         r.in.rate.steady(),
		OutSteady:        r.out.rate.steady(),
		BridgeableStalls: r.bridgeable,
		Lag:              r.lag.dist(),
	}
	if r.in.seen && r.out.seen {
		rep.TailFlush = time.Duration(max(r.out.last-r.in.last, 0))
	}
	return rep
}

// String returns the report as one compact line.
func (rep Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "events %d/%d runes %d/%d", rep.EventsIn, rep.EventsOut, rep.RunesIn, rep.RunesOut)
	fmt.Fprintf(&b, " cv %.2f/%.2f", rep.InRateCV, rep.OutRateCV)
	fmt.Fprintf(&b, " gap_in %s gap_out %s", rep.InGap, rep.OutGap)
	fmt.Fprintf(&b, " stalls %d (%d bridgeable, %d in)", rep.Stalls, rep.BridgeableStalls, rep.InStalls)
	fmt.Fprintf(&b, " steady %.2f/%.2f", rep.InSteady, rep.OutSteady)
	fmt.Fprintf(&b, " lag %s tail %s", rep.Lag, roundDur(rep.TailFlush))
	return b.String()
}

// String returns "p50/p99/max".
func (d Dist) String() string {
	return roundDur(d.P50).String() + "/" + roundDur(d.P99).String() + "/" + roundDur(d.Max).String()
}

// roundDur rounds for display: to 0.1 ms under 1 s, to 1 ms above.
func roundDur(d time.Duration) time.Duration {
	if d < time.Second && d > -time.Second {
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
