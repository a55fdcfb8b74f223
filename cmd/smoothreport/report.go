package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/smoothness"
	"github.com/llmrelay/caddy-llm-relay/internal/traces"
)

// jsonDur is a duration that marshals as a string like "400ms".
type jsonDur time.Duration

func (d jsonDur) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// report is the whole run. In JSON, the smoothness figures' durations
// are in nanoseconds.
type report struct {
	Mode              string         `json:"mode"`
	Clock             string         `json:"clock"` // "real" or "virtual"
	MaxDelay          jsonDur        `json:"max_delay"`
	ReasoningMaxDelay jsonDur        `json:"reasoning_max_delay"` // as applied: max_delay unless split-reasoning
	MinInterval       jsonDur        `json:"min_interval"`
	Traces            []*traceResult `json:"traces"`
	Targets           []targetResult `json:"targets"`
	Informational     bool           `json:"targets_informational"` // -mode off: smoothness targets do not count
	OK                bool           `json:"ok"`
}

// targetResult is one target's verdict.
type targetResult struct {
	Name     string   `json:"name"`
	Pass     bool     `json:"pass"`
	Passed   int      `json:"passed"`
	Checked  int      `json:"checked"`
	Failures []string `json:"failures,omitempty"`
}

// Smoothness targets, on clustered traces.
const (
	cvReduction = 0.80
	lagSlack    = 30 * time.Millisecond
	tailMax     = 100 * time.Millisecond
	// surgeMax bounds the reasoning's most in a 100 ms window once the
	// answer began, against its mean before (traceResult.ReasoningSurge).
	surgeMax = 2.0
)

// evaluate fills Targets and OK.
func (r *report) evaluate(o options) {
	exact := targetResult{Name: "byte-exact text and endings (all traces)"}
	cv := targetResult{Name: fmt.Sprintf("output CV >= %.0f%% below input", cvReduction*100)}
	stalls := targetResult{Name: "no bridgeable stall > 250ms"}
	lag := targetResult{Name: fmt.Sprintf("lag p99 <= max delay + %s", lagSlack)}
	tail := targetResult{Name: fmt.Sprintf("tail flush <= %s", tailMax)}
	surge := targetResult{Name: fmt.Sprintf("reasoning surge at the answer <= %.0fx", surgeMax)}
	worse := targetResult{Name: "never worse than pass-through (all traces)"}
	check := func(tr *targetResult, ok bool, failure string) {
		tr.Checked++
		if ok {
			tr.Passed++
		} else {
			tr.Failures = append(tr.Failures, failure)
		}
	}
	for _, res := range r.Traces {
		check(&exact, res.Exact, res.Name+": "+res.ExactNote)
		if o.mode != "off" {
			for _, row := range res.Rows {
				ok, why := notWorse(row.Report, o.minInterval, o.clock)
				check(&worse, res.Error == "" && ok, fmt.Sprintf("%s/%s %s", res.Name, row.Channel, why))
			}
		}
		if !res.Clustered {
			continue
		}
		a := res.all()
		t, _ := traces.ByName(res.Name)
		// The whole text, and each channel's alone where each is
		// clustered (traces.Trace.LanesClustered).
		rows := res.Rows[:1]
		if t.LanesClustered {
			rows = res.Rows
		}
		res.cvApplies = cvApplies(t, o)
		for _, row := range rows {
			name := res.Name
			if row.Channel != "all" {
				name += "/" + row.Channel
			}
			r := row.Report
			if res.cvApplies {
				check(&cv, res.Error == "" && r.OutRateCV <= (1-cvReduction)*r.InRateCV,
					fmt.Sprintf("%s %.2f->%.2f (%s)", name, r.InRateCV, r.OutRateCV, change(r.InRateCV, r.OutRateCV)))
			}
			check(&stalls, res.Error == "" && r.BridgeableStalls == 0,
				fmt.Sprintf("%s %d bridgeable", name, r.BridgeableStalls))
		}
		for _, row := range res.lagRows(t, o) {
			check(&lag, res.Error == "" && row.lag.P99 <= row.max+lagSlack,
				fmt.Sprintf("%s/%s p99 %s > %s", res.Name, row.name, fmtDur(row.lag.P99), fmtDur(row.max+lagSlack)))
		}
		check(&tail, res.Error == "" && a.TailFlush <= tailMax,
			fmt.Sprintf("%s %s", res.Name, fmtDur(a.TailFlush)))
		if t.LanesClustered && res.cvApplies {
			check(&surge, res.Error == "" && res.ReasoningSurge <= surgeMax,
				fmt.Sprintf("%s %.1fx", res.Name, res.ReasoningSurge))
		}
	}
	r.Targets = []targetResult{exact, cv, stalls, lag, tail, surge, worse}
	r.Informational = o.mode == "off"
	r.OK = true
	for i := range r.Targets {
		tr := &r.Targets[i]
		tr.Pass = tr.Passed == tr.Checked
		if tr.Pass {
			continue
		}
		if i == 0 || (o.strict && !r.Informational) {
			r.OK = false
		}
	}
}

// Never worse than pass-through: the output's rate CV, text gap p99 and
// stalls against the input's, with this much noise allowed.
const (
	worseRel = 0.05
	worseCV  = 0.02             // absolute, for CVs near 0
	worseGap = time.Millisecond // absolute, for timer granularity

	// realJitter is the gap allowance on the real clock instead: a
	// timer, a goroutine hand-off and a loopback read each add a few
	// milliseconds at random on a busy 2-core machine (as mode off shows
	// on the same traces), which the virtual clock does not have.
	realJitter = 10 * time.Millisecond
)

