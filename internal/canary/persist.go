package canary

import "time"

// Persisted is the part of a canary's state that a restart keeps and a
// fleet shares: where it is in its roll-out. The guard's window of
// samples is not in it: each instance judges its own attempts (see
// [Canary.Adopt]).
type Persisted struct {
	State  State     `json:"state"`
	Step   int       `json:"step"`  // index into the configured steps
	Share  float64   `json:"share"` // percent, for people reading the state
	Since  time.Time `json:"since"` // when the current step (or the rollback) began
	Reason string    `json:"reason,omitempty"`
	// EndsAt is when the current phase ends at the earliest, for people
	// reading the state (Adopt reads Step and Since). Absent from states
	// saved before phases had their own durations, and on the last phase.
	EndsAt time.Time `json:"ends_at,omitzero"`
}

// Persist returns the canary's roll-out state.
func (c *Canary) Persist() Persisted {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := Persisted{State: c.state, Step: c.step, Share: c.Share(), Since: c.since, Reason: c.reason}
	if d := c.phases[c.step].For; c.state == StateActive && d > 0 {
		p.EndsAt = c.since.Add(d)
	}
	return p
}

// Adopt moves the canary to p when p is further along: a rollback (final,
// as one decided here), a later step of the same steps, or the same step
// begun earlier (its phase ends sooner: a restart or a later instance
// does not start the phase's clock again). It never moves back, so
// instances that adopt each other's state converge on the furthest one,
// and a stale copy changes nothing. It returns the event for a change of
// share, or nil (an earlier start changes no share). A step that the
// steps do not have is ignored.
//
// The new step starts with an empty count of samples since the step: the
// next promotion waits for this instance's own samples, as it would have
// after a promotion of its own.
func (c *Canary) Adopt(p Persisted) *Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == StateRolledBack {
		return nil
	}
	from := c.Share()
	switch {
	case p.State == StateRolledBack:
		c.setShare(0)
		c.state = StateRolledBack
		c.since = p.Since
		c.reason = p.Reason
		return &Event{Kind: EventRollback, From: from, To: 0, Reason: p.Reason, At: p.Since}
	case p.Step == c.step && p.State == c.state && !p.Since.IsZero() && p.Since.Before(c.since):
		c.since = p.Since
		return nil
	case p.Step > c.step && p.Step < len(c.phases):
		c.step = p.Step
		to := c.phases[c.step].Share
		c.setShare(to)
		if to >= 100 {
			c.state = StatePromoted
		}
		c.since = p.Since
		c.sinceStep = 0
		return &Event{Kind: EventPromote, From: from, To: to, Reason: p.Reason, At: p.Since}
	}
	return nil
}

// Ahead reports whether p is further along than q, as Adopt orders
// states: a rollback is ahead of anything but a rollback, a later step of
// an earlier one, and the same step begun earlier of one begun later.
func (p Persisted) Ahead(q Persisted) bool {
	switch {
	case q.State == StateRolledBack:
		return false
	case p.State == StateRolledBack:
		return true
	case p.Step != q.Step:
		return p.Step > q.Step
	}
	return !p.Since.IsZero() && p.Since.Before(q.Since)
}
