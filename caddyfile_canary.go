package llmrelay

import (
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// parseCanaryLine parses `canary <upstream> [<model>] [<percent>]`. The
// percent may be left out when the block gives a roll-out by phases (the
// first phase is the starting share). A last argument that is a number
// is the percent, as it always was; anything else is the model.
func parseCanaryLine(d *caddyfile.Dispenser) (*Canary, error) {
	args := d.RemainingArgs()
	if len(args) < 1 || len(args) > 3 {
		return nil, d.Errf("canary: expected `canary <upstream> [<model>] <percent>`")
	}
	c := &Canary{Upstream: args[0]}
	rest := args[1:]
	if n := len(rest); n > 0 && isNumber(rest[n-1]) {
		pct, err := parsePercent(rest[n-1])
		if err != nil {
			return nil, d.Errf("canary: %v", err)
		}
		c.Percent = pct
		rest = rest[:n-1]
	}
	switch len(rest) {
	case 0:
	case 1:
		c.Model = rest[0]
	default:
		return nil, d.Errf("canary: expected `canary <upstream> [<model>] <percent>`")
	}
	return c, nil
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
