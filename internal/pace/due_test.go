package pace

import (
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/traces"
)

// Due is never late: whatever was just pushed, Next called at any time
// before Due sends nothing. (Run's writer is not woken for pushes that
// are due no earlier than the wake-up it already waits for.) Each probe
// is a real call, so the stream goes on from the probe's time.
func TestDueNeverLate(t *testing.T) {
	probes := 0
	for _, tr := range traces.All() {
		arrs := traceArrivals(tr)
		for _, mode := range []Mode{ModePace, ModeSplit} {
			p := NewPacer(Config{Mode: mode})
			var t0 time.Time
			now := t0
			for i := 0; i < len(arrs); {
				if at := t0.Add(arrs[i].At); at.After(now) {
					now = at
				}
				for i < len(arrs) && !t0.Add(arrs[i].At).After(now) {
					p.Push(&arrs[i].Event, now)
					i++
				}
				if i == len(arrs) {
					p.End(now)
				}
				next := t0.Add(time.Hour)
				if i < len(arrs) {
					next = t0.Add(arrs[i].At)
				}
				if due := p.Due(now); due.After(now) {
					probe := now.Add(due.Sub(now) / 2)
					if probe.After(now) && probe.Before(next) {
						if out, _ := p.Next(probe); len(out) > 0 {
							t.Fatalf("%s, %s: Due %v after a push at %v, but Next at %v sent %q", tr.Name, mode, due.Sub(t0), now.Sub(t0), probe.Sub(t0), out)
						}
						probes++
						now = probe
					}
				}
				// Then as Run's writer: every wake-up before the next arrival.
				for {
					_, wake := p.Next(now)
					if wake.IsZero() || !wake.Before(next) {
						break
					}
					now = wake
				}
			}
		}
	}
	if probes < 100 {
		t.Fatalf("only %d probes: the traces no longer exercise Due", probes)
	}
}

// Mode off's shortcuts (ClassifyCount, pass) send the same bytes at the
// same times and record the same figures as the queue they bypass.
func TestPassThroughMatchesQueue(t *testing.T) {
	for _, tr := range traces.All() {
		arrs := traceArrivals(tr)
		fast, slow := NewPacer(Config{}), NewPacer(Config{})
		if !fast.passThrough {
			t.Fatal("mode off, Chat, no budget: not passThrough")
		}
		slow.passThrough = false
		var t0 time.Time
		for i := 0; i < len(arrs); {
			now := t0.Add(arrs[i].At)
			for i < len(arrs) && !t0.Add(arrs[i].At).After(now) {
				kf, ks := fast.Push(&arrs[i].Event, now), slow.Push(&arrs[i].Event, now)
				textOrOther := (kf == KindText || kf == KindOther) && (ks == KindText || ks == KindOther)
				if kf != ks && !textOrOther { // text or other: the same in mode off
					t.Fatalf("%s, event %d: kind %s, queued %s", tr.Name, i, kindName(kf), kindName(ks))
				}
				i++
			}
			of, _ := fast.Next(now)
			os, _ := slow.Next(now)
			if string(of) != string(os) {
				t.Fatalf("%s at %v: sent %q, queued %q", tr.Name, now.Sub(t0), of, os)
			}
		}
		if f, s := fast.Stats(), slow.Stats(); f.Report != s.Report || f.EventsOut != s.EventsOut {
			t.Fatalf("%s: figures %+v, queued %+v", tr.Name, f.Report, s.Report)
		}
	}
}

// traceArrivals are a trace's blocks stamped with their step's time.
func traceArrivals(tr traces.Trace) []Arrival {
	var at []time.Duration
	var writes [][]byte
	for _, s := range tr.Steps {
		at, writes = append(at, s.At), append(writes, s.Raw)
	}
	return ArrivalsOf(at, writes)
}

// A Pacer made after another's Release (its buffers and recorder reused)
// sends and measures exactly what a Pacer made fresh does.
func TestReleasedPacerStartsClean(t *testing.T) {
	all := traces.All()
	for _, mode := range []Mode{ModeOff, ModePace, ModeSplit} {
		cfg := Config{Mode: mode}
		for i, tr := range all {
			prev := all[(i+1)%len(all)]
			fresh, pf, err := Simulate(cfg, traceArrivals(tr))
			if err != nil {
				t.Fatal(err)
			}
			_, pp, err := Simulate(cfg, traceArrivals(prev))
			if err != nil {
				t.Fatal(err)
			}
			pp.Release() // its buffers, full of prev, go to the next Pacer
			again, pa, err := Simulate(cfg, traceArrivals(tr))
			if err != nil {
				t.Fatal(err)
			}
			if len(fresh) != len(again) {
				t.Fatalf("%s, %s after %s: %d emissions, fresh %d", mode, tr.Name, prev.Name, len(again), len(fresh))
			}
			for j := range fresh {
				if fresh[j].At != again[j].At || string(fresh[j].Raw) != string(again[j].Raw) {
					t.Fatalf("%s, %s after %s: emission %d differs", mode, tr.Name, prev.Name, j)
				}
			}
			if pf.Stats().Report != pa.Stats().Report {
				t.Fatalf("%s, %s after %s: figures differ", mode, tr.Name, prev.Name)
			}
			pf.Release()
			pa.Release()
		}
	}
}
