package llmrelay

import (
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmrelay/caddy-llm-relay/internal/canary"
	"github.com/llmrelay/caddy-llm-relay/internal/health"
	"github.com/llmrelay/caddy-llm-relay/internal/shadow"
)

// canaryRuntime is a route's compiled canary.
type canaryRuntime struct {
	c      *canary.Canary // shared across reloads while the canary's settings stay the same
	key    string         // what picks the bucket: header:<name>, body:user or client_ip
	target *target
	logger *zap.Logger
}

// selects reports whether this request goes to the canary first. It also
// advances a due promotion.
func (c *canaryRuntime) selects(r *http.Request, body *requestBody, now time.Time) bool {
	c.logEvent(c.c.Check(now))
	k := canaryKey(c.key, r, body)
	return k != "" && c.c.Selects(k)
}

// record feeds a canary attempt to its guard.
func (c *canaryRuntime) record(res *attemptResult, at time.Time) {
	if res.clientGone || (res.resp != nil && res.resp.StatusCode >= 300) {
		return
	}
	s := canary.Sample{At: at, OK: res.resp != nil}
	if s.OK {
		s.TTFT = res.ttft
	}
	c.logEvent(c.c.Record(s))
}

func (c *canaryRuntime) logEvent(ev *canary.Event) {
	if ev == nil {
		return
	}
	fields := []zap.Field{zap.String("canary", c.target.up.name+" ("+modelLabel(c.target.model)+")"),
		zap.Float64("from_percent", ev.From), zap.Float64("to_percent", ev.To), zap.String("reason", ev.Reason)}
	if ev.Kind == "rollback" {
		c.logger.Warn("canary rolled back", fields...)
		return
	}
	c.logger.Info("canary promoted", fields...)
}

// compileCanaryShadow compiles a model's canary and shadow targets.
func (h *Relay) compileCanaryShadow(rt *route, m *ModelRoute) error {
	slo := resolveSLO(h.SLO, m.SLO)
	if c := m.Canary; c != nil {
		t, err := h.sideTarget(c.Upstream, c.Model, slo)
		if err != nil {
			return fmt.Errorf("canary: %w", err)
		}
		if c.Percent <= 0 && len(c.Promote) == 0 {
			return fmt.Errorf("canary: a share of 0%% sends it nothing; give a percentage above 0")
		}
		switch {
		case c.Key == "", c.Key == "client_ip", c.Key == "body:user":
		case len(c.Key) > len("header:") && c.Key[:len("header:")] == "header:":
		default:
			return fmt.Errorf("canary: key %q: want header:<name>, body:user or client_ip", c.Key)
		}
		steps := append([]float64{c.Percent}, c.Promote...)
		guard := canary.Guard{TTFTP99: time.Duration(c.Guard.TTFTP99), ErrorRate: c.Guard.ErrorRate,
			MinSamples: c.Guard.MinSamples, Window: c.Guard.Window}
		if err := canary.Validate(steps, guard, time.Duration(c.PromoteEvery)); err != nil {
			return fmt.Errorf("canary: %w", err)
		}
		// Keyed by everything that defines it: a reload with the same
		// canary keeps its state (a rollback stays rolled back); a changed
		// canary starts afresh.
		key := fmt.Sprintf("%s|%s|%s|%v|%v|%v", rt.alias, healthKey(t.up, t.model), c.Key, steps, guard, c.PromoteEvery)
		name := rt.alias + " → " + t.up.name + " (" + modelLabel(t.model) + ")"
		v, _, err := canaryPool.LoadOrNew(key, func() (caddy.Destructor, error) {
			cn := canary.New(name, steps, guard, time.Duration(c.PromoteEvery), time.Now())
			if p, ok := durable.restoredCanary(key); ok {
				// Its roll-out before the restart: a rollback stays.
				cn.Adopt(p)
			}
			return pooled[*canary.Canary]{cn}, nil
		})
		if err != nil {
			return err
		}
		h.poolKeys = append(h.poolKeys, poolKey{canaryPool, key})
		keySpec := c.Key
		if keySpec == "" {
			keySpec = "client_ip"
		}
		rt.canary = &canaryRuntime{c: v.(pooled[*canary.Canary]).v, key: keySpec, target: t, logger: h.logger}
	}
	if s := m.Shadow; s != nil {
		t, err := h.sideTarget(s.Upstream, s.Model, slo)
		if err != nil {
			return fmt.Errorf("shadow: %w", err)
		}
		maxc := s.MaxConcurrent
		if maxc == 0 {
			maxc = 4
		}
		key := fmt.Sprintf("%s|%s|%d", rt.alias, healthKey(t.up, t.model), maxc)
		v, _, err := shadowPool.LoadOrNew(key, func() (caddy.Destructor, error) {
			return pooled[*shadow.Runner]{shadow.NewRunner(maxc)}, nil
		})
		if err != nil {
			return err
		}
		h.poolKeys = append(h.poolKeys, poolKey{shadowPool, key})
		rt.shadow = &shadowRuntime{runner: v.(pooled[*shadow.Runner]).v, percent: s.Percent, target: t}
	}
	return nil
}

// sideTarget compiles the target of a canary or shadow line.
func (h *Relay) sideTarget(upName, model string, slo health.SLO) (*target, error) {
	up, ok := h.upstreams[upName]
	if !ok {
		return nil, fmt.Errorf("unknown upstream %q (define it with `upstream %s <base_url>`)", upName, upName)
	}
	t := newTarget(up, model)
	if err := h.attachHealth(t, slo); err != nil {
		return nil, err
	}
	// A canary on a capped upstream counts there; a shadow's copies are
	// bounded by its own max_concurrent and do not.
	if err := h.attachCaps(t, "", 0); err != nil {
		return nil, err
	}
	return t, nil
}
