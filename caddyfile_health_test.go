package llmrelay

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

func TestCaddyfileHealthRouting(t *testing.T) {
	r, err := cfParse(t, `llm_relay {
	upstream eu http://eu/v1 {
		region eu
		health_check {
			uri /health
			interval 10s
			timeout 2s
		}
	}
	upstream us http://us/v1 {
		region us
	}
	upstream next http://next/v1
	slo {
		ttft 800ms
		success 95%
		window 40
		min_samples 8
	}
	model m {
		to eu
		to us {
			rank 1
			weight 3
		}
		slo {
			ttft 2s
		}
		canary next next-model 5 {
			key header X-User
			guard {
				ttft_p99 3s
				error_rate 0.1
				min_samples 10
				window 50
			}
			promote 25 100 every 10m
		}
		shadow next 10% {
			max_concurrent 3
		}
	}
}`)
	if err != nil {
		t.Fatal(err)
	}
	hc := r.Upstreams[0].HealthCheck
	if r.Upstreams[0].Region != "eu" || hc == nil || hc.URI != "/health" || hc.Interval != caddy.Duration(10*time.Second) || hc.Timeout != caddy.Duration(2*time.Second) {
		t.Errorf("upstream eu: %+v %+v", r.Upstreams[0], hc)
	}
	if s := r.SLO; s == nil || s.TTFT != caddy.Duration(800*time.Millisecond) || s.Success != 0.95 || s.Window != 40 || s.MinSamples != 8 {
		t.Errorf("relay slo %+v", r.SLO)
	}
	m := r.Models[0]
	if m.Targets[1].Rank != 1 || m.Targets[1].Weight != 3 {
		t.Errorf("target us %+v", m.Targets[1])
	}
	c := m.Canary
	if c == nil || c.Upstream != "next" || c.Model != "next-model" || c.Percent != 5 || c.Key != "header:X-User" ||
		c.Guard.TTFTP99 != caddy.Duration(3*time.Second) || c.Guard.ErrorRate != 0.1 || c.Guard.MinSamples != 10 || c.Guard.Window != 50 ||
		len(c.Promote) != 2 || c.Promote[1] != 100 || c.PromoteEvery != caddy.Duration(10*time.Minute) {
		t.Errorf("canary %+v", c)
	}
	if s := m.Shadow; s == nil || s.Upstream != "next" || s.Model != "" || s.Percent != 10 || s.MaxConcurrent != 3 {
		t.Errorf("shadow %+v", m.Shadow)
	}
	if err := cfProvision(t, r); err != nil {
		t.Fatal(err)
	}
	rt := r.routes["m"]
	// The model's slo overrides ttft only; the rest comes from the relay.
	if slo := rt.targets[0].slo; slo.TTFT != 2*time.Second || slo.Success != 0.95 || slo.Window != 40 || slo.MinSamples != 8 {
		t.Errorf("resolved slo %+v", slo)
	}
	if rt.targets[0].rank != 1 || rt.targets[1].rank != 1 || rt.targets[1].weight != 3 {
		t.Errorf("ranks: eu %d, us %d/%d (equal ranks form a pool)", rt.targets[0].rank, rt.targets[1].rank, rt.targets[1].weight)
	}
	if rt.canary == nil || rt.canary.c.Share() != 5 || rt.shadow == nil || rt.shadow.percent != 10 {
		t.Errorf("canary/shadow not compiled: %+v %+v", rt.canary, rt.shadow)
	}
}

func TestCaddyfileHealthErrors(t *testing.T) {
	ok := func(body string) string {
		return "llm_relay {\n\tupstream u http://u/v1\n\tmodel m {\n\t\tto u\n\t}\n" + body + "\n}"
	}
	model := func(body string) string {
		return "llm_relay {\n\tupstream u http://u/v1\n\tmodel m {\n\t\tto u\n" + body + "\n\t}\n}"
	}
	for _, tc := range []struct {
		name string
		in   string
		want []string
	}{
		{"slo bad ratio", ok("\tslo {\n\t\tsuccess 1.5\n\t}"), []string{`slo success: "1.5" is not a ratio; write it like 0.95 or 95%`, "Testfile:7"}},
		{"slo bad window", ok("\tslo {\n\t\twindow 0\n\t}"), []string{`slo window: "0" is not a positive whole number`, "Testfile:7"}},
		{"slo unknown", ok("\tslo {\n\t\tp99 1s\n\t}"), []string{`unrecognized slo subdirective "p99"`, "Testfile:7"}},
		{"slo twice", ok("\tslo {\n\t}\n\tslo {\n\t}"), []string{"slo is already specified", "Testfile:8"}},
		{"health_check relative", ok("\tupstream v http://v/v1 {\n\t\thealth_check {\n\t\t\turi models\n\t\t}\n\t}"),
			[]string{`health_check uri "models": write a path relative to the base URL, such as /models`, "Testfile:8"}},
		{"region missing", ok("\tupstream v http://v/v1 {\n\t\tregion\n\t}"), []string{"expected `region <code>`", "Testfile:7"}},
		{"rank zero", model("\t\tto u {\n\t\t\trank 0\n\t\t}"), []string{`rank: "0" is not a positive whole number`, "Testfile:6"}},
		{"canary percent", model("\t\tcanary u 150"), []string{`canary: "150" is not a percentage between 0 and 100`, "Testfile:5"}},
		{"canary args", model("\t\tcanary u"), []string{"canary: expected `canary <upstream> [<model>] <percent>`", "Testfile:5"}},
		{"canary key", model("\t\tcanary u 5 {\n\t\t\tkey cookie session\n\t\t}"), []string{"canary key: expected `key header <name>`", "Testfile:6"}},
		{"canary promote", model("\t\tcanary u 5 {\n\t\t\tpromote 50 100\n\t\t}"), []string{"canary promote: expected `promote <percent...> every <duration>`", "Testfile:6"}},
		{"canary unknown upstream", model("\t\tcanary nope 5"), []string{`model "m": canary: unknown upstream "nope"`, "Testfile:5"}},
		{"shadow unknown upstream", model("\t\tshadow nope 5"), []string{`model "m": shadow: unknown upstream "nope"`, "Testfile:5"}},
		{"shadow max", model("\t\tshadow u 5 {\n\t\t\tmax_concurrent none\n\t\t}"), []string{`shadow max_concurrent: "none" is not a positive whole number`, "Testfile:6"}},
		{"guard ratio", model("\t\tcanary u 5 {\n\t\t\tguard {\n\t\t\t\terror_rate 2\n\t\t\t}\n\t\t}"), []string{`guard error_rate: "2" is not a ratio`, "Testfile:7"}},
	} {
		expectParseError(t, tc.name, tc.in, tc.want...)
	}
}

// Load-time checks of the canary's shape (JSON configs included).
func TestCanaryValidatedAtProvision(t *testing.T) {
	r := &Relay{
		Upstreams: []*Upstream{{Name: "u", BaseURL: "http://u/v1"}, {Name: "c", BaseURL: "http://c/v1"}},
		Models: []*ModelRoute{{Alias: "m", Targets: []Target{{Upstream: "u"}},
			Canary: &Canary{Upstream: "c", Percent: 50, Promote: []float64{20}}}},
	}
	err := cfProvision(t, r)
	if err == nil || !strings.Contains(err.Error(), `model "m": canary:`) {
		t.Fatalf("err = %v (promotion steps must increase)", err)
	}
}
