package health

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// EWMAAlpha is the weight of a new observation in [Target.Latency].
const EWMAAlpha = 0.2

// Sample is the outcome of one attempt on a target.
type Sample struct {
	// At is when the attempt happened (its start or its end; the relay
	// should pick one and keep to it): the time the target's status is
	// judged at, a cooldown starts from, and the sample ages from. A
	// sample of an attempt that began before its target's ejection is
	// then judged Ejected and changes nothing.
	At time.Time
	// TTFT is the time to first token (or byte); 0 when the attempt failed
	// before it, or unknown. Only successful samples with a TTFT feed the
	// latency average and the SLO's p90.
	TTFT time.Duration
	// Duration is the whole attempt. Kept for the caller's logs; no
	// judgment uses it.
	Duration time.Duration
	// OK: the attempt succeeded.
	OK bool
}

// Change is a status change, for a log line (eject, recover, degrade,
// half-open).
type Change struct {
	Target   string
	From, To Status
	Reason   string    // why, e.g. "3 consecutive failures", "ttft p90 1.2s > slo 800ms"
	At       time.Time // when the change was observed
}

// String returns e.g. `upstream-a/gpt-4o: healthy -> ejected (3 consecutive failures)`.
func (c *Change) String() string {
	return fmt.Sprintf("%s: %s -> %s (%s)", c.Target, c.From, c.To, c.Reason)
}

// rec is one sample in the ring: times as Unix nanoseconds.
type rec struct {
	at   int64
	ttft int64 // ns; 0 = none
	ok   bool
}

// Target is the health of one target. Create it with [NewTarget]; all its
// methods are safe for concurrent use.
type Target struct {
	name string

	mu      sync.Mutex
	ring    []rec   // the last len(ring) samples; ring[next-1] is the newest
	next    int     // where the next sample goes
	count   int     // samples held, <= len(ring)
	scratch []int64 // len(ring) TTFTs, for percentiles without allocating

	ewma   float64 // latency EWMA in ns; 0 = unknown
	consec int     // consecutive failures (attempts and probes)

	ejected      bool          // Ejected, or HalfOpen once now >= until
	ejections    int           // ejections so far (failed trials included)
	cooldown     time.Duration // length of the current cooldown; 0 when not ejected
	until        time.Time     // end of the current cooldown
	ejectReason  string        // why the target was last ejected
	trialTimeout time.Duration // from the Policy at ejection
	trialClaimed bool
	trialAt      time.Time

	probeRTT time.Duration // the last good probe's round trip; 0 = none yet
	flag     string        // why Flag marked the target Degraded; "" = not flagged
	reported Status        // the status as of the last change reported (or observed)
	since    time.Time     // when reported was observed; zero = since creation
}

// NewTarget returns a healthy target keeping the last window samples
// (window <= 0: [DefaultWindow]). The name is used in [Change] and
// [Snapshot].
func NewTarget(name string, window int) *Target {
	if window <= 0 {
		window = DefaultWindow
	}
	return &Target{
		name:    name,
		ring:    make([]rec, window),
		scratch: make([]int64, window),
	}
}

// Name returns the target's name.
func (t *Target) Name() string { return t.name }

