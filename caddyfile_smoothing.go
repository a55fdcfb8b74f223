package llmrelay

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
)

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
		case "max_delay", "reasoning_max_delay", "min_interval":
			dur, err := parseDurationArg(d, key, v)
			if err != nil {
				return nil, err
			}
			switch key {
			case "max_delay":
				s.MaxDelay = dur
			case "reasoning_max_delay":
				s.ReasoningMaxDelay = dur
			default:
				s.MinInterval = dur
			}
		case "heartbeat", "early_commit":
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur < 0 {
				return nil, d.Errf("%s: %q is not a duration; write it like 15s, or 0 to turn it off", key, v)
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
		default:
			return nil, d.Errf("unrecognized smoothing subdirective %q; expected max_delay, reasoning_max_delay, min_interval, heartbeat, reasoning or early_commit", key)
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
