package llmrelay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/health"
)

// Regions as clients use them (docs/routing.md#regions):
//
//   - `X-Region-Hint: auto` or `<code>` orders a chain within its tiers
//     (health.Order): never a later model ahead of an earlier one.
//   - `X-Region-Hint: <code>!` (the client's) and `region_pin <code>` (the
//     operator's, per model) keep a request in one region: only its
//     targets are tried, on both legs of a hand-off; a canary or shadow
//     outside it gets nothing of the request; when no target there
//     answers, 503 region_unavailable. Both forms exist because they serve
//     different people: a client with its own residency duty (one tenant
//     of a shared relay) pins per request; an operator whose model may
//     only ever run in one jurisdiction pins it for everyone, and no
//     client can loosen it. A client pin naming another region than the
//     operator's gets 400 region_conflict rather than either one
//     silently winning: its data would otherwise go where it said not to.
//   - `GET /v1/ping` with `X-Region-Hint: <code>` times a live round trip
//     to the region's healthiest upstream.

// inRegion reports whether the target runs in region code ("" : any).
func (t *target) inRegion(code string) bool {
	return code == "" || strings.EqualFold(t.up.region, code)
}

// regionChoice is what a request's region hint and its route's pin ask
// of the order: the hint Order takes (auto, a code, or ""), and the
// region the request is kept in ("": none). serve has rejected a hint
// that does not parse or conflicts (checkRegion).
func (rt *route) regionChoice(r *http.Request) (order, pin string) {
	hint, _ := health.ParseHint(r.Header.Get(regionHeader))
	pin = rt.pin
	if pin == "" && hint.Strict {
		pin = hint.Region
	}
	return hint.String(), pin
}

// checkRegion checks a request's region hint against its route: it
// parses, does not contradict the model's region_pin, and a pinned
// request has a target in its region on every chain it walks. It
// returns the region the request is kept in ("": none).
func checkRegion(rt *route, r *http.Request) (string, *apiError) {
	raw := r.Header.Get(regionHeader)
	hint, err := health.ParseHint(raw)
	if err != nil {
		return "", errInvalidRegionHint(raw, err)
	}
	if rt.pin != "" && hint.Strict && !strings.EqualFold(hint.Region, rt.pin) {
		return "", errRegionConflict(rt.alias, rt.pin, hint.Region)
	}
	_, pin := rt.regionChoice(r)
	if pin == "" {
		return "", nil
	}
	chains := [][]*target{rt.targets}
	if rt.handoff != nil {
		chains = append(chains, rt.handoff.reason.targets)
	}
	for _, ts := range chains {
		if !slices.ContainsFunc(ts, func(t *target) bool { return t.inRegion(pin) }) {
			return "", errRegionNotServed(rt.alias, pin, regionsOf(ts))
		}
	}
	return pin, nil
}

