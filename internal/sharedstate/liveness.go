package sharedstate

import (
	"fmt"
	"time"
)

// Peer is another instance's key limit figures as this instance last
// read them, and when, by this instance's clock, it saw them change.
type Peer struct {
	Raw     string
	Figures Figures
	Changed time.Time     // zero: not seen to change, and not recent by its own time
	Skew    time.Duration // its time less this instance's, at the change last seen (0: unknown)
}

// Observe takes another instance's figures read at now into what was
// known of it (prev; ok false the first time). An instance writes new
// figures (with a new time) at every sync, so figures that change are an
// instance alive, whatever its clock says; figures that stay the same for
// stale are an instance gone. The first figures seen are taken as recent
// only if their own time is within stale behind and MaxSkew ahead of now:
// an instance gone before this one started, or a value written with a
// time far ahead, does not count until it changes. lag is the most a
// live instance's time may trail this one's when read (a sync interval
// and a round trip): beyond it, and MaxSkew, its clock is named as
// behind.
func Observe(prev Peer, ok bool, raw string, fig Figures, now time.Time, stale, lag time.Duration) (Peer, string) {
	p := Peer{Raw: raw, Figures: fig, Changed: prev.Changed, Skew: prev.Skew}
	switch {
	case !ok:
		p.Changed = time.Time{}
		if d := fig.At.Sub(now); d <= MaxSkew && d > -stale {
			p.Changed = fig.At
			if d > 0 {
				p.Changed = now
			}
		}
		if d := fig.At.Sub(now); d > 0 {
			p.Skew = d
		}
	case raw != prev.Raw:
		p.Changed, p.Skew = now, fig.At.Sub(now)
	}
	switch {
	case p.Skew > MaxSkew:
		return p, fmt.Sprintf("written by a clock more than %s ahead of this instance's: its requests in flight count only while its figures keep changing", MaxSkew)
	case p.Skew < -(MaxSkew + lag):
		return p, fmt.Sprintf("written by a clock more than %s behind this instance's (beyond the sync interval): its requests in flight count while its figures keep changing", MaxSkew)
	}
	return p, ""
}

// Live reports whether the instance's requests in flight still count at
// now: its figures changed within stale, by this instance's clock.
func (p Peer) Live(now time.Time, stale time.Duration) bool {
	return !p.Changed.IsZero() && now.Sub(p.Changed) < stale
}

// InFlight is the instance's requests in flight as they count against a
// cap of limit: no more than the cap (an instance with another config
// may hold more; the cap is full either way).
func (p Peer) InFlight(limit int64) int64 {
	return min(max(p.Figures.InFlight, 0), limit)
}
