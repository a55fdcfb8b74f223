package llmrelay

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("llm_relay", parseRelayCaddyfile)
	// Before reverse_proxy, so a catch-all reverse_proxy in the same site
	// cannot shadow the relay and no `order` line is needed.
	httpcaddyfile.RegisterDirectiveOrder("llm_relay", httpcaddyfile.Before, "reverse_proxy")
}

func parseRelayCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	r := new(Relay)
	err := r.UnmarshalCaddyfile(h.Dispenser)
	return r, err
}

// UnmarshalCaddyfile sets up the handler from the tokens of an
// `llm_relay [<matcher>] { ... }` block.
//
// The block's grammar is written once, in the README's Caddyfile section
// (README.md#caddyfile): a subdirective added here goes there too.
// TestCaddyfileGrammar fails when the two differ, or when an
// "unrecognized ... subdirective" error below does not offer exactly what
// its block accepts. docs/configuration.md and the pages it links explain
// each setting; the types in config.go (Smoothing in smoothing.go) give
// each field's line.
func (h *Relay) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.Errf("llm_relay takes no arguments besides a matcher; put settings in its block")
	}
	upstreamLines := map[string]bool{}
	var pendingTo []pendingTarget

	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "key":
			args := d.RemainingArgs()
			var tail []string
			for i, a := range args {
				if a == "budget" && i >= 1 {
					args, tail = args[:i], args[i:]
					break
				}
			}
			if len(args) < 1 || len(args) > 2 {
				return d.Errf("key: expected `key <token> [<name>]`, got %d arguments", len(args))
			}
			k := ClientKey{Token: args[0]}
			if len(args) == 2 {
				k.Name = args[1]
			}
			if tail != nil {
				if err := parseKeyBudget(d, &k, tail); err != nil {
					return err
				}
			}
			if err := parseKeyBlock(d, &k); err != nil {
				return err
			}
			h.Keys = append(h.Keys, k)
			if err := k.check(keyName(h.Keys, len(h.Keys)-1)); err != nil {
				return d.Err(err.Error())
			}
			if _, err := keyBudgets(h.Keys); err != nil {
				return d.Err(err.Error())
			}
			if _, err := keyReasoningBudgets(h.Keys); err != nil {
				return d.Err(err.Error())
			}
			if _, err := keyRateLimits(h.Keys); err != nil {
				return d.Err(err.Error())
			}

		case "max_body":
			if !d.NextArg() {
				return d.ArgErr()
			}
			size, err := humanize.ParseBytes(d.Val())
			if err != nil || size == 0 {
				return d.Errf("max_body: %q is not a size; write it like 16MiB or 512KB", d.Val())
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			h.MaxBody = int64(size)

		case "upstream":
			u, err := parseUpstream(d, upstreamLines)
			if err != nil {
				return err
			}
			upstreamLines[u.Name] = true
			h.Upstreams = append(h.Upstreams, u)

		case "model":
			m, pending, err := parseModel(d, h.Models)
			if err != nil {
				return err
			}
			h.Models = append(h.Models, m)
			pendingTo = append(pendingTo, pending...)

		case "failover":
			if h.Failover != nil {
				return d.Err("failover is already specified; use one failover block")
			}
			f, err := parseFailover(d)
			if err != nil {
				return err
			}
			h.Failover = f

		case "reasoning_field":
			if h.ReasoningField != "" {
				return d.Err("reasoning_field is already specified")
			}
			f, err := parseReasoningField(d)
			if err != nil {
				return err
			}
			h.ReasoningField = f

		case "reasoning_budget":
			if h.ReasoningBudget != nil {
				return d.Err("reasoning_budget is already specified")
			}
			b, err := parseReasoningBudget(d)
			if err != nil {
				return err
			}
			h.ReasoningBudget = b

		case "adaptive_effort":
			if h.AdaptiveEffort != nil {
				return d.Err("adaptive_effort is already specified; use one block")
			}
			a, err := parseAdaptiveEffort(d)
			if err != nil {
				return err
			}
			h.AdaptiveEffort = a

		case "price":
			model, p, err := parsePrice(d)
			if err != nil {
				return err
			}
			if _, dup := h.Prices[model]; dup {
				return d.Errf("price %s is defined twice", model)
			}
			if h.Prices == nil {
				h.Prices = map[string]Price{}
			}
			h.Prices[model] = p

		case "builtin_prices":
			if h.BuiltinPrices != nil {
				return d.Err("builtin_prices is already specified")
			}
			var v string
			if !d.Args(&v) || d.NextArg() || v != "on" && v != "off" {
				return d.Err("builtin_prices: expected `builtin_prices on|off`")
			}
			on := v == "on"
			h.BuiltinPrices = &on

		case "trace_content":
			var v string
			if !d.Args(&v) || d.NextArg() || v != "on" && v != "off" {
				return d.Err("trace_content: expected `trace_content on|off` (whether spans record the messages; off by default)")
			}
			h.TraceContent = v == "on"

		case "slo":
			if h.SLO != nil {
				return d.Err("slo is already specified; use one slo block")
			}
			slo, err := parseSLO(d)
			if err != nil {
				return err
			}
			h.SLO = slo

		case "region":
			if !d.NextArg() {
				return d.Err("region: expected a code, such as eu-west")
			}
			h.Region = d.Val()
			if d.NextArg() {
				return d.Errf("region takes one code, got another: %q", d.Val())
			}

		case "state":
			if h.State != nil {
				return d.Err("state is already specified; use one state line")
			}
			st, err := parseState(d)
			if err != nil {
				return err
			}
			h.State = st
			if err := st.check(); err != nil {
				return d.Err(err.Error())
			}

		case "capacity":
			if h.Capacity != nil {
				return d.Err("capacity is already specified; use one capacity block")
			}
			c, err := parseCapacity(d)
			if err != nil {
				return err
			}
			if _, err := resolveCapacity(c); err != nil {
				return d.Err(err.Error())
			}
			h.Capacity = c

		case "resume":
			if h.Resume != nil {
				return d.Err("resume is already specified; use one resume block")
			}
			rs, err := parseResume(d)
			if err != nil {
				return err
			}
			if err := rs.check(); err != nil {
				return d.Err(err.Error())
			}
			h.Resume = rs

		case "smoothing":
			if h.Smoothing != nil {
				return d.Err("smoothing is already specified; use one smoothing block")
			}
			s, err := parseSmoothing(d, nil)
			if err != nil {
				return err
			}
			h.Smoothing = s

		default:
			return d.Errf("unrecognized llm_relay subdirective %q; expected key, max_body, upstream, model, failover, smoothing, slo, reasoning_budget, reasoning_field, adaptive_effort, price, builtin_prices, region, state, capacity, resume or trace_content", d.Val())
		}
	}

	// `to` may name an upstream defined further down, so check at the end,
	// reporting the line of the `to`.
	for _, p := range pendingTo {
		if !upstreamLines[p.upstream] {
			return p.err
		}
	}
	if err := h.checkModelSmoothing(); err != nil {
		return err
	}
	return h.checkRegionPins()
}

// pendingTarget remembers a `to` line until every upstream is known.
type pendingTarget struct {
	upstream string
	err      error // the error to report if it stays unknown
}

