package simulator

import (
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmrelay/caddy-llm-relay/internal/sim"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("llm_simulator", parseSimulatorCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("llm_simulator", httpcaddyfile.Before, "reverse_proxy")
}

func parseSimulatorCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	s := new(Simulator)
	err := s.UnmarshalCaddyfile(h.Dispenser)
	return s, err
}

// UnmarshalCaddyfile sets up the simulator from Caddyfile tokens. The
// block is optional. Syntax:
//
//	llm_simulator [<matcher>] {
//	    # text
//	    model <name...>
//	    seed <int>
//	    reasoning_tokens <n>
//	    content_tokens <n>
//	    reasoning_form fields|tags|tags_unopened
//	    echo handoff
//	    tool_calls forced|auto
//	    continue_overlap <runes>
//
//	    # pacing (pattern sets both phases; later lines override earlier ones)
//	    pattern steady [<tokens_per_sec>]
//	    pattern clustered [<burst_tokens> [<pause> [<spread>]]]
//	    reasoning_pattern steady|clustered [<args...>]
//	    content_pattern steady|clustered [<args...>]
//	    ttfb <duration>
//
//	    # faults, tried in order; <rate> is a probability like 0.3 or 30%
//	    fail <status> [<rate>] [retry_after <value>]
//	    overloaded [<rate>] [retry_after <value>]
//	    stall [<rate>]
//	    drop_after <events> [<rate>]
//	    error_after <events> [<rate>]
//	    drop_in reasoning|answer|tool_args [<rate>]
//	    error_in reasoning|answer|tool_args [<rate>]
//	    drop_before_end [<rate>]
//	    error_before_end [<rate>]
//	}
//
// `reasoning_tokens 0` removes the reasoning phase. `pattern steady 0`
// streams as fast as possible. `echo handoff` answers every request with
// the reasoning a hand-off injected into it, as
// `handoff:<prefill|user|system|none>:<reasoning>`, and no reasoning (a
// request's `X-Sim-Echo: handoff` header does the same for one request).
// `tool_calls auto` calls the first tool of every request that has tools
// and leaves the choice to the model (`X-Sim-Tool-Calls: auto` for one
// request); by default only a forced choice gets a call.
// A request that ends with the answer so far as an assistant turn (a
// prefill, or that turn and then a user turn starting "Your previous
// reply was cut off") gets the rest of the answer only, no reasoning;
// `continue_overlap` makes it first repeat the last <runes> runes of the
// answer so far. `drop_after 1` cuts right after the first data event;
// `drop_in <phase>` in the middle of that phase (about half its deltas,
// drawn by seed and request); `drop_before_end` after everything but the
// end event ([DONE], message_stop, response.completed); the error_
// variants send the in-band error event there instead.
func (s *Simulator) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.Errf("llm_simulator takes no arguments besides a matcher; put settings in its block")
	}
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		switch name {
		case "seed", "reasoning_tokens", "content_tokens", "reasoning_form", "echo", "tool_calls", "ttfb", "latency", "continue_overlap":
			if seen[name] {
				return d.Errf("%s already specified", name)
			}
			seen[name] = true
		}
		switch name {
		case "model":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			s.Models = append(s.Models, args...)

		case "seed":
			v, err := simOneArg(d)
			if err != nil {
				return err
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return d.Errf("seed: must be an integer, got %q", v)
			}
			s.Seed = n

		case "reasoning_tokens", "content_tokens":
			v, err := simOneArg(d)
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return d.Errf("%s: must be a whole number of tokens >= 0, got %q", name, v)
			}
			if name == "reasoning_tokens" {
				s.ReasoningTokens = &n
			} else {
				s.ContentTokens = &n
			}

		case "reasoning_form":
			v, err := simOneArg(d)
			if err != nil {
				return err
			}
			switch v {
			case sim.ReasoningFields, sim.ReasoningTags, sim.ReasoningTagsUnopened:
			default:
				return d.Errf("reasoning_form: must be %s, %s or %s, got %q", sim.ReasoningFields, sim.ReasoningTags, sim.ReasoningTagsUnopened, v)
			}
			s.ReasoningForm = v

		case "echo":
			v, err := simOneArg(d)
			if err != nil {
				return err
			}
			if v != sim.EchoHandoff {
				return d.Errf("echo: must be %s, got %q", sim.EchoHandoff, v)
			}
			s.Echo = v

		case "tool_calls":
			v, err := simOneArg(d)
			if err != nil {
				return err
			}
			if v != sim.ToolCallsForced && v != sim.ToolCallsAuto {
				return d.Errf("tool_calls: must be %s or %s, got %q", sim.ToolCallsForced, sim.ToolCallsAuto, v)
			}
			s.ToolCalls = v

		case "continue_overlap":
			v, err := simOneArg(d)
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return d.Errf("continue_overlap: must be a whole number of runes >= 0, got %q", v)
			}
			s.ContinueOverlap = n

		case "pattern", "reasoning_pattern", "content_pattern":
			p, err := simParsePattern(d, name)
			if err != nil {
				return err
			}
			if name != "content_pattern" {
				s.ReasoningPattern = p
			}
			if name != "reasoning_pattern" {
				cp := *p
				s.ContentPattern = &cp
			}

		case "ttfb":
			v, err := simOneArg(d)
			if err != nil {
				return err
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur < 0 {
				return d.Errf("ttfb: %q is not a duration >= 0; write it like 250ms or 2s", v)
			}
			s.TTFB = caddy.Duration(dur)

		case "latency":
			v, err := simOneArg(d)
			if err != nil {
				return err
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur < 0 {
				return d.Errf("latency: %q is not a duration >= 0; write it like 80ms", v)
			}
			s.Latency = caddy.Duration(dur)

		case "fail":
			f, err := simParseFail(d)
			if err != nil {
				return err
			}
			s.Faults = append(s.Faults, f)

		case "overloaded":
			f := SimulatorFault{Kind: sim.FaultOverloaded}
			if err := simParseRateRetry(d, "overloaded [<rate>] [retry_after <value>]", d.RemainingArgs(), &f); err != nil {
				return err
			}
			s.Faults = append(s.Faults, f)

		case "stall":
			args := d.RemainingArgs()
			if len(args) > 1 {
				return d.ArgErr()
			}
			f := SimulatorFault{Kind: sim.FaultStall}
			if len(args) == 1 {
				rate, err := simParseRate(d, name, args[0])
				if err != nil {
					return err
				}
				f.Rate = rate
			}
			s.Faults = append(s.Faults, f)

		case "drop_after", "error_after":
			args := d.RemainingArgs()
			if len(args) < 1 || len(args) > 2 {
				return d.ArgErr()
			}
			f := SimulatorFault{Kind: sim.FaultDrop}
			if name == "error_after" {
				f.Kind = sim.FaultError
			}
			n, err := strconv.Atoi(args[0])
			if err != nil || n < 0 {
				return d.Errf("%s: events must be a whole number >= 0, got %q", name, args[0])
			}
			f.After = n
			if len(args) == 2 {
				if f.Rate, err = simParseRate(d, name, args[1]); err != nil {
					return err
				}
			}
			s.Faults = append(s.Faults, f)

		case "drop_in", "error_in", "drop_before_end", "error_before_end":
			f, err := simParsePlaced(d, name)
			if err != nil {
				return err
			}
			s.Faults = append(s.Faults, f)

		default:
			return d.Errf("unrecognized llm_simulator subdirective %q; expected model, seed, reasoning_tokens, content_tokens, reasoning_form, echo, tool_calls, continue_overlap, pattern, reasoning_pattern, content_pattern, ttfb, latency, fail, overloaded, stall, drop_after, error_after, drop_in, error_in, drop_before_end or error_before_end", name)
		}
	}
	return nil
}

