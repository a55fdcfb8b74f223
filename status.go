package llmrelay

import (
	"cmp"
	"encoding/json"
	"maps"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmrelay/caddy-llm-relay/internal/canary"
	"github.com/llmrelay/caddy-llm-relay/internal/health"
	"github.com/llmrelay/caddy-llm-relay/internal/reasoninghealth"
	"github.com/llmrelay/caddy-llm-relay/internal/shadow"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

func init() {
	caddy.RegisterModule(AdminStatus{})
	caddy.RegisterModule(StatusHandler{})
	httpcaddyfile.RegisterHandlerDirective("llm_relay_status", parseStatusCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("llm_relay_status", httpcaddyfile.Before, "reverse_proxy")
}

// liveRelays are the provisioned relay handlers, for the status view.
var liveRelays = struct {
	sync.Mutex
	m map[*Relay]struct{}
}{m: map[*Relay]struct{}{}}

func registerRelay(h *Relay) {
	liveRelays.Lock()
	liveRelays.m[h] = struct{}{}
	liveRelays.Unlock()
}

func unregisterRelay(h *Relay) {
	liveRelays.Lock()
	delete(liveRelays.m, h)
	liveRelays.Unlock()
}

// Status is the JSON view of the relays' routing state.
type Status struct {
	Time     time.Time          `json:"time"`
	Targets  []targetStatus     `json:"targets"`
	Canaries []canary.Snapshot  `json:"canaries"`
	Shadows  []shadowStatusView `json:"shadows"`

	Keys []keyStatus `json:"keys"`

	// State is where spend, canaries and ejections are kept (the most
	// recently loaded relay's `state`), and, for redis, whether it answers.
	State *fleetStatus `json:"state,omitempty"`

	// Resume: resumable streams (the most recently loaded relay's
	// `resume`); nil without one.
	Resume *resumeStatus `json:"resume,omitempty"`

	// Chains: per model alias, its targets in chain order.
	Chains []chainView `json:"chains"`
	// Streams: the last streams (at most 50), the newest first, with their
	// timelines.
	Streams []streamView `json:"streams"`
	// Failovers: the last requests (at most 50) that needed more than one
	// attempt or skipped a target, the newest first.
	Failovers []failoverView `json:"failovers"`
}

// keyStatus is a client key's spend in its current period.
type keyStatus struct {
	Key       string  `json:"key"`
	Budget    string  `json:"budget,omitempty"` // e.g. "$50.00 per day"
	Spent     string  `json:"spent"`
	Remaining string  `json:"remaining,omitempty"`
	Blocked   bool    `json:"blocked"`
	SpentUSD  float64 `json:"spent_usd"`
	OthersUSD float64 `json:"others_usd,omitempty"` // of spent_usd, what the fleet's other instances spent (state redis)
	BudgetUSD float64 `json:"budget_usd,omitempty"` // the budget's limit
	Period    string  `json:"period"`               // "day" or "month": the budget's (day without one)
	// USDPerHour is the rate of spend over the period so far.
	USDPerHour float64 `json:"usd_per_hour"`
	// Alerts are the budget thresholds (percent) already alerted this period.
	Alerts []int `json:"alerts,omitempty"`
	// Expires is the earliest expiry of the name's tokens still valid;
	// ExpiresSoon says it is within 14 days.
	Expires     time.Time `json:"expires,omitzero"`
	ExpiresSoon bool      `json:"expires_soon,omitempty"`
	Requests    int64     `json:"requests"`
	Tokens      struct {
		Prompt     int64 `json:"prompt"`
		Completion int64 `json:"completion"`
		Reasoning  int64 `json:"reasoning"`
		Cached     int64 `json:"cached"`
	} `json:"tokens"`
}

type targetStatus struct {
	health.Snapshot
	Upstream string   `json:"upstream"`
	Model    string   `json:"model"`
	Region   string   `json:"region,omitempty"`
	Models   []string `json:"aliases"` // the model aliases whose chains use it
	// Reasoning is the target's reasoning health (baseline and recent
	// reasoning tokens per effort, recent cluster rate), when its SLO
	// judges reasoning (reasoninghealth.go).
	Reasoning *reasoninghealth.Snapshot `json:"reasoning,omitempty"`
}

type shadowStatusView struct {
	Alias    string       `json:"alias"`
	Upstream string       `json:"upstream"`
	Model    string       `json:"model"`
	Percent  float64      `json:"percent"`
	Stats    shadow.Stats `json:"stats"`
	// Verdict is the shadow against the model's SLO over its recent
	// copies, with both sides' reasoning (shadowverdict.go).
	Verdict shadow.Verdict `json:"verdict"`
}

// buildStatus collects the state of every live relay at now. Entries
// shared by several handlers (a reload in progress, two sites using the
// same upstream) appear once. (The metrics' gauges take their few figures
// in a walk of their own: stateCollector.Collect.)
func buildStatus(now time.Time) Status {
	st := Status{Time: now.UTC(), Targets: []targetStatus{}, Canaries: []canary.Snapshot{}, Shadows: []shadowStatusView{},
		Keys: []keyStatus{}, Chains: []chainView{}}
	// One entry per target and SLO: a target shared by models with
	// different SLOs can be healthy for one and degraded for another.
	type targetKey struct {
		t   *health.Target
		slo health.SLO
	}
	seenT := map[targetKey]int{}
	seenC := map[*canary.Canary]bool{}
	seenS := map[*shadow.Runner]bool{}
	addTarget := func(t *target, alias string) {
		k := targetKey{t.health, t.slo}
		if i, ok := seenT[k]; ok {
			if !slices.Contains(st.Targets[i].Models, alias) {
				st.Targets[i].Models = append(st.Targets[i].Models, alias)
			}
			return
		}
		seenT[k] = len(st.Targets)
		st.Targets = append(st.Targets, targetStatus{Snapshot: t.health.Snapshot(now, t.slo),
			Upstream: t.up.name, Model: modelLabel(t.model), Region: t.up.region, Models: []string{alias},
			Reasoning: reasoningStatus(t)})
	}
	liveRelays.Lock()
	defer liveRelays.Unlock()
	keys := map[string]bool{}
	expiry := map[string]time.Time{} // the earliest end of a name's tokens still valid
	for h := range liveRelays.m {
		for i, k := range h.Keys {
			name := cmp.Or(k.Name, defaultKeyName(i))
			keys[name] = true
			if ex, _ := parseKeyTime(k.Expires); !ex.IsZero() && ex.After(now) && (expiry[name].IsZero() || ex.Before(expiry[name])) {
				expiry[name] = ex
			}
		}
		if h.keys.open() {
			keys["anonymous"] = true
		}
	}
	for _, k := range ledger.Snapshot(now) {
		if !keys[k.Key] {
			continue // a key no longer configured
		}
		ks := keyStatus{Key: k.Key, Spent: usage.FormatUSD(k.Spent), SpentUSD: k.Spent, OthersUSD: k.Others,
			Blocked: k.Blocked, Requests: k.ThisPeriod.Requests}
		ks.Period = k.Budget.Period.String()
		if ex := expiry[k.Key]; !ex.IsZero() {
			ks.Expires, ks.ExpiresSoon = ex, ex.Sub(now) < expiryWarning
		}
		if h := now.Sub(k.Start).Hours(); h > 0 {
			ks.USDPerHour = k.Spent / h
		}
		if own, ok := ledger.Own(k.Key, now); ok {
			ks.Alerts = own.Alerted
		}
		if k.Budget.Limit > 0 {
			ks.BudgetUSD = k.Budget.Limit
			ks.Budget = k.Budget.String()
			ks.Remaining = usage.FormatUSD(k.Remaining)
		}
		ks.Tokens.Prompt, ks.Tokens.Completion = k.ThisPeriod.Prompt, k.ThisPeriod.Completion
		ks.Tokens.Reasoning, ks.Tokens.Cached = k.ThisPeriod.Reasoning, k.ThisPeriod.Cached
		st.Keys = append(st.Keys, ks)
	}
	relays := slices.Collect(maps.Keys(liveRelays.m))
	slices.SortFunc(relays, func(a, b *Relay) int { return a.provisioned.Compare(b.provisioned) })
	if n := len(relays); n > 0 {
		s := relays[n-1].stateStatus()
		st.State = &s
		st.Resume = relays[n-1].resumeStatus(now)
	}
	for _, h := range relays {
		for _, rt := range h.routesInOrder() {
			for _, t := range rt.targets {
				addTarget(t, rt.alias)
			}
			if c := rt.canary; c != nil {
				addTarget(c.target, rt.alias)
				if !seenC[c.c] {
					seenC[c.c] = true
					st.Canaries = append(st.Canaries, c.c.Snapshot(now))
				}
			}
			if s := rt.shadow; s != nil && !seenS[s.runner] {
				seenS[s.runner] = true
				st.Shadows = append(st.Shadows, shadowStatusView{Alias: rt.alias, Upstream: s.target.up.name,
					Model: modelLabel(s.target.model), Percent: s.percent, Stats: s.runner.Stats(), Verdict: s.runner.Verdict(s.judge)})
			}
		}
	}
	seenAlias := map[string]bool{}
	for i := len(relays) - 1; i >= 0; i-- { // the newest config's chains first
		for _, rt := range relays[i].routesInOrder() {
			if seenAlias[rt.alias] {
				continue
			}
			seenAlias[rt.alias] = true
			c := chainOf(rt, now)
			relays[i].chainPrices(&c, rt)
			st.Chains = append(st.Chains, c)
		}
	}
	st.Streams, st.Failovers = recentStreamViews(), recentFailoverViews()
	return st
}

func writeStatus(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(buildStatus(time.Now()))
}

// AdminStatus serves the status on Caddy's admin API at
// GET /llm_relay/status.
type AdminStatus struct{}

// CaddyModule returns the Caddy module information.
func (AdminStatus) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "admin.api.llm_relay", New: func() caddy.Module { return new(AdminStatus) }}
}