// parseUpstream parses `upstream <name> <base_url> { ... }`; defined holds
// the names of the upstreams parsed before it.
func parseUpstream(d *caddyfile.Dispenser, defined map[string]bool) (*Upstream, error) {
	args := d.RemainingArgs()
	if len(args) != 2 {
		return nil, d.Errf("upstream: expected `upstream <name> <base_url>`, e.g. `upstream openai https://api.openai.com/v1`")
	}
	if err := checkUpstreamName(args[0], defined); err != nil {
		return nil, d.Err(err.Error())
	}
	u := &Upstream{Name: args[0], BaseURL: args[1]}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "api":
			if !d.NextArg() {
				return nil, d.Errf("upstream %q: expected `api openai|chat|anthropic`", u.Name)
			}
			if u.API != "" {
				return nil, d.Errf("upstream %q: api is already specified", u.Name)
			}
			u.API = d.Val()
			if err := checkAPI(u.API); err != nil {
				return nil, d.Errf("upstream %q: %v", u.Name, err)
			}
			if d.NextArg() {
				return nil, d.ArgErr()
			}
		case "continue_with":
			if u.ContinueWith != "" {
				return nil, d.Errf("upstream %q: continue_with is already specified", u.Name)
			}
			if !d.NextArg() {
				return nil, d.Errf("upstream %q: expected `continue_with prefill|prefix|continue_final_message|instruct`", u.Name)
			}
			u.ContinueWith = d.Val()
			if err := checkContinueWith(u.ContinueWith); err != nil {
				return nil, d.Errf("upstream %q: %v", u.Name, err)
			}
			if d.NextArg() {
				return nil, d.ArgErr()
			}
		case "api_key":
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			if u.APIKey != "" {
				return nil, d.Errf("upstream %q: api_key is already specified", u.Name)
			}
			u.APIKey = d.Val()
			if u.APIKey == "" {
				return nil, d.Errf("upstream %q: api_key is empty; if it comes from {$VAR}, check that the variable is set, or use {env.VAR}, which is checked at load", u.Name)
			}
			if d.NextArg() {
				return nil, d.ArgErr()
			}
		case "header":
			var field, value string
			if !d.Args(&field, &value) {
				return nil, d.Errf("upstream %q: expected `header <field> <value>`", u.Name)
			}
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			if u.Headers == nil {
				u.Headers = make(map[string][]string)
			}
			key := http.CanonicalHeaderKey(field)
			u.Headers[key] = append(u.Headers[key], value)
		case "region":
			if !d.NextArg() {
				return nil, d.Errf("upstream %q: expected `region <code>`", u.Name)
			}
			u.Region = d.Val()
			if d.NextArg() {
				return nil, d.ArgErr()
			}
		case "max_concurrent":
			n, err := parseMaxConcurrent(d)
			if err != nil {
				return nil, d.Errf("upstream %q: %v", u.Name, err)
			}
			u.MaxConcurrent = n
		case "trace_provider":
			if !d.NextArg() || u.TraceProvider != "" {
				return nil, d.Errf("upstream %q: expected one `trace_provider <name>`, e.g. `trace_provider deepseek`", u.Name)
			}
			u.TraceProvider = d.Val()
			if d.NextArg() {
				return nil, d.ArgErr()
			}
		case "trace_propagation":
			var v string
			if !d.Args(&v) || d.NextArg() || v != "on" && v != "off" || u.TracePropagation != nil {
				return nil, d.Errf("upstream %q: expected one `trace_propagation on|off`", u.Name)
			}
			on := v == "on"
			u.TracePropagation = &on
		case "reasoning_format", "reasoning_tags", "starts_in_reasoning", "reasoning_end_marker":
			if _, err := parseInlineReasoning(d, &u.InlineReasoning); err != nil {
				return nil, fmt.Errorf("upstream %q: %w", u.Name, err)
			}
		case "health_check":
			if u.HealthCheck != nil {
				return nil, d.Errf("upstream %q: health_check is already specified", u.Name)
			}
			hc, err := parseHealthCheck(d)
			if err != nil {
				return nil, err
			}
			u.HealthCheck = hc
		case "transport":
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			if u.TransportRaw != nil {
				return nil, d.Errf("upstream %q: transport is already specified", u.Name)
			}
			name := d.Val()
			unm, err := caddyfile.UnmarshalModule(d, "http.reverse_proxy.transport."+name)
			if err != nil {
				return nil, err
			}
			if _, ok := unm.(http.RoundTripper); !ok {
				return nil, d.Errf("upstream %q: transport %q is not an HTTP transport", u.Name, name)
			}
			u.TransportRaw = caddyconfig.JSONModuleObject(unm, "protocol", name, nil)
		default:
			return nil, d.Errf("unrecognized upstream subdirective %q; expected api, api_key, header, transport, region, health_check, max_concurrent, reasoning_format, reasoning_tags, starts_in_reasoning, reasoning_end_marker, continue_with, trace_provider or trace_propagation", d.Val())
		}
	}
	return u, nil
}