// Record records one attempt and returns the status change it caused, or
// nil. Its time is s.At.
//
// A failure counts towards [Policy.FailuresToEject]; on a Healthy or
// Degraded target it also ejects when the window's success ratio (with at
// least MinSamples counted) falls below SLO.Success/2. On a HalfOpen
// target, the first Record settles the trial, whoever sends it: success →
// Healthy (or Degraded, if the window still breaks the SLO) with the
// cooldown reset; failure → Ejected for twice the previous cooldown (capped
// at MaxCooldown). On an Ejected target still cooling down (say, a late
// answer from a request sent before the ejection) the sample is kept but
// changes nothing.
func (t *Target) Record(s Sample, slo SLO, pol Policy) *Change {
	slo = slo.WithDefaults()
	pol = pol.WithDefaults()
	now := s.At
	t.mu.Lock()
	defer t.mu.Unlock()

	before := t.statusLocked(now, slo)
	t.ring[t.next] = rec{at: now.UnixNano(), ttft: int64(s.TTFT), ok: s.OK}
	t.next++
	if t.next == len(t.ring) {
		t.next = 0
	}
	if t.count < len(t.ring) {
		t.count++
	}
	var cause string
	if s.OK {
		if s.TTFT > 0 {
			t.observe(s.TTFT)
		}
		t.consec = 0
		if before == HalfOpen {
			t.recover()
			cause = "trial succeeded"
		}
	} else {
		t.consec++
		cause = t.fail(now, before, slo, pol, false)
	}
	return t.transition(before, now, slo, cause)
}

// Probe records an active health check. A failed probe counts like a
// failed attempt towards ejection (and fails a half-open target's trial),
// but does not enter the SLO window. A good probe feeds rtt to the latency
// average; it recovers an ejected target whose cooldown is over (HalfOpen),
// and otherwise changes nothing: in particular it does not reset the
// consecutive failures, since a health endpoint may answer while real
// requests fail.
func (t *Target) Probe(at time.Time, rtt time.Duration, ok bool, slo SLO, pol Policy) *Change {
	slo = slo.WithDefaults()
	pol = pol.WithDefaults()
	t.mu.Lock()
	defer t.mu.Unlock()

	before := t.statusLocked(at, slo)
	var cause string
	if ok {
		if rtt > 0 {
			t.observe(rtt)
			t.probeRTT = rtt
		}
		if before == HalfOpen {
			t.recover()
			cause = "probe succeeded"
		}
	} else {
		t.consec++
		cause = t.fail(at, before, slo, pol, true)
	}
	return t.transition(before, at, slo, cause)
}

// Check reports a change that time alone made since the last reported one
// (a cooldown ending: Ejected → HalfOpen; bad samples ageing out: Degraded
// → Healthy), once; nil when there is none. Record and Probe report their
// own changes; call Check from a periodic loop or before logging.
func (t *Target) Check(now time.Time, slo SLO) *Change {
	slo = slo.WithDefaults()
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.statusLocked(now, slo)
	if cur == t.reported {
		return nil
	}
	return t.report(t.reported, cur, now, slo, "")
}

// Status returns the target's status at now under slo.
func (t *Target) Status(now time.Time, slo SLO) Status {
	slo = slo.WithDefaults()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.statusLocked(now, slo)
}

// ClaimTrial admits the trial request of a HalfOpen target: it returns true
// to exactly one caller, until a Record or Probe settles the trial, or the
// trial is abandoned (nothing recorded within [Policy.TrialTimeout]), when
// it may be claimed again. It returns false when the target is not HalfOpen.
func (t *Target) ClaimTrial(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.ejected || now.Before(t.until) {
		return false
	}
	if t.trialClaimed && now.Sub(t.trialAt) < t.trialTimeout {
		return false
	}
	t.trialClaimed = true
	t.trialAt = now
	return true
}

// Latency returns the decaying average (EWMA, alpha [EWMAAlpha]) of the
// TTFT of successful samples and the RTT of good probes; 0 = unknown.
func (t *Target) Latency() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Duration(t.ewma)
}

// view returns what Order needs, under one lock.
func (t *Target) view(now time.Time, slo SLO) (Status, time.Duration, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.statusLocked(now, slo), time.Duration(t.ewma), t.until
}

func (t *Target) observe(d time.Duration) {
	if t.ewma == 0 {
		t.ewma = float64(d)
		return
	}
	t.ewma += EWMAAlpha * (float64(d) - t.ewma)
}

// statusLocked computes the status; slo has its defaults.
func (t *Target) statusLocked(now time.Time, slo SLO) Status {
	if t.ejected {
		if now.Before(t.until) {
			return Ejected
		}
		return HalfOpen
	}
	if t.flag != "" || t.breaks(now, slo) {
		return Degraded
	}
	return Healthy
}

