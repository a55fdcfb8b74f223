package health

import "time"

// Flag marks the target Degraded for a reason judged outside its window
// (the relay's reasoning health: reasoning cut short, or clustered), or
// clears the mark when reason is "". While flagged, the target is
// Degraded unless Ejected or HalfOpen, whatever its window says, and the
// reason leads its Snapshot's Reason. The caller decides when the mark
// ends (a passing trial). It returns the status change, or nil.
func (t *Target) Flag(reason string, now time.Time, slo SLO) *Change {
	slo = slo.WithDefaults()
	t.mu.Lock()
	defer t.mu.Unlock()
	before := t.statusLocked(now, slo)
	t.flag = reason
	cause := ""
	if reason == "" && before == Degraded {
		cause = "reasoning trial passed"
	}
	return t.transition(before, now, slo, cause)
}

// Flagged returns the reason of the target's Flag, "" when none.
func (t *Target) Flagged() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.flag
}