// parseModel parses `model <alias> { to ... }`; defined holds the routes
// parsed before it.
func parseModel(d *caddyfile.Dispenser, defined []*ModelRoute) (*ModelRoute, []pendingTarget, error) {
	if !d.NextArg() {
		return nil, nil, d.Errf("model: expected `model <alias> { to <upstream> [<upstream_model>] }`")
	}
	m := &ModelRoute{Alias: d.Val()}
	seen := make(map[string]bool, len(defined))
	for _, existing := range defined {
		seen[existing.Alias] = true
	}
	if err := checkModelAlias(m.Alias, seen); err != nil {
		return nil, nil, d.Err(err.Error())
	}
	if d.NextArg() {
		return nil, nil, d.ArgErr()
	}
	// Reported after the block is read, but it names this line.
	noTargets := d.Err(errNoTargets(m.Alias).Error())
	noAnswer := d.Err(errHandoffNoAnswer(m.Alias).Error())
	var noReason error // a handoff block without reason lines, at its line
	var pending []pendingTarget
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "to", "reason":
			line := d.Val()
			t, p, err := parseChainTarget(d, m.Alias, line)
			if err != nil {
				return nil, nil, err
			}
			pending = append(pending, p)
			if line == "to" {
				m.Targets = append(m.Targets, t)
			} else {
				m.Reason = append(m.Reason, t)
			}
		case "handoff":
			if m.Handoff != nil {
				return nil, nil, d.Errf("model %q: handoff is already specified; use one handoff block", m.Alias)
			}
			noReason = d.Err(errHandoffWithoutReason(m.Alias).Error())
			ho, err := parseHandoff(d, m.Alias)
			if err != nil {
				return nil, nil, err
			}
			m.Handoff = ho
		case "smoothing":
			if m.Smoothing != nil {
				return nil, nil, d.Errf("model %q: smoothing is already specified; use one smoothing block", m.Alias)
			}
			s, err := parseSmoothing(d, &m.Alias)
			if err != nil {
				return nil, nil, err
			}
			m.Smoothing = s
		case "slo":
			if m.SLO != nil {
				return nil, nil, d.Errf("model %q: slo is already specified; use one slo block", m.Alias)
			}
			slo, err := parseSLO(d)
			if err != nil {
				return nil, nil, err
			}
			m.SLO = slo
		case "reasoning_field":
			if m.ReasoningField != "" {
				return nil, nil, d.Errf("model %q: reasoning_field is already specified", m.Alias)
			}
			f, err := parseReasoningField(d)
			if err != nil {
				return nil, nil, err
			}
			m.ReasoningField = f
		case "reasoning_budget":
			if m.ReasoningBudget != nil {
				return nil, nil, d.Errf("model %q: reasoning_budget is already specified", m.Alias)
			}
			b, err := parseReasoningBudget(d)
			if err != nil {
				return nil, nil, err
			}
			m.ReasoningBudget = b
		case "adaptive_effort":
			if m.AdaptiveEffort != nil {
				return nil, nil, d.Errf("model %q: adaptive_effort is already specified", m.Alias)
			}
			a, err := parseAdaptiveEffort(d)
			if err != nil {
				return nil, nil, err
			}
			m.AdaptiveEffort = a
		case "canary":
			if m.Canary != nil {
				return nil, nil, d.Errf("model %q: canary is already specified; one canary per model", m.Alias)
			}
			c, err := parseCanary(d)
			if err != nil {
				return nil, nil, err
			}
			pending = append(pending, pendingTarget{upstream: c.Upstream,
				err: d.Err(errUnknownUpstream(m.Alias, "canary", c.Upstream).Error())})
			m.Canary = c
		case "shadow":
			if m.Shadow != nil {
				return nil, nil, d.Errf("model %q: shadow is already specified; one shadow per model", m.Alias)
			}
			sh, err := parseShadow(d)
			if err != nil {
				return nil, nil, err
			}
			pending = append(pending, pendingTarget{upstream: sh.Upstream,
				err: d.Err(errUnknownUpstream(m.Alias, "shadow", sh.Upstream).Error())})
			m.Shadow = sh
		case "region_pin":
			if m.RegionPin != "" {
				return nil, nil, d.Errf("model %q: region_pin is already specified; a model is pinned to one region", m.Alias)
			}
			if !d.NextArg() {
				return nil, nil, d.Errf("model %q: expected `region_pin <code>`, the region of one of its upstreams", m.Alias)
			}
			m.RegionPin = d.Val()
			if d.NextArg() {
				return nil, nil, d.Errf("model %q: region_pin takes one region code, got another: %q", m.Alias, d.Val())
			}
			m.regionPinAt = fmt.Sprintf("%s:%d", d.File(), d.Line()) // checked once every upstream is read
		case "failover":
			if m.Failover != nil {
				return nil, nil, d.Errf("model %q: failover is already specified", m.Alias)
			}
			f, err := parseModelFailover(d, m.Alias)
			if err != nil {
				return nil, nil, err
			}
			m.Failover = f
		default:
			return nil, nil, d.Errf("unrecognized model subdirective %q; expected to, reason, handoff, smoothing, slo, canary, shadow, reasoning_budget, reasoning_field, adaptive_effort, region_pin or failover", d.Val())
		}
	}
	if len(m.Targets) == 0 && len(m.Reason) > 0 {
		return nil, nil, noAnswer
	}
	if len(m.Targets) == 0 {
		return nil, nil, noTargets
	}
	if noReason != nil && len(m.Reason) == 0 {
		return nil, nil, noReason
	}
	return m, pending, nil
}

// parseChainTarget parses a `to` or `reason` line (line) and its block:
// the target, and its upstream name to check once every upstream is known.
func parseChainTarget(d *caddyfile.Dispenser, alias, line string) (Target, pendingTarget, error) {
	args := d.RemainingArgs()
	if len(args) < 1 || len(args) > 2 {
		return Target{}, pendingTarget{}, d.Errf("model %q: expected `%s <upstream> [<upstream_model>]`", alias, line)
	}
	t := Target{Upstream: args[0]}
	if len(args) == 2 {
		t.Model = args[1]
	}
	what := ""
	if line == "reason" {
		what = "reason"
	}
	p := pendingTarget{upstream: t.Upstream, err: d.Err(errUnknownUpstream(alias, what, t.Upstream).Error())}
	if err := parseTargetEdits(d, &t); err != nil {
		return Target{}, pendingTarget{}, err
	}
	return t, p, nil
}

// parseHandoff parses a model's `handoff { ... }` block.
func parseHandoff(d *caddyfile.Dispenser, alias string) (*Handoff, error) {
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	ho := &Handoff{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		if !d.NextArg() {
			return nil, d.Errf("model %q: handoff: %s needs a value", alias, name)
		}
		v := d.Val()
		if d.NextArg() {
			return nil, d.ArgErr()
		}
		switch name {
		case "inject":
			ho.Inject = v
		case "max_reasoning":
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, d.Errf("model %q: handoff: max_reasoning %q is not a whole number of tokens; write it like 4000, or leave it out to hand off at the reasoning's own end", alias, v)
			}
			ho.MaxReasoning = n
		case "on_reason_failure":
			ho.OnReasonFailure = v
		default:
			return nil, d.Errf("unrecognized handoff subdirective %q; expected inject, max_reasoning or on_reason_failure", name)
		}
		// The same checks as the JSON config's, at this line.
		if err := ho.check(); err != nil {
			return nil, d.Errf("model %q: handoff: %v", alias, err)
		}
	}
	return ho, nil
}

// parseTargetEdits parses the optional `{ set ...; unset ... }` of a `to`.
func parseTargetEdits(d *caddyfile.Dispenser, t *Target) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "set", "unset":
			if err := parseOneEdit(d, t); err != nil {
				return err
			}
		case "rank", "weight":
			key := d.Val()
			var v string
			if !d.Args(&v) || d.NextArg() {
				return d.Errf("%s: expected `%s <n>`", key, key)
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return d.Errf("%s: %q is not a positive whole number", key, v)
			}
			if key == "rank" {
				t.Rank = n
			} else {
				t.Weight = n
			}
		case "max_concurrent":
			n, err := parseMaxConcurrent(d)
			if err != nil {
				return d.Err(err.Error())
			}
			t.MaxConcurrent = n
		case "reasoning_format", "reasoning_tags", "starts_in_reasoning", "reasoning_end_marker":
			if _, err := parseInlineReasoning(d, &t.InlineReasoning); err != nil {
				return err
			}
		default:
			return d.Errf("unrecognized target subdirective %q; expected set, unset, rank, weight, max_concurrent, reasoning_format, reasoning_tags, starts_in_reasoning or reasoning_end_marker", d.Val())
		}
	}
	return nil
}

