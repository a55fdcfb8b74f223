// Package canary implements a canary roll-out with automatic rollback.
//
// A [Canary] sends a share (in percent) of requests to a canary target
// first; the rest take the normal chain. Which requests is decided by
// [Bucket], a SHA-256 hash of a request key (a header, the body's "user", the
// client IP: chosen by the caller), so the same key always lands on the same
// side, across restarts and across instances.
//
// Every attempt sent to the canary is fed to [Canary.Record]. The last
// Guard.Window samples form the judged window; once it holds at least
// Guard.MinSamples samples, the guard is checked on every Record:
//
//   - error rate: failed samples / samples in the window > Guard.ErrorRate;
//   - TTFT: the p99 (nearest rank) of the TTFTs of the successful samples in
//     the window > Guard.TTFTP99, or their mean > Guard.TTFTMean (each
//     judged once at least MinSamples samples of the window succeeded);
//   - reasoning cluster rate: the mean of the last Guard.Window rates fed
//     to [Canary.RecordCluster] (one per canary stream with reasoning, as
//     received from the upstream) > Guard.ClusterRate, judged once at
//     least MinSamples of them arrived. Streams without reasoning say
//     nothing of it, so they are not in this window; a canary whose
//     model never reasons is never judged on it;
//   - reasoning floor: at any effort, the canary's mean reasoning tokens
//     per answer < Guard.ReasoningFloor × the stable targets' mean over
//     the same period, fed to [Canary.RecordReasoning] (reasoning.go).
//
// The Record that sees the guard break rolls the canary back: its share drops
// to 0 at once, so [Canary.Selects] is false for every key from then on. A
// rollback is final for the Canary value: there is no automatic re-enable and
// no Reset. The caller is expected to keep Canary values across config
// reloads keyed by the canary's configuration (upstream, model, steps, guard,
// promote schedule, key source): an unchanged config finds the rolled-back
// Canary again, and a changed one makes a fresh Canary, which is how an
// operator re-enables a canary after fixing it.
//
// Promotion: a roll-out is a list of [Phase]s (e.g. 5 % for 3 days, 50 %
// for 7 days, then 100 %); the single interval of [New] (every step lasts
// the same) is the special case [Every]. The share moves to the next phase
// once the current one has lasted its duration, at least MinSamples
// samples arrived since it began and the window holds the guard. A phase
// without a duration (the last one, always) is never left. It is checked
// on every Record (at the sample's time) and by [Canary.Check] (for
// periods without traffic). The guard keeps running at every step,
// including the last one: a promoted canary that starts failing is rolled
// back too.
//
// The package reads no clock: every time comes in as a parameter or in a
// [Sample]. All methods are safe for concurrent use; [Canary.Share] and
// [Canary.Selects] take no lock.
//
// The package has no Caddy imports.
package canary

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Bucket maps a key to [0, 100): the first 8 bytes of SHA-256(key) as a
// big-endian uint64, converted to float64, divided by 2^64, times 100 (the
// same figure as Python's int.from_bytes(sha256(key)[:8], "big") / 2**64 *
// 100). The 1-in-2^54 hashes that round up to 100 are mapped to the largest
// float64 below 100. It is stable across restarts, instances and
// architectures.
func Bucket(key string) float64 {
	sum := sha256.Sum256([]byte(key))
	u := binary.BigEndian.Uint64(sum[:8])
	b := float64(u) / (1 << 64) * 100
	if b >= 100 {
		b = math.Nextafter(100, 0)
	}
	return b
}

// Defaults for a zero Guard field.
const (
	DefaultMinSamples = 20
	DefaultWindow     = 100
)

// Guard is what the canary must hold to stay on and to be promoted.
type Guard struct {
	TTFTP99    time.Duration // 0 = not judged
	ErrorRate  float64       // 0 = not judged; a failed canary attempt is an error
	MinSamples int           // samples needed before judging; 0 = DefaultMinSamples
	Window     int           // last samples judged; 0 = DefaultWindow

	// TTFTMean is the most the mean TTFT of the window's successful
	// samples may be; 0 = not judged.
	TTFTMean time.Duration
	// ClusterRate is the most the mean reasoning cluster rate (0 to 1) of
	// the last Window streams with reasoning may be; 0 = not judged.
	ClusterRate float64
	// ReasoningFloor is the least share (0 to 1) of the stable targets'
	// mean reasoning tokens per answer, at the same effort over the same
	// period, that the canary's mean may be (see RecordReasoning); 0 =
	// not judged.
	ReasoningFloor float64
}