// fail applies a failure (t.consec already counted) to a target whose
// status was before; it returns the ejection reason, or "". A failed probe
// does not consult the window (it is not in it).
func (t *Target) fail(now time.Time, before Status, slo SLO, pol Policy, probe bool) string {
	switch before {
	case HalfOpen:
		what := "trial"
		if probe {
			what = "probe"
		}
		next := min(max(2*t.cooldown, pol.BaseCooldown), pol.MaxCooldown)
		t.eject(now, next, pol, fmt.Sprintf("%s failed; cooldown %s", what, fmtDur(next)))
		return t.ejectReason
	case Ejected:
		return "" // cooling down: counted only
	}
	if pol.FailuresToEject > 0 && t.consec >= pol.FailuresToEject {
		t.eject(now, pol.BaseCooldown, pol, fmt.Sprintf("%d consecutive failures", t.consec))
		return t.ejectReason
	}
	if slo.Success > 0 && !probe {
		w := t.window(now, slo, false)
		if w.n >= slo.MinSamples && w.ratio() < slo.Success/2 {
			t.eject(now, pol.BaseCooldown, pol, fmt.Sprintf("success %.2f < %.2f (half the slo %.2f)",
				w.ratio(), slo.Success/2, slo.Success))
			return t.ejectReason
		}
	}
	return ""
}

func (t *Target) eject(now time.Time, cooldown time.Duration, pol Policy, reason string) {
	t.ejected = true
	t.ejections++
	t.cooldown = cooldown
	t.until = now.Add(cooldown)
	t.ejectReason = reason
	t.trialTimeout = pol.TrialTimeout
	t.trialClaimed = false
}

func (t *Target) recover() {
	t.ejected = false
	t.cooldown = 0
	t.until = time.Time{}
	t.consec = 0
	t.trialClaimed = false
}

// transition reports the change from before to the status now, if any.
func (t *Target) transition(before Status, now time.Time, slo SLO, cause string) *Change {
	after := t.statusLocked(now, slo)
	if after == before {
		if t.reported != after {
			// A time-driven change nobody observed with Check.
			t.reported, t.since = after, t.observedSince(after, now)
		}
		return nil
	}
	return t.report(before, after, now, slo, cause)
}

func (t *Target) report(from, to Status, now time.Time, slo SLO, cause string) *Change {
	t.reported, t.since = to, now
	return &Change{Target: t.name, From: from, To: to, Reason: t.reason(from, to, now, slo, cause), At: now}
}

// observedSince is when a status first seen at now, without a reported
// change, began: the cooldown's end for HalfOpen, else now.
func (t *Target) observedSince(st Status, now time.Time) time.Time {
	if st == HalfOpen && !t.until.IsZero() {
		return t.until
	}
	return now
}

// reason explains a change from → to; cause is what Record or Probe did
// (an ejection or a recovery), or "".
func (t *Target) reason(from, to Status, now time.Time, slo SLO, cause string) string {
	switch to {
	case Ejected:
		if cause != "" {
			return cause
		}
		return t.ejectReason
	case HalfOpen:
		return fmt.Sprintf("cooldown %s over", fmtDur(t.cooldown))
	case Degraded:
		b := t.breakReason(now, slo)
		if cause != "" {
			return cause + "; " + b
		}
		return b
	}
	// Healthy.
	if cause != "" {
		return cause
	}
	return t.meetReason(now, slo)
}

// win is the part of the window a judgment counts.
type win struct {
	n, ok int
	ttfts int   // successful samples with a TTFT
	slow  int   // of those, with TTFT > slo.TTFT
	p90   int64 // when computed
}

func (w win) ratio() float64 {
	if w.n == 0 {
		return 0
	}
	return float64(w.ok) / float64(w.n)
}

