package llmrelay

import (
	"context"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// prober runs one upstream's active health checks until stopped.
type prober struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (p *prober) stop() {
	p.cancel()
	<-p.done
}

// startProbes starts the active health checks of every upstream that has
// a health_check block. A probe's result goes to every target on that
// upstream (each model sent to it), as live traffic does.
func (h *Relay) startProbes(ctx caddy.Context) {
	for _, u := range h.Upstreams {
		hc := u.HealthCheck
		if hc == nil {
			continue
		}
		up := h.upstreams[u.Name]
		// One entry per health state: chain, canary and shadow targets
		// (and aliases) sending the same model share one.
		var targets []*target
		seen := map[*healthEntry]bool{}
		h.eachTarget(func(t *target) {
			if t.up == up && !seen[t.entry] {
				seen[t.entry] = true
				targets = append(targets, t)
			}
		})
		uri := hc.URI
		if uri == "" {
			uri = "/models"
		}
		interval := durationOr(hc.Interval, 30*time.Second)
		timeout := durationOr(hc.Timeout, 5*time.Second)
		pctx, cancel := context.WithCancel(ctx)
		p := &prober{cancel: cancel, done: make(chan struct{})}
		h.probes = append(h.probes, p)
		go func() {
			defer close(p.done)
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				h.probe(pctx, up, uri, timeout, targets)
				select {
				case <-pctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}
}

// probe sends one health check and records it.
func (h *Relay) probe(ctx context.Context, up *upstreamRuntime, uri string, timeout time.Duration, targets []*target) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := up.newRequest(ctx, http.MethodGet, up.base+uri, nil, nil)
	if err != nil {
		return
	}
	start := time.Now()
	resp, err := up.transport.RoundTrip(req)
	ok := err == nil && resp.StatusCode < 300
	if err == nil {
		_ = resp.Body.Close() // reads what is left first (see reusing)
	}
	if ctx.Err() != nil && err != nil && context.Cause(ctx) == context.Canceled {
		return // stopping, not a failed probe
	}
	rtt := time.Since(start)
	for _, t := range targets {
		h.logChange(t.health.Probe(start, rtt, ok, t.slo, defaultPolicy))
	}
}

// eachTarget calls f for every compiled target: chains, canaries and
// shadows.
func (h *Relay) eachTarget(f func(*target)) {
	visit := func(rt *route) {
		for _, t := range rt.targets {
			f(t)
		}
		if rt.canary != nil {
			f(rt.canary.target)
		}
		if rt.shadow != nil {
			f(rt.shadow.target)
		}
	}
	for _, rt := range h.routes {
		visit(rt)
	}
	if h.wildcard != nil {
		visit(h.wildcard)
	}
}