// parseOneEdit parses one `set <json_field> <value>` or `unset
// <json_field>` line (the dispenser on its first token) into t.
func parseOneEdit(d *caddyfile.Dispenser, t *Target) error {
	if d.Val() == "set" {
		var field, value string
		if !d.Args(&field, &value) {
			return d.Errf("set: expected `set <json_field> <value>`")
		}
		if d.NextArg() {
			return d.Errf("set %s: too many arguments; quote a value with spaces", field)
		}
		if err := checkFieldPath(field); err != nil {
			return d.Errf("set %s: %v", field, err)
		}
		if t.Set == nil {
			t.Set = make(map[string]json.RawMessage)
		}
		t.Set[field] = jsonValue(value)
		return nil
	}
	if !d.NextArg() {
		return d.Errf("unset: expected `unset <json_field>`")
	}
	if err := checkFieldPath(d.Val()); err != nil {
		return d.Errf("unset %s: %v", d.Val(), err)
	}
	t.Unset = append(t.Unset, d.Val())
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// jsonValue uses v as JSON if it parses, else as a JSON string.
func jsonValue(v string) json.RawMessage {
	if json.Valid([]byte(v)) {
		return json.RawMessage(v)
	}
	b, _ := json.Marshal(v)
	return b
}

// parseFailover parses the failover block.
func parseFailover(d *caddyfile.Dispenser) (*Failover, error) {
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	f := new(Failover)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "on":
			words := d.RemainingArgs()
			if len(words) == 0 {
				return nil, d.Errf("on: expected one or more of connect, timeout, 5xx, 429 ...")
			}
			if _, err := parseTriggers(words); err != nil {
				return nil, d.Errf("on: %v", err)
			}
			f.On = append(f.On, words...)
		case "attempts":
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			n, err := strconv.Atoi(d.Val())
			if err != nil || n < 1 {
				return nil, d.Errf("attempts: %q is not a positive whole number", d.Val())
			}
			if err := checkAttempts(n); err != nil {
				return nil, d.Err(err.Error())
			}
			f.Attempts = n
			if d.NextArg() {
				return nil, d.ArgErr()
			}
		case "backoff":
			var base, max string
			if !d.Args(&base, &max) || d.NextArg() {
				return nil, d.Errf("backoff: expected `backoff <base> <max>`, e.g. `backoff 100ms 2s`")
			}
			b, err := parseDurationArg(d, "backoff base", base)
			if err != nil {
				return nil, err
			}
			m, err := parseDurationArg(d, "backoff max", max)
			if err != nil {
				return nil, err
			}
			if _, err := resolveBackoff(&Failover{BackoffBase: b, BackoffMax: m}); err != nil {
				return nil, d.Err(err.Error())
			}
			f.BackoffBase, f.BackoffMax = b, m
		case "first_byte_timeout", "try_duration", "stream_idle_timeout":
			name := d.Val()
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			dur, err := parseDurationArg(d, name, d.Val())
			if err != nil {
				return nil, err
			}
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			fl := map[string]floor{"first_byte_timeout": floorFirstByte, "try_duration": floorTryDuration, "stream_idle_timeout": floorStreamIdle}[name]
			if err := fl.check(dur); err != nil {
				return nil, d.Err(err.Error())
			}
			switch name {
			case "first_byte_timeout":
				f.FirstByteTimeout = dur
			case "try_duration":
				f.TryDuration = dur
			default:
				f.StreamIdleTimeout = dur
			}
		case "after_commit", "continue_reasoning":
			name := d.Val()
			var v string
			if !d.Args(&v) || d.NextArg() {
				return nil, d.Errf("%s: expected one value, e.g. `%s`", name, map[string]string{"after_commit": "after_commit continue", "continue_reasoning": "continue_reasoning mark"}[name])
			}
			if name == "after_commit" {
				f.AfterCommit = v
			} else {
				f.ContinueReasoning = v
			}
			if err := f.checkContinuation(); err != nil {
				return nil, d.Err(err.Error())
			}
		default:
			return nil, d.Errf("unrecognized failover subdirective %q; expected on, attempts, backoff, first_byte_timeout, try_duration, stream_idle_timeout, after_commit or continue_reasoning", d.Val())
		}
	}
	return f, nil
}

// parseModelFailover parses a model's failover block: its continuation
// settings only (the rest of failover is the relay's).
func parseModelFailover(d *caddyfile.Dispenser, alias string) (*Failover, error) {
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	f := new(Failover)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		var v string
		switch name {
		case "after_commit", "continue_reasoning":
			if !d.Args(&v) || d.NextArg() {
				return nil, d.Errf("model %q: failover: %s: expected one value", alias, name)
			}
		default:
			return nil, d.Errf("unrecognized failover subdirective %q; expected after_commit or continue_reasoning", name) // a model block takes only these
		}
		if name == "after_commit" {
			f.AfterCommit = v
		} else {
			f.ContinueReasoning = v
		}
		if err := f.checkContinuation(); err != nil {
			return nil, d.Errf("model %q: failover: %v", alias, err)
		}
	}
	return f, nil
}

// parseDurationArg parses a positive duration such as 250ms or 2s.
func parseDurationArg(d *caddyfile.Dispenser, what, v string) (caddy.Duration, error) {
	dur, err := caddy.ParseDuration(v)
	if err != nil || dur <= 0 {
		return 0, d.Errf("%s: %q is not a positive duration; write it like 250ms, 2s or 1m", what, v)
	}
	return caddy.Duration(dur), nil
}

// Interface guard
var _ caddyfile.Unmarshaler = (*Relay)(nil)

// parseSLO parses `slo { ttft <dur>; success <ratio>; window <n>; min_samples <n>;
// reasoning_floor <ratio>; cluster_rate <ratio> }`.
func parseSLO(d *caddyfile.Dispenser) (*SLO, error) {
	s := &SLO{at: fmt.Sprintf("%s:%d", d.File(), d.Line())}
	if d.NextArg() {
		return nil, d.Errf("slo takes no arguments; put ttft, success, window and min_samples in its block")
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		key := d.Val()
		var v string
		if !d.Args(&v) || d.NextArg() {
			return nil, d.Errf("slo: expected `%s <value>`", key)
		}
		switch key {
		case "ttft":
			dur, err := parseDurationArg(d, "slo ttft", v)
			if err != nil {
				return nil, err
			}
			s.TTFT = dur
		case "success":
			r, err := parseRatio(v)
			if err != nil {
				return nil, d.Errf("slo success: %v", err)
			}
			s.Success = r
		case "reasoning_floor", "cluster_rate":
			r, err := parseRatio(v)
			if err != nil {
				return nil, d.Errf("slo %s: %v", key, err)
			}
			if key == "reasoning_floor" {
				s.ReasoningFloor = r
			} else {
				s.ClusterRate = r
			}
		case "window", "min_samples":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, d.Errf("slo %s: %q is not a positive whole number", key, v)
			}
			if err := checkWindow(key, n); err != nil {
				return nil, d.Errf("slo %v", err)
			}
			if key == "window" {
				s.Window = n
			} else {
				s.MinSamples = n
			}
		default:
			return nil, d.Errf("unrecognized slo subdirective %q; expected ttft, success, window, min_samples, reasoning_floor or cluster_rate", key)
		}
	}
	return s, nil
}

// parseRatio parses a share such as 0.95 (or 95%).
func parseRatio(v string) (float64, error) {
	pct := strings.HasSuffix(v, "%")
	f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	if pct {
		f /= 100
	}
	if err != nil || checkRatio("", f) != nil {
		return 0, fmt.Errorf("%q is not a ratio; write it like 0.95 or 95%%", v)
	}
	return f, nil
}

// parsePercent parses a share of requests such as 5 or 5%.
func parsePercent(v string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	if err != nil || checkPercent("", f) != nil {
		return 0, fmt.Errorf("%q is not a percentage between 0 and 100", v)
	}
	return f, nil
}

