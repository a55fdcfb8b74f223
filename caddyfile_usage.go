package llmrelay

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

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

// parseReasoningField parses `reasoning_field reasoning_content|reasoning`.
func parseReasoningField(d *caddyfile.Dispenser) (string, error) {
	if !d.NextArg() {
		return "", d.Errf("reasoning_field: expected `reasoning_field reasoning_content|reasoning`")
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
