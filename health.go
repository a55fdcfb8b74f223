package llmrelay

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/llmrelay/caddy-llm-relay/internal/health"
	"github.com/llmrelay/caddy-llm-relay/internal/reasoninghealth"
	"go.uber.org/zap"
)

// Health state lives in process-wide pools keyed by what it describes, not
// in the handler: on a config reload the new handler is provisioned before
// the old one is cleaned up, so it finds the same entries and the measured
// windows, cooldowns and canary decisions carry over.
var (
	targetPool = caddy.NewUsagePool()
	canaryPool = caddy.NewUsagePool()
	shadowPool = caddy.NewUsagePool()
)

// pooled wraps a value for a UsagePool, which wants a Destructor.
type pooled[T any] struct{ v T }

func (pooled[T]) Destruct() error { return nil }

// healthKey names a target's health state: the upstream (name and base
// URL, so pointing a name elsewhere starts afresh) and the model sent.
func healthKey(up *upstreamRuntime, model string) string {
	return up.name + "|" + up.base + "|" + model
}

// defaultSLO and defaultPolicy apply when no slo block says otherwise.
var defaultPolicy = health.Policy{FailuresToEject: 3, BaseCooldown: 10 * time.Second, MaxCooldown: 5 * time.Minute}

// resolveSLO merges a model's slo block over the relay's.
func resolveSLO(relay, model *SLO) health.SLO {
	var s health.SLO
	for _, b := range []*SLO{relay, model} {
		if b == nil {
			continue
		}
		if b.TTFT != 0 {
			s.TTFT = time.Duration(b.TTFT)
		}
		if b.Success != 0 {
			s.Success = b.Success
		}
		if b.Window != 0 {
			s.Window = b.Window
		}
		if b.MinSamples != 0 {
			s.MinSamples = b.MinSamples
		}
	}
	if s.Window == 0 {
		s.Window = 50
	}
	if s.MinSamples == 0 {
		s.MinSamples = 10
	}
	return s
}

// healthEntry is a target's shared health state.
type healthEntry struct {
	t         *health.Target
	reasoning *reasoninghealth.Tracker // reasoninghealth.go
	recheck   atomic.Int64             // unix ns of the last live request let through while degraded
}

// attachHealth gives a compiled target its shared health state.
func (h *Relay) attachHealth(t *target, slo health.SLO) error {
	key := healthKey(t.up, t.model)
	v, _, err := targetPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		// The ring holds more than any one window: a reload or another
		// model may judge the same target over a longer window.
		ht := health.NewTarget(t.up.name+" ("+modelLabel(t.model)+")", max(slo.Window, minHealthRing))
		if e, ok := durable.restoredEjection(key); ok {
			// Ejected before the restart: not tried again before its
			// cooldown ends.
			h.logChange(ht.Adopt(e, "before the restart", time.Now(), slo, defaultPolicy))
		}
		return pooled[*healthEntry]{&healthEntry{t: ht, reasoning: reasoninghealth.NewTracker()}}, nil
	})
	if err != nil {
		return err
	}
	h.poolKeys = append(h.poolKeys, poolKey{targetPool, key})
	t.entry = v.(pooled[*healthEntry]).v
	t.health = t.entry.t
	t.slo = slo
	return nil
}

// minHealthRing is the fewest samples a target keeps (about 40 KiB).
const minHealthRing = 1000

// recheckEvery is how often a degraded target still gets one live
// request first: without traffic its window could never show that it
// recovered.
const recheckEvery = time.Second

// claimRecheck reports whether this request should try the degraded
// target first, at most once per recheckEvery.
func (e *healthEntry) claimRecheck(now time.Time) bool {
	last := e.recheck.Load()
	if now.UnixNano()-last < int64(recheckEvery) {
		return false
	}
	return e.recheck.CompareAndSwap(last, now.UnixNano())
}

// modelLabel names the model a target sends, for logs, /status and the
// target_healthy metric: "*" for a target that forwards the client's model
// unchanged (a `to <upstream>` line without a model, as in the `*` route),
// so no client-chosen string ever becomes a label.
func modelLabel(m string) string {
	if m == "" {
		return "*"
	}
	return m
}

// poolKey is one reference this handler holds in a pool, released at
// Cleanup.
type poolKey struct {
	pool *caddy.UsagePool
	key  string
}

// recordAttempt feeds an attempt's outcome to its target's health, and
// logs any change of status.
func (h *Relay) recordAttempt(t *target, res *attemptResult, at time.Time) {
	if res.clientGone {
		return
	}
	s := health.Sample{At: at, Duration: time.Since(at)}
	switch {
	case res.resp != nil && res.resp.StatusCode < 300:
		s.OK, s.TTFT = true, res.ttft
	case res.resp != nil:
		return // a non-retryable answer (a 400 about the request) says nothing about health
	}
	h.logChange(t.health.Record(s, t.slo, defaultPolicy))
}

// recordBroken counts a committed stream that broke as a failure.
func (h *Relay) recordBroken(t *target, at time.Time) {
	h.logChange(t.health.Record(health.Sample{At: at, Duration: time.Since(at)}, t.slo, defaultPolicy))
}

// logChange logs a status change of a target: ejections and degradations
// as warnings, recoveries as info.
func (h *Relay) logChange(c *health.Change) {
	if c == nil {
		return
	}
	fields := []zap.Field{zap.String("target", c.Target), zap.String("from", c.From.String()),
		zap.String("to", c.To.String()), zap.String("reason", c.Reason)}
	if c.To == health.Healthy || c.To == health.HalfOpen {
		h.logger.Info("target "+c.To.String(), fields...)
		return
	}
	h.logger.Warn("target "+c.To.String(), fields...)
}

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
		uri, timeout := up.probeURI, up.probeTimeout
		interval := durationOr(hc.Interval, 30*time.Second)
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

// The health probe's defaults (HealthCheck).
const (
	defaultProbeURI     = "/models"
	defaultProbeTimeout = 5 * time.Second
)

// probe sends one health check and records it.
func (h *Relay) probe(ctx context.Context, up *upstreamRuntime, uri string, timeout time.Duration, targets []*target) {
	res := up.probeOnce(ctx, uri, timeout)
	if res.stopped {
		return // stopping, not a failed probe
	}
	for _, t := range targets {
		h.logChange(t.health.Probe(res.start, res.rtt, res.ok(), t.slo, defaultPolicy))
	}
}

// probeResult is one health probe's round trip.
type probeResult struct {
	start   time.Time
	rtt     time.Duration
	status  int   // the upstream's answer; 0: none
	err     error // why there was no answer
	stopped bool  // ctx was cancelled (not its timeout): no result at all
}

func (p probeResult) ok() bool { return p.err == nil && p.status > 0 && p.status < 300 }

// probeOnce sends an upstream's health probe: GET <base_url><uri> with
// its key and headers, bounded by timeout. The active health checks and
// GET /v1/ping with a region hint both send it.
func (up *upstreamRuntime) probeOnce(ctx context.Context, uri string, timeout time.Duration) probeResult {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := up.newRequest(ctx, http.MethodGet, up.base+uri, nil, payload{})
	if err != nil {
		return probeResult{stopped: true, err: err} // nothing was sent
	}
	res := probeResult{start: time.Now()}
	resp, err := up.transport.RoundTrip(req)
	if err == nil {
		res.status = resp.StatusCode
		_ = resp.Body.Close() // reads what is left first (see reusing)
	}
	res.err = err
	if ctx.Err() != nil && err != nil && context.Cause(ctx) == context.Canceled {
		res.stopped = true
	}
	res.rtt = time.Since(res.start)
	return res
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
