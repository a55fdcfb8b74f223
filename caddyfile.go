package llmrelay

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
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

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	llm_relay [<matcher>] {
//	    # clients
//	    key <token> [<name>] [budget <usd> per day|month]
//	    max_body <size>
//
//	    # providers
//	    upstream <name> <base_url> {
//	        api openai|chat|anthropic
//	        api_key <key>
//	        header <field> <value>
//	        transport http { ... }
//	        region <code>
//	        health_check { uri <path>; interval <duration>; timeout <duration> }
//	    }
//
//	    # routing
//	    model <alias> {
//	        to <upstream> [<upstream_model>] [{
//	            set <json_field> <value>
//	            unset <json_field>
//	            rank <n>
//	            weight <n>
//	        }]
//	        canary <upstream> [<model>] <percent> { key ...; guard { ... }; promote ... }
//	        shadow <upstream> [<model>] <percent> { max_concurrent <n> }
//	        smoothing ... | slo { ... } | reasoning_budget ... | reasoning_field ... | adaptive_effort { ... }
//	    }
//	    slo { ttft <duration>; success <ratio>; window <n>; min_samples <n> }
//
//	    # failover
//	    failover {
//	        on <class...>
//	        attempts <n>
//	        backoff <base> <max>
//	        first_byte_timeout <duration>
//	        try_duration <duration>
//	        stream_idle_timeout <duration>
//	    }
//
//	    # streaming
//	    smoothing [off|pace|split-reasoning] {
//	        max_delay <duration>
//	        reasoning_max_delay <duration>
//	        min_interval <duration>
//	        heartbeat <duration>
//	        reasoning show|hide
//	        early_commit <duration>
//	    }
//
//	    # reasoning and money
//	    reasoning_budget <tokens> [truncate|failover|error]
//	    reasoning_field reasoning_content|reasoning
//	    adaptive_effort { below <tokens> <effort>; else <effort>; client_effort keep|override }
//	    price <model> { input <usd>; output <usd>; cached_input <usd>; cache_write <usd> }
//	}
//
// The types in config.go, config_health.go and config_usage.go document
// each option.
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
			h.Keys = append(h.Keys, k)
			if err := k.check(keyName(h.Keys, len(h.Keys)-1)); err != nil {
				return d.Err(err.Error())
			}
			if _, err := keyBudgets(h.Keys); err != nil {
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

		case "slo":
			if h.SLO != nil {
				return d.Err("slo is already specified; use one slo block")
			}
			slo, err := parseSLO(d)
			if err != nil {
				return err
			}
			h.SLO = slo

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
			return d.Errf("unrecognized llm_relay subdirective %q; expected key, max_body, upstream, model, failover, smoothing, slo, reasoning_budget, reasoning_field, adaptive_effort or price", d.Val())
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
	return nil
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
			return nil, d.Errf("unrecognized upstream subdirective %q; expected api_key, header, transport, region or health_check", d.Val())
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
	var pending []pendingTarget
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "to":
			args := d.RemainingArgs()
			if len(args) < 1 || len(args) > 2 {
				return nil, nil, d.Errf("model %q: expected `to <upstream> [<upstream_model>]`", m.Alias)
			}
			t := Target{Upstream: args[0]}
			if len(args) == 2 {
				t.Model = args[1]
			}
			pending = append(pending, pendingTarget{upstream: t.Upstream,
				err: d.Err(errUnknownUpstream(m.Alias, "", t.Upstream).Error())})
			if err := parseTargetEdits(d, &t); err != nil {
				return nil, nil, err
			}
			m.Targets = append(m.Targets, t)
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
		default:
			return nil, nil, d.Errf("unrecognized model subdirective %q; expected to, smoothing, slo, canary, shadow, reasoning_budget, reasoning_field or adaptive_effort", d.Val())
		}
	}
	if len(m.Targets) == 0 {
		return nil, nil, noTargets
	}
	return m, pending, nil
}

// parseTargetEdits parses the optional `{ set ...; unset ... }` of a `to`.
func parseTargetEdits(d *caddyfile.Dispenser, t *Target) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "set":
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
		case "unset":
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
		default:
			return d.Errf("unrecognized target subdirective %q; expected set, unset, rank or weight", d.Val())
		}
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
			switch name {
			case "first_byte_timeout":
				f.FirstByteTimeout = dur
			case "try_duration":
				f.TryDuration = dur
			default:
				f.StreamIdleTimeout = dur
			}
		default:
			return nil, d.Errf("unrecognized failover subdirective %q; expected on, attempts, backoff, first_byte_timeout, try_duration or stream_idle_timeout", d.Val())
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
