package main

import (
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/traces"
)

// vt0 is the virtual clock's origin; only differences matter.
var vt0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// runVirtual replays the named traces through the pacer alone on a
// virtual clock (pace.Simulate): no Caddy, no network, no timers, and the
// same figures in every run. The pacer gets the configuration the relay
// would give it for these options; the client's view is the pacer's
// output as written, each write stamped with its virtual time.
func runVirtual(o options, names []string) (*report, error) {
	mode, err := pace.ParseMode(o.mode)
	if err != nil {
		return nil, err
	}
	cfg := pace.Config{
		Mode:              mode,
		MaxDelay:          o.maxDelay,
		ReasoningMaxDelay: o.reasoningMaxDelay,
		MinInterval:       o.minInterval,
	}
	var streams []*stream
	for _, name := range names {
		t, _ := traces.ByName(name)
		s, err := simulateTrace(cfg, t)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		streams = append(streams, s)
	}
	return newReport(o, streams), nil
}

// simulateTrace runs one trace through pace.Simulate and returns what a
// client would have received, as a replayed stream.
func simulateTrace(cfg pace.Config, t traces.Trace) (*stream, error) {
	at := make([]time.Duration, len(t.Steps))
	writes := make([][]byte, len(t.Steps))
	s := &stream{trace: t, status: 200, headerAt: vt0}
	for i, st := range t.Steps {
		at[i], writes[i] = st.At, st.Raw
		s.upstream = append(s.upstream, vt0.Add(st.At))
	}
	arrs := pace.ArrivalsOf(at, writes)
	if t.Tagged {
		// The relay parses the inline reasoning before the pacer.
		evs, err := relayEvents(t)
		if err != nil {
			return nil, err
		}
		arrs = arrs[:0]
		for _, e := range evs {
			arrs = append(arrs, pace.Arrival{At: e.at, Event: e.ev})
		}
	}
	ems, _, err := pace.Simulate(cfg, arrs)
	if err != nil {
		return nil, err
	}
	for _, em := range ems {
		rd := sse.NewReader(bytes.NewReader(em.Raw), 0)
		for {
			ev, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, err
			}
			s.events = append(s.events, received{
				at:           vt0.Add(em.At),
				data:         bytes.Clone(ev.Data),
				hasData:      ev.HasData,
				comment:      ev.IsComment(),
				unterminated: ev.Unterminated,
			})
		}
	}
	return s, nil
}
