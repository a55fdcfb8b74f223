package pace

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// Arrival is one upstream block and when it arrived, counted from the
// start of the stream.
type Arrival struct {
	At    time.Duration
	Event sse.Event
}

// Emission is one write to the client and when it happened.
type Emission struct {
	At  time.Duration
	Raw []byte
}

// ArrivalsOf parses upstream writes, each one or more SSE blocks, into
// blocks stamped with the time of the write that completed them. A block
// still cut off after the last write is dropped, as an SSE client drops
// it.
func ArrivalsOf(at []time.Duration, writes [][]byte) []Arrival {
	var out []Arrival
	var buf []byte
	for i, w := range writes {
		buf = append(buf, w...)
		rd := sse.NewReader(bytes.NewReader(buf), 0)
		consumed := 0
		for {
			ev, err := rd.Next()
			if err != nil || ev.Unterminated {
				break
			}
			out = append(out, Arrival{At: at[i], Event: ev.Clone()})
			consumed += len(ev.Raw)
		}
		buf = buf[consumed:]
	}
	return out
}

// Simulate runs a Pacer over arrivals on a virtual clock, the way Run
// does on a real one: every arrival is pushed at its time, the end event
// or the end of the arrivals ends the stream, and Next is called at each
// arrival and exactly when it asks to be. Heartbeats are left out (they
// carry nothing). It returns the emissions and the Pacer, for its
// figures (Stats) and state.
//
// Because nothing here waits, a trace of seconds simulates in
// microseconds, and the figures are the same in every run: this is the
// clock the smoothness targets are gated on.
func Simulate(cfg Config, arrs []Arrival) ([]Emission, *Pacer, error) {
	p := NewPacer(cfg)
	var t0 time.Time // only differences matter
	var ems []Emission
	var wake time.Time
	i := 0
	ended := false
	for steps := 0; ; steps++ {
		if steps > 10_000_000 {
			return ems, p, errors.New("pace: simulation does not finish")
		}
		var now time.Time
		switch {
		case i < len(arrs) && (wake.IsZero() || !t0.Add(arrs[i].At).After(wake)):
			now = t0.Add(arrs[i].At)
		case !wake.IsZero():
			now = wake
		case !ended && i == len(arrs):
			// No arrivals at all: the upstream ended at once.
			p.End(now)
			ended = true
			continue
		default:
			if !p.Empty() {
				return ems, p, errors.New("pace: queue not empty at the end and no wake-up asked")
			}
			return ems, p, nil
		}
		for i < len(arrs) && !t0.Add(arrs[i].At).After(now) && !ended {
			k := p.Push(&arrs[i].Event, now)
			i++
			if k == KindDone || p.OverBudget() || i == len(arrs) {
				// The end event, a budget stop, or the upstream's EOF
				// after its last block.
				p.End(now)
				ended = true
			}
		}
		out, w := p.Next(now)
		if !w.IsZero() && !w.After(now) && len(out) == 0 {
			return ems, p, fmt.Errorf("pace: Next asks to be woken at %v, not after now %v, and wrote nothing", w.Sub(t0), now.Sub(t0))
		}
		wake = w
		if len(out) > 0 {
			ems = append(ems, Emission{At: now.Sub(t0), Raw: bytes.Clone(out)})
		}
	}
}