// withDefaults fills zero fields and keeps MinSamples <= Window.
func (g Guard) withDefaults() Guard {
	if g.MinSamples <= 0 {
		g.MinSamples = DefaultMinSamples
	}
	if g.Window <= 0 {
		g.Window = DefaultWindow
	}
	if g.MinSamples > g.Window {
		g.MinSamples = g.Window
	}
	if g.TTFTP99 < 0 {
		g.TTFTP99 = 0
	}
	if g.ErrorRate < 0 || math.IsNaN(g.ErrorRate) {
		g.ErrorRate = 0
	}
	if g.TTFTMean < 0 {
		g.TTFTMean = 0
	}
	if g.ClusterRate < 0 || math.IsNaN(g.ClusterRate) {
		g.ClusterRate = 0
	}
	if g.ReasoningFloor < 0 || math.IsNaN(g.ReasoningFloor) {
		g.ReasoningFloor = 0
	}
	return g
}

// Phase is one stage of a roll-out: a share of requests, held for a time
// before the next phase.
type Phase struct {
	Share float64       // percent, in (0, 100]
	For   time.Duration // how long the phase lasts at least; 0 = never left (the last phase)
}

// Every is the roll-out of steps that each last every (0: the first step
// is never left): what [New] takes.
func Every(steps []float64, every time.Duration) []Phase {
	ph := make([]Phase, len(steps))
	for i, s := range steps {
		ph[i] = Phase{Share: s}
		if i < len(steps)-1 {
			ph[i].For = every
		}
	}
	return ph
}

// Sample is one attempt sent to the canary target.
type Sample struct {
	At   time.Time     // when the attempt ended (or its TTFT was known)
	TTFT time.Duration // time to first token of a successful attempt
	OK   bool          // false: the attempt failed (counts as an error)
}

// State is the canary's life-cycle state.
type State string

const (
	StateActive     State = "active"      // taking its share, guard running
	StateRolledBack State = "rolled_back" // share 0 for good
	StatePromoted   State = "promoted"    // reached 100 %, guard still running
)

// Event kinds.
const (
	EventRollback = "rollback"
	EventPromote  = "promote"
)