// simOneArg returns the single argument of the current line.
func simOneArg(d *caddyfile.Dispenser) (string, error) {
	if !d.NextArg() {
		return "", d.ArgErr()
	}
	v := d.Val()
	if d.NextArg() {
		return "", d.ArgErr()
	}
	return v, nil
}

// simParsePattern parses `<name> steady [<tokens_per_sec>]` or
// `<name> clustered [<burst_tokens> [<pause> [<spread>]]]`.
func simParsePattern(d *caddyfile.Dispenser, name string) (*SimulatorPattern, error) {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return nil, d.Errf("%s: expected `%s steady [<tokens_per_sec>]` or `%s clustered [<burst_tokens> [<pause> [<spread>]]]`", name, name, name)
	}
	p := &SimulatorPattern{Kind: args[0]}
	switch p.Kind {
	case sim.Steady:
		if len(args) > 2 {
			return nil, d.ArgErr()
		}
		if len(args) == 2 {
			rate, err := strconv.ParseFloat(args[1], 64)
			if err != nil || rate < 0 {
				return nil, d.Errf("%s steady: tokens per second must be a number >= 0 (0 = as fast as possible), got %q", name, args[1])
			}
			p.Rate = &rate
		}
	case sim.Clustered:
		if len(args) > 4 {
			return nil, d.ArgErr()
		}
		if len(args) > 1 {
			n, err := strconv.Atoi(args[1])
			if err != nil || n <= 0 {
				return nil, d.Errf("%s clustered: burst_tokens must be a whole number > 0, got %q", name, args[1])
			}
			p.Burst = n
		}
		for i, field := range []*caddy.Duration{&p.Pause, &p.Spread} {
			if len(args) <= 2+i {
				break
			}
			dur, err := caddy.ParseDuration(args[2+i])
			if err != nil || dur <= 0 {
				what := [...]string{"pause", "spread"}[i]
				return nil, d.Errf("%s clustered: %s must be a positive duration like 800ms, got %q", name, what, args[2+i])
			}
			*field = caddy.Duration(dur)
		}
	default:
		return nil, d.Errf("%s: kind must be steady or clustered, got %q", name, p.Kind)
	}
	return p, nil
}

