package main

import (
	"fmt"
	"io"
	"os"
)

// -trace (issue 33): what the relay's spans cost when Caddy's `tracing`
// is on and its sampler drops every request, beyond what tracing adds to
// reverse_proxy. Four targets, interleaved: the relay's site and the same
// relay block under `tracing` (one relay process), reverse_proxy and
// reverse_proxy under `tracing` (the proxy process). The children run
// with OTEL_TRACES_SAMPLER=always_off and OTEL_TRACES_EXPORTER=none:
// Caddy's tracing wraps every request in its otelhttp handler (what it
// costs any handler), nothing records and nothing is exported. The
// figure: the relay's extra CPU per request,
// (relay traced - relay) - (reverse_proxy traced - reverse_proxy),
// against the untraced relay's, goal at most 5 %.

// traceRelaySite is the relay's first site again under `tracing`: the
// same block (relayBlock). Ports: the site; the block.
const traceRelaySite = `
http://:%[1]d {
	bind 127.0.0.1
	tracing {
		span relay
	}
%[2]s}
`

// traceProxySite is reverse_proxy under `tracing`. Ports: the site, sim.
const traceProxySite = `
http://:%[1]d {
	bind 127.0.0.1
	tracing {
		span proxy
	}
	reverse_proxy 127.0.0.1:%[2]d
}
`

// goalTraceExtra is issue 33's bound: the relay's extra cost with tracing
// on and nothing sampled, beyond reverse_proxy's, over the relay's
// untraced cost.
const goalTraceExtra = 0.05

// traceEnv sets what the children read for Caddy's tracing: they inherit
// this process's environment.
func traceEnv() {
	os.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	os.Setenv("OTEL_TRACES_EXPORTER", "none")
}

// traceTargets are -trace's four targets.
func traceTargets(sites siteURLs) []*target {
	return []*target{
		{name: "relay", url: sites.relay + "/v1/chat/completions", proc: sites.relayProc},
		{name: "relay+tracing", url: sites.relayTraced + "/v1/chat/completions", proc: sites.relayProc},
		{name: "reverse_proxy", url: sites.proxy + "/v1/chat/completions", proc: sites.proxyProc},
		{name: "reverse_proxy+tracing", url: sites.proxyTraced + "/v1/chat/completions", proc: sites.proxyProc},
	}
}

// reportTraceGoal prints the relay's extra CPU per request under tracing
// beyond reverse_proxy's, against the goal.
func reportTraceGoal(w io.Writer, results []*result) {
	if len(results) != 4 {
		return
	}
	s := make([]summary, 4)
	for i, r := range results {
		if s[i] = summarize(r); s[i].ok == 0 {
			return
		}
	}
	relay, relayT, proxy, proxyT := s[0].cpu, s[1].cpu, s[2].cpu, s[3].cpu
	extra := (relayT - relay) - (proxyT - proxy)
	share := float64(extra) / float64(relay)
	verdict := "MET"
	if share > goalTraceExtra {
		verdict = "NOT MET"
	}
	fmt.Fprintf(w, "CPU per request: relay %s, traced %s (%+.1fµs); reverse_proxy %s, traced %s (%+.1fµs)\n",
		us(relay), us(relayT), float64(relayT-relay)/1e3, us(proxy), us(proxyT), float64(proxyT-proxy)/1e3)
	fmt.Fprintf(w, "goal the relay's extra cost under tracing (nothing sampled) beyond reverse_proxy's <= %.0f%% of its untraced cost: %s (%+.1fµs, %+.1f%%)\n",
		goalTraceExtra*100, verdict, float64(extra)/1e3, share*100)
}