// Event reports a change of share.
type Event struct {
	Kind   string    `json:"kind"` // EventRollback or EventPromote
	From   float64   `json:"from"` // share in percent before
	To     float64   `json:"to"`   // share in percent after
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Validate checks a canary configuration as New expects it: at least one
// step, every step in (0, 100], strictly increasing; guard figures not
// negative, ErrorRate at most 1, MinSamples not above Window (when both are
// set); promoteEvery not negative. New does not fail on a bad config (it
// clamps), so a config parser should call Validate.
func Validate(steps []float64, g Guard, promoteEvery time.Duration) error {
	errs := []error{validateSteps(steps), g.validate()}
	if promoteEvery < 0 {
		errs = append(errs, fmt.Errorf("promote every %s: must not be negative", promoteEvery))
	}
	return errors.Join(errs...)
}

// ValidatePhases checks a roll-out as NewPhases expects it: the shares as
// Validate's steps, no negative duration, none on the last phase (nothing
// follows it), and the guard as Validate does.
func ValidatePhases(phases []Phase, g Guard) error {
	steps := make([]float64, len(phases))
	for i, p := range phases {
		steps[i] = p.Share
	}
	errs := []error{validateSteps(steps), g.validate()}
	for i, p := range phases {
		switch {
		case p.For < 0:
			errs = append(errs, fmt.Errorf("phase %d (%v%%): duration %s must not be negative", i+1, p.Share, p.For))
		case p.For > 0 && i == len(phases)-1:
			errs = append(errs, fmt.Errorf("phase %d (%v%%) is the last, and has a duration: no phase follows it", i+1, p.Share))
		}
	}
	return errors.Join(errs...)
}

func validateSteps(steps []float64) error {
	var errs []error
	if len(steps) == 0 {
		errs = append(errs, errors.New("no share given"))
	}
	for i, s := range steps {
		switch {
		case math.IsNaN(s) || s <= 0 || s > 100:
			errs = append(errs, fmt.Errorf("share %v: must be in (0, 100]", s))
		case i > 0 && s <= steps[i-1]:
			errs = append(errs, fmt.Errorf("promote steps must increase: %v after %v", s, steps[i-1]))
		}
	}
	return errors.Join(errs...)
}

func (g Guard) validate() error {
	var errs []error
	if g.TTFTP99 < 0 {
		errs = append(errs, fmt.Errorf("ttft_p99 %s: must not be negative", g.TTFTP99))
	}
	if math.IsNaN(g.ErrorRate) || g.ErrorRate < 0 || g.ErrorRate > 1 {
		errs = append(errs, fmt.Errorf("error_rate %v: must be in [0, 1]", g.ErrorRate))
	}
	if g.MinSamples < 0 {
		errs = append(errs, fmt.Errorf("min_samples %d: must not be negative", g.MinSamples))
	}
	if g.Window < 0 {
		errs = append(errs, fmt.Errorf("window %d: must not be negative", g.Window))
	}
	if d := g.withDefaults(); g.MinSamples > 0 && g.MinSamples > d.Window {
		errs = append(errs, fmt.Errorf("min_samples %d is larger than window %d", g.MinSamples, d.Window))
	}
	if g.TTFTMean < 0 {
		errs = append(errs, fmt.Errorf("ttft_mean %s: must not be negative", g.TTFTMean))
	}
	if math.IsNaN(g.ClusterRate) || g.ClusterRate < 0 || g.ClusterRate > 1 {
		errs = append(errs, fmt.Errorf("cluster_rate %v: must be in [0, 1]", g.ClusterRate))
	}
	if math.IsNaN(g.ReasoningFloor) || g.ReasoningFloor < 0 || g.ReasoningFloor > 1 {
		errs = append(errs, fmt.Errorf("reasoning_floor %v: must be in [0, 1]", g.ReasoningFloor))
	}
	return errors.Join(errs...)
}

// Canary is one canary roll-out. Make it with New.
type Canary struct {
	name   string
	phases []Phase // at least one; shares clamped, the last without a duration
	guard  Guard   // with defaults

	share atomic.Uint64 // math.Float64bits of the current share

	mu          sync.Mutex
	state       State
	step        int       // index into steps
	since       time.Time // last change (creation, step, rollback)
	win         []Sample  // ring of the last guard.Window samples
	head        int       // next write position in win
	n           int       // samples in win
	sinceStep   int       // samples recorded since the current step began
	total       int64     // samples recorded while judged
	failedTotal int64
	late        int64 // samples received after the rollback (ignored)
	reason      string
	scratch     []time.Duration
	clusters    []float64                 // ring of the last guard.Window cluster rates
	cHead, cN   int                       // next write position in clusters, rates in it
	efforts     map[string]*effortWindows // reasoning per effort, canary and stable (reasoning.go)
}

// New makes a canary. steps are the shares in percent; the first is the
// starting share (e.g. [5] or [5, 50, 100]). promoteEvery is how long the
// guard must hold, with at least MinSamples samples since the last step,
// before the next step (0 = never promote). Out-of-range steps are clamped
// to [0, 100] (see Validate); no step at all means a share of 0.
func New(name string, steps []float64, guard Guard, promoteEvery time.Duration, now time.Time) *Canary {
	return NewPhases(name, Every(steps, promoteEvery), guard, now)
}

// NewPhases makes a canary that rolls out by phases: it starts at the
// first phase's share, at now. Out-of-range shares are clamped to [0, 100],
// negative durations to 0 and the last phase's duration is dropped (see
// ValidatePhases); no phase at all means a share of 0.
func NewPhases(name string, phases []Phase, guard Guard, now time.Time) *Canary {
	ph := make([]Phase, 0, len(phases))
	for _, p := range phases {
		if math.IsNaN(p.Share) {
			continue
		}
		ph = append(ph, Phase{Share: min(max(p.Share, 0), 100), For: max(p.For, 0)})
	}
	if len(ph) == 0 {
		ph = append(ph, Phase{})
	}
	ph[len(ph)-1].For = 0
	g := guard.withDefaults()
	c := &Canary{
		name:     name,
		phases:   ph,
		guard:    g,
		state:    StateActive,
		since:    now,
		win:      make([]Sample, g.Window),
		scratch:  make([]time.Duration, 0, g.Window),
		clusters: make([]float64, g.Window),
	}
	if ph[0].Share >= 100 {
		c.state = StatePromoted
	}
	c.setShare(ph[0].Share)
	return c
}

func (c *Canary) setShare(p float64) { c.share.Store(math.Float64bits(p)) }

// Name returns the name given to New.
func (c *Canary) Name() string { return c.name }

// Share returns the current share in percent: 0 after a rollback.
func (c *Canary) Share() float64 { return math.Float64frombits(c.share.Load()) }

// Selects reports whether the request with this key goes to the canary:
// Bucket(key) < Share(). It takes no lock and skips the hash at 0 and 100 %.
func (c *Canary) Selects(key string) bool {
	p := c.Share()
	if p <= 0 {
		return false
	}
	if p >= 100 {
		return true
	}
	return Bucket(key) < p
}

// State returns the current state.
func (c *Canary) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Record feeds one attempt sent to the canary. It returns an event when
// this sample rolls the canary back (the share is 0 when Record returns) or
// promotes it (checked at s.At); nil otherwise. Samples recorded after a
// rollback are counted as late and otherwise ignored.
func (c *Canary) Record(s Sample) *Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == StateRolledBack {
		c.late++
		return nil
	}
	c.win[c.head] = s
	c.head = (c.head + 1) % len(c.win)
	if c.n < len(c.win) {
		c.n++
	}
	c.sinceStep++
	c.total++
	if !s.OK {
		c.failedTotal++
	}
	j := c.judge()
	if j.broken {
		return c.rollback(s.At, j)
	}
	return c.promote(s.At, j)
}