// simParsePlaced parses `drop_in|error_in <phase> [<rate>]` and
// `drop_before_end|error_before_end [<rate>]`.
func simParsePlaced(d *caddyfile.Dispenser, name string) (SimulatorFault, error) {
	kind, place, _ := strings.Cut(name, "_")
	f := SimulatorFault{Kind: sim.FaultDrop}
	if kind == "error" {
		f.Kind = sim.FaultError
	}
	args := d.RemainingArgs()
	if place == "in" {
		if len(args) == 0 || len(args) > 2 {
			return f, d.Errf("%s: expected `%s reasoning|answer|tool_args [<rate>]`", name, name)
		}
		switch args[0] {
		case sim.InReasoning, sim.InAnswer, sim.InToolArgs:
		default:
			return f, d.Errf("%s: phase must be %s, %s or %s, got %q", name, sim.InReasoning, sim.InAnswer, sim.InToolArgs, args[0])
		}
		f.In, args = args[0], args[1:]
	} else {
		if len(args) > 1 {
			return f, d.Errf("%s: expected `%s [<rate>]`", name, name)
		}
		f.BeforeEnd = true
	}
	if len(args) == 1 {
		rate, err := simParseRate(d, name, args[0])
		if err != nil {
			return f, err
		}
		f.Rate = rate
	}
	return f, nil
}

// simParseFail parses `fail <status> [<rate>] [retry_after <value>]`.
func simParseFail(d *caddyfile.Dispenser) (SimulatorFault, error) {
	f := SimulatorFault{Kind: sim.FaultStatus}
	args := d.RemainingArgs()
	if len(args) == 0 {
		return f, d.ArgErr()
	}
	status, err := strconv.Atoi(args[0])
	if err != nil || status < 400 || status > 599 {
		return f, d.Errf("fail: status must be an HTTP error status 400-599, got %q", args[0])
	}
	f.Status = status
	return f, simParseRateRetry(d, "fail <status> [<rate>] [retry_after <value>]", args[1:], &f)
}

// simParseRateRetry parses the `[<rate>] [retry_after <value>]` tail of
// a fail or overloaded line into f; usage is the line's syntax, for
// errors.
func simParseRateRetry(d *caddyfile.Dispenser, usage string, args []string, f *SimulatorFault) error {
	name, _, _ := strings.Cut(usage, " ")
	rateSet := false
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "retry_after":
			if i+1 >= len(args) || f.RetryAfter != "" {
				return d.Errf("%s: expected `%s`", name, usage)
			}
			i++
			f.RetryAfter = args[i]
		case !rateSet && f.RetryAfter == "":
			var err error
			if f.Rate, err = simParseRate(d, name, args[i]); err != nil {
				return err
			}
			rateSet = true
		default:
			return d.Errf("%s: unexpected argument %q; expected `%s`", name, args[i], usage)
		}
	}
	return nil
}

// simParseRate parses a probability written as 0.3 or 30%.
func simParseRate(d *caddyfile.Dispenser, name, v string) (float64, error) {
	num, pct := strings.CutSuffix(v, "%")
	rate, err := strconv.ParseFloat(num, 64)
	if pct {
		rate /= 100
	}
	if err != nil || !(rate > 0 && rate <= 1) {
		return 0, d.Errf("%s: rate must be a probability in (0, 1] like 0.3 or 30%%, got %q", name, v)
	}
	return rate, nil
}
