package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/traces"
)

func TestReplayModeOff(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Caddy and replays traces in real time")
	}
	o := defaultOptions()
	o.mode = "off"
	o.traces = []string{"tools", "error-mid", "eof-no-done"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var logs bytes.Buffer
	rep, err := run(ctx, o, &logs)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, logs.String())
	}
	if len(rep.Traces) != len(o.traces) {
		t.Fatalf("%d results", len(rep.Traces))
	}
	for i, res := range rep.Traces {
		if res.Name != o.traces[i] {
			t.Errorf("result %d is %s, want %s", i, res.Name, o.traces[i])
		}
		if !res.Exact || res.Error != "" {
			t.Errorf("%s: exact %v (%s), error %q", res.Name, res.Exact, res.ExactNote, res.Error)
		}
		if res.Timing != "upstream-write" {
			t.Errorf("%s: input timing %s", res.Name, res.Timing)
		}
		a := res.all()
		if a.EventsIn == 0 || a.EventsOut == 0 || a.RunesIn != a.RunesOut {
			t.Errorf("%s: %+v", res.Name, a)
		}
		// Pass-through adds almost nothing; generous bound for loaded
		// machines and -race.
		if a.Lag.P50 > 100*time.Millisecond {
			t.Errorf("%s: pass-through lag %v", res.Name, a.Lag)
		}
	}
	if !rep.OK || !rep.Targets[0].Pass || !rep.Informational {
		t.Errorf("report OK %v, targets %+v", rep.OK, rep.Targets)
	}

	var out bytes.Buffer
	rep.print(&out)
	table := out.String()
	for _, want := range []string{"mode off", "trace", "CV in", "lag p50", "tools", "error-mid", "eof-no-done", "yes", "PASS  byte-exact"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	t.Logf("\n%s", table)
	if err := json.NewEncoder(io.Discard).Encode(rep); err != nil {
		t.Fatal(err)
	}
}