// RecordCluster feeds the reasoning cluster rate (0 to 1) of one canary
// stream with reasoning, as received from the upstream, at the stream's
// end. It returns the rollback event when this rate breaks the guard, nil
// otherwise (promotion is Record's and Check's: it counts attempts). A
// rate outside [0, 1] is ignored, as is every rate after a rollback.
func (c *Canary) RecordCluster(at time.Time, rate float64) *Event {
	if math.IsNaN(rate) || rate < 0 || rate > 1 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == StateRolledBack {
		return nil
	}
	c.clusters[c.cHead] = rate
	c.cHead = (c.cHead + 1) % len(c.clusters)
	c.cN = min(c.cN+1, len(c.clusters))
	if c.guard.ClusterRate <= 0 {
		// Kept for display only: without a limit the rate breaks nothing,
		// and the rest of the window is unchanged since the last judge.
		return nil
	}
	if j := c.judge(); j.broken {
		return c.rollback(at, j)
	}
	return nil
}

// rollback drops the share to 0 for good. c.mu held.
func (c *Canary) rollback(at time.Time, j judgement) *Event {
	from := c.Share()
	c.setShare(0)
	c.state = StateRolledBack
	c.since = at
	c.reason = fmt.Sprintf("%s (window of %d samples, share was %s%%)", j.reason, c.n, fmtPct(from))
	return &Event{Kind: EventRollback, From: from, To: 0, Reason: c.reason, At: at}
}

// Check promotes the canary to its next step if the current step has lasted
// the promote interval, at least MinSamples samples arrived since it began
// and the window holds the guard. Call it periodically or lazily (e.g. on
// requests); it returns the promotion event or nil.
func (c *Canary) Check(now time.Time) *Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == StateRolledBack {
		return nil
	}
	return c.promote(now, c.judge())
}

// promote applies a promotion if due. c.mu held.
func (c *Canary) promote(now time.Time, j judgement) *Event {
	if c.state != StateActive || c.step >= len(c.phases)-1 {
		return nil
	}
	d := c.phases[c.step].For
	if d <= 0 || now.Sub(c.since) < d || c.sinceStep < c.guard.MinSamples || !j.judged || j.broken {
		return nil
	}
	from := c.phases[c.step].Share
	held := now.Sub(c.since)
	c.step++
	to := c.phases[c.step].Share
	c.setShare(to)
	if to >= 100 {
		c.state = StatePromoted
	}
	reason := fmt.Sprintf("guard held for %s over %d samples at %s%% (error rate %s, ttft p99 %s)",
		held, c.sinceStep, fmtPct(from), fmtPct(j.errRate*100)+"%", fmtDur(j.p99, j.okCount))
	c.since = now
	c.sinceStep = 0
	return &Event{Kind: EventPromote, From: from, To: to, Reason: reason, At: now}
}

// judgement is the guard's verdict on the current window.
type judgement struct {
	judged  bool // the window holds >= MinSamples samples
	broken  bool
	reason  string // why broken
	errRate float64
	failed  int
	okCount int
	p99     time.Duration // of the successful samples; 0 if none
	mean    time.Duration // of the successful samples; 0 if none
	cluster float64       // mean of the cluster rates; 0 if none
}

