// Package reasoninghealth watches a target's reasoning for the signs of a
// provider degrading under load while still answering 200: reasoning cut
// short (fewer reasoning tokens per request than the target's own
// baseline) and reasoning that comes in clusters (a high reasoning cluster
// rate, the share of the reasoning in the late half of its phase).
//
// A [Tracker] is one target's state. Each finished request is one
// [Sample]; [Tracker.Add] judges it against a [Config] (the SLO's
// reasoning_floor and cluster_rate) and reports when the target becomes
// degraded or recovers.
//
// # Decisions
//
//   - Reasoning tokens are tracked per effort (the request's reasoning
//     effort, "default" when it states none): a request at effort low
//     reasons far less than one at high, and must not read as a drop.
//     The cluster rate is tracked per target, whatever the effort: it is
//     a property of how the provider streams.
//   - The baseline is slow: an exponentially weighted mean with weight
//     [BaselineAlpha] (about the last 50 requests). The recent window is
//     short: the last [RecentWindow] requests. A request joins the
//     baseline when it leaves the recent window, so the two never overlap. The floor is judged only
//     once the baseline has [MinBaseline] samples and the recent window
//     is full; the cluster rate once the recent window holds
//     [RecentWindow] streams whose rate is known.
//   - The signal: recent mean / baseline mean < Floor, or recent mean
//     cluster rate > ClusterRate.
//   - The baseline freezes while the target is degraded, so a long
//     degradation never becomes the new normal.
//   - An early stop is a request whose reasoning is under [EarlyStop] of
//     its effort's baseline mean (no reasoning at all included). Early
//     stops are counted (baseline rate and recent count, for the status
//     page), not judged on their own: a recent window full of them is
//     already far under any floor.
//   - Recovery follows the half-open rule of the other SLO misses: while
//     degraded, the relay still sends the target one request now and
//     then (its recheck); each sample that comes in while degraded is a
//     trial judged on its own: reasoning at or above Floor × the frozen
//     baseline (and, when known, a cluster rate at or below ClusterRate)
//     recovers the target and starts a fresh recent window; anything
//     else keeps it degraded.
//
// The package reads no clock and has no Caddy imports.
package reasoninghealth

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Tuning. Not configurable: the SLO says how far is too far; these say
// how much evidence it takes.
const (
	BaselineAlpha = 0.02 // weight of a new sample in the baseline mean
	RecentWindow  = 5    // requests in the recent window
	MinBaseline   = 20   // baseline samples before the floor is judged
	EarlyStop     = 0.25 // reasoning under this share of the baseline is an early stop
)

// DefaultEffort is the effort of a request that states none.
const DefaultEffort = "default"

// Config is what a tier's SLO asks of a target's reasoning. The zero value
// judges nothing.
type Config struct {
	// Floor: the target is degraded when its recent mean reasoning
	// tokens per request fall below Floor × its baseline mean (0 < Floor
	// <= 1; 0 = not judged).
	Floor float64
	// ClusterRate: the target is degraded when its recent mean reasoning
	// cluster rate is above ClusterRate (0 < ClusterRate <= 1; 0 = not
	// judged).
	ClusterRate float64
}

// On reports whether c judges anything.
func (c Config) On() bool { return c.Floor > 0 || c.ClusterRate > 0 }

// Sample is one finished request on the target.
type Sample struct {
	At        time.Time
	Effort    string // "" = DefaultEffort
	Reasoning int    // reasoning tokens, from the usage or counted on the stream
	// Cluster is the stream's reasoning cluster rate as received, when
	// ClusterKnown (a stream with enough reasoning to say).
	Cluster      float64
	ClusterKnown bool
}

// Signal names what made a target degraded: a bounded metric label.
type Signal string

const (
	SignalFloor   Signal = "reasoning_floor"
	SignalCluster Signal = "cluster_rate"
)

// Change is a status change reported by [Tracker.Add].
type Change struct {
	Degraded bool   // true: became degraded; false: recovered
	Signal   Signal // what degraded it (empty on recovery)
	Reason   string // e.g. "reasoning 38% of baseline (1,210 → 460 tokens, effort high)"
}

// series is one effort's reasoning figures.
type series struct {
	base    float64 // baseline mean
	baseN   int     // samples in the baseline
	stopEW  float64 // baseline early-stop rate (EWMA, same weight)
	recent  []int   // the last RecentWindow reasoning counts, oldest first
	stopped []bool  // early stop, for each of recent
}

