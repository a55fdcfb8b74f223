package health

import (
	"testing"
	"time"
)

func TestEjectionAdoptedUntilItsEnd(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	slo, pol := SLO{}, Policy{FailuresToEject: 3, BaseCooldown: 10 * time.Second}
	a := NewTarget("a", 0)
	for i := range 3 {
		a.Record(Sample{At: t0.Add(time.Duration(i) * time.Millisecond)}, slo, pol)
	}
	e, ok := a.Ejection(t0.Add(time.Second))
	if !ok || !e.Until.Equal(t0.Add(2*time.Millisecond+10*time.Second)) || e.Cooldown != 10*time.Second {
		t.Fatalf("Ejection = %+v, %v", e, ok)
	}

	b := NewTarget("b", 0)
	c := b.Adopt(e, "fleet", t0.Add(time.Second), slo, pol)
	if c == nil || c.To != Ejected || c.Reason != "fleet: 3 consecutive failures" {
		t.Fatalf("Adopt change = %v", c)
	}
	if st := b.Status(t0.Add(5*time.Second), slo); st != Ejected {
		t.Fatalf("status during the adopted cooldown = %s", st)
	}
	if st := b.Status(e.Until, slo); st != HalfOpen {
		t.Fatalf("status at the adopted cooldown's end = %s", st)
	}
	// Adopting the same ejection again, or an older one, changes nothing.
	if c := b.Adopt(e, "fleet", t0.Add(2*time.Second), slo, pol); c != nil {
		t.Fatalf("second Adopt = %v", c)
	}
	// An ejection already over is not adopted.
	if c := NewTarget("c", 0).Adopt(e, "fleet", e.Until, slo, pol); c != nil {
		t.Fatalf("Adopt of an ended ejection = %v", c)
	}
	// A failed trial after an adopted ejection doubles its cooldown.
	if !b.ClaimTrial(e.Until) {
		t.Fatal("no trial after the adopted cooldown")
	}
	b.Record(Sample{At: e.Until}, slo, pol)
	if e2, ok := b.Ejection(e.Until); !ok || e2.Cooldown != 20*time.Second {
		t.Fatalf("after a failed trial: %+v, %v", e2, ok)
	}
}

func TestRecentTTFT(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	a := NewTarget("a", 4)
	for i := range 6 {
		a.Record(Sample{At: t0, OK: i != 3, TTFT: time.Duration(i+1) * time.Millisecond}, SLO{}, Policy{})
	}
	got := a.RecentTTFT(10)
	want := []time.Duration{3 * time.Millisecond, 5 * time.Millisecond, 6 * time.Millisecond} // the ring holds 4: 3, 4 (failed), 5, 6
	if len(got) != len(want) {
		t.Fatalf("RecentTTFT = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("RecentTTFT = %v, want %v", got, want)
		}
	}
	if got := a.RecentTTFT(2); len(got) != 2 || got[1] != 6*time.Millisecond {
		t.Fatalf("RecentTTFT(2) = %v", got)
	}
}
