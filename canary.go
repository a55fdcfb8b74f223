package llmrelay

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmrelay/caddy-llm-relay/internal/canary"
	"github.com/llmrelay/caddy-llm-relay/internal/health"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
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

// recordCluster feeds the reasoning cluster rate of a canary stream, as
// received from the upstream, to the guard; a stream without reasoning
// (or too little to say) feeds nothing.
func (c *canaryRuntime) recordCluster(cl pace.Clusters, at time.Time) {
	if cl.InKnown {
		c.logEvent(c.c.RecordCluster(at, cl.In))
	}
}

// rollout is the canary's roll-out as phases, from either form.
func (c *Canary) rollout() []canary.Phase {
	if len(c.Phases) > 0 {
		ph := make([]canary.Phase, len(c.Phases))
		for i, p := range c.Phases {
			ph[i] = canary.Phase{Share: p.Percent, For: time.Duration(p.For)}
		}
		return ph
	}
	return canary.Every(append([]float64{c.Percent}, c.Promote...), time.Duration(c.PromoteEvery))
}

func (g CanaryGuard) guard() canary.Guard {
	return canary.Guard{TTFTP99: time.Duration(g.TTFTP99), ErrorRate: g.ErrorRate, MinSamples: g.MinSamples,
		Window: g.Window, TTFTMean: time.Duration(g.TTFTMean), ClusterRate: g.ClusterRate, ReasoningFloor: g.ReasoningFloor}
}

// canaryPoolKey is a canary's key in canaryPool, also the key of its saved
// state (durable.go) and, digested, its field in the fleet's hash. A
// canary that the previous version could express keeps the key that
// version gave it, so its saved and shared state still apply: the steps,
// the four guard figures and promote_every (in nanoseconds) as before,
// whichever form the schedule was written in. What is new is appended
// only when set.
func canaryPoolKey(prefix string, phases []canary.Phase, g canary.Guard) string {
	steps := make([]float64, len(phases))
	var every time.Duration
	uniform := true
	for i, p := range phases {
		steps[i] = p.Share
		switch {
		case i == len(phases)-1:
		case i == 0:
			every = p.For
		case p.For != every:
			uniform = false
		}
	}
	old := struct {
		TTFTP99    time.Duration
		ErrorRate  float64
		MinSamples int
		Window     int
	}{g.TTFTP99, g.ErrorRate, g.MinSamples, g.Window}
	key := fmt.Sprintf("%s|%v|%v|%v", prefix, steps, old, caddy.Duration(every))
	if !uniform {
		key = fmt.Sprintf("%s|%v|%v|phases", prefix, steps, old)
		for _, p := range phases {
			key += fmt.Sprintf(" %v:%d", p.Share, p.For)
		}
	}
	if g.TTFTMean > 0 {
		key += fmt.Sprintf("|ttft_mean=%d", g.TTFTMean)
	}
	if g.ClusterRate > 0 {
		key += fmt.Sprintf("|cluster_rate=%v", g.ClusterRate)
	}
	if g.ReasoningFloor > 0 {
		key += fmt.Sprintf("|reasoning_floor=%v", g.ReasoningFloor)
	}
	return key
}

// checkRollout checks a canary's schedule and guard, for both config
// forms; the Caddyfile parser calls it at the promote line.
func (c *Canary) checkRollout() error {
	if len(c.Phases) > 0 {
		if len(c.Promote) > 0 || c.PromoteEvery != 0 {
			return fmt.Errorf("promote: phases with `for` and promote ... every are two forms of one schedule; use one: `promote 5%% for 3d, 50%% for 7d, 100%%` (JSON: phases) or `promote 50 100 every 10m` (JSON: promote, promote_every)")
		}
		return c.checkPhases()
	}
	switch {
	case c.PromoteEvery < 0:
		return fmt.Errorf("promote every %s is negative; give how long each step lasts, such as 10m", time.Duration(c.PromoteEvery))
	case len(c.Promote) > 0 && c.PromoteEvery == 0:
		return fmt.Errorf("promote %v without promote_every never promotes; give how long each step lasts (Caddyfile: `promote 50 100 every 10m`; JSON: promote_every)", c.Promote)
	case len(c.Promote) == 0 && c.PromoteEvery != 0:
		return fmt.Errorf("promote_every %s without promote: there is no step to promote to; give the next shares (Caddyfile: `promote 50 100 every 10m`; JSON: promote)", time.Duration(c.PromoteEvery))
	}
	prev := c.Percent
	for _, p := range c.Promote {
		if err := checkPercent("promote", p); err != nil {
			return err
		}
		if p <= prev {
			return fmt.Errorf("promote %v%% after %v%%: each step's share must be larger than the one before", p, prev)
		}
		prev = p
	}
	return c.Guard.check()
}