// Tracker is one target's reasoning health. The zero value is not
// usable: make it with [NewTracker]. Safe for concurrent use.
type Tracker struct {
	mu       sync.Mutex
	efforts  map[string]*series
	clusters []float64 // the last RecentWindow known cluster rates, oldest first

	degraded bool
	signal   Signal
	reason   string
	since    time.Time
	trips    int // times degraded so far
}

// NewTracker returns a tracker with no samples.
func NewTracker() *Tracker { return &Tracker{efforts: map[string]*series{}} }

// maxEfforts bounds the efforts tracked (an effort is a client's string):
// the relay normalises it to a few words, this is a second guard.
const maxEfforts = 16

// Add records one sample and judges it under c; it returns the change it
// caused, or nil.
func (t *Tracker) Add(s Sample, c Config) *Change {
	if s.Effort == "" {
		s.Effort = DefaultEffort
	}
	s.Reasoning = max(s.Reasoning, 0)
	t.mu.Lock()
	defer t.mu.Unlock()
	se := t.efforts[s.Effort]
	if se == nil {
		if len(t.efforts) >= maxEfforts {
			return nil
		}
		se = &series{}
		t.efforts[s.Effort] = se
	}
	early := se.baseN >= MinBaseline && float64(s.Reasoning) < EarlyStop*se.base

	if t.degraded {
		// A trial, judged alone against the frozen baseline.
		if !t.passes(se, s, c) {
			return nil
		}
		t.degraded, t.signal, t.reason, t.since = false, "", "", s.At
		for _, x := range t.efforts {
			x.recent, x.stopped = x.recent[:0], x.stopped[:0]
		}
		t.clusters = t.clusters[:0]
		t.push(se, s, early)
		return &Change{Degraded: false, Reason: t.trialReason(se, s)}
	}
	// The baseline takes a sample when it leaves the recent window, so
	// the two never overlap; it takes none while degraded (it freezes).
	if old, out := t.push(se, s, early); out {
		if se.baseN == 0 {
			se.base = float64(old.reasoning)
		} else {
			se.base += BaselineAlpha * (float64(old.reasoning) - se.base)
		}
		b := 0.0
		if old.early {
			b = 1
		}
		se.stopEW += BaselineAlpha * (b - se.stopEW)
		se.baseN++
	}

	if sig, why := t.judge(se, s.Effort, c); sig != "" {
		t.degraded, t.signal, t.reason, t.since = true, sig, why, s.At
		t.trips++
		return &Change{Degraded: true, Signal: sig, Reason: why}
	}
	return nil
}

// left is a sample that left an effort's recent window.
type left struct {
	reasoning int
	early     bool
}

// push adds s to the recent windows, and returns the effort's sample it
// pushed out, if any.
func (t *Tracker) push(se *series, s Sample, early bool) (left, bool) {
	var l left
	var out bool
	se.recent, l.reasoning, out = appendRing(se.recent, s.Reasoning)
	se.stopped, l.early, _ = appendRing(se.stopped, early)
	if s.ClusterKnown {
		t.clusters, _, _ = appendRing(t.clusters, s.Cluster)
	}
	return l, out
}

// appendRing appends v to a window of at most RecentWindow values, and
// returns the value it pushed out, if any.
func appendRing[T any](r []T, v T) ([]T, T, bool) {
	var old T
	out := len(r) == RecentWindow
	if out {
		old = r[0]
		copy(r, r[1:])
		r = r[:RecentWindow-1]
	}
	return append(r, v), old, out
}

// judge returns the signal the recent windows break, with its reason.
func (t *Tracker) judge(se *series, effort string, c Config) (Signal, string) {
	if c.Floor > 0 && se.baseN >= MinBaseline && len(se.recent) == RecentWindow && se.base > 0 {
		m := meanInt(se.recent)
		if m/se.base < c.Floor {
			return SignalFloor, fmt.Sprintf("reasoning %d%% of baseline (%s → %s tokens, effort %s)",
				int(math.Round(100*m/se.base)), thousands(se.base), thousands(m), effort)
		}
	}
	if c.ClusterRate > 0 && len(t.clusters) == RecentWindow {
		if m := meanF(t.clusters); m > c.ClusterRate {
			return SignalCluster, fmt.Sprintf("reasoning cluster rate %.2f > %.2f", m, c.ClusterRate)
		}
	}
	return "", ""
}

