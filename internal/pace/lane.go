package pace

import (
	"math"
	"time"
)

const (
	// gapTau is how fast the remembered largest gap fades.
	gapTau = time.Second
	// overlap stretches a burst's drain a little past the expected next
	// burst, so the output does not fall silent just before it arrives.
	overlap = 1.15
)

// lane is the rate control for one kind of text (answer or reasoning).
//
// The idea: a stream that arrives in bursts separated by gaps of about G
// looks smooth if every burst is spread over about G. So the lane keeps a
// fading maximum of recent inter-arrival gaps (gaps longer than the max
// delay cannot be bridged and are ignored), and at each arrival sets the
// drain rate so the backlog lasts that long, capped at 80 % of the max
// delay. The rate then stays constant until the next arrival: a linear
// drain, which is what looks steady.
//
// Pieces end at word boundaries, so they overshoot the runes the rate
// allows; credit carries the difference over to the next ticks, so the
// average rate is right however the text is cut.
type lane struct {
	maxDelay time.Duration
	interval time.Duration
	patient  bool // always use the longest lag (reasoning in split mode)
	fresh    bool // the backlog started from idle and nothing was sent yet

	gap     float64   // seconds, fading max of bridgeable gaps
	last    time.Time // last arrival
	backlog int       // runes queued in this lane
	rate    float64   // current drain rate, runes per second

	credit  float64   // runes the lane may still send; < 0: ahead of its rate
	accrued time.Time // when credit was last brought up to date
}

func newLane(maxDelay, interval time.Duration) lane {
	// Until the cadence is known, assume the longest lag: the first
	// burst is spread as far as the bound allows instead of draining
	// early and leaving a hole before the second.
	return lane{maxDelay: maxDelay, interval: interval, gap: 0.6 * maxDelay.Seconds() / overlap}
}

// arrive records runes arriving at now and sets the drain rate.
func (l *lane) arrive(now time.Time, runes int) {
	if !l.last.IsZero() {
		// A gap longer than the max delay cannot be bridged and says
		// nothing about the cadence: it neither sets nor fades the
		// estimate, so the burst after a long silence is paced like the
		// ones before it.
		if dt := now.Sub(l.last).Seconds(); dt <= l.maxDelay.Seconds() {
			l.gap = max(dt, l.gap*math.Exp(-dt/gapTau.Seconds()))
		}
	}
	l.last = now
	if l.backlog == 0 {
		// Starting from idle: no credit saved up, none owed.
		l.credit, l.accrued, l.fresh = 0, now, true
	}
	l.backlog += runes
	l.setRate(l.targetLag())
}

// accrue adds the credit earned since the last call, capped at two
// intervals' worth so an idle spell does not turn into a burst.
func (l *lane) accrue(now time.Time) {
	if l.backlog == 0 {
		l.credit, l.accrued = 0, now
		return
	}
	l.credit += l.rate * now.Sub(l.accrued).Seconds()
	l.credit = min(l.credit, max(1, 2*l.rate*l.interval.Seconds()))
	l.accrued = now
}

// spend records runes sent.
func (l *lane) spend(runes int) {
	l.fresh = false
	l.backlog -= runes
	l.credit -= float64(runes)
}

// targetLag is how long the current backlog should take to drain. A
// patient lane (reasoning, in split-reasoning mode) always takes 80 % of
// its max delay: reasoning is not latency-sensitive, and the long lag
// bridges the silence models often leave before the answer.
func (l *lane) targetLag() float64 {
	if l.patient {
		return 0.8 * l.maxDelay.Seconds()
	}
	return min(max(overlap*l.gap, l.interval.Seconds()), 0.8*l.maxDelay.Seconds())
}

// setRate sets the drain rate so the backlog lasts lag seconds.
func (l *lane) setRate(lag float64) {
	l.rate = float64(l.backlog) / lag
}

// hurry raises the drain rate so the backlog is gone within lag seconds
// (at a barrier or the stream's end).
func (l *lane) hurry(lag float64) {
	l.rate = max(l.rate, float64(l.backlog)/lag)
}