// judge evaluates the window. c.mu held.
func (c *Canary) judge() judgement {
	g := c.guard
	j := judgement{judged: c.n >= g.MinSamples}
	var why []string
	if c.cN > 0 {
		sum := 0.0
		for _, r := range c.clusters[:c.cN] { // order does not matter to a mean
			sum += r
		}
		j.cluster = sum / float64(c.cN)
		if g.ClusterRate > 0 && c.cN >= g.MinSamples && j.cluster > g.ClusterRate {
			over := 0
			for _, r := range c.clusters[:c.cN] {
				if r > g.ClusterRate {
					over++
				}
			}
			why = append(why, fmt.Sprintf("reasoning cluster rate %.3f > %.3f (+%.3f; mean of the last %d streams with reasoning, as received; %d of them over the limit)",
				j.cluster, g.ClusterRate, j.cluster-g.ClusterRate, c.cN, over))
		}
	}
	why = append(why, c.reasoningBreaks()...)
	if c.n == 0 {
		return j.verdict(why)
	}
	// Chronological (insertion) order: oldest first.
	start := (c.head - c.n + len(c.win)) % len(c.win)
	c.scratch = c.scratch[:0]
	var firstFail time.Time
	for i := range c.n {
		s := c.win[(start+i)%len(c.win)]
		if s.OK {
			c.scratch = append(c.scratch, s.TTFT)
		} else {
			if j.failed == 0 {
				firstFail = s.At
			}
			j.failed++
		}
	}
	j.okCount = len(c.scratch)
	j.errRate = float64(j.failed) / float64(c.n)
	if j.okCount > 0 {
		var sum time.Duration
		for _, d := range c.scratch {
			sum += d
		}
		j.mean = sum / time.Duration(j.okCount)
		slices.Sort(c.scratch)
		j.p99 = c.scratch[(99*j.okCount+99)/100-1] // nearest rank
	}
	if !j.judged {
		return j.verdict(why)
	}
	if g.ErrorRate > 0 && j.errRate > g.ErrorRate {
		why = append(why, fmt.Sprintf("error rate %s%% > %s%% (+%s points; %d of %d attempts failed; first failure in window at %s)",
			fmtPct(j.errRate*100), fmtPct(g.ErrorRate*100), fmtPct((j.errRate-g.ErrorRate)*100),
			j.failed, c.n, fmtTime(firstFail)))
	}
	if g.TTFTP99 > 0 && j.okCount >= g.MinSamples && j.p99 > g.TTFTP99 {
		var firstSlow time.Time
		slow := 0
		for i := range c.n {
			s := c.win[(start+i)%len(c.win)]
			if s.OK && s.TTFT > g.TTFTP99 {
				if slow == 0 {
					firstSlow = s.At
				}
				slow++
			}
		}
		why = append(why, fmt.Sprintf("ttft p99 %s > %s (+%s; %d of %d successful attempts over the limit; first at %s)",
			j.p99, g.TTFTP99, j.p99-g.TTFTP99, slow, j.okCount, fmtTime(firstSlow)))
	}
	if g.TTFTMean > 0 && j.okCount >= g.MinSamples && j.mean > g.TTFTMean {
		why = append(why, fmt.Sprintf("ttft mean %s > %s (+%s; over %d successful attempts; p99 %s)",
			j.mean.Round(time.Millisecond), g.TTFTMean, (j.mean-g.TTFTMean).Round(time.Millisecond), j.okCount, j.p99))
	}
	return j.verdict(why)
}

// verdict sets broken and reason from the reasons found.
func (j judgement) verdict(why []string) judgement {
	if len(why) > 0 {
		j.broken = true
		j.reason = strings.Join(why, " and ")
	}
	return j
}