// parseHealthCheck parses `health_check { uri <path>; interval <dur>; timeout <dur> }`.
func parseHealthCheck(d *caddyfile.Dispenser) (*HealthCheck, error) {
	hc := &HealthCheck{}
	if d.NextArg() {
		return nil, d.Errf("health_check takes no arguments; put uri, interval and timeout in its block")
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		key := d.Val()
		var v string
		if !d.Args(&v) || d.NextArg() {
			return nil, d.Errf("health_check: expected `%s <value>`", key)
		}
		switch key {
		case "uri":
			if err := checkHealthURI(v); err != nil {
				return nil, d.Errf("health_check %v", err)
			}
			hc.URI = v
		case "interval", "timeout":
			dur, err := parseDurationArg(d, "health_check "+key, v)
			if err != nil {
				return nil, err
			}
			if err := map[string]floor{"interval": floorProbeInterval, "timeout": floorProbeTimeout}[key].check(dur); err != nil {
				return nil, d.Errf("health_check %v", err)
			}
			if key == "interval" {
				hc.Interval = dur
			} else {
				hc.Timeout = dur
			}
		default:
			return nil, d.Errf("unrecognized health_check subdirective %q; expected uri, interval or timeout", key)
		}
	}
	return hc, nil
}

// parseTargetLine parses `<upstream> [<model>] <percent>` of canary and
// shadow.
func parseTargetLine(d *caddyfile.Dispenser, what string) (up, model string, pct float64, err error) {
	args := d.RemainingArgs()
	if len(args) < 2 || len(args) > 3 {
		return "", "", 0, d.Errf("%s: expected `%s <upstream> [<model>] <percent>`", what, what)
	}
	up = args[0]
	if len(args) == 3 {
		model = args[1]
	}
	pct, perr := parsePercent(args[len(args)-1])
	if perr != nil {
		return "", "", 0, d.Errf("%s: %v", what, perr)
	}
	return up, model, pct, nil
}

// parseCanary parses a model block's `canary` line and block.
func parseCanary(d *caddyfile.Dispenser) (*Canary, error) {
	c, gotShare, err := parseCanaryLine(d)
	if err != nil {
		return nil, err
	}
	// Reported after the block is read, but it names this line.
	noShare := d.Errf("canary: no share; give one, as in `canary <upstream> [<model>] <percent>`, or a roll-out in its block, as in `promote 5%% for 3d, 50%% for 7d, 100%%`")
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "key":
			args := d.RemainingArgs()
			switch {
			case len(args) == 2 && args[0] == "header":
				if err := checkCanaryHeader(args[1]); err != nil {
					return nil, d.Errf("canary %v", err)
				}
				c.Key = "header:" + args[1]
			case len(args) == 2 && args[0] == "body" && args[1] == "user":
				c.Key = "body:user"
			case len(args) == 1 && args[0] == "client_ip":
				c.Key = "client_ip"
			default:
				return nil, d.Errf("canary key: expected `key header <name>`, `key body user` or `key client_ip`")
			}
		case "guard":
			if err := parseGuard(d, &c.Guard); err != nil {
				return nil, err
			}
		case "promote":
			if err := parseCanaryPromote(d, c); err != nil {
				return nil, err
			}
		default:
			return nil, d.Errf("unrecognized canary subdirective %q; expected key, guard or promote", d.Val())
		}
	}
	if !gotShare && len(c.Phases) == 0 {
		return nil, noShare
	}
	return c, nil
}

// parseCanaryLine parses `canary <upstream> [<model>] [<percent>]`. The
// percent may be left out when the block gives a roll-out by phases (the
// first phase is the starting share). A last argument that is a number
// is the percent, as it always was; anything else is the model. gotShare
// reports a percent given (0 included: Provision refuses it, saying why).
func parseCanaryLine(d *caddyfile.Dispenser) (c *Canary, gotShare bool, err error) {
	args := d.RemainingArgs()
	if len(args) < 1 || len(args) > 3 {
		return nil, false, d.Errf("canary: expected `canary <upstream> [<model>] <percent>`")
	}
	c = &Canary{Upstream: args[0]}
	rest := args[1:]
	if n := len(rest); n > 0 && isNumber(rest[n-1]) {
		pct, err := parsePercent(rest[n-1])
		if err != nil {
			return nil, false, d.Errf("canary: %v", err)
		}
		c.Percent, gotShare = pct, true
		rest = rest[:n-1]
	}
	switch len(rest) {
	case 0:
	case 1:
		c.Model = rest[0]
	default:
		return nil, false, d.Errf("canary: expected `canary <upstream> [<model>] <percent>`")
	}
	return c, gotShare, nil
}

func isNumber(v string) bool {
	_, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	return err == nil
}

// parseCanaryPromote parses a canary's promote line, in either form:
//
//	promote <percent...> every <duration>        (steps of one length)
//	promote <percent> for <duration>, ..., <percent>   (phases of their own)
//
// and checks the schedule at this line.
func parseCanaryPromote(d *caddyfile.Dispenser, c *Canary) error {
	if len(c.Promote) > 0 || len(c.Phases) > 0 {
		return d.Errf("canary promote is already specified; give the whole schedule on one promote line")
	}
	args := d.RemainingArgs()
	hasFor, hasEvery := false, false
	for _, a := range args {
		hasFor = hasFor || strings.TrimSuffix(a, ",") == "for"
		hasEvery = hasEvery || a == "every"
	}
	const forms = "`promote 5% for 3d, 50% for 7d, 100%` (phases of their own lengths) or `promote 50 100 every 10m` (steps after the canary's share, each as long)"
	switch {
	case hasFor && hasEvery:
		return d.Errf("canary promote: `for` and `every` are two forms of one schedule; use one: %s", forms)
	case hasFor:
		for i, part := range strings.Split(strings.Join(args, " "), ",") {
			f := strings.Fields(part)
			if len(f) != 1 && (len(f) != 3 || f[1] != "for") {
				return d.Errf("canary promote: phase %d %q: expected `<percent> for <duration>`, or `<percent>` for the last; e.g. %s", i+1, strings.TrimSpace(part), forms)
			}
			pct, err := parsePercent(f[0])
			if err != nil {
				return d.Errf("canary promote: phase %d: %v", i+1, err)
			}
			ph := CanaryPhase{Percent: pct}
			if len(f) == 3 {
				dur, err := parseDurationArg(d, "canary promote: phase "+strconv.Itoa(i+1)+" for", f[2])
				if err != nil {
					return err
				}
				ph.For = dur
			}
			c.Phases = append(c.Phases, ph)
		}
	case len(args) >= 3 && args[len(args)-2] == "every":
		for _, a := range args[:len(args)-2] {
			p, err := parsePercent(a)
			if err != nil {
				return d.Errf("canary promote: %v", err)
			}
			c.Promote = append(c.Promote, p)
		}
		dur, err := parseDurationArg(d, "canary promote every", args[len(args)-1])
		if err != nil {
			return err
		}
		c.PromoteEvery = dur
	default:
		return d.Errf("canary promote: expected %s", forms)
	}
	if err := c.checkRollout(); err != nil {
		return d.Errf("canary %v", err)
	}
	return nil
}