// Routes returns the admin routes.
func (AdminStatus) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{
		Pattern: "/llm_relay/status",
		Handler: caddy.AdminHandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			if r.Method != http.MethodGet {
				return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: errMethodNotAllowed(r.Method, r.URL.Path)}
			}
			if wantsHTML(r) {
				return writeStatusPage(w, r)
			}
			return writeStatus(w)
		}),
	}}
}

// StatusHandler serves the same status on a site, for when the admin API
// is off or not reachable. Protect it like any internal page.
//
// Caddyfile: `llm_relay_status` (no options), e.g. under `handle /relay-status`.
type StatusHandler struct{}

// CaddyModule returns the Caddy module information.
func (StatusHandler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_relay_status", New: func() caddy.Module { return new(StatusHandler) }}
}

// ServeHTTP writes the status.
func (StatusHandler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", http.MethodGet)
		writeAPIError(w, errMethodNotAllowed(r.Method, r.URL.Path), endpoint{dialect: dialectChat})
		return nil
	}
	if wantsHTML(r) {
		return writeStatusPage(w, r)
	}
	return writeStatus(w)
}

// UnmarshalCaddyfile: the directive takes no arguments or block.
func (s *StatusHandler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() || d.NextBlock(0) {
		return d.Errf("llm_relay_status takes no arguments or block")
	}
	return nil
}

func parseStatusCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	s := new(StatusHandler)
	err := s.UnmarshalCaddyfile(h.Dispenser)
	return s, err
}

var (
	_ caddy.AdminRouter           = AdminStatus{}
	_ caddyhttp.MiddlewareHandler = StatusHandler{}
	_ caddyfile.Unmarshaler       = (*StatusHandler)(nil)
)

// routesInOrder returns the compiled routes in config order.
func (h *Relay) routesInOrder() []*route {
	out := make([]*route, 0, len(h.Models))
	for _, m := range h.Models {
		if m.Alias == "*" {
			if h.wildcard != nil {
				out = append(out, h.wildcard)
			}
			continue
		}
		if rt, ok := h.routes[m.Alias]; ok {
			out = append(out, rt)
		}
	}
	return out
}

// chainView is a model alias's chain, for the status page.
type chainView struct {
	Alias   string      `json:"alias"`
	Targets []chainLink `json:"targets"`
	// RegionPin is the model's region_pin (absent: none).
	RegionPin string `json:"region_pin,omitempty"`
}

// chainLink is one target of a chain, in chain order.
type chainLink struct {
	Upstream string `json:"upstream"`
	Model    string `json:"model"`
	Status   string `json:"status"` // healthy, degraded, ejected or half-open
	Reason   string `json:"reason,omitempty"`
	// CooldownLeftMS is what is left of an ejection's cooldown.
	CooldownLeftMS float64 `json:"cooldown_left_ms,omitempty"`
	Samples        int     `json:"samples"`
	SuccessRatio   float64 `json:"success_ratio"`
	TTFTP50MS      float64 `json:"ttft_p50_ms"`
	TTFTP90MS      float64 `json:"ttft_p90_ms"`
	// ProbeRTTMS is the last good health probe's round trip (0: no probe).
	ProbeRTTMS float64 `json:"probe_rtt_ms,omitempty"`
	// The SLO the target is held to (0: not judged).
	SLOTTFTMS  float64 `json:"slo_ttft_ms"`
	SLOSuccess float64 `json:"slo_success"`
	// The SLO's reasoning_floor and cluster_rate (absent: not judged).
	SLOReasoningFloor float64 `json:"slo_reasoning_floor,omitempty"`
	SLOClusterRate    float64 `json:"slo_cluster_rate,omitempty"`
	// RecentTTFTMS are the last (up to 30) successful TTFTs, oldest first.
	RecentTTFTMS []float64 `json:"recent_ttft_ms"`
	// For a target with a max_concurrent (on its upstream or its `to`
	// line; absent without): its requests in flight and cap, the fuller
	// of the two, and the occupancy, in flight over cap (0-1).
	InFlight      int64   `json:"in_flight,omitempty"`
	MaxConcurrent int64   `json:"max_concurrent,omitempty"`
	Occupancy     float64 `json:"occupancy,omitempty"`
	// Price is the price that applies to the target's model and where it
	// comes from: from config (a price block), builtin (the built-in
	// list, with its source page and date), none (no cost is counted), or
	// per_request (the client's model, forwarded unchanged).
	Price *priceInfo `json:"price,omitempty"`
}

