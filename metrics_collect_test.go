package llmrelay

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmrelay/caddy-llm-relay/internal/health"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// startParityRelay parses and provisions an llm_relay block, registering
// it among the live relays until the test ends, its key budgets in the
// ledger.
func startParityRelay(tb testing.TB, block string) *Relay {
	tb.Helper()
	r := new(Relay)
	if err := r.UnmarshalCaddyfile(caddyfile.NewTestDispenser(block)); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	tb.Cleanup(cancel)
	tb.Cleanup(func() {
		if err := r.Cleanup(); err != nil {
			tb.Errorf("Cleanup: %v", err)
		}
	})
	if err := r.Provision(ctx); err != nil {
		tb.Fatal(err)
	}
	if err := r.Validate(); err != nil {
		tb.Fatal(err)
	}
	r.applyBudgets() // as its first request would
	return r
}

// gatherState runs the state collector as a scrape does and returns its
// series as `name{label="value",...}` (labels sorted) -> value.
func gatherState(tb testing.TB) map[string]float64 {
	tb.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(stateCollector{})
	fams, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() { // the registry sorts them by name
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetGauge().GetValue()
		}
	}
	return out
}

// The small config of TestGaugesMatchStatusView: names start with "mp-" so
// that relays other tests left loaded do not count.
const cfMetricsParity = `llm_relay {
	key tok-mp-a mp-a budget 10 per day
	key tok-mp-b mp-b
	state off
	upstream mp-up1 http://127.0.0.1:1/v1 {
		max_concurrent 4
	}
	upstream mp-up2 http://127.0.0.1:2/v1
	slo {
		window 4
		min_samples 2
	}
	model mp-strict {
		to mp-up1 m1
		to mp-up2
		slo {
			ttft 10ms
		}
		canary mp-up2 m2 25
	}
	model mp-lenient {
		to mp-up2
		to mp-up1 m1 {
			max_concurrent 2
		}
	}
}`

