package main

import (
	"fmt"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/smoothness"
	"github.com/llmrelay/caddy-llm-relay/internal/traces"
)

// inputSlack: when merging input and output events in time order, an
// input event up to this much later than an output event is recorded
// first, so that small clock-reference errors never make an output appear
// to precede the input that caused it. Recording inputs early only
// matters for the Recorder's bounded ring of input silences.
const inputSlack = 50 * time.Millisecond

// channel keys the text of one choice's channel.
type channel struct {
	choice    int
	reasoning bool
}

// timed is an event with its time and its visible text per channel.
type timed struct {
	at     time.Time
	pieces []traces.Piece
}

func (e timed) runes(reasoning bool) int {
	n := 0
	for _, p := range e.pieces {
		if p.Reasoning == reasoning {
			n += p.Runes()
		}
	}
	return n
}

// chanReport is the smoothness of one channel, or of all text ("all").
type chanReport struct {
	Channel string `json:"channel"`
	smoothness.Report
}

// traceResult is everything reported for one trace.
type traceResult struct {
	Name      string       `json:"name"`
	Clustered bool         `json:"clustered"`
	cvApplies bool         // the CV target applies in this mode (set by evaluate)
	Ends      string       `json:"ends"`
	Timing    string       `json:"input_timing"` // "upstream-write" or "header-offset"
	Rows      []chanReport `json:"rows"`         // "all", then "reasoning" and "answer" if both exist
	// ReasoningSurge is the most reasoning text the client got in a
	// 100 ms window once the answer began to arrive, over what a
	// 100 ms window held on average before (reasoningSurge); traces with
	// both channels only.
	ReasoningSurge float64 `json:"reasoning_surge,omitempty"`
	Exact          bool    `json:"exact"`
	ExactNote      string  `json:"exact_note,omitempty"`
	Error          string  `json:"error,omitempty"`
}

// all returns the report over all text.
func (r *traceResult) all() smoothness.Report { return r.Rows[0].Report }

// analyze computes the figures of one replayed stream.
func analyze(s *stream, o options) *traceResult {
	t := s.trace
	res := &traceResult{Name: t.Name, Clustered: t.Clustered, Ends: t.Ends}
	fail := func(format string, args ...any) *traceResult {
		res.Error = fmt.Sprintf(format, args...)
		res.ExactNote = res.Error
		res.Rows = []chanReport{{Channel: "all"}}
		return res
	}
	if s.err != nil && len(s.events) == 0 {
		return fail("%v", s.err)
	}

	// Input: the trace's events at their arrival times, as the relay
	// reads them (a tagged trace's reasoning in its field).
	evs, err := relayEvents(t)
	if err != nil {
		return fail("trace: %v", err)
	}
	stepTime := func(i int) time.Time { return s.headerAt.Add(t.Steps[i].At) }
	res.Timing = "header-offset"
	if s.upstream != nil {
		res.Timing = "upstream-write"
		stepTime = func(i int) time.Time { return s.upstream[i] }
	}
	want := new(traces.Transcript)
	var in []timed
	for _, ev := range evs {
		pieces, err := want.Add(ev.ev.Data)
		if err != nil {
			return fail("trace: %v", err)
		}
		in = append(in, timed{at: stepTime(ev.step), pieces: pieces})
	}
	if t.Ends == traces.EndsEOF && len(t.Steps) > 0 {
		// The cut-off block: the upstream's last bytes, without text.
		in = append(in, timed{at: stepTime(len(t.Steps) - 1)})
	}

	// Output: the data events the client received.
	got := new(traces.Transcript)
	var out []timed
	var parseErr error
	unterminated := false
	for _, ev := range s.events {
		if ev.unterminated {
			unterminated = true
			continue // SSE drops a block cut off by EOF
		}
		if !ev.hasData {
			continue
		}
		pieces, err := got.Add(ev.data)
		if err != nil && parseErr == nil {
			parseErr = err
		}
		out = append(out, timed{at: ev.at, pieces: pieces})
	}

	// Exactness.
	res.Exact, res.ExactNote = exactness(t, want, got, parseErr, unterminated, s.err)

	// Recorders: all text, and per channel.
	hasR, hasA := t.Reasoning != "", t.Answer != ""
	maxOf := func(reasoning bool) time.Duration {
		if reasoning {
			return o.reasoningMax()
		}
		return o.answerMax()
	}
	all := smoothness.New()
	all.TrackTextGaps()
	all.SetMaxDelay(o.answerMax())
	chRec := map[bool]*smoothness.Recorder{}
	for _, r := range []bool{true, false} {
		chRec[r] = smoothness.New()
		chRec[r].TrackTextGaps()
		chRec[r].SetMaxDelay(maxOf(r))
	}
	feedIn := func(e timed) {
		rr, ar := e.runes(true), e.runes(false)
		if rr > 0 {
			all.SetMaxDelay(maxOf(true))
		} else if ar > 0 {
			all.SetMaxDelay(maxOf(false))
		}
		all.Input(e.at, rr+ar)
		if rr > 0 {
			chRec[true].Input(e.at, rr)
		}
		if ar > 0 {
			chRec[false].Input(e.at, ar)
		}
	}
	feedOut := func(e timed) {
		rr, ar := e.runes(true), e.runes(false)
		all.Output(e.at, rr+ar)
		if rr > 0 {
			chRec[true].Output(e.at, rr)
		}
		if ar > 0 {
			chRec[false].Output(e.at, ar)
		}
	}
	i := 0
	for _, e := range out {
		for i < len(in) && !in[i].at.After(e.at.Add(inputSlack)) {
			feedIn(in[i])
			i++
		}
		feedOut(e)
	}
	for ; i < len(in); i++ {
		feedIn(in[i])
	}

	// Lag: pair characters in order per choice and channel.
	type pending struct {
		at    time.Time
		runes int
	}
	queues := map[channel][]pending{}
	for _, e := range in {
		for _, p := range e.pieces {
			k := channel{p.Choice, p.Reasoning}
			queues[k] = append(queues[k], pending{e.at, p.Runes()})
		}
	}
	for _, e := range out {
		for _, p := range e.pieces {
			k := channel{p.Choice, p.Reasoning}
			q := queues[k]
			for n := p.Runes(); n > 0 && len(q) > 0; {
				m := min(n, q[0].runes)
				lag := e.at.Sub(q[0].at)
				all.Lag(lag, m)
				chRec[p.Reasoning].Lag(lag, m)
				n -= m
				q[0].runes -= m
				if q[0].runes == 0 {
					q = q[1:]
				}
			}
			queues[k] = q
		}
	}

	res.Rows = []chanReport{{"all", all.Report()}}
	if hasR && hasA {
		res.Rows = append(res.Rows, chanReport{"reasoning", chRec[true].Report()}, chanReport{"answer", chRec[false].Report()})
		res.ReasoningSurge = reasoningSurge(in, out)
	}
	if s.err != nil {
		res.Error = s.err.Error()
	}
	return res
}