// notWorse reports whether one row's output is no worse than its input,
// and if not, why. A text gap up to one tick interval (min_interval
// stretched to divide 100 ms) is the configured emission cadence, not a
// regression: an upstream that sends faster than that is merged into one
// event per tick, which is what min_interval asks for.
func notWorse(r smoothness.Report, minInterval time.Duration, clock string) (bool, string) {
	var why []string
	if r.OutRateCV > r.InRateCV*(1+worseRel)+worseCV {
		why = append(why, fmt.Sprintf("CV %.2f->%.2f", r.InRateCV, r.OutRateCV))
	}
	tick := 100 * time.Millisecond / (100 * time.Millisecond / minInterval)
	slack := worseGap
	if clock == "real" {
		slack = realJitter
	}
	limit := max(time.Duration(float64(r.InTextGap.P99)*(1+worseRel)), time.Duration(float64(tick)*(1+worseRel))) + slack
	if r.OutTextGap.P99 > limit {
		why = append(why, fmt.Sprintf("text gap p99 %s->%s", fmtDur(r.InTextGap.P99), fmtDur(r.OutTextGap.P99)))
	}
	if r.Stalls > r.InStalls {
		why = append(why, fmt.Sprintf("gaps>250ms %d->%d", r.InStalls, r.Stalls))
	}
	return len(why) == 0, strings.Join(why, ", ")
}

// cvApplies reports whether the CV target applies to a clustered trace
// in this mode: its clusters must be bridgeable by the max delay of the
// lane that carries them (reasoning clusters 600 ms apart are not, with
// pace mode's 400 ms).
func cvApplies(t traces.Trace, o options) bool {
	bound := o.answerMax()
	if t.Reasoning != "" {
		// The clustered traces with reasoning cluster their reasoning.
		bound = o.reasoningMax()
	}
	return t.Cadence <= bound
}

// change formats the relative change from in to out.
func change(in, out float64) string {
	if in == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%+.0f%%", (out-in)/in*100)
}

// fmtDur formats a duration compactly.
func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

// print writes the table and the target lines.
func (r *report) print(w io.Writer) {
	timing := "upstream write stamps"
	for _, t := range r.Traces {
		if t.Timing == "header-offset" {
			timing = "step offsets from the client's header time (some traces)"
		}
	}
	if r.Clock == "virtual" {
		timing = "virtual clock (the pacer alone)"
	}
	fmt.Fprintf(w, "smoothreport: mode %s, max_delay %s, reasoning_max_delay %s, min_interval %s; input times: %s\n\n",
		r.Mode, time.Duration(r.MaxDelay), time.Duration(r.ReasoningMaxDelay), time.Duration(r.MinInterval), timing)
	const format = "%-26s %-4s %9s %6s %6s %6s %13s %7s %9s %7s %7s %7s %7s  %s\n"
	fmt.Fprintf(w, format, "trace", "ch", "events", "CV in", "CV out", "change", "text gap p99", "stalls", "steady", "lag p50", "p99", "max", "tail", "exact")
	for _, res := range r.Traces {
		name := res.Name
		switch {
		case res.Clustered && res.cvApplies:
			name += " *"
		case res.Clustered:
			name += " (*)"
		}
		for i, row := range res.Rows {
			ch, exact, tail := row.Channel, "", ""
			if i == 0 {
				exact = "yes"
				if !res.Exact {
					exact = "NO: " + res.ExactNote
				}
				tail = fmtDur(row.TailFlush)
			} else {
				name = ""
				ch = "rsn"
				if row.Channel == "answer" {
					ch = "ans"
				}
			}
			fmt.Fprintf(w, format, name, ch,
				fmt.Sprintf("%d/%d", row.EventsIn, row.EventsOut),
				fmt.Sprintf("%.2f", row.InRateCV), fmt.Sprintf("%.2f", row.OutRateCV), change(row.InRateCV, row.OutRateCV),
				fmtDur(row.InTextGap.P99)+">"+fmtDur(row.OutTextGap.P99), fmt.Sprintf("%d/%d/%d", row.InStalls, row.Stalls, row.BridgeableStalls),
				fmt.Sprintf("%.0f>%.0f%%", 100*row.InSteady, 100*row.OutSteady),
				fmtDur(row.Lag.P50), fmtDur(row.Lag.P99), fmtDur(row.Lag.Max), tail, exact)
		}
	}
	fmt.Fprintf(w, "\n* clustered (targets apply); (*) clustered, but its clusters are further apart than this mode's bound (no CV target).\n"+
		"text gap p99 = in>out, gaps between text events that a relay could bridge. stalls = gaps > 250ms between text events: in/out/of which bridgeable.\n"+
		"steady = in>out, share of 100 ms windows in which the text grew.\n\n")
	for _, tr := range r.Targets {
		verdict := "PASS"
		if !tr.Pass {
			verdict = "FAIL"
		}
		line := fmt.Sprintf("%s  %-44s %d/%d", verdict, tr.Name, tr.Passed, tr.Checked)
		if len(tr.Failures) > 0 {
			line += "  failing: " + strings.Join(tr.Failures, "; ")
		}
		fmt.Fprintln(w, line)
	}
	if r.Informational {
		fmt.Fprintln(w, "(-mode off: the smoothness targets are informational; only exactness sets the exit status)")
	}
}