// checkPhases checks the phases form of the schedule.
func (c *Canary) checkPhases() error {
	last := len(c.Phases) - 1
	for i, p := range c.Phases {
		pct := fmtPercent(p.Percent)
		switch {
		case math.IsNaN(p.Percent) || p.Percent <= 0 || p.Percent > 100:
			return fmt.Errorf("promote phase %d: %s%% is not a share above 0 and at most 100", i+1, pct)
		case i > 0 && p.Percent <= c.Phases[i-1].Percent:
			return fmt.Errorf("promote phase %d: %s%% after %s%%; each phase's share must be larger than the one before", i+1, pct, fmtPercent(c.Phases[i-1].Percent))
		case p.For < 0:
			return fmt.Errorf("promote phase %d (%s%%): duration %s is negative; give how long it lasts, such as `%s%% for 3d`", i+1, pct, time.Duration(p.For), pct)
		case i < last && p.For == 0:
			return fmt.Errorf("promote phase %d (%s%%) has no duration; only the last phase stays without an end: write `%s%% for 3d` (JSON: \"for\": \"3d\")", i+1, pct, pct)
		case i == last && p.For != 0:
			return fmt.Errorf("promote: the last phase (%s%% for %s) has a duration, but no phase follows it; drop `for %s`, or add the phase that follows (e.g. `, 100%%`)", pct, canary.FormatSpan(time.Duration(p.For)), canary.FormatSpan(time.Duration(p.For)))
		}
	}
	if c.Percent != 0 && c.Percent != c.Phases[0].Percent {
		return fmt.Errorf("the canary's share %s%% is not its first phase's %s%%; the first phase is the starting share: leave the percent out of the canary line (JSON: percent), or make the two agree", fmtPercent(c.Percent), fmtPercent(c.Phases[0].Percent))
	}
	return c.Guard.check()
}

// check checks a guard's figures (the Caddyfile checks each at its line).
func (g CanaryGuard) check() error {
	switch {
	case g.TTFTP99 < 0:
		return fmt.Errorf("guard ttft_p99 %s is negative; give a duration such as 2s", time.Duration(g.TTFTP99))
	case g.TTFTMean < 0:
		return fmt.Errorf("guard ttft_mean %s is negative; give a duration such as 800ms", time.Duration(g.TTFTMean))
	case math.IsNaN(g.ErrorRate) || g.ErrorRate < 0 || g.ErrorRate > 1:
		return fmt.Errorf("guard error_rate %v is not a ratio; give one between 0 and 1, such as 0.05", g.ErrorRate)
	case math.IsNaN(g.ClusterRate) || g.ClusterRate < 0 || g.ClusterRate > 1:
		return fmt.Errorf("guard cluster_rate %v is not a ratio; give one between 0 and 1, such as 0.65 (0.5 is an even flow)", g.ClusterRate)
	case math.IsNaN(g.ReasoningFloor) || g.ReasoningFloor < 0 || g.ReasoningFloor > 1:
		return fmt.Errorf("guard reasoning_floor %v is not a share of the stable targets' reasoning; give one above 0 and at most 1, such as 0.5 (or leave it out: not judged)", g.ReasoningFloor)
	}
	return nil
}

func fmtPercent(p float64) string { return strconv.FormatFloat(p, 'f', -1, 64) }

// compileCanaryShadow compiles a model's canary and shadow targets.
func (h *Relay) compileCanaryShadow(rt *route, m *ModelRoute) error {
	slo := resolveSLO(h.SLO, m.SLO)
	if c := m.Canary; c != nil {
		t, err := h.sideTarget(c.Upstream, c.Model, slo)
		if err != nil {
			return fmt.Errorf("canary: %w", err)
		}
		if c.Percent <= 0 && len(c.Promote) == 0 && len(c.Phases) == 0 {
			return fmt.Errorf("canary: a share of 0%% sends it nothing; give a percentage above 0")
		}
		switch {
		case c.Key == "", c.Key == "client_ip", c.Key == "body:user":
		case len(c.Key) > len("header:") && c.Key[:len("header:")] == "header:":
		default:
			return fmt.Errorf("canary: key %q: want header:<name>, body:user or client_ip", c.Key)
		}
		phases, guard := c.rollout(), c.Guard.guard()
		if err := canary.ValidatePhases(phases, guard); err != nil {
			return fmt.Errorf("canary: %w", err)
		}
		// Keyed by everything that defines it: a reload with the same
		// canary keeps its state (a rollback stays rolled back); a changed
		// canary starts afresh.
		key := canaryPoolKey(rt.alias+"|"+healthKey(t.up, t.model)+"|"+c.Key, phases, guard)
		name := rt.alias + " → " + t.up.name + " (" + modelLabel(t.model) + ")"
		v, _, err := canaryPool.LoadOrNew(key, func() (caddy.Destructor, error) {
			cn := canary.NewPhases(name, phases, guard, time.Now())
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
