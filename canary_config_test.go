package llmrelay

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmrelay/caddy-llm-relay/internal/canary"
)

func TestCaddyfileCanaryPhases(t *testing.T) {
	r, err := cfParse(t, `llm_relay {
	upstream u http://u/v1
	upstream next http://next/v1
	model m {
		to u
		canary next gpt-next {
			guard {
				ttft_mean 800ms
				cluster_rate 0.65
				reasoning_floor 50%
				min_samples 10
			}
			promote 5% for 3d, 50% for 7d, 100%
		}
	}
}`)
	if err != nil {
		t.Fatal(err)
	}
	c := r.Models[0].Canary
	want := []CanaryPhase{{5, caddy.Duration(72 * time.Hour)}, {50, caddy.Duration(168 * time.Hour)}, {100, 0}}
	if c.Model != "gpt-next" || c.Percent != 0 || fmt.Sprint(c.Phases) != fmt.Sprint(want) ||
		c.Guard.TTFTMean != caddy.Duration(800*time.Millisecond) || c.Guard.ClusterRate != 0.65 || c.Guard.ReasoningFloor != 0.5 {
		t.Fatalf("canary %+v", c)
	}
	// The JSON a `caddy adapt` gives, and back: the same canary.
	b, _ := json.Marshal(c)
	if !strings.Contains(string(b), `"phases":[{"percent":5,"for":259200000000000},{"percent":50,"for":604800000000000},{"percent":100}]`) ||
		!strings.Contains(string(b), `"ttft_mean":800000000`) || !strings.Contains(string(b), `"cluster_rate":0.65`) || !strings.Contains(string(b), `"reasoning_floor":0.5`) {
		t.Fatalf("JSON %s", b)
	}
	var back Canary
	if err := json.Unmarshal([]byte(`{"upstream":"next","phases":[{"percent":5,"for":"3d"},{"percent":50,"for":"7d"},{"percent":100}],"guard":{"ttft_mean":"800ms","cluster_rate":0.65,"reasoning_floor":0.5,"min_samples":10}}`), &back); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(back.Phases) != fmt.Sprint(want) || back.Guard != c.Guard {
		t.Fatalf("from JSON: %+v", back)
	}
	if err := cfProvision(t, r); err != nil {
		t.Fatal(err)
	}
	s := r.routes["m"].canary.c.Snapshot(time.Now())
	if s.Share != 5 || len(s.Phases) != 3 || s.Phases[0].For != "3d" || s.Phases[1].For != "7d" || s.NextStepAt.IsZero() || s.GuardReasoningFloor != 0.5 {
		t.Fatalf("compiled: %+v", s)
	}

	// The line's percent may be given when it agrees with the first phase,
	// and a number after the upstream is still the percent.
	r, err = cfParse(t, "llm_relay {\n\tupstream u http://u/v1\n\tmodel m {\n\t\tto u\n\t\tcanary u 5 {\n\t\t\tpromote 5 for 1h, 100\n\t\t}\n\t}\n}")
	if err != nil || r.Models[0].Canary.Percent != 5 || r.Models[0].Canary.Model != "" || len(r.Models[0].Canary.Phases) != 2 {
		t.Fatalf("%v %+v", err, r.Models[0].Canary)
	}
}