// regionsOf lists the regions of targets, sorted, once each ("(none)"
// for targets without one).
func regionsOf(ts []*target) []string {
	var out []string
	for _, t := range ts {
		r := t.up.region
		if r == "" {
			r = "(none)"
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// inPin returns the targets of ts in region pin (ts itself when pin is
// "").
func inPin(ts []*target, pin string) []*target {
	if pin == "" {
		return ts
	}
	out := make([]*target, 0, len(ts))
	for _, t := range ts {
		if t.inRegion(pin) {
			out = append(out, t)
		}
	}
	return out
}

// pinned is the region the chain run's request is kept in ("": none).
func (c *chainRun) pinned() string {
	_, pin := c.rt.regionChoice(c.r)
	return pin
}

// shadowInRegion is the route's shadow, unless the request is pinned to a
// region the shadow is not in: a pinned request's content never leaves
// its region, not even as a copy.
func (c *chainRun) shadowInRegion() *shadowRuntime {
	if sr := c.rt.shadow; sr != nil && sr.target.inRegion(c.pinned()) {
		return sr
	}
	return nil
}

// storedInRegion keeps the upstreams a stored-response call may ask to
// the client's pinned region (`X-Region-Hint: <code>!`), if any: the call
// names no model, so no region_pin applies.
func storedInRegion(ups []*upstreamRuntime, r *http.Request) ([]*upstreamRuntime, *apiError) {
	raw := r.Header.Get(regionHeader)
	hint, err := health.ParseHint(raw)
	if err != nil {
		return nil, errInvalidRegionHint(raw, err)
	}
	if !hint.Strict {
		return ups, nil
	}
	var out, all []*upstreamRuntime
	for _, up := range ups {
		if strings.EqualFold(up.region, hint.Region) {
			out = append(out, up)
		}
		all = append(all, up)
	}
	if len(out) == 0 {
		var regions []string
		for _, up := range all {
			if up.region != "" && !slices.Contains(regions, up.region) {
				regions = append(regions, up.region)
			}
		}
		slices.Sort(regions)
		return nil, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "region_not_served",
			Message: "No api openai upstream, where stored responses are kept, is in region " + strconv.Quote(hint.Region) +
				", and the request is kept in that region (X-Region-Hint: " + hint.Region + "!). Their regions: " + strings.Join(regions, ", ") + "."}
	}
	return out, nil
}

// regionFailure is a pinned request's answer when its chain gave up: the
// failures of the region's targets are 503 region_unavailable (the
// region is out, and the request may not leave it), while an error about
// the request itself (a 4xx other than 429) is kept.
func regionFailure(e *apiError, pin, summary string) *apiError {
	if e.Status < 500 && e.Status != http.StatusTooManyRequests {
		return e
	}
	out := errRegionUnavailable(pin, summary)
	out.RetryAfter = e.RetryAfter
	return out
}

func errInvalidRegionHint(raw string, err error) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_region_hint",
		Message: "Invalid X-Region-Hint " + strconv.Quote(raw) + ": " + err.Error() + "."}
}

func errRegionConflict(alias, pin, asked string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "region_conflict",
		Message: "The model '" + alias + "' is pinned to region " + strconv.Quote(pin) + " by this relay (region_pin), and X-Region-Hint: " +
			asked + "! asks to keep the request in region " + strconv.Quote(asked) + ". Send X-Region-Hint: " + pin + "! or leave out the '!'."}
}

func errRegionNotServed(alias, pin string, regions []string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "region_not_served",
		Message: "The model '" + alias + "' has no target in region " + strconv.Quote(pin) + ", and the request is kept in that region (X-Region-Hint: " +
			pin + "!). Its targets' regions: " + strings.Join(regions, ", ") + "."}
}

func errRegionUnavailable(region, summary string) *apiError {
	return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "region_unavailable",
		Message: "No upstream in region " + strconv.Quote(region) + " could answer, and the request is kept in that region (no failover to another): " + summary}
}

func errRegionNotFound(code string, known []string) *apiError {
	k := "none has a region"
	if len(known) > 0 {
		k = "the known regions are " + strings.Join(known, ", ")
	}
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "region_not_found",
		Message: "No upstream of this relay is in region " + strconv.Quote(code) + "; " + k + "."}
}

