package health

import (
	"testing"
	"time"
)

func TestFlag(t *testing.T) {
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	slo := SLO{Success: 0.9}
	tg := NewTarget("a", 0)
	c := tg.Flag("reasoning 38% of baseline", now, slo)
	if c == nil || c.From != Healthy || c.To != Degraded || c.Reason != "reasoning 38% of baseline" {
		t.Fatalf("Flag = %v", c)
	}
	if st := tg.Status(now, slo); st != Degraded {
		t.Fatalf("status = %v", st)
	}
	if s := tg.Snapshot(now, slo); s.Reason != "reasoning 38% of baseline" || s.Status != "degraded" {
		t.Fatalf("snapshot = %+v", s)
	}
	// Successes do not end the flag; only clearing it does.
	for i := range 20 {
		tg.Record(Sample{At: now.Add(time.Duration(i) * time.Millisecond), OK: true}, slo, Policy{})
	}
	if st := tg.Status(now, slo); st != Degraded {
		t.Fatalf("status after successes = %v", st)
	}
	c = tg.Flag("", now.Add(time.Second), slo)
	if c == nil || c.To != Healthy || c.Reason != "reasoning trial passed" {
		t.Fatalf("clear = %v", c)
	}
	// Ejection outranks the flag.
	tg.Flag("x", now, slo)
	for i := range 3 {
		tg.Record(Sample{At: now.Add(2*time.Second + time.Duration(i)), OK: false}, slo, Policy{})
	}
	if st := tg.Status(now.Add(3*time.Second), slo); st != Ejected {
		t.Fatalf("status = %v, want ejected", st)
	}
}