// passes reports whether a trial sample meets c on its own.
func (t *Tracker) passes(se *series, s Sample, c Config) bool {
	if t.signal == SignalFloor && se.baseN < MinBaseline {
		return false // an effort without a baseline: no evidence either way
	}
	if c.Floor > 0 && se.baseN >= MinBaseline && float64(s.Reasoning) < c.Floor*se.base {
		return false
	}
	if c.ClusterRate > 0 && s.ClusterKnown && s.Cluster > c.ClusterRate {
		return false
	}
	if t.signal == SignalCluster && c.ClusterRate > 0 && !s.ClusterKnown {
		return false // nothing to judge the cluster rate by: still degraded
	}
	return true
}

func (t *Tracker) trialReason(se *series, s Sample) string {
	if se.baseN > 0 {
		return fmt.Sprintf("trial reasoned %s tokens (baseline %s, effort %s)", thousands(float64(s.Reasoning)), thousands(se.base), s.Effort)
	}
	return "trial passed"
}

// Clear ends a degradation without a trial (the SLO no longer judges
// reasoning) and reports whether there was one. The baseline is kept.
func (t *Tracker) Clear(at time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.degraded {
		return false
	}
	t.degraded, t.signal, t.reason, t.since = false, "", "", at
	for _, x := range t.efforts {
		x.recent, x.stopped = x.recent[:0], x.stopped[:0]
	}
	t.clusters = t.clusters[:0]
	return true
}

// Degraded reports whether the target is degraded, and why.
func (t *Tracker) Degraded() (bool, Signal, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.degraded, t.signal, t.reason
}

// Effort is one effort's figures in a [Snapshot].
type Effort struct {
	Effort           string  `json:"effort"`
	BaselineTokens   float64 `json:"baseline_tokens"`
	BaselineSamples  int     `json:"baseline_samples"`
	BaselineEarlyPct float64 `json:"baseline_early_stop_pct"`
	RecentTokens     float64 `json:"recent_tokens"`
	RecentSamples    int     `json:"recent_samples"`
	RecentEarlyStops int     `json:"recent_early_stops"`
}

// Snapshot is a tracker's figures, for the status view.
type Snapshot struct {
	Efforts []Effort `json:"efforts"`
	// RecentClusterRate is the mean of the recent known cluster rates
	// (ClusterSamples of them; 0 when none).
	RecentClusterRate float64   `json:"recent_cluster_rate,omitzero"`
	ClusterSamples    int       `json:"cluster_samples"`
	Degraded          bool      `json:"degraded"`
	Signal            Signal    `json:"signal,omitempty"`
	Reason            string    `json:"reason,omitempty"`
	Since             time.Time `json:"since,omitzero"`
	Degradations      int       `json:"degradations"`
}

// Snapshot returns the tracker's figures, efforts sorted by name.
func (t *Tracker) Snapshot() Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Snapshot{Degraded: t.degraded, Signal: t.signal, Reason: t.reason, Since: t.since, Degradations: t.trips,
		ClusterSamples: len(t.clusters), Efforts: []Effort{}}
	if len(t.clusters) > 0 {
		s.RecentClusterRate = round3(meanF(t.clusters))
	}
	for name, se := range t.efforts {
		e := Effort{Effort: name, BaselineTokens: math.Round(se.base), BaselineSamples: se.baseN,
			BaselineEarlyPct: math.Round(1000*se.stopEW) / 10, RecentSamples: len(se.recent)}
		if len(se.recent) > 0 {
			e.RecentTokens = math.Round(meanInt(se.recent))
		}
		for _, b := range se.stopped {
			if b {
				e.RecentEarlyStops++
			}
		}
		s.Efforts = append(s.Efforts, e)
	}
	slices.SortFunc(s.Efforts, func(a, b Effort) int {
		switch {
		case a.Effort < b.Effort:
			return -1
		case a.Effort > b.Effort:
			return 1
		}
		return 0
	})
	return s
}

func meanInt(v []int) float64 {
	sum := 0
	for _, x := range v {
		sum += x
	}
	return float64(sum) / float64(len(v))
}

func meanF(v []float64) float64 {
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// thousands formats a token count rounded to an integer with thousands
// separators: 1210.4 → "1,210".
func thousands(f float64) string {
	s := strconv.FormatInt(int64(math.Round(f)), 10)
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