func TestFlagsAndCaddyfile(t *testing.T) {
	o, err := parseFlags([]string{"-mode", "pace", "-max-delay", "300ms", "-traces", "cjk, steady,cjk", "-strict=false", "-tagged=false"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.mode != "pace" || o.maxDelay != 300*time.Millisecond || o.strict || strings.Join(o.traces, ",") != "cjk,steady" {
		t.Fatalf("options %+v", o)
	}
	if o.reasoningMax() != 300*time.Millisecond {
		t.Fatalf("pace mode: reasoning max delay %v, want max_delay", o.reasoningMax())
	}
	cf := caddyfile(o, 1, 2)
	for _, want := range []string{"smoothing pace {", "max_delay 300ms", "upstream traces http://127.0.0.1:2/v1", "http://127.0.0.1:1 {", "admin off"} {
		if !strings.Contains(cf, want) {
			t.Errorf("Caddyfile lacks %q:\n%s", want, cf)
		}
	}
	o.mode = "off"
	if strings.Contains(caddyfile(o, 1, 2), "smoothing") {
		t.Error("-mode off must leave the smoothing block out")
	}
	// The tagged traces get an upstream that parses their tags, unless
	// -tagged=false.
	if strings.Contains(cf, "reasoning_format") || strings.Contains(cf, "tagged-reasoning") {
		t.Errorf("Caddyfile with -tagged=false names the tagged upstream:\n%s", cf)
	}
	o, err = parseFlags(nil, io.Discard)
	if err != nil || !o.tagged {
		t.Fatalf("-tagged: %+v, %v", o, err)
	}
	cf = caddyfile(o, 1, 2)
	for _, want := range []string{"upstream traces_tagged http://127.0.0.1:2/v1 {\n\t\t\treasoning_format tags\n\t\t}", "model tagged-reasoning {\n\t\t\tto traces_tagged tagged-reasoning\n\t\t}"} {
		if !strings.Contains(cf, want) {
			t.Errorf("Caddyfile with -tagged lacks %q:\n%s", want, cf)
		}
	}
	if strings.Index(cf, "model tagged-reasoning") > strings.Index(cf, "model *") {
		t.Errorf("the tagged alias comes after model *:\n%s", cf)
	}
	for _, bad := range [][]string{{"-mode", "fast"}, {"-traces", "nope"}, {"-max-delay", "0s"}, {"extra"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// With -tagged=false the real clock leaves the tagged traces out, and a
// run of nothing but them is an error, before any server starts.
func TestRealClockSkipsTaggedTraces(t *testing.T) {
	o := defaultOptions()
	o.tagged = false
	o.traces = []string{"tagged-reasoning"}
	var logs bytes.Buffer
	if _, err := run(context.Background(), o, &logs); err == nil || !strings.Contains(err.Error(), "-tagged") {
		t.Fatalf("run: %v", err)
	}
	if !strings.Contains(logs.String(), "not replaying tagged-reasoning") {
		t.Errorf("logs: %s", logs.String())
	}
}

// A reasoning dump when the answer starts scores several times 1; a
// steady drain of what is queued, about 1.
func TestReasoningSurge(t *testing.T) {
	at := func(ms int) time.Time { return vt0.Add(time.Duration(ms) * time.Millisecond) }
	piece := func(reasoning bool, n int) []traces.Piece {
		return []traces.Piece{{Reasoning: reasoning, Text: strings.Repeat("x", n)}}
	}
	// Reasoning bursts of 90 runes every 300 ms; at 1500 ms the last
	// 150 with the answer's first; the answer then.
	var in []timed
	for ms := 0; ms < 1500; ms += 300 {
		in = append(in, timed{at(ms), piece(true, 90)})
	}
	in = append(in, timed{at(1500), piece(true, 150)})
	for ms := 1500; ms < 2500; ms += 300 {
		in = append(in, timed{at(ms), piece(false, 90)})
	}
	// Output: 10 reasoning runes every 33 ms up to the answer (450 of
	// them), then the 150 queued; the answer beside.
	steady := func(from, to, runes int) (out []timed) {
		for ms := from; ms < to; ms += 33 {
			out = append(out, timed{at(ms), piece(true, runes)})
		}
		return out
	}
	answer := steady(1500, 2500, 0)
	for i := range answer {
		answer[i].pieces = piece(false, 10)
	}
	merge := func(a, b []timed) []timed {
		out := append(slices.Clone(a), b...)
		slices.SortStableFunc(out, func(x, y timed) int { return x.at.Compare(y.at) })
		return out
	}
	for _, c := range []struct {
		name     string
		drain    []timed
		min, max float64
	}{
		{"a steady drain within 300 ms", steady(1510, 1810, 15), 0.8, 1.3},
		{"all at once", []timed{{at(1510), piece(true, 150)}}, 2.5, 100},
		{"all at once, as the answer arrives", []timed{{at(1500), piece(true, 150)}}, 2.5, 100},
	} {
		out := merge(merge(steady(0, 1500, 10), c.drain), answer)
		if got := reasoningSurge(in, out); got < c.min || got > c.max {
			t.Errorf("%s: surge %.2f, want %.1f to %.1f", c.name, got, c.min, c.max)
		}
	}
}

// The CI gate: the whole report on the virtual clock, in both modes,
// meets every target of issue 16.
func TestVirtualTargets(t *testing.T) {
	for _, mode := range []string{"pace", "split-reasoning"} {
		o := defaultOptions()
		o.mode, o.clock = mode, "virtual"
		rep, err := run(context.Background(), o, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range rep.Traces {
			if !res.Exact {
				t.Errorf("%s/%s: not exact: %s", mode, res.Name, res.ExactNote)
			}
			// A trace with both channels clustered is held to the
			// targets per channel: its reasoning (a tagged trace's
			// too, parsed out of its content) reached the pacer as
			// reasoning.
			tr, _ := traces.ByName(res.Name)
			if tr.LanesClustered && (len(res.Rows) != 3 || !res.cvApplies || res.Rows[1].RunesOut == 0) {
				t.Errorf("%s/%s: rows %+v, CV target applies %v", mode, res.Name, res.Rows, res.cvApplies)
			}
		}
		for _, tr := range rep.Targets {
			for _, f := range tr.Failures {
				t.Errorf("%s: %s: %s", mode, tr.Name, f)
			}
		}
		if testing.Verbose() {
			rep.print(os.Stdout)
		}
	}
}
