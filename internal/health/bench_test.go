package health

import (
	"testing"
	"time"
)

var benchSLO = SLO{TTFT: 800 * time.Millisecond, Success: 0.9}

// BenchmarkRecord: one successful sample into a full 50-sample window,
// judged against TTFT and success (two window scans per Record).
func BenchmarkRecord(b *testing.B) {
	tg := NewTarget("a", 0)
	now := t0
	b.ReportAllocs()
	for i := range b.N {
		now = now.Add(time.Millisecond)
		tg.Record(Sample{At: now, TTFT: time.Duration(300+i%400) * time.Millisecond, OK: true}, benchSLO, Policy{})
	}
}

// BenchmarkRecordParallel: every goroutine records on the same target.
func BenchmarkRecordParallel(b *testing.B) {
	tg := NewTarget("a", 0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		now := t0
		for pb.Next() {
			now = now.Add(time.Millisecond)
			tg.Record(Sample{At: now, TTFT: 300 * time.Millisecond, OK: true}, benchSLO, Policy{})
		}
	})
}

func BenchmarkStatus(b *testing.B) {
	tg := NewTarget("a", 0)
	for i := range 50 {
		tg.Record(Sample{At: t0.Add(time.Duration(i) * time.Second), TTFT: 500 * time.Millisecond, OK: true}, benchSLO, Policy{})
	}
	now := t0.Add(time.Minute)
	b.ReportAllocs()
	for b.Loop() {
		tg.Status(now, benchSLO)
	}
}

// BenchmarkOrder: a 4-target chain with full windows, as three ranks
// (one pool of two) or one pool of four, with and without a hint.
func BenchmarkOrder(b *testing.B) {
	mkChain := func(ranks []int) []Candidate {
		cands := make([]Candidate, len(ranks))
		for i, r := range ranks {
			tg := NewTarget("t", 0)
			for k := range 50 {
				tg.Record(Sample{At: t0.Add(time.Duration(k) * time.Second), TTFT: time.Duration(200+100*i) * time.Millisecond, OK: true}, benchSLO, Policy{})
			}
			cands[i] = Candidate{T: tg, SLO: benchSLO, Rank: r, Weight: 1, Region: []string{"us", "eu"}[i%2]}
		}
		return cands
	}
	now := t0.Add(time.Minute)
	for _, bc := range []struct {
		name  string
		ranks []int
		hint  string
	}{
		{"chain", []int{0, 1, 1, 2}, ""},
		{"pool4", []int{0, 0, 0, 0}, ""},
		{"pool4-auto", []int{0, 0, 0, 0}, HintAuto},
		{"chain-region", []int{0, 1, 1, 2}, "eu"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cands := mkChain(bc.ranks)
			rnd := seeded(1)
			b.ReportAllocs()
			for b.Loop() {
				Order(cands, now, bc.hint, rnd)
			}
		})
	}
}