// checkRegionPin checks a model's region_pin against the upstreams: the
// code names a region of an upstream of each of its chains, and its
// canary and shadow are in it.
func checkRegionPin(m *ModelRoute, ups []*Upstream) error {
	pin := m.RegionPin
	if pin == "" {
		return nil
	}
	if _, err := health.ParseHint(pin); err != nil || strings.HasSuffix(pin, "!") || strings.EqualFold(pin, health.HintAuto) {
		return fmt.Errorf("model %q: region_pin %q is not a region code; give one upstream's region, such as fra", m.Alias, pin)
	}
	regionOf := func(name string) (string, bool) {
		for _, u := range ups {
			if u != nil && u.Name == name {
				return u.Region, true
			}
		}
		return "", false
	}
	for _, chain := range []struct {
		what    string
		targets []Target
	}{{"to", m.Targets}, {"reason", m.Reason}} {
		if len(chain.targets) == 0 {
			continue
		}
		var regions []string
		found := false
		for _, t := range chain.targets {
			r, _ := regionOf(t.Upstream)
			found = found || strings.EqualFold(r, pin)
			if r != "" && !slices.Contains(regions, r) {
				regions = append(regions, r)
			}
		}
		if !found {
			have := "none of them has a region"
			if len(regions) > 0 {
				slices.Sort(regions)
				have = "theirs: " + strings.Join(regions, ", ")
			}
			return fmt.Errorf("model %q: region_pin %s: no upstream of its %s lines is in region %q (%s); set `region %s` on the upstream that runs there, or pin one of their regions",
				m.Alias, pin, chain.what, pin, have, pin)
		}
	}
	for _, side := range []struct{ what, upstream, gets string }{
		{"canary", canaryUpstream(m.Canary), "a request"},
		{"shadow", shadowUpstream(m.Shadow), "a copy (a pinned request's content stays in its region)"},
	} {
		if side.upstream == "" {
			continue
		}
		if r, ok := regionOf(side.upstream); ok && !strings.EqualFold(r, pin) {
			return fmt.Errorf("model %q: region_pin %s: its %s upstream %q is not in region %q, so it would never get %s; move the %s into the region or remove it",
				m.Alias, pin, side.what, side.upstream, pin, side.gets, side.what)
		}
	}
	return nil
}

func canaryUpstream(c *Canary) string {
	if c == nil {
		return ""
	}
	return c.Upstream
}

func shadowUpstream(s *Shadow) string {
	if s == nil {
		return ""
	}
	return s.Upstream
}

// checkRegionPins checks every model's region_pin (checkConfig, and the
// Caddyfile parser once every upstream is read, naming the line).
func (h *Relay) checkRegionPins() error {
	for _, m := range h.Models {
		if m == nil {
			continue
		}
		if err := checkRegionPin(m, h.Upstreams); err != nil {
			if m.regionPinAt != "" {
				return fmt.Errorf("%w, at %s", err, m.regionPinAt)
			}
			return err
		}
	}
	return nil
}

// pingTimeout bounds GET /v1/ping with a region hint: every round trip
// it makes together (each also by its upstream's probe timeout).
const pingTimeout = 10 * time.Second

// servePing answers GET /v1/ping. Without a region hint, or with auto:
// the edge's region and time, without a key, a log line or a metric,
// cheap enough for a client to measure its round trip to each edge (auto
// is the relay's own choice by latency, per request: there is no one
// region to time). With `X-Region-Hint: <code>` (or `<code>!`), it
// answers after a live round trip to the region's healthiest upstream,
// the request that upstream's health probe sends, and says which and how
// long; that round trip is made with the relay's provider key, so it
// asks for a client key as every relayed request does.
func (h *Relay) servePing(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	ep, _ := endpointOf(r.URL)
	raw := r.Header.Get(regionHeader)
	hint, err := health.ParseHint(raw)
	if err != nil {
		writeAPIError(w, errInvalidRegionHint(raw, err), ep)
		return
	}
	if hint.Region == "" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(h.pingAnswer(nil))
		return
	}
	entry, ok := h.keys.authenticate(r)
	if !ok {
		writeAPIError(w, errUnauthorized, ep)
		return
	}
	if e := entry.admits(r, time.Now()); e != nil {
		writeAPIError(w, e, ep)
		return
	}
	res, e := h.pingRegion(r.Context(), hint.Region)
	if e != nil {
		writeAPIError(w, e, ep)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(h.pingAnswer(res))
}

// regionPing is the round trip a region ping made.
type regionPing struct {
	hint, upstream, region, status string
	rtt                            time.Duration
}