func chainOf(rt *route, now time.Time) chainView {
	c := chainView{Alias: rt.alias, Targets: make([]chainLink, 0, len(rt.targets)), RegionPin: rt.pin}
	for _, t := range rt.targets {
		snap := t.health.Snapshot(now, t.slo)
		l := chainLink{Upstream: t.up.name, Model: modelLabel(t.model), Status: snap.Status, Reason: snap.Reason,
			Samples: snap.Samples, SuccessRatio: snap.SuccessRatio,
			TTFTP50MS: ms(time.Duration(snap.TTFTP50)), TTFTP90MS: ms(time.Duration(snap.TTFTP90)), ProbeRTTMS: ms(time.Duration(snap.ProbeRTT)),
			SLOTTFTMS: ms(t.slo.TTFT), SLOSuccess: t.slo.Success, RecentTTFTMS: []float64{},
			SLOReasoningFloor: t.rslo.Floor, SLOClusterRate: t.rslo.ClusterRate}
		if left := snap.CooldownUntil.Sub(now); left > 0 {
			l.CooldownLeftMS = ms(left)
		}
		for _, d := range t.health.RecentTTFT(30) {
			l.RecentTTFTMS = append(l.RecentTTFTMS, ms(d))
		}
		if c := t.fullest(); c != nil {
			l.InFlight, l.MaxConcurrent = c.inFlight.Load(), c.max
			l.Occupancy = math.Round(float64(l.InFlight)/float64(l.MaxConcurrent)*1000) / 1000
		}
		c.Targets = append(c.Targets, l)
	}
	return c
}
