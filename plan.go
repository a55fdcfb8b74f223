package llmrelay

import (
	"encoding/json"
	"net"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmrelay/caddy-llm-relay/internal/health"
)

// regionHeader is a client's routing hint: a region code to prefer,
// `auto` for the lowest measured latency (both within each tier of the
// chain, see health.Order), or `<code>!` to keep to that region
// (regions.go). It never reaches an upstream.
const regionHeader = "X-Region-Hint"

// plan is the order in which one request tries its chain.
type plan struct {
	targets     []*target
	halfOpen    []bool // targets[i] was recovering (half-open) when ordered: claim its trial first
	canaryFirst bool   // targets[0] is the canary
	// spilledFrom is the target the request would have gone to, had it
	// not been at spill_at (nil: no spill-over).
	spilledFrom *target
}

// orderTargets returns the order in which this request tries its chain:
// the canary target first when the request falls into the canary's
// bucket, then the chain's targets by health (healthy before degraded
// before ejected, by rank, latency-aware within a pool, the region hint
// first within each tier). Nothing is left out: when every target is
// out, the least bad one is still tried. Each target's health is judged
// once, by health.Order. A request kept in a region (a region pin) has
// only that region's targets, and a canary outside it is not tried.
func (h *Relay) orderTargets(rt *route, r *http.Request, body *requestBody, now time.Time) plan {
	hint, pin := rt.regionChoice(r)
	targets := inPin(rt.targets, pin)
	cands := make([]health.Candidate, len(targets))
	for i, t := range targets {
		// Log what time alone changed (a cooldown ended, bad samples
		// aged out).
		h.logChange(t.health.Check(now, t.slo))
		cands[i] = health.Candidate{T: t.health, SLO: t.slo, Rank: t.rank, Weight: t.weight, Region: t.up.region, Model: t.model}
	}
	idx := health.Order(cands, now, hint, nil) // nil: the global, goroutine-safe source
	p := plan{targets: make([]*target, 0, len(idx)+1), halfOpen: make([]bool, 0, len(idx)+1)}
	// An ejected canary is left out: until its guard decides, every
	// request in its bucket would pay its failure first.
	if c := rt.canary; c != nil && c.target.inRegion(pin) {
		if st := c.target.health.Status(now, c.target.slo); st != health.Ejected && c.selects(r, body, now) {
			p.targets = append(p.targets, c.target)
			p.halfOpen = append(p.halfOpen, st == health.HalfOpen)
			p.canaryFirst = true
		}
	}
	// The first degraded target whose recheck is due goes first, so a
	// recovered target is noticed from live traffic.
	for k, i := range idx {
		if k > 0 && cands[i].Status == health.Degraded && targets[i].entry.claimRecheck(now) {
			copy(idx[1:k+1], idx[:k])
			idx[0] = i
			break
		}
	}
	for _, i := range idx {
		p.targets = append(p.targets, targets[i])
		p.halfOpen = append(p.halfOpen, cands[i].Status == health.HalfOpen)
	}
	if rt.capped {
		if from := p.spillOver(h.capacity.spill); from != nil {
			p.spilledFrom = from
			countCapacity(rt.alias, from, capSpill)
		}
	}
	return p
}

// canaryKey is the value a request's canary bucket is computed from, ""
// when the request has none (it then stays on the chain).
func canaryKey(spec string, r *http.Request, body *requestBody) string {
	switch {
	case spec == "body:user":
		var u string
		if raw, ok := body.fields["user"]; ok {
			_ = json.Unmarshal(raw, &u)
		}
		return u
	case len(spec) > len("header:") && spec[:len("header:")] == "header:":
		return r.Header.Get(spec[len("header:"):])
	}
	if ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok && ip != "" {
		return ip
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