// Snapshot is a JSON-ready view of a canary.
type Snapshot struct {
	Name       string    `json:"name"`
	State      State     `json:"state"`
	Share      float64   `json:"share"` // percent
	Steps      []float64 `json:"steps"`
	Step       int       `json:"step"`    // index into Steps
	Since      time.Time `json:"since"`   // last change: creation, step or rollback
	AgeMs      float64   `json:"age_ms"`  // now - Since
	Samples    int       `json:"samples"` // in the judged window
	Window     int       `json:"window"`
	MinSamples int       `json:"min_samples"`
	// SamplesSinceStep counts the samples since the current step began.
	SamplesSinceStep int     `json:"samples_since_step"`
	TotalSamples     int64   `json:"total_samples"`
	TotalFailed      int64   `json:"total_failed"`
	LateSamples      int64   `json:"late_samples,omitempty"` // after the rollback, ignored
	ErrorRate        float64 `json:"error_rate"`             // of the window, 0..1
	TTFTP99Ms        float64 `json:"ttft_p99_ms"`            // of the window's successful samples
	GuardErrorRate   float64 `json:"guard_error_rate,omitempty"`
	GuardTTFTP99Ms   float64 `json:"guard_ttft_p99_ms,omitempty"`
	TTFTMeanMs       float64 `json:"ttft_mean_ms"` // of the window's successful samples
	GuardTTFTMeanMs  float64 `json:"guard_ttft_mean_ms,omitempty"`
	// ClusterRate is the mean reasoning cluster rate of the last
	// ClusterSamples streams with reasoning (nil before the first).
	ClusterRate      *float64 `json:"cluster_rate,omitempty"`
	ClusterSamples   int      `json:"cluster_samples"`
	GuardClusterRate float64  `json:"guard_cluster_rate,omitempty"`
	// Reasoning compares, per effort, the canary's mean reasoning tokens
	// per answer with the stable targets' over the same period (only
	// with a guard reasoning_floor; absent before the first answer).
	Reasoning           []ReasoningView `json:"reasoning,omitempty"`
	GuardReasoningFloor float64         `json:"guard_reasoning_floor,omitempty"`
	// Phases is the roll-out; Step indexes it (and Steps, their shares).
	Phases []PhaseView `json:"phases"`
	// NextStepAt is when the current phase ends: the earliest time of the
	// next promotion (zero when none is due: last phase, no schedule, or
	// rolled back). The promotion also needs SamplesToStep more samples
	// and a window that holds the guard.
	NextStepAt     time.Time `json:"next_step_at,omitzero"`
	SamplesToStep  int       `json:"samples_to_step,omitempty"`
	RollbackReason string    `json:"rollback_reason,omitempty"`
}

// PhaseView is one phase of a Snapshot.
type PhaseView struct {
	Share float64 `json:"share"`            // percent
	ForMs float64 `json:"for_ms,omitempty"` // 0: never left
	For   string  `json:"for,omitempty"`    // the same, for people: 3d, 12h, 90s
}

// Snapshot returns the canary's state for display. now only fills AgeMs; it
// changes nothing (promotion is Check's job).
func (c *Canary) Snapshot(now time.Time) Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.judge()
	s := Snapshot{
		Name:                c.name,
		State:               c.state,
		Share:               c.Share(),
		Steps:               make([]float64, len(c.phases)),
		Phases:              make([]PhaseView, len(c.phases)),
		Step:                c.step,
		Since:               c.since,
		AgeMs:               ms(now.Sub(c.since)),
		Samples:             c.n,
		Window:              c.guard.Window,
		MinSamples:          c.guard.MinSamples,
		SamplesSinceStep:    c.sinceStep,
		TotalSamples:        c.total,
		TotalFailed:         c.failedTotal,
		LateSamples:         c.late,
		ErrorRate:           j.errRate,
		TTFTP99Ms:           ms(j.p99),
		GuardErrorRate:      c.guard.ErrorRate,
		GuardTTFTP99Ms:      ms(c.guard.TTFTP99),
		TTFTMeanMs:          ms(j.mean),
		GuardTTFTMeanMs:     ms(c.guard.TTFTMean),
		ClusterSamples:      c.cN,
		GuardClusterRate:    c.guard.ClusterRate,
		RollbackReason:      c.reason,
		Reasoning:           c.reasoningViews(),
		GuardReasoningFloor: c.guard.ReasoningFloor,
	}
	for i, p := range c.phases {
		s.Steps[i] = p.Share
		s.Phases[i] = PhaseView{Share: p.Share, ForMs: ms(p.For), For: FormatSpan(p.For)}
	}
	if c.cN > 0 {
		s.ClusterRate = &j.cluster
	}
	if d := c.phases[c.step].For; c.state == StateActive && d > 0 && c.step < len(c.phases)-1 {
		s.NextStepAt = c.since.Add(d)
		s.SamplesToStep = max(c.guard.MinSamples-c.sinceStep, 0)
	}
	return s
}

// FormatSpan writes a phase's duration as people write it: the largest
// units that fit, such as 3d, 1d12h, 90m or 1.5s ("" for 0).
func FormatSpan(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	if d%time.Second != 0 || d < time.Minute {
		return d.String()
	}
	var b strings.Builder
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := d / u.d; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			d -= n * u.d
		}
	}
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fmtPct(p float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", p), "0"), ".")
}

func fmtDur(d time.Duration, n int) string {
	if n == 0 {
		return "n/a"
	}
	return d.String()
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "unknown time"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
