package health

import "time"

// Ejection is a target's ejection as another instance (or an earlier run
// of this one) saw it: what a fleet shares and a restart keeps, so a
// target found dead is not tried again at once.
type Ejection struct {
	Until    time.Time     `json:"until"`    // end of the cooldown
	Cooldown time.Duration `json:"cooldown"` // its length, which the next failed trial doubles
	Reason   string        `json:"reason"`
}

// Ejection returns the target's current ejection, if it is ejected and
// still cooling down at now.
func (t *Target) Ejection(now time.Time) (Ejection, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.ejected || !now.Before(t.until) {
		return Ejection{}, false
	}
	return Ejection{Until: t.until, Cooldown: t.cooldown, Reason: t.ejectReason}, true
}

// Adopt ejects the target until e.Until, unless its cooldown is already
// over at now or the target is already ejected at least that long. It
// returns the status change (nil when nothing changed); the change's
// reason is e.Reason with from, the adopted ejection's source, prefixed.
// After the cooldown the target is HalfOpen as after any ejection: this
// instance's own trial decides.
func (t *Target) Adopt(e Ejection, from string, now time.Time, slo SLO, pol Policy) *Change {
	slo = slo.WithDefaults()
	pol = pol.WithDefaults()
	if !now.Before(e.Until) {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ejected && !t.until.Before(e.Until) {
		return nil
	}
	before := t.statusLocked(now, slo)
	reason := e.Reason
	if from != "" {
		reason = from + ": " + reason
	}
	t.eject(now, max(e.Cooldown, 0), pol, reason)
	t.until = e.Until
	return t.transition(before, now, slo, reason)
}

// RecentTTFT returns the TTFTs of the last n successful samples that had
// one, oldest first: the points of a latency sparkline.
func (t *Target) RecentTTFT(n int) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]time.Duration, 0, min(n, t.count))
	for i := 1; i <= t.count && len(out) < n; i++ {
		r := t.ring[(t.next-i+len(t.ring))%len(t.ring)]
		if r.ok && r.ttft > 0 {
			out = append(out, time.Duration(r.ttft))
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