// parseGuard parses a canary's `guard { ... }`.
func parseGuard(d *caddyfile.Dispenser, g *CanaryGuard) error {
	if d.NextArg() {
		return d.Errf("guard takes no arguments; put ttft_p99, ttft_mean, error_rate, cluster_rate, reasoning_floor, min_samples and window in its block")
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		key := d.Val()
		var v string
		if !d.Args(&v) || d.NextArg() {
			return d.Errf("guard: expected `%s <value>`", key)
		}
		switch key {
		case "ttft_p99":
			dur, err := parseDurationArg(d, "guard ttft_p99", v)
			if err != nil {
				return err
			}
			g.TTFTP99 = dur
		case "error_rate":
			r, err := parseRatio(v)
			if err != nil {
				return d.Errf("guard error_rate: %v", err)
			}
			g.ErrorRate = r
		case "ttft_mean":
			dur, err := parseDurationArg(d, "guard ttft_mean", v)
			if err != nil {
				return err
			}
			g.TTFTMean = dur
		case "cluster_rate":
			r, err := parseRatio(v)
			if err != nil {
				return d.Errf("guard cluster_rate: %v", err)
			}
			g.ClusterRate = r
		case "reasoning_floor":
			r, err := parseRatio(v)
			if err != nil {
				return d.Errf("guard reasoning_floor: %v (a share of the stable targets' reasoning above 0 and at most 1, such as 0.5)", err)
			}
			g.ReasoningFloor = r
		case "min_samples", "window":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return d.Errf("guard %s: %q is not a positive whole number", key, v)
			}
			if err := checkWindow(key, n); err != nil {
				return d.Errf("guard %v", err)
			}
			if key == "window" {
				g.Window = n
			} else {
				g.MinSamples = n
			}
		default:
			return d.Errf("unrecognized guard subdirective %q; expected ttft_p99, ttft_mean, error_rate, cluster_rate, reasoning_floor, min_samples or window", key)
		}
	}
	return nil
}

// parseShadow parses a model block's `shadow` line and block.
func parseShadow(d *caddyfile.Dispenser) (*Shadow, error) {
	up, model, pct, err := parseTargetLine(d, "shadow")
	if err != nil {
		return nil, err
	}
	s := &Shadow{Upstream: up, Model: model, Percent: pct}
	if err := s.check(); err != nil {
		return nil, d.Errf("shadow: %v", err)
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "max_concurrent":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return nil, d.Errf("shadow: expected `max_concurrent <n>`")
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, d.Errf("shadow max_concurrent: %q is not a positive whole number", v)
			}
			s.MaxConcurrent = n
		case "warn_similarity":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return nil, d.Errf("shadow: expected `warn_similarity <ratio>`")
			}
			r, err := parseRatio(v)
			if err != nil {
				return nil, d.Errf("shadow warn_similarity: %v", err)
			}
			s.WarnSimilarity = r
		default:
			return nil, d.Errf("unrecognized shadow subdirective %q; expected max_concurrent or warn_similarity", d.Val())
		}
	}
	return s, nil
}

// parseReasoningBudget parses `reasoning_budget <tokens> [truncate|failover|error]`.
func parseReasoningBudget(d *caddyfile.Dispenser) (*ReasoningBudget, error) {
	args := d.RemainingArgs()
	if len(args) < 1 || len(args) > 2 {
		return nil, d.Errf("reasoning_budget: expected `reasoning_budget <tokens> [truncate|failover|error]`")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		return nil, d.Errf("reasoning_budget: %q is not a positive number of tokens", args[0])
	}
	b := &ReasoningBudget{Tokens: n}
	if len(args) == 2 {
		b.Action = args[1]
	}
	if err := b.check(); err != nil {
		return nil, d.Err(err.Error())
	}
	return b, nil
}

// parseAdaptiveEffort parses `adaptive_effort { below <n> <effort>; else <effort>; client_effort keep|override }`.
func parseAdaptiveEffort(d *caddyfile.Dispenser) (*AdaptiveEffort, error) {
	a := &AdaptiveEffort{}
	if d.NextArg() {
		return nil, d.Errf("adaptive_effort takes no arguments; put below/else lines in its block")
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		key := d.Val()
		args := d.RemainingArgs()
		switch key {
		case "below":
			if len(args) != 2 {
				return nil, d.Errf("adaptive_effort: expected `below <tokens> <effort>`")
			}
			n, err := strconv.Atoi(args[0])
			if err != nil {
				return nil, d.Errf("adaptive_effort below: %q is not a positive number of tokens", args[0])
			}
			r := EffortRule{Below: n, Effort: args[1]}
			var prev *EffortRule
			if k := len(a.Rules); k > 0 {
				prev = &a.Rules[k-1]
			}
			if err := checkEffortRule(prev, r); err != nil {
				return nil, d.Err(err.Error())
			}
			a.Rules = append(a.Rules, r)
		case "else":
			if len(args) != 1 {
				return nil, d.Errf("adaptive_effort: expected `else <effort>` with %s", effortWords)
			}
			if err := checkEffort("adaptive_effort else", args[0]); err != nil {
				return nil, d.Err(err.Error())
			}
			a.Else = args[0]
		case "client_effort":
			if len(args) != 1 {
				return nil, d.Errf("adaptive_effort: expected `client_effort keep` or `client_effort override`")
			}
			if err := checkClientEffort(args[0]); err != nil {
				return nil, d.Err(err.Error())
			}
			a.ClientEffort = args[0]
		default:
			return nil, d.Errf("unrecognized adaptive_effort subdirective %q; expected below, else or client_effort", key)
		}
	}
	if err := a.check(); err != nil {
		return nil, d.Err(err.Error())
	}
	return a, nil
}

// parsePrice parses `price <model> { input <usd>; output <usd>; cached_input <usd>; cache_write <usd> }`.
func parsePrice(d *caddyfile.Dispenser) (string, Price, error) {
	var model string
	if !d.Args(&model) || d.NextArg() {
		return "", Price{}, d.Errf("price: expected `price <model> { input <usd per MTok>; output <usd per MTok> }`")
	}
	var p Price
	seen := false
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		key := d.Val()
		var v string
		if !d.Args(&v) || d.NextArg() {
			return "", p, d.Errf("price %s: expected `%s <usd per million tokens>`", model, key)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return "", p, d.Errf("price %s: %s %q is not an amount of US dollars per million tokens", model, key, v)
		}
		if err := checkPriceField(model, key, f); err != nil {
			return "", p, d.Err(err.Error())
		}
		switch key {
		case "input":
			p.Input = f
		case "output":
			p.Output = f
		case "cached_input":
			p.CachedInput = f
		case "cache_write":
			p.CacheWrite = f
		default:
			return "", p, d.Errf("unrecognized price subdirective %q; expected input, output, cached_input or cache_write", key)
		}
		seen = true
	}
	if !seen {
		return "", p, d.Errf("price %s: give at least input and output in its block", model)
	}
	return model, p, nil
}

