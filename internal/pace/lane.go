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
// The idea: a stream that arrives in bursts looks smooth if text leaves
// at the input's average rate, with just enough held back to last until
// the next burst. So the lane measures the input rate per cluster of
// arrivals (a moving average over about three clusters) and keeps a
// fading maximum of the gaps between them (gaps longer than the max
// delay cannot be bridged and are ignored). At each arrival it drains at
// the measured rate, slowed where the backlog would not last hold gaps
// (steadyRate); the Pacer raises the rate where deadlines need it and
// paces the first cluster, before anything is measured, on a falling
// rate (Pacer.stretchFirst). The rate then stays constant until the next
// arrival: a linear drain, which is what looks steady.
//
// Pieces end near the runes the rate allows, at word boundaries where
// they can; credit carries the difference over to the next ticks, so the
// average rate is right however the text is cut.
type lane struct {
	maxDelay time.Duration
	interval time.Duration
	hold     float64 // gaps the backlog must last after an arrival (see steadyRate)
	fresh    bool    // the backlog started from idle and nothing was sent yet

	gap     float64   // seconds, fading max of bridgeable gaps
	guessed bool      // gap is the initial guess, not yet measured
	last    time.Time // last arrival
	backlog int       // runes queued in this lane
	rate    float64   // current drain rate, runes per second

	credit  float64   // runes the lane may still send; < 0: ahead of its rate
	accrued time.Time // when credit was last brought up to date
	yielded int       // contested ticks given to the other lane since this one last won one (see share)

	// The input rate, measured per cluster: a cluster is a run of
	// arrivals less than one interval apart (one burst, read in a few
	// reads); when the next cluster starts, the runes of the last one
	// over the time between their starts is one sample of the rate.
	clusterAt    time.Time // when the current cluster started
	clusterRunes int       // runes in it so far
	inRate       float64   // runes per second, a moving average of the samples; 0: not known yet

	// inherited: the cadence and rate are another lane's (inherit),
	// and the lane is still in its first cluster. ownSample: the next
	// sample replaces inRate rather than being averaged in. heldUntil:
	// that first cluster sends nothing before this (Pacer.holdStart).
	inherited bool
	ownSample bool
	heldUntil time.Time
}

func newLane(maxDelay, interval time.Duration) lane {
	// Until the cadence is measured, guess one of about half the bound;
	// the first cluster's drain does not depend on it much (see
	// Pacer.stretchFirst), and steadyRate uses it only until then.
	return lane{maxDelay: maxDelay, interval: interval, hold: untilNext, gap: 0.65 * maxDelay.Seconds() / overlap, guessed: true}
}

// arrive records runes arriving at now and sets the drain rate.
func (l *lane) arrive(now time.Time, runes int) {
	if !l.last.IsZero() {
		// A gap longer than the max delay cannot be bridged and says
		// nothing about the cadence: it neither sets nor fades the
		// estimate, so the burst after a long silence is paced like the
		// ones before it.
		if dt := now.Sub(l.last).Seconds(); dt <= l.maxDelay.Seconds() && dt >= l.interval.Seconds() {
			if l.guessed {
				// The first measured gap replaces the guess outright:
				// a fading maximum would keep a guess that was too long
				// for a second or more.
				l.gap, l.guessed = dt, false
			} else {
				l.gap = max(dt, l.gap*math.Exp(-dt/gapTau.Seconds()))
			}
		}
	}
	l.measure(now, runes)
	l.last = now
	if l.backlog == 0 {
		// Starting from idle: no credit saved up, none owed.
		l.credit, l.accrued, l.fresh = 0, now, true
	}
	l.backlog += runes
	l.rate = l.steadyRate()
}

// catchUp lets the drain run a little faster than the input, so a
// backlog built while the rate was not yet known shrinks over time.
const catchUp = 1.05

// untilNext is how long, in gaps, the backlog must last after an
// arrival: a little past when the next cluster is due.
const untilNext = 1.05