// window scans the last slo.Window samples not older than slo.MaxAge. With
// keep, it copies their TTFTs to t.scratch[:w.ttfts] (unsorted).
func (t *Target) window(now time.Time, slo SLO, keep bool) win {
	var w win
	k := min(t.count, slo.Window)
	oldest := int64(-1 << 63)
	if slo.MaxAge > 0 {
		oldest = now.Add(-slo.MaxAge).UnixNano()
	}
	limit := int64(slo.TTFT)
	i := t.next
	for range k {
		i--
		if i < 0 {
			i = len(t.ring) - 1
		}
		r := &t.ring[i]
		if r.at < oldest {
			continue
		}
		w.n++
		if !r.ok {
			continue
		}
		w.ok++
		if r.ttft > 0 {
			if keep {
				t.scratch[w.ttfts] = r.ttft
			}
			w.ttfts++
			if r.ttft > limit {
				w.slow++
			}
		}
	}
	return w
}

// rank90 is the 1-based nearest rank of the p90 of m values: ceil(0.9·m).
func rank90(m int) int { return (9*m + 9) / 10 }

// breaks reports whether the window breaks slo: with at least MinSamples
// counted, a success ratio below Success or a TTFT p90 above TTFT.
func (t *Target) breaks(now time.Time, slo SLO) bool {
	if slo.TTFT <= 0 && slo.Success <= 0 {
		return false
	}
	w := t.window(now, slo, false)
	return w.n >= slo.MinSamples && (badRatio(w, slo) || badTTFT(w, slo))
}

func badRatio(w win, slo SLO) bool { return slo.Success > 0 && w.ratio() < slo.Success }

// badTTFT: the p90 (value of rank ceil(0.9·m)) is above slo.TTFT exactly
// when fewer than that many values are at or below it.
func badTTFT(w win, slo SLO) bool {
	return slo.TTFT > 0 && w.ttfts > 0 && w.ttfts-w.slow < rank90(w.ttfts)
}

// percentiles sorts t.scratch[:m] and returns its p50 and p90 (nearest rank).
func (t *Target) percentiles(m int) (p50, p90 int64) {
	if m == 0 {
		return 0, 0
	}
	s := t.scratch[:m]
	slices.Sort(s)
	return s[(m+1)/2-1], s[rank90(m)-1]
}

func (t *Target) breakReason(now time.Time, slo SLO) string {
	w := t.window(now, slo, true)
	_, p90 := t.percentiles(w.ttfts)
	var parts []string
	if t.flag != "" {
		parts = append(parts, t.flag)
	}
	judged := w.n >= slo.MinSamples // a flagged target may have fewer
	if judged && badRatio(w, slo) {
		parts = append(parts, fmt.Sprintf("success %.2f < slo %.2f", w.ratio(), slo.Success))
	}
	if judged && badTTFT(w, slo) {
		parts = append(parts, fmt.Sprintf("ttft p90 %s > slo %s", fmtDur(time.Duration(p90)), fmtDur(slo.TTFT)))
	}
	if len(parts) == 0 {
		return "breaks slo"
	}
	return strings.Join(parts, "; ")
}

func (t *Target) meetReason(now time.Time, slo SLO) string {
	w := t.window(now, slo, true)
	if w.n < slo.MinSamples {
		return fmt.Sprintf("%d recent samples < %d: slo not judged", w.n, slo.MinSamples)
	}
	var parts []string
	if slo.Success > 0 {
		parts = append(parts, fmt.Sprintf("success %.2f >= slo %.2f", w.ratio(), slo.Success))
	}
	if slo.TTFT > 0 && w.ttfts > 0 {
		_, p90 := t.percentiles(w.ttfts)
		parts = append(parts, fmt.Sprintf("ttft p90 %s <= slo %s", fmtDur(time.Duration(p90)), fmtDur(slo.TTFT)))
	}
	if len(parts) == 0 {
		return "meets slo"
	}
	return strings.Join(parts, "; ")
}
