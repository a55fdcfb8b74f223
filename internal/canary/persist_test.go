package canary

import (
	"testing"
	"time"
)

func TestAdoptOnlyMovesForward(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	g := Guard{ErrorRate: 0.5, MinSamples: 2, Window: 4}
	a := New("a", []float64{5, 50, 100}, g, time.Minute, t0)
	b := New("b", []float64{5, 50, 100}, g, time.Minute, t0)

	// a promotes after a minute of good samples; b adopts the step.
	a.Record(Sample{At: t0.Add(time.Second), OK: true, TTFT: time.Millisecond})
	a.Record(Sample{At: t0.Add(2 * time.Second), OK: true, TTFT: time.Millisecond})
	if ev := a.Check(t0.Add(2 * time.Minute)); ev == nil || ev.To != 50 {
		t.Fatalf("a's promotion = %v", ev)
	}
	if ev := b.Adopt(a.Persist()); ev == nil || ev.Kind != EventPromote || b.Share() != 50 {
		t.Fatalf("b adopting a's step: %v, share %v", ev, b.Share())
	}
	// An older state (b's own start) changes nothing.
	if ev := b.Adopt(Persisted{State: StateActive, Step: 0}); ev != nil || b.Share() != 50 {
		t.Fatalf("adopting an older step: %v, share %v", ev, b.Share())
	}
	// A step the steps do not have is ignored.
	if ev := b.Adopt(Persisted{State: StateActive, Step: 7}); ev != nil {
		t.Fatalf("adopting step 7: %v", ev)
	}

	// a rolls back; b adopts the rollback and its reason, for good.
	for i := range 4 {
		a.Record(Sample{At: t0.Add(3*time.Minute + time.Duration(i)*time.Second)})
	}
	p := a.Persist()
	if p.State != StateRolledBack || p.Reason == "" {
		t.Fatalf("a after failures: %+v", p)
	}
	if ev := b.Adopt(p); ev == nil || ev.Kind != EventRollback || b.Share() != 0 || b.State() != StateRolledBack {
		t.Fatalf("b adopting the rollback: %v, share %v", ev, b.Share())
	}
	if b.Persist().Reason != p.Reason {
		t.Fatalf("reason %q, want %q", b.Persist().Reason, p.Reason)
	}
	if ev := b.Adopt(Persisted{State: StatePromoted, Step: 2}); ev != nil || b.Share() != 0 {
		t.Fatalf("a rolled-back canary adopted a promotion: %v", ev)
	}
}

func TestAhead(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	active := func(step int, since time.Time) Persisted {
		return Persisted{State: StateActive, Step: step, Since: since}
	}
	rb := Persisted{State: StateRolledBack, Since: t0}
	for _, c := range []struct {
		p, q Persisted
		want bool
	}{
		{rb, active(2, t0), true},
		{active(2, t0), rb, false},
		{rb, rb, false},
		{active(1, t0.Add(time.Hour)), active(0, t0), true},
		{active(0, t0), active(1, t0.Add(time.Hour)), false},
		{active(0, t0), active(0, t0.Add(time.Minute)), true},
		{active(0, t0.Add(time.Minute)), active(0, t0), false},
		{active(0, t0), active(0, t0), false},
	} {
		if got := c.p.Ahead(c.q); got != c.want {
			t.Errorf("%+v.Ahead(%+v) = %v", c.p, c.q, got)
		}
	}
	// Adopt and Ahead agree: after adopting q, q is not ahead.
	g := Guard{MinSamples: 1}
	for _, q := range []Persisted{rb, active(1, t0), active(0, t0.Add(-time.Hour)), active(0, t0.Add(time.Hour))} {
		c := New("c", []float64{5, 50, 100}, g, time.Hour, t0)
		c.Adopt(q)
		if q.Ahead(c.Persist()) {
			t.Errorf("after Adopt(%+v): %+v is behind it", q, c.Persist())
		}
	}
}
