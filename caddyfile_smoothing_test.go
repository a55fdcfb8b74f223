package llmrelay

import (
	"strings"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
)

func TestCaddyfileSmoothing(t *testing.T) {
	r, err := cfParse(t, `llm_relay {
	upstream u http://u/v1
	model fast {
		to u
		smoothing off
	}
	model thinker {
		to u
		smoothing {
			reasoning hide
			max_delay 250ms
		}
	}
	model plain {
		to u
	}
	smoothing split-reasoning {
		max_delay 300ms
		reasoning_max_delay 2s
		min_interval 20ms
		heartbeat 0
		early_commit 5s
	}
}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfProvision(t, r); err != nil {
		t.Fatal(err)
	}
	want := map[string]smoothPolicy{
		"plain": {cfg: pace.Config{Mode: pace.ModeSplit, MaxDelay: 300 * time.Millisecond, ReasoningMaxDelay: 2 * time.Second,
			MinInterval: 20 * time.Millisecond}, earlyCommit: 5 * time.Second},
		"fast": {cfg: pace.Config{Mode: pace.ModeOff, MaxDelay: 300 * time.Millisecond, ReasoningMaxDelay: 2 * time.Second,
			MinInterval: 20 * time.Millisecond}, earlyCommit: 5 * time.Second},
		"thinker": {cfg: pace.Config{Mode: pace.ModeSplit, MaxDelay: 250 * time.Millisecond, ReasoningMaxDelay: 2 * time.Second,
			MinInterval: 20 * time.Millisecond, HideReasoning: true}, earlyCommit: 5 * time.Second},
	}
	for alias, w := range want {
		if got := r.routes[alias].smooth; got != w {
			t.Errorf("%s: policy %+v, want %+v", alias, got, w)
		}
	}
}

func TestSmoothingDefaults(t *testing.T) {
	cases := []struct {
		name   string
		relay  *Smoothing
		mode   pace.Mode
		hb     time.Duration
		maxDel time.Duration
	}{
		{"no block: off, heartbeats on", nil, pace.ModeOff, 15 * time.Second, 400 * time.Millisecond},
		{"a block without a mode paces", &Smoothing{}, pace.ModePace, 15 * time.Second, 400 * time.Millisecond},
	}
	for _, c := range cases {
		pol, err := resolveSmoothing(c.relay, nil)
		if err != nil {
			t.Fatal(err)
		}
		if pol.cfg.Mode != c.mode || pol.cfg.Heartbeat != c.hb || pol.cfg.MaxDelay != c.maxDel ||
			pol.cfg.MinInterval != 30*time.Millisecond || pol.cfg.ReasoningMaxDelay != 1500*time.Millisecond || pol.earlyCommit != 0 {
			t.Errorf("%s: %+v", c.name, pol)
		}
	}
}

func TestCaddyfileSmoothingErrors(t *testing.T) {
	// The smoothing block starts at Testfile:6.
	ok := func(body string) string {
		return "llm_relay {\n\tupstream u http://u/v1\n\tmodel m {\n\t\tto u\n\t}\n" + body + "\n}"
	}
	for _, tc := range []struct {
		name string
		in   string
		want []string
	}{
		{"unknown mode", ok("\tsmoothing fast"), []string{`smoothing: unknown mode "fast"; write ` + "`smoothing off`", "Testfile:6"}},
		{"two modes", ok("\tsmoothing pace off"), []string{`got extra argument "off"`, "Testfile:6"}},
		{"twice", ok("\tsmoothing pace\n\tsmoothing off"), []string{"smoothing is already specified", "Testfile:7"}},
		{"unknown setting", ok("\tsmoothing {\n\t\tdelay 1s\n\t}"), []string{`unrecognized smoothing subdirective "delay"; expected max_delay`, "Testfile:7"}},
		{"bad duration", ok("\tsmoothing {\n\t\tmax_delay soon\n\t}"), []string{`max_delay: "soon" is not a positive duration`, "Testfile:7"}},
		{"zero max_delay", ok("\tsmoothing {\n\t\tmax_delay 0\n\t}"), []string{`max_delay: "0" is not a positive duration`, "Testfile:7"}},
		{"no value", ok("\tsmoothing {\n\t\tmin_interval\n\t}"), []string{"smoothing: expected `min_interval <value>`, got 0 values", "Testfile:7"}},
		{"bad heartbeat", ok("\tsmoothing {\n\t\theartbeat -1s\n\t}"), []string{`heartbeat: "-1s" is not a duration; write it like 15s, or 0 to turn it off`, "Testfile:7"}},
		{"bad reasoning", ok("\tsmoothing {\n\t\treasoning maybe\n\t}"), []string{`reasoning: "maybe" is not show or hide`, "Testfile:7"}},
		{"min_interval over max_delay", ok("\tsmoothing {\n\t\tmin_interval 500ms\n\t}"),
			[]string{"smoothing: min_interval 500ms is longer than max_delay 400ms", "Testfile:6"}},
		{"model block merged with relay level", "llm_relay {\n\tupstream u http://u/v1\n\tmodel m {\n\t\tto u\n\t\tsmoothing {\n\t\t\tmax_delay 50ms\n\t\t}\n\t}\n\tsmoothing {\n\t\tmin_interval 100ms\n\t\tmax_delay 1s\n\t}\n}",
			[]string{`model "m": smoothing: min_interval 100ms is longer than max_delay 50ms`, "Testfile:5"}},
		{"model smoothing twice", "llm_relay {\n\tupstream u http://u/v1\n\tmodel m {\n\t\tto u\n\t\tsmoothing pace\n\t\tsmoothing off\n\t}\n}",
			[]string{`model "m": smoothing is already specified`, "Testfile:6"}},
	} {
		expectParseError(t, tc.name, tc.in, tc.want...)
	}
}

// JSON configs (caddy adapt output, or hand-written) are checked at
// provision with the same rules.
func TestSmoothingJSONValidation(t *testing.T) {
	r := &Relay{
		Upstreams: []*Upstream{{Name: "u", BaseURL: "http://u/v1"}},
		Models:    []*ModelRoute{{Alias: "m", Targets: []Target{{Upstream: "u"}}}},
		Smoothing: &Smoothing{Mode: "turbo"},
	}
	err := cfProvision(t, r)
	if err == nil || !strings.Contains(err.Error(), `smoothing: unknown smoothing mode "turbo"`) {
		t.Fatalf("err = %v", err)
	}
}

// expectParseError fails unless parsing in gives an error containing every
// want (the message and the Testfile:<line> it names).
func expectParseError(t *testing.T, name, in string, want ...string) {
	t.Helper()
	_, err := cfParse(t, in)
	if err == nil {
		t.Errorf("%s: no error", name)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not contain %q", name, err, w)
		}
	}
}
