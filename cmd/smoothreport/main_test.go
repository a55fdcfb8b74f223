package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"
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
	o, err := parseFlags([]string{"-mode", "pace", "-max-delay", "300ms", "-traces", "cjk, steady,cjk", "-strict=false"}, io.Discard)
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
	for _, bad := range [][]string{{"-mode", "fast"}, {"-traces", "nope"}, {"-max-delay", "0s"}, {"extra"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
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
