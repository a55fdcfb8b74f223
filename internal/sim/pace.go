package sim

import (
	"context"
	"time"
)

// waiter blocks for a duration unless the request's client goes away.
// It uses one timer per wait, stopped on return, so nothing outlives
// the request.
type waiter struct {
	ctx context.Context
}

func (w waiter) wait(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
}

// pacer spaces the token events of one phase according to its Pattern.
type pacer struct {
	p     Pattern
	w     waiter
	start time.Time // phase start (steady) or current burst start (clustered)
}

func newPacer(p Pattern, w waiter) *pacer {
	return &pacer{p: p, w: w, start: time.Now()}
}

// before waits until token i (0-based within the phase) is due.
//
// Steady: token i is due (i+1)/Rate after the phase started, measured
// from a fixed start so rounding does not drift.
//
// Clustered: a burst's tokens are spread over BurstSpread; after the
// last token of a burst the stream is silent for Pause, measured from
// that token, so the silence is never shorter than Pause.
func (pc *pacer) before(i int) error {
	switch pc.p.Kind {
	case Clustered:
		j := i % pc.p.Burst
		if j == 0 {
			if i > 0 {
				if err := pc.w.wait(pc.p.Pause); err != nil {
					return err
				}
			}
			pc.start = time.Now()
			return nil
		}
		due := pc.start.Add(pc.p.BurstSpread * time.Duration(j) / time.Duration(pc.p.Burst))
		return pc.w.wait(time.Until(due))
	default: // Steady
		if pc.p.Rate <= 0 {
			return nil
		}
		due := pc.start.Add(time.Duration(float64(i+1) / pc.p.Rate * float64(time.Second)))
		return pc.w.wait(time.Until(due))
	}
}