// parseKeyBudget parses the `budget <usd> per day|month` tail of a key line.
func parseKeyBudget(d *caddyfile.Dispenser, k *ClientKey, args []string) error {
	if len(args) != 4 || args[0] != "budget" || args[2] != "per" {
		return d.Errf("key: expected `key <token> [<name>] [budget <usd> per day|month]`")
	}
	f, err := strconv.ParseFloat(args[1], 64)
	if err != nil || f == 0 {
		return d.Errf("key budget: %q is not a positive amount of US dollars", args[1])
	}
	k.Budget, k.BudgetPeriod = f, args[3]
	return nil
}

// parseKeyBlock parses a key's block: budget, rpm, tpm, allow_ip,
// not_before and expires, each checked on its own line.
func parseKeyBlock(d *caddyfile.Dispenser, k *ClientKey) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		args := d.RemainingArgs()
		switch name {
		case "budget":
			if k.Budget != 0 {
				return d.Err("key: budget is already given for this key")
			}
			if err := parseKeyBudget(d, k, append([]string{"budget"}, args...)); err != nil {
				return err
			}
		case "rpm", "tpm", "max_concurrent":
			if len(args) != 1 {
				return d.Errf("key %s: expected one number, such as `%s 600`", name, name)
			}
			n, err := strconv.Atoi(args[0])
			if err != nil || n <= 0 {
				return d.Errf("key %s: %q is not a positive whole number", name, args[0])
			}
			switch name {
			case "rpm":
				k.RPM = n
			case "tpm":
				k.TPM = n
			default:
				k.MaxConcurrent = n
			}
		case "reasoning_budget":
			if k.ReasoningBudget != 0 {
				return d.Err("key: reasoning_budget is already given for this key")
			}
			if len(args) != 3 || args[1] != "per" {
				return d.Err("key reasoning_budget: expected `reasoning_budget <tokens> per day|month`")
			}
			n, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || n <= 0 {
				return d.Errf("key reasoning_budget: %q is not a positive whole number of tokens", args[0])
			}
			k.ReasoningBudget, k.ReasoningBudgetPeriod = n, args[2]
			if err := k.checkReasoningBudget("this key"); err != nil {
				return d.Err(err.Error())
			}
		case "allow_ip":
			if len(args) == 0 {
				return d.Err("key allow_ip: expected one or more addresses or CIDR ranges, such as 10.0.0.0/8")
			}
			k.AllowIP = append(k.AllowIP, args...)
		case "not_before", "expires":
			if len(args) != 1 {
				return d.Errf("key %s: expected one date, such as 2027-03-01 or 2027-03-01T12:00:00Z", name)
			}
			if name == "not_before" {
				k.NotBefore = args[0]
			} else {
				k.Expires = args[0]
			}
		default:
			return d.Errf("unrecognized key subdirective %q; expected budget, reasoning_budget, rpm, tpm, max_concurrent, allow_ip, not_before or expires", name)
		}
		if err := k.check("this key"); err != nil {
			return d.Err(err.Error())
		}
	}
	return nil
}

// parseReasoningField parses `reasoning_field reasoning_content|reasoning|both|inline`.
func parseReasoningField(d *caddyfile.Dispenser) (string, error) {
	if !d.NextArg() {
		return "", d.Errf("reasoning_field: expected `reasoning_field reasoning_content|reasoning|both|inline`")
	}
	f := d.Val()
	if err := checkReasoningField(f); err != nil {
		return "", d.Err(err.Error())
	}
	if d.NextArg() {
		return "", d.ArgErr()
	}
	return f, nil
}

// parseSmoothing parses a `smoothing [<mode>] { ... }` block, at the relay
// level (model == nil) or in a model block. Each value is checked here so
// that a mistake names its own line.
func parseSmoothing(d *caddyfile.Dispenser, model *string) (*Smoothing, error) {
	s := &Smoothing{}
	if d.NextArg() {
		if _, err := pace.ParseMode(d.Val()); err != nil {
			return nil, d.Errf("smoothing: unknown mode %q; write `smoothing off`, `smoothing pace` or `smoothing split-reasoning`", d.Val())
		}
		s.Mode = d.Val()
	}
	if d.NextArg() {
		return nil, d.Errf("smoothing: expected `smoothing [off|pace|split-reasoning] { ... }`, got extra argument %q", d.Val())
	}
	// Cross-field checks are reported after the block, naming this line.
	s.at = fmt.Sprintf("%s:%d", d.File(), d.Line())
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		key := d.Val()
		args := d.RemainingArgs()
		if len(args) != 1 {
			return nil, d.Errf("smoothing: expected `%s <value>`, got %d values", key, len(args))
		}
		v := args[0]
		switch key {
		case "max_delay", "reasoning_max_delay", "reasoning_drain", "min_interval":
			dur, err := parseDurationArg(d, key, v)
			if err != nil {
				return nil, err
			}
			if key == "min_interval" {
				if err := floorMinInterval.check(dur); err != nil {
					return nil, d.Err(err.Error())
				}
			}
			switch key {
			case "max_delay":
				s.MaxDelay = dur
			case "reasoning_max_delay":
				s.ReasoningMaxDelay = dur
			case "reasoning_drain":
				s.ReasoningDrain = dur
			default:
				s.MinInterval = dur
			}
		case "heartbeat", "early_commit":
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur < 0 {
				return nil, d.Errf("%s: %q is not a duration; write it like 15s, or 0 to turn it off", key, v)
			}
			if err := map[string]floor{"heartbeat": floorHeartbeat, "early_commit": floorEarlyCommit}[key].check(caddy.Duration(dur)); err != nil {
				return nil, d.Err(err.Error())
			}
			if key == "heartbeat" {
				cd := caddy.Duration(dur)
				s.Heartbeat = &cd
			} else {
				s.EarlyCommit = caddy.Duration(dur)
			}
		case "reasoning":
			if v != "show" && v != "hide" {
				return nil, d.Errf("reasoning: %q is not show or hide", v)
			}
			s.Reasoning = v
		case "split_ratio":
			r, err := strconv.ParseFloat(v, 64)
			if err == nil {
				err = checkSplitRatio(r)
			} else {
				err = fmt.Errorf("split_ratio %q is not a number: give a number from 0 to 1, such as 0.35", v)
			}
			if err != nil {
				return nil, d.Err(err.Error())
			}
			s.SplitRatio = &r
		default:
			return nil, d.Errf("unrecognized smoothing subdirective %q; expected max_delay, reasoning_max_delay, reasoning_drain, min_interval, split_ratio, heartbeat, reasoning or early_commit", key)
		}
	}
	// A model block alone cannot be checked against the relay level here
	// (it may come first); resolveSmoothing checks the merge at load.
	if model == nil {
		if _, err := resolveSmoothing(s, nil); err != nil {
			return nil, fmt.Errorf("smoothing: %w, at %s", err, s.at)
		}
	}
	return s, nil
}

// checkModelSmoothing checks each model's smoothing merged over the relay
// level, once the whole llm_relay block is read, naming the model's
// smoothing line.
func (h *Relay) checkModelSmoothing() error {
	for _, m := range h.Models {
		if m.Smoothing == nil {
			continue
		}
		if _, err := resolveSmoothing(h.Smoothing, m.Smoothing); err != nil {
			return fmt.Errorf("model %q: smoothing: %w, at %s", m.Alias, err, m.Smoothing.at)
		}
	}
	return nil
}

