package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

// -trace (issue 33): what the relay's spans cost when Caddy's `tracing`
// is on and its sampler drops every request, beyond what tracing adds to
// reverse_proxy. Four targets, interleaved: the relay with and without
// tracing (one site of the relay process, one handler: `tracing` applies
// to the requests that ask for it, ?traced=1), and reverse_proxy with and
// without it (the same in the proxy process). The children run with
// OTEL_TRACES_SAMPLER=always_off and OTEL_TRACES_EXPORTER=none: Caddy's
// tracing wraps the traced requests in its otelhttp handler (what it
// costs any handler), nothing records and nothing is exported. The
// figure: the relay's extra CPU per request,
// (relay traced - relay) - (reverse_proxy traced - reverse_proxy),
// against the untraced relay's, goal at most 5 %.
//
// Rounds are traceRound requests long unless -round says otherwise. With
// the default 500, every round switching a process between its traced
// and untraced path cost the traced path a few µs more per request
// (measured 2026-12-07: the relay's extra +7.3 µs at 500, +1.7 µs at
// 5,000, +0.5 µs at 25,000; each target alone in its processes, -0.6 and
// -2.0 µs), the same with the relay's tracing code compiled out: a cost
// of switching, not of the spans (docs/benchmark.md).
const traceRound = 5000

// traceRelaySite is the relay's block (relayBlock) with `tracing` for the
// requests that ask for it. Ports: the site; the block.
const traceRelaySite = `
http://:%[1]d {
	bind 127.0.0.1
	@traced query traced=1
	tracing @traced {
		span relay
	}
%[2]s}
`

// traceProxySite is reverse_proxy with `tracing` for the requests that
// ask for it. Ports: the site, sim.
const traceProxySite = `
http://:%[1]d {
	bind 127.0.0.1
	@traced query traced=1
	tracing @traced {
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
		{name: "relay", url: sites.relayTrace + "/v1/chat/completions?traced=0", proc: sites.relayProc},
		{name: "relay+tracing", url: sites.relayTrace + "/v1/chat/completions?traced=1", proc: sites.relayProc},
		{name: "reverse_proxy", url: sites.proxyTrace + "/v1/chat/completions?traced=0", proc: sites.proxyProc},
		{name: "reverse_proxy+tracing", url: sites.proxyTrace + "/v1/chat/completions?traced=1", proc: sites.proxyProc},
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

// flagSet reports whether the command line set the named flag.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
