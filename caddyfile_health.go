package llmrelay

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// parseSLO parses `slo { ttft <dur>; success <ratio>; window <n>; min_samples <n> }`.
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
		case "window", "min_samples":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, d.Errf("slo %s: %q is not a positive whole number", key, v)
			}
			if key == "window" {
				s.Window = n
			} else {
				s.MinSamples = n
			}
		default:
			return nil, d.Errf("unrecognized slo subdirective %q; expected ttft, success, window or min_samples", key)
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
	up, model, pct, err := parseTargetLine(d, "canary")
	if err != nil {
		return nil, err
	}
	c := &Canary{Upstream: up, Model: model, Percent: pct}
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
			args := d.RemainingArgs()
			if len(args) < 3 || args[len(args)-2] != "every" {
				return nil, d.Errf("canary promote: expected `promote <percent...> every <duration>`, e.g. `promote 50 100 every 10m`")
			}
			for _, a := range args[:len(args)-2] {
				p, err := parsePercent(a)
				if err != nil {
					return nil, d.Errf("canary promote: %v", err)
				}
				c.Promote = append(c.Promote, p)
			}
			dur, err := parseDurationArg(d, "canary promote every", args[len(args)-1])
			if err != nil {
				return nil, err
			}
			c.PromoteEvery = dur
		default:
			return nil, d.Errf("unrecognized canary subdirective %q; expected key, guard or promote", d.Val())
		}
	}
	return c, nil
}

// parseGuard parses a canary's `guard { ... }`.
func parseGuard(d *caddyfile.Dispenser, g *CanaryGuard) error {
	if d.NextArg() {
		return d.Errf("guard takes no arguments; put ttft_p99, error_rate, min_samples and window in its block")
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
		case "min_samples", "window":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return d.Errf("guard %s: %q is not a positive whole number", key, v)
			}
			if key == "window" {
				g.Window = n
			} else {
				g.MinSamples = n
			}
		default:
			return d.Errf("unrecognized guard subdirective %q; expected ttft_p99, error_rate, min_samples or window", key)
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
		default:
			return nil, d.Errf("unrecognized shadow subdirective %q; expected max_concurrent", d.Val())
		}
	}
	return s, nil
}