// inherit starts a lane that has had no text yet with the cadence and
// rate another lane of the stream measured: the answer after reasoning
// comes from the same model at the same pace, and guessing it afresh
// would start the answer at twice its rate (see Pacer.stretchFirst) just
// as the reasoning drains.
//
// The inherited rate is a guess, as a lane's first gap is: the answer may
// come faster or slower than the reasoning did (reasoning bursts 300 ms
// apart, answer bursts 250 ms apart, say). And the lane's first cluster
// is where the other lane's text stopped, anywhere in a burst: it may be
// a sliver of one, and is no measure of the rate. So the first cluster
// gives no sample, and the sample of the second replaces the inherited
// rate outright (see measure); averaged in, the guess would hold the
// answer below its rate for a second, its backlog growing all along.
func (l *lane) inherit(from *lane) {
	if !l.last.IsZero() || from.guessed || from.inRate == 0 {
		return
	}
	l.gap, l.guessed, l.inRate = from.gap, false, from.inRate
	l.inherited = true
}

// rateWeight is the weight of a new sample in the moving average of the
// input rate: about the last three clusters count.
const rateWeight = 0.35

// measure updates the input rate with runes arriving at now.
func (l *lane) measure(now time.Time, runes int) {
	switch dt := now.Sub(l.clusterAt); {
	case l.clusterAt.IsZero() || dt > l.maxDelay:
		// The first cluster, or one after a silence no pacer can
		// bridge: the silence is not part of the rate.
		l.clusterAt, l.clusterRunes = now, 0
	case now.Sub(l.last) >= l.interval:
		sample := float64(l.clusterRunes) / dt.Seconds()
		switch {
		case l.inherited:
			// The first cluster after inheriting: no sample (see
			// inherit), and the next one replaces the guess.
			l.ownSample = true
		case l.inRate == 0 || l.ownSample:
			l.inRate, l.ownSample = sample, false
		default:
			l.inRate += rateWeight * (sample - l.inRate)
		}
		l.clusterAt, l.clusterRunes = now, 0
		l.inherited, l.heldUntil = false, time.Time{}
	case dt >= flowSpan*l.interval:
		// A flow: arrivals closer than an interval for longer than a
		// burst lasts. There is no gap to bridge; its rate is what it
		// has carried so far.
		l.inRate = float64(l.clusterRunes) / dt.Seconds()
		l.gap, l.guessed = l.interval.Seconds(), false
		l.inherited, l.ownSample, l.heldUntil = false, false, time.Time{}
	}
	l.clusterRunes += runes
}

// flowSpan is how many intervals a run of close arrivals lasts before it
// counts as a flow rather than a burst read in several pieces.
const flowSpan = 2

// steadyRate is the drain rate after an arrival. Once the input's rate is
// measured, it is that rate (a little more, to work off a backlog built
// while it was not known), but no faster than makes the backlog last
// until the next cluster is due: following each burst's own size instead
// makes the output as uneven as the bursts are, and running dry before
// the next one leaves a hole. Until then the backlog is spread over
// targetLag. The caller raises the result where
// the queued text's deadlines need more (see Pacer.meetDeadlines), and
// paces a lane's first cluster itself (Pacer.stretchFirst).
func (l *lane) steadyRate() float64 {
	if l.inRate > 0 {
		return min(float64(l.backlog)/(l.hold*l.gap), catchUp*l.inRate)
	}
	return float64(l.backlog) / l.targetLag()
}

// accrue adds the credit earned since the last call, capped at two
// intervals' worth so an idle spell does not turn into a burst, and one
// more for each tick the lane yielded to the other under a split ratio
// (a yielded tick is not idle: its piece goes out with the next one the
// lane wins).
func (l *lane) accrue(now time.Time) {
	if l.backlog == 0 {
		l.credit, l.accrued, l.yielded = 0, now, 0
		return
	}
	l.credit += l.rate * now.Sub(l.accrued).Seconds()
	l.credit = min(l.credit, max(1, float64(2+l.yielded)*l.rate*l.interval.Seconds()))
	l.accrued = now
}

// spend records runes sent.
func (l *lane) spend(runes int) {
	l.backlog -= runes
	if !l.fresh {
		l.credit -= float64(runes)
	}
	l.fresh = false
}

// targetLag is how long the current backlog should take to drain before
// the input's rate is known: about the gap between clusters, capped at
// 80 % of the max delay.
func (l *lane) targetLag() float64 {
	return min(max(overlap*l.gap, l.interval.Seconds()), 0.8*l.maxDelay.Seconds())
}

// hurry raises the drain rate so the backlog is gone within lag seconds
// (at a barrier or the stream's end).
func (l *lane) hurry(lag float64) {
	l.rate = max(l.rate, float64(l.backlog)/lag)
	l.heldUntil = time.Time{}
}