// lagRows returns, per channel with text, its lag report and max delay.
func (r *traceResult) lagRows(t traces.Trace, o options) []struct {
	name string
	lag  smoothness.Dist
	max  time.Duration
} {
	type row = struct {
		name string
		lag  smoothness.Dist
		max  time.Duration
	}
	if len(r.Rows) == 3 {
		return []row{
			{"reasoning", r.Rows[1].Lag, o.reasoningMax()},
			{"answer", r.Rows[2].Lag, o.answerMax()},
		}
	}
	m := o.answerMax()
	if t.Answer == "" {
		m = o.reasoningMax()
	}
	return []row{{"all", r.Rows[0].Lag, m}}
}

// exactness compares what the client reassembled with the trace, and
// checks the ending.
func exactness(t traces.Trace, want, got *traces.Transcript, parseErr error, unterminated bool, readErr error) (bool, string) {
	switch {
	case parseErr != nil:
		return false, "unparsable event: " + parseErr.Error()
	case string(got.Reasoning) != t.Reasoning:
		return false, "reasoning: " + want.Diff(got)
	case string(got.Answer) != t.Answer:
		return false, "answer: " + want.Diff(got)
	}
	if d := want.Diff(got); d != "" {
		return false, d
	}
	if got.AfterEnd > 0 {
		return false, fmt.Sprintf("%d events after [DONE] or an error", got.AfterEnd)
	}
	if unterminated {
		return false, "the client's stream ended inside an event"
	}
	if readErr != nil {
		return false, "read error: " + readErr.Error()
	}
	switch t.Ends {
	case traces.EndsDone:
		if !got.Done || len(got.Errors) > 0 {
			return false, fmt.Sprintf("ending: [DONE] %v, %d error events; want [DONE] only", got.Done, len(got.Errors))
		}
	case traces.EndsError:
		if got.Done || len(got.Errors) == 0 || got.Errors[0] != want.Errors[0] {
			return false, fmt.Sprintf("ending: [DONE] %v, errors %v; want the upstream's error %v", got.Done, got.Errors, want.Errors)
		}
	case traces.EndsEOF:
		if got.Done {
			return false, "ending: [DONE] after a truncated upstream stream"
		}
	}
	return true, ""
}

// reasoningSurge measures a reasoning dump when the answer starts: the
// most reasoning runes the output carried in a 100 ms window that ends
// when or after the first answer text arrived, over the larger of the output's
// mean reasoning runes per 100 ms before then and what 100 ms of a steady
// drain of the reasoning still queued then carries (split-reasoning
// drains it within ReasoningDrain, the default 300 ms, beside the
// answer). A relay that sends what it holds of the reasoning at once when
// the answer comes scores several times 1; one that drains it at a
// steady rate, about 1. 0 when no reasoning left after the answer began,
// or none before.
func reasoningSurge(in, out []timed) float64 {
	var answerAt time.Time
	queued := 0
	for _, e := range in {
		if answerAt.IsZero() && e.runes(false) > 0 {
			answerAt = e.at
		}
		if !answerAt.IsZero() && e.at.After(answerAt) {
			break
		}
		queued += e.runes(true)
	}
	var first time.Time
	before := 0
	for _, e := range out {
		if n := e.runes(true); n > 0 && e.at.Before(answerAt) {
			if first.IsZero() {
				first = e.at
			}
			before += n
		}
	}
	queued -= before
	span := answerAt.Sub(first)
	if answerAt.IsZero() || before == 0 || span < smoothness.Window {
		return 0
	}
	ref := max(float64(before)/(float64(span)/float64(smoothness.Window)),
		float64(queued)/(float64(pace.DefaultReasoningDrain)/float64(smoothness.Window)))
	most := 0
	for i, e := range out {
		if e.runes(true) == 0 || e.at.Before(answerAt) {
			continue
		}
		// The window that ends with this event.
		n := 0
		for j := i; j >= 0 && e.at.Sub(out[j].at) < smoothness.Window; j-- {
			n += out[j].runes(true)
		}
		most = max(most, n)
	}
	return float64(most) / ref
}