// pingAnswer renders the ping's JSON: the edge's region and time, and a
// region ping's round trip.
func (h *Relay) pingAnswer(p *regionPing) []byte {
	now := time.Now().UTC()
	b := make([]byte, 0, 96)
	b = append(b, `{"object":"relay.ping","region":`...)
	b = strconv.AppendQuote(b, h.Region)
	b = append(b, `,"time":"`...)
	b = now.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","unix_ms":`...)
	b = strconv.AppendInt(b, now.UnixMilli(), 10)
	if p != nil {
		b = append(b, `,"hint":`...)
		b = strconv.AppendQuote(b, p.hint)
		b = append(b, `,"upstream":`...)
		b = strconv.AppendQuote(b, p.upstream)
		b = append(b, `,"upstream_region":`...)
		b = strconv.AppendQuote(b, p.region)
		b = append(b, `,"upstream_status":`...)
		b = strconv.AppendQuote(b, p.status)
		b = append(b, `,"rtt_ms":`...)
		b = strconv.AppendFloat(b, float64(p.rtt.Microseconds())/1000, 'f', 3, 64)
	}
	b = append(b, "}\n"...)
	return b
}

// pingRegion makes the round trip of a region ping: to the region's
// upstreams in order of health (healthy before degraded, the lowest
// latency first; an ejected one is not asked), until one answers 2xx.
// 404 when no upstream is in the region, 503 when none is healthy or
// none answered. Nothing here is recorded as health: a ping only reads.
func (h *Relay) pingRegion(ctx context.Context, code string) (*regionPing, *apiError) {
	var ups []*upstreamRuntime
	var known []string
	for _, u := range h.Upstreams {
		up := h.upstreams[u.Name]
		if up == nil {
			continue
		}
		if up.region != "" && !slices.ContainsFunc(known, func(k string) bool { return strings.EqualFold(k, up.region) }) {
			known = append(known, up.region)
		}
		if strings.EqualFold(up.region, code) {
			ups = append(ups, up)
		}
	}
	if len(ups) == 0 {
		slices.Sort(known)
		return nil, errRegionNotFound(code, known)
	}
	// One candidate per health entry of the region's upstreams (each
	// model sent to one), and one of unknown health for an upstream no
	// chain uses; health.Order puts the healthiest, fastest first.
	var cands []health.Candidate
	var owner []*upstreamRuntime
	seen := map[*healthEntry]bool{}
	for _, up := range ups {
		n := len(cands)
		h.eachTarget(func(t *target) {
			if t.up == up && !seen[t.entry] {
				seen[t.entry] = true
				cands = append(cands, health.Candidate{T: t.health, SLO: t.slo, Region: code})
				owner = append(owner, up)
			}
		})
		if len(cands) == n {
			cands = append(cands, health.Candidate{Region: code})
			owner = append(owner, up)
		}
	}
	now := time.Now()
	var order []*upstreamRuntime
	var status []health.Status
	var out []string
	for _, i := range health.Order(cands, now, health.HintAuto, nil) {
		up := owner[i]
		if slices.Contains(order, up) || slices.Contains(out, up.name) {
			continue // its best target came first
		}
		if cands[i].Status == health.Ejected {
			out = append(out, up.name)
			continue
		}
		order = append(order, up)
		status = append(status, cands[i].Status)
	}
	if len(order) == 0 {
		return nil, errRegionUnavailable(code, "every upstream there is cooling down after failures ("+strings.Join(out, ", ")+" ejected)")
	}
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	var failed []string
	for k, up := range order {
		res := up.probeOnce(ctx, up.probeURI, up.probeTimeout)
		if res.ok() {
			return &regionPing{hint: code, upstream: up.name, region: up.region, status: status[k].String(), rtt: res.rtt}, nil
		}
		failed = append(failed, up.name+": "+pingFailure(res, up.probeTimeout))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errRegionUnavailable(code, "its upstreams did not answer the ping ("+strings.Join(failed, "; ")+")")
}

// pingFailure says why a ping's round trip failed, in words safe for a
// client: no address, no URL, no key.
func pingFailure(res probeResult, timeout time.Duration) string {
	switch {
	case res.status > 0:
		return "answered " + strconv.Itoa(res.status)
	case errors.Is(res.err, context.DeadlineExceeded):
		return "no answer within " + timeout.String()
	case res.stopped:
		return "the ping was cancelled"
	}
	return "could not be reached"
}