// TestGaugesMatchStatusView: the state gauges a scrape reads are the
// figures the status view shows, for a config with an ejected target, a
// target degraded under one model's SLO and healthy under the other's, a
// canary, a key budget partly spent and capped targets with requests in
// flight.
func TestGaugesMatchStatusView(t *testing.T) {
	r := startParityRelay(t, cfMetricsParity)
	now := time.Now()
	strict, lenient := r.routes["mp-strict"], r.routes["mp-lenient"]
	// mp-up2 "*" ejected: three failures in a row.
	up2 := strict.targets[1]
	for range 3 {
		up2.health.Record(health.Sample{At: now}, up2.slo, defaultPolicy)
	}
	// mp-up1 m1: slow successes break mp-strict's ttft 10ms, not
	// mp-lenient's (no ttft), so the status view lists it twice.
	up1 := strict.targets[0]
	for range 2 {
		up1.health.Record(health.Sample{At: now, TTFT: 60 * time.Millisecond, OK: true}, up1.slo, defaultPolicy)
	}
	ledger.Add("mp-a", 2.5, usage.Usage{}, now)
	capped := lenient.targets[1]
	capped.caps[0].inFlight.Add(1) // the upstream's cap: 1 of 4
	capped.caps[1].inFlight.Add(1) // the target's own: 1 of 2, the fuller
	t.Cleanup(func() {
		capped.caps[0].inFlight.Add(-1)
		capped.caps[1].inFlight.Add(-1)
	})

	st := buildStatus(time.Now())
	got := gatherState(t)

	want := map[string]float64{}
	for _, ts := range st.Targets { // the first listing of a target is the gauge's
		if !strings.HasPrefix(ts.Upstream, "mp-") {
			continue
		}
		k := fmt.Sprintf("llm_relay_target_healthy{model=%q,upstream=%q}", ts.Model, ts.Upstream)
		if _, ok := want[k]; ok {
			continue
		}
		want[k] = map[string]float64{"healthy": 1, "degraded": .5, "half-open": .5, "ejected": 0}[ts.Status]
	}
	for _, c := range st.Canaries {
		alias, rest, _ := strings.Cut(c.Name, " → ")
		upstream, _, _ := strings.Cut(rest, " (")
		if strings.HasPrefix(alias, "mp-") {
			want[fmt.Sprintf("llm_relay_canary_share_percent{alias=%q,upstream=%q}", alias, upstream)] = c.Share
		}
	}
	for _, k := range st.Keys {
		if strings.HasPrefix(k.Key, "mp-") && k.Budget != "" {
			want[fmt.Sprintf("llm_relay_budget_remaining_usd{key=%q}", k.Key)] = math.Max(k.BudgetUSD-k.SpentUSD, 0)
			if got := usage.FormatUSD(got[fmt.Sprintf("llm_relay_budget_remaining_usd{key=%q}", k.Key)]); got != k.Remaining {
				t.Errorf("key %s: the gauge's remaining %s, the status view's %s", k.Key, got, k.Remaining)
			}
		}
	}
	for _, c := range st.Chains {
		if !strings.HasPrefix(c.Alias, "mp-") {
			continue
		}
		for _, l := range c.Targets {
			if l.MaxConcurrent == 0 {
				continue
			}
			labels := fmt.Sprintf("{alias=%q,model=%q,upstream=%q}", c.Alias, l.Model, l.Upstream)
			want["llm_relay_target_in_flight"+labels] = float64(l.InFlight)
			want["llm_relay_target_occupancy"+labels] = float64(l.InFlight) / float64(l.MaxConcurrent)
		}
	}

	// The figures the config makes, so that the comparison is not of two
	// empty sets.
	for k, v := range map[string]float64{
		`llm_relay_target_healthy{model="m1",upstream="mp-up1"}`:                      .5,
		`llm_relay_target_healthy{model="*",upstream="mp-up2"}`:                       0,
		`llm_relay_target_healthy{model="m2",upstream="mp-up2"}`:                      1,
		`llm_relay_canary_share_percent{alias="mp-strict",upstream="mp-up2"}`:         25,
		`llm_relay_target_in_flight{alias="mp-lenient",model="m1",upstream="mp-up1"}`: 1,
		`llm_relay_target_occupancy{alias="mp-lenient",model="m1",upstream="mp-up1"}`: .5,
		`llm_relay_target_in_flight{alias="mp-strict",model="m1",upstream="mp-up1"}`:  1,
		`llm_relay_target_occupancy{alias="mp-strict",model="m1",upstream="mp-up1"}`:  .25,
	} {
		if w, ok := want[k]; !ok || w != v {
			t.Errorf("the status view gives %s %v (listed: %v), want %v", k, w, ok, v)
		}
	}
	if _, ok := want[`llm_relay_budget_remaining_usd{key="mp-a"}`]; !ok {
		t.Errorf("the status view shows no budget for mp-a")
	}

	for k, w := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("the status view shows %s %v; the collector has no such series", k, w)
		} else if math.Abs(g-w) > 1e-9 {
			t.Errorf("%s: the collector reads %v, the status view %v", k, g, w)
		}
	}
	for k, g := range got {
		if strings.Contains(k, `"mp-`) {
			if _, ok := want[k]; !ok {
				t.Errorf("the collector has %s %v; the status view shows no such figure", k, g)
			}
		}
	}
	if _, ok := got[`llm_relay_budget_remaining_usd{key="mp-b"}`]; ok {
		t.Errorf("a key without a budget has a budget gauge")
	}
	if up := st.State != nil && st.State.Up != nil; up != hasPrefix(got, "llm_relay_shared_state_up{") {
		t.Errorf("shared state: the status view's up is known: %v; the collector's gauge present: %v", up, !up)
	}
}

func hasPrefix(series map[string]float64, prefix string) bool {
	for k := range series {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// BenchmarkStateCollect is one scrape of the state gauges over a config
// of 12 models (three targets each, a canary on half of them, capped
// upstreams) and 40 keys with budgets.
func BenchmarkStateCollect(b *testing.B) {
	var cf strings.Builder
	cf.WriteString("llm_relay {\n\tstate off\n")
	for i := range 40 {
		fmt.Fprintf(&cf, "\tkey tok-bench-%d bench-%d budget 10 per day\n", i, i)
	}
	for i := range 4 {
		fmt.Fprintf(&cf, "\tupstream bench-up%d http://127.0.0.1:%d/v1 {\n\t\tmax_concurrent 8\n\t}\n", i, i+1)
	}
	for i := range 12 {
		fmt.Fprintf(&cf, "\tmodel bench-%d {\n", i)
		for j := range 3 {
			fmt.Fprintf(&cf, "\t\tto bench-up%d m%d\n", (i+j)%4, i)
		}
		if i%2 == 0 {
			fmt.Fprintf(&cf, "\t\tcanary bench-up%d c%d 10\n", (i+3)%4, i)
		}
		cf.WriteString("\t}\n")
	}
	cf.WriteString("}")
	startParityRelay(b, cf.String())
	ch := make(chan prometheus.Metric, 1024)
	b.ReportAllocs()
	for b.Loop() {
		stateCollector{}.Collect(ch)
		for len(ch) > 0 {
			<-ch
		}
	}
}