// parseState parses `state off|local` and `state redis <address> { ... }`,
// `state redis sentinel <master_name> <sentinel_address...> { ... }` and
// `state redis cluster <node_address...> { ... }` (redismodes.go).
func parseState(d *caddyfile.Dispenser) (*StateConfig, error) {
	if !d.NextArg() {
		return nil, d.Err("state: expected off, local or redis <address>")
	}
	st := &StateConfig{Backend: d.Val()}
	switch st.Backend {
	case "off", "local":
		if d.NextArg() {
			return nil, d.Errf("state %s takes no more arguments", st.Backend)
		}
		if d.NextBlock(d.Nesting()) {
			return nil, d.Errf("state %s takes no block", st.Backend)
		}
		return st, nil
	case "redis":
	default:
		return nil, d.Errf("state: unknown backend %q; expected off, local or redis <address>", st.Backend)
	}
	if !d.NextArg() {
		return nil, d.Err("state redis: expected an address (host:port, or unix:/path/to/redis.sock), or sentinel <master_name> <sentinel_address...>, or cluster <node_address...>")
	}
	switch st.Address = d.Val(); st.Address {
	case "sentinel", "cluster":
		st.Mode, st.Address = st.Address, ""
		if st.Mode == "sentinel" && d.NextArg() {
			st.MasterName = d.Val()
		}
		st.Addresses = d.RemainingArgs()
	default:
		if d.NextArg() {
			return nil, d.Errf("state redis: unexpected argument %q; put settings in its block", d.Val())
		}
	}
	if err := st.check(); err != nil {
		return nil, d.Err(err.Error()) // on the state line
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		switch name {
		case "tls":
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			st.TLS = true
			continue
		case "password", "db", "prefix", "sync_interval", "share_health", "sentinel_password":
		default:
			return nil, d.Errf("unrecognized state redis subdirective %q; expected password, db, prefix, tls, sync_interval, share_health or sentinel_password", name)
		}
		if !d.NextArg() {
			return nil, d.Errf("state redis: %s needs a value", name)
		}
		v := d.Val()
		if d.NextArg() {
			return nil, d.Errf("state redis: %s takes one value", name)
		}
		switch name {
		case "password":
			st.Password = v
		case "sentinel_password":
			st.SentinelPassword = v
		case "db":
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, d.Errf("state redis: db %q is not a whole number", v)
			}
			st.DB = n
		case "prefix":
			st.Prefix = v
		case "sync_interval":
			dur, err := parseDurationArg(d, "sync_interval", v)
			if err != nil {
				return nil, err
			}
			st.SyncInterval = dur
		case "share_health":
			switch v {
			case "on":
				st.ShareHealth = new(bool)
				*st.ShareHealth = true
			case "off":
				st.ShareHealth = new(bool)
			default:
				return nil, d.Errf("state redis: share_health %q: expected on or off", v)
			}
		}
		if err := st.check(); err != nil {
			return nil, d.Err(err.Error()) // on this line, not the block's end
		}
	}
	return st, nil
}

// parseMaxConcurrent parses `max_concurrent <n>` (n >= 1).
func parseMaxConcurrent(d *caddyfile.Dispenser) (int, error) {
	var v string
	if !d.Args(&v) || d.NextArg() {
		return 0, fmt.Errorf("expected `max_concurrent <n>`, the most requests in flight at once")
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("max_concurrent: %q is not a positive whole number", v)
	}
	return n, nil
}

// parseCapacity parses the relay-level `capacity { ... }` block.
func parseCapacity(d *caddyfile.Dispenser) (*Capacity, error) {
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	c := new(Capacity)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch key := d.Val(); key {
		case "spill_at", "degrade_at", "shed_at":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return nil, d.Errf("capacity: expected `%s <percent>`, such as `%s 80%%`", key, key)
			}
			pct, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
			if err != nil || pct <= 0 || pct > 100 {
				return nil, d.Errf("capacity: %s %q is not a percentage above 0 and at most 100", key, v)
			}
			switch key {
			case "spill_at":
				c.SpillAt = pct
			case "degrade_at":
				c.DegradeAt = pct
			default:
				c.ShedAt = pct
			}
		case "queue_timeout":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return nil, d.Errf("capacity: expected `queue_timeout <duration>`, such as `queue_timeout 2s`")
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur < 0 {
				return nil, d.Errf("capacity: queue_timeout %q is not a duration such as 2s", v)
			}
			c.QueueTimeout = caddy.Duration(dur)
		case "degrade":
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			if c.Degrade != nil {
				return nil, d.Err("capacity: degrade is already specified; use one degrade block")
			}
			// The same set/unset lines as a target's block.
			var t Target
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				if v := d.Val(); v != "set" && v != "unset" {
					return nil, d.Errf("capacity: unrecognized degrade subdirective %q; expected set or unset", v)
				}
				if err := parseOneEdit(d, &t); err != nil {
					return nil, err
				}
			}
			c.Degrade = &DegradeEdit{Set: t.Set, Unset: t.Unset}
		default:
			return nil, d.Errf("unrecognized capacity subdirective %q; expected spill_at, degrade_at, shed_at, queue_timeout or degrade", d.Val())
		}
	}
	return c, nil
}

// parseResume parses `resume { ttl; max_bytes; max_streams; coalesce;
// detach; retry }`; a bare `resume` takes every default.
func parseResume(d *caddyfile.Dispenser) (*Resume, error) {
	if d.NextArg() {
		return nil, d.Errf("resume takes no arguments; put settings in its block")
	}
	rs := new(Resume)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		key := d.Val()
		var v string
		if !d.Args(&v) || d.NextArg() {
			return nil, d.Errf("resume: expected `%s <value>`", key)
		}
		dur := func(off bool) (caddy.Duration, error) {
			if off && v == "off" {
				return -1, nil
			}
			x, err := caddy.ParseDuration(v)
			if err != nil || x <= 0 {
				or := ""
				if off {
					or = ", or off"
				}
				return 0, d.Errf("resume: %s %q is not a duration above 0 such as 2m%s", key, v, or)
			}
			return caddy.Duration(x), nil
		}
		var err error
		switch key {
		case "ttl":
			rs.TTL, err = dur(false)
		case "retry":
			rs.Retry, err = dur(false)
		case "coalesce":
			rs.Coalesce, err = dur(true)
		case "detach":
			rs.Detach, err = dur(true)
		case "max_bytes":
			size, perr := humanize.ParseBytes(v)
			if perr != nil || size == 0 || size > 1<<40 {
				return nil, d.Errf("resume: max_bytes %q is not a size such as 8MiB", v)
			}
			rs.MaxBytes = int64(size)
		case "max_streams":
			n, perr := strconv.Atoi(v)
			if perr != nil || n <= 0 {
				return nil, d.Errf("resume: max_streams %q is not a whole number above 0", v)
			}
			rs.MaxStreams = n
		default:
			return nil, d.Errf("unrecognized resume subdirective %q; expected ttl, max_bytes, max_streams, coalesce, detach or retry", key)
		}
		if err != nil {
			return nil, err
		}
	}
	return rs, nil
}
