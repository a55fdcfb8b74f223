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
}

// Persist returns the canary's roll-out state.
func (c *Canary) Persist() Persisted {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Persisted{State: c.state, Step: c.step, Share: c.Share(), Since: c.since, Reason: c.reason}
}

// Adopt moves the canary to p when p is further along: a rollback (final,
// as one decided here), or a later step of the same steps. It never moves
// back, so instances that adopt each other's state converge on the
// furthest one, and a stale copy changes nothing. It returns the event
// for the change, or nil. A step that the steps do not have is ignored.
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
	case p.Step > c.step && p.Step < len(c.steps):
		c.step = p.Step
		to := c.steps[c.step]
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