// Every schedule and guard error is the same from the Caddyfile (with the
// line) and from JSON (through Provision).
func TestCanaryScheduleErrorsBothForms(t *testing.T) {
	model := func(body string) string {
		return "llm_relay {\n\tupstream u http://u/v1\n\tmodel m {\n\t\tto u\n" + body + "\n\t}\n}"
	}
	for _, tc := range []struct {
		name      string
		caddyfile string
		line      int
		json      Canary
		want      string
	}{
		{"phases not increasing", "\t\tcanary u {\n\t\t\tpromote 50% for 1d, 10% for 1d, 100%\n\t\t}", 6,
			Canary{Upstream: "u", Phases: []CanaryPhase{{50, caddy.Duration(24 * time.Hour)}, {10, caddy.Duration(24 * time.Hour)}, {100, 0}}},
			"promote phase 2: 10% after 50%; each phase's share must be larger than the one before"},
		{"phase without duration", "\t\tcanary u {\n\t\t\tpromote 5% for 1d, 50%, 100%\n\t\t}", 6,
			Canary{Upstream: "u", Phases: []CanaryPhase{{5, caddy.Duration(24 * time.Hour)}, {50, 0}, {100, 0}}},
			"promote phase 2 (50%) has no duration; only the last phase stays without an end: write `50% for 3d`"},
		{"last phase with duration", "\t\tcanary u {\n\t\t\tpromote 5% for 1d, 50% for 7d\n\t\t}", 6,
			Canary{Upstream: "u", Phases: []CanaryPhase{{5, caddy.Duration(24 * time.Hour)}, {50, caddy.Duration(7 * 24 * time.Hour)}}},
			"promote: the last phase (50% for 7d) has a duration, but no phase follows it; drop `for 7d`"},
		{"line percent disagrees", "\t\tcanary u 10 {\n\t\t\tpromote 5% for 1d, 100%\n\t\t}", 6,
			Canary{Upstream: "u", Percent: 10, Phases: []CanaryPhase{{5, caddy.Duration(24 * time.Hour)}, {100, 0}}},
			"the canary's share 10% is not its first phase's 5%"},
		{"steps not increasing", "\t\tcanary u 50 {\n\t\t\tpromote 20 100 every 1h\n\t\t}", 6,
			Canary{Upstream: "u", Percent: 50, Promote: []float64{20, 100}, PromoteEvery: caddy.Duration(time.Hour)},
			"promote 20% after 50%: each step's share must be larger than the one before"},
	} {
		expectParseError(t, tc.name, model(tc.caddyfile), tc.want, fmt.Sprintf("Testfile:%d", tc.line))
		c := tc.json
		r := &Relay{Upstreams: []*Upstream{{Name: "u", BaseURL: "http://u/v1"}},
			Models: []*ModelRoute{{Alias: "m", Targets: []Target{{Upstream: "u"}}, Canary: &c}}}
		if err := cfProvision(t, r); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `model "m": canary:`) {
			t.Errorf("%s (JSON): err = %v, want %q", tc.name, err, tc.want)
		}
	}
	// Caddyfile-only shapes, at their lines.
	for _, tc := range []struct {
		name, in string
		line     int
		want     string
	}{
		{"for and every", "\t\tcanary u {\n\t\t\tpromote 5% for 1d, 100% every 1h\n\t\t}", 6, "`for` and `every` are two forms of one schedule"},
		{"bad phase", "\t\tcanary u {\n\t\t\tpromote 5% during 1d, 100% for\n\t\t}", 6, "phase 1 \"5% during 1d\": expected `<percent> for <duration>`"},
		{"bad duration", "\t\tcanary u {\n\t\t\tpromote 5% for soon, 100%\n\t\t}", 6, `canary promote: phase 1 for: "soon" is not a positive duration`},
		{"two promote lines", "\t\tcanary u {\n\t\t\tpromote 5% for 1d, 100%\n\t\t\tpromote 5% for 1d, 100%\n\t\t}", 7, "canary promote is already specified"},
		{"no share", "\t\tcanary u gpt-next {\n\t\t\tkey client_ip\n\t\t}", 5, "canary: no share; give one"},
		{"cluster_rate ratio", "\t\tcanary u 5 {\n\t\t\tguard {\n\t\t\t\tcluster_rate 1.5\n\t\t\t}\n\t\t}", 7, `guard cluster_rate: "1.5" is not a ratio`},
		{"reasoning_floor above 1", "\t\tcanary u 5 {\n\t\t\tguard {\n\t\t\t\treasoning_floor 1.5\n\t\t\t}\n\t\t}", 7, `guard reasoning_floor: "1.5" is not a ratio; write it like 0.95 or 95% (a share of the stable targets' reasoning above 0 and at most 1, such as 0.5)`},
		{"reasoning_floor 0", "\t\tcanary u 5 {\n\t\t\tguard {\n\t\t\t\treasoning_floor 0\n\t\t\t}\n\t\t}", 7, `guard reasoning_floor: "0" is not a ratio`},
		{"ttft_mean duration", "\t\tcanary u 5 {\n\t\t\tguard {\n\t\t\t\tttft_mean fast\n\t\t\t}\n\t\t}", 7, `guard ttft_mean: "fast" is not a positive duration`},
	} {
		expectParseError(t, tc.name, model(tc.in), tc.want, fmt.Sprintf("Testfile:%d", tc.line))
	}
	// JSON-only shapes.
	for _, tc := range []struct {
		name string
		c    Canary
		want string
	}{
		{"both forms", Canary{Upstream: "u", Promote: []float64{50}, PromoteEvery: caddy.Duration(time.Hour), Phases: []CanaryPhase{{5, caddy.Duration(time.Hour)}, {100, 0}}},
			"phases with `for` and promote ... every are two forms of one schedule"},
		{"promote without every", Canary{Upstream: "u", Percent: 5, Promote: []float64{50}}, "promote [50] without promote_every never promotes"},
		{"negative phase", Canary{Upstream: "u", Phases: []CanaryPhase{{5, caddy.Duration(-time.Hour)}, {100, 0}}}, "duration -1h0m0s is negative"},
		{"cluster_rate", Canary{Upstream: "u", Percent: 5, Guard: CanaryGuard{ClusterRate: 2}}, "guard cluster_rate 2 is not a ratio"},
		{"reasoning_floor", Canary{Upstream: "u", Percent: 5, Guard: CanaryGuard{ReasoningFloor: 1.5}}, "guard reasoning_floor 1.5 is not a share of the stable targets' reasoning; give one above 0 and at most 1"},
		{"reasoning_floor negative", Canary{Upstream: "u", Percent: 5, Guard: CanaryGuard{ReasoningFloor: -0.5}}, "guard reasoning_floor -0.5 is not a share"},
		{"ttft_mean", Canary{Upstream: "u", Percent: 5, Guard: CanaryGuard{TTFTMean: -1}}, "guard ttft_mean -1ns is negative"},
	} {
		c := tc.c
		r := &Relay{Upstreams: []*Upstream{{Name: "u", BaseURL: "http://u/v1"}},
			Models: []*ModelRoute{{Alias: "m", Targets: []Target{{Upstream: "u"}}, Canary: &c}}}
		if err := cfProvision(t, r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// A canary the previous version could express keeps its pool key, which
// is also the key of its saved state and (digested) its field in the
// fleet's hash: a state saved before phases still finds its canary.
func TestCanaryPoolKeyUnchanged(t *testing.T) {
	// The previous version's key, verbatim.
	type oldGuard struct {
		TTFTP99    time.Duration
		ErrorRate  float64
		MinSamples int
		Window     int
	}
	oldKey := func(prefix string, c *Canary) string {
		steps := append([]float64{c.Percent}, c.Promote...)
		g := oldGuard{time.Duration(c.Guard.TTFTP99), c.Guard.ErrorRate, c.Guard.MinSamples, c.Guard.Window}
		return fmt.Sprintf("%s|%v|%v|%v", prefix, steps, g, c.PromoteEvery)
	}
	for _, c := range []*Canary{
		{Percent: 5},
		{Percent: 5, Promote: []float64{50, 100}, PromoteEvery: caddy.Duration(10 * time.Minute),
			Guard: CanaryGuard{TTFTP99: caddy.Duration(3 * time.Second), ErrorRate: 0.1, MinSamples: 10, Window: 50}},
		{Percent: 12.5, Guard: CanaryGuard{ErrorRate: 0.05}},
	} {
		if got, want := canaryPoolKey("m|h|client_ip", c.rollout(), c.Guard.guard()), oldKey("m|h|client_ip", c); got != want {
			t.Errorf("key %q, the previous version's %q", got, want)
		}
	}
	if got := canaryPoolKey("p", canary.Every([]float64{5, 50}, time.Hour), canary.Guard{}); got != "p|[5 50]|{0s 0 0 0}|3600000000000" {
		t.Errorf("golden key %q", got)
	}
	// Phases of one length are the every form's key (rewriting the
	// schedule does not reset the canary); of their own lengths, and the
	// new guard figures, make keys of their own.
	every := &Canary{Percent: 5, Promote: []float64{50, 100}, PromoteEvery: caddy.Duration(time.Hour)}
	same := &Canary{Phases: []CanaryPhase{{5, caddy.Duration(time.Hour)}, {50, caddy.Duration(time.Hour)}, {100, 0}}}
	own := &Canary{Phases: []CanaryPhase{{5, caddy.Duration(time.Hour)}, {50, caddy.Duration(2 * time.Hour)}, {100, 0}}}
	k := func(c *Canary) string { return canaryPoolKey("p", c.rollout(), c.Guard.guard()) }
	if k(every) != k(same) {
		t.Errorf("%q != %q", k(every), k(same))
	}
	if k(own) == k(every) {
		t.Errorf("phases of their own lengths share the every key %q", k(own))
	}
	mean := &Canary{Percent: 5, Guard: CanaryGuard{TTFTMean: caddy.Duration(time.Second)}}
	cluster := &Canary{Percent: 5, Guard: CanaryGuard{ClusterRate: 0.7}}
	if k(mean) == k(&Canary{Percent: 5}) || k(cluster) == k(&Canary{Percent: 5}) || k(mean) == k(cluster) {
		t.Errorf("new guard figures share a key: %q %q", k(mean), k(cluster))
	}
	floor := &Canary{Percent: 5, Guard: CanaryGuard{ReasoningFloor: 0.5}}
	if k(floor) == k(&Canary{Percent: 5}) || k(floor) == k(cluster) {
		t.Errorf("reasoning_floor shares a key: %q", k(floor))
	}
}
