package llmrelay

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
)

// Smoothing configures the SSE re-pacer, which turns a clustered upstream
// stream into a steady one with a bound on the delay it adds. It applies
// to streaming answers only.
//
// Caddyfile: `smoothing [off|pace|split-reasoning] { ... }` in `llm_relay`,
// and in a `model` block to override it there; each field below gives its
// line. The grammar is the README's Caddyfile section (README.md#caddyfile).
//
// In a `model` block, a setting left out keeps the relay-level value.
// Clients choose the mode per request with the header
// `X-Relay-Mode: off|pace|split-reasoning` or the body field
// `"relay": {"mode": "..."}` (the header wins), and the split ratio with
// `"relay": {"split_ratio": 0.35}`; neither reaches the upstream.
type Smoothing struct {
	// The mode: `off` forwards events as they come; `pace` paces all text
	// on one lane bounded by max_delay; `split-reasoning` paces reasoning
	// and answer text on separate lanes with their own bounds, and drains
	// queued reasoning at once when the answer starts. Default: `pace`
	// when a relay-level smoothing block is present (the mode of the relay
	// level in a model block), else `off`.
	Mode string `json:"mode,omitempty"`

	// `max_delay <duration>`: no answer text (all text in `pace` mode) is
	// held longer than this. Default: `400ms`.
	MaxDelay caddy.Duration `json:"max_delay,omitempty"`

	// `reasoning_max_delay <duration>`: the same bound for reasoning text
	// in `split-reasoning` mode. Default: `1500ms`.
	ReasoningMaxDelay caddy.Duration `json:"reasoning_max_delay,omitempty"`

	// `reasoning_drain <duration>`: in `split-reasoning` mode, reasoning
	// still queued when the answer starts finishes at a steady rate within
	// this long, instead of leaving at once; the answer flows beside it.
	// Default: `300ms`.
	ReasoningDrain caddy.Duration `json:"reasoning_drain,omitempty"`

	// `min_interval <duration>`: while a backlog is paced out, at most one
	// emission per interval. At most max_delay, at least `1ms`. Default:
	// `30ms`.
	MinInterval caddy.Duration `json:"min_interval,omitempty"`

	// `heartbeat <duration>`: after this much silence towards the client,
	// send the SSE comment `: keep-alive`, so proxies and load balancers
	// do not cut the stream. `0` turns it off. Applies in every mode,
	// `off` included, once the stream is committed. Default: `15s`. At
	// least `50ms` when on.
	Heartbeat *caddy.Duration `json:"heartbeat,omitempty"`

	// `reasoning show|hide`: `hide` removes reasoning text
	// (`reasoning_content` and `reasoning` delta fields) from streams, in
	// every mode; it is still counted. Default: `show`.
	Reasoning string `json:"reasoning,omitempty"`

	// `split_ratio <0..1>`: in `split-reasoning` mode, the reasoning
	// lane's share of the emissions while both lanes have text queued
	// (0.35: about a third of those ticks send reasoning, the rest
	// answer). Each lane's delay bound still holds over it: text due
	// goes at its tick whichever lane the share picked. 0: the answer
	// goes first whenever it has text; 1: the reasoning does. Other modes
	// ignore it. A request's `"relay": {"split_ratio": ...}` overrides
	// it. Default: none, each tick sends a piece of each lane.
	SplitRatio *float64 `json:"split_ratio,omitempty"`

	// `early_commit <duration>`: when a stream's first upstream data event
	// has not come after this long, answer `200` with SSE headers and start
	// heartbeats; failover goes on behind them, and if every attempt fails
	// the stream ends with an in-band error event. Default: off. At least
	// `50ms` when on.
	EarlyCommit caddy.Duration `json:"early_commit,omitempty"`

	at string // where the Caddyfile block was, for load errors
}

// defaultHeartbeat is the heartbeat when none is configured: under the
// common idle timeouts (CDNs 30s, AWS ALB 60s, Cloudflare ~100s).
const defaultHeartbeat = 15 * time.Second

// smoothPolicy is a route's resolved smoothing.
type smoothPolicy struct {
	cfg         pace.Config
	earlyCommit time.Duration
}

// resolveSmoothing merges a model-level block over the relay-level one and
// applies defaults. Either may be nil.
func resolveSmoothing(relay, model *Smoothing) (smoothPolicy, error) {
	var s Smoothing
	mode := "off"
	if relay != nil {
		s = *relay
		mode = "pace"
		if relay.Mode != "" {
			mode = relay.Mode
		}
	}
	if model != nil {
		if model.Mode != "" {
			mode = model.Mode
		}
		if model.MaxDelay != 0 {
			s.MaxDelay = model.MaxDelay
		}
		if model.ReasoningMaxDelay != 0 {
			s.ReasoningMaxDelay = model.ReasoningMaxDelay
		}
		if model.ReasoningDrain != 0 {
			s.ReasoningDrain = model.ReasoningDrain
		}
		if model.MinInterval != 0 {
			s.MinInterval = model.MinInterval
		}
		if model.Heartbeat != nil {
			s.Heartbeat = model.Heartbeat
		}
		if model.Reasoning != "" {
			s.Reasoning = model.Reasoning
		}
		if model.EarlyCommit != 0 {
			s.EarlyCommit = model.EarlyCommit
		}
		if model.SplitRatio != nil {
			s.SplitRatio = model.SplitRatio
		}
	}

	var pol smoothPolicy
	m, err := pace.ParseMode(mode)
	if err != nil {
		return pol, err
	}
	pol.cfg = pace.Config{
		Mode:              m,
		MaxDelay:          durationOr(s.MaxDelay, pace.DefaultMaxDelay),
		ReasoningMaxDelay: durationOr(s.ReasoningMaxDelay, pace.DefaultReasoningMaxDelay),
		MinInterval:       durationOr(s.MinInterval, pace.DefaultMinInterval),
		ReasoningDrain:    durationOr(s.ReasoningDrain, pace.DefaultReasoningDrain),
		Heartbeat:         defaultHeartbeat,
	}
	if s.Heartbeat != nil {
		pol.cfg.Heartbeat = time.Duration(*s.Heartbeat)
	}
	switch s.Reasoning {
	case "", "show":
	case "hide":
		pol.cfg.HideReasoning = true
	default:
		return pol, fmt.Errorf("reasoning %q: want show or hide", s.Reasoning)
	}
	pol.earlyCommit = time.Duration(s.EarlyCommit)
	if s.SplitRatio != nil {
		if err := checkSplitRatio(*s.SplitRatio); err != nil {
			return pol, err
		}
		pol.cfg.SplitRatio = s.SplitRatio
	}
	c := pol.cfg
	switch {
	case c.MaxDelay < 0 || c.ReasoningMaxDelay < 0 || c.ReasoningDrain < 0 || c.MinInterval < 0 || c.Heartbeat < 0 || pol.earlyCommit < 0:
		return pol, fmt.Errorf("durations must not be negative")
	case floorHeartbeat.check(caddy.Duration(c.Heartbeat)) != nil:
		return pol, floorHeartbeat.check(caddy.Duration(c.Heartbeat))
	case floorEarlyCommit.check(caddy.Duration(pol.earlyCommit)) != nil:
		return pol, floorEarlyCommit.check(caddy.Duration(pol.earlyCommit))
	case floorMinInterval.check(caddy.Duration(c.MinInterval)) != nil:
		return pol, floorMinInterval.check(caddy.Duration(c.MinInterval))
	case c.MinInterval > c.MaxDelay:
		return pol, fmt.Errorf("min_interval %s is longer than max_delay %s; pacing could not keep the bound", c.MinInterval, c.MaxDelay)
	case c.MinInterval > c.ReasoningMaxDelay:
		return pol, fmt.Errorf("min_interval %s is longer than reasoning_max_delay %s; pacing could not keep the bound", c.MinInterval, c.ReasoningMaxDelay)
	}
	return pol, nil
}

// modeHeader lets a client choose the smoothing mode of one request.
const modeHeader = "X-Relay-Mode"

// requestMode returns the mode a request asks for (header first, then the
// body's relay.mode), or ok=false when it asks for none.
func requestMode(r *http.Request, body *requestBody) (pace.Mode, bool, error) {
	v := r.Header.Get(modeHeader)
	from := modeHeader + " header"
	if v == "" {
		v, from = body.relayMode, "relay.mode"
	}
	if v == "" {
		return 0, false, nil
	}
	m, err := pace.ParseMode(v)
	if err != nil {
		return 0, false, errInvalidRelayMode(from, v)
	}
	return m, true, nil
}

// relayOptions is the body's `relay` object: the relay's own per-request
// options, removed before the upstream sees the body.
type relayOptions struct {
	Mode string
	// SplitRatio is the reasoning lane's share of the emissions while
	// both lanes have text queued, in split-reasoning (see
	// pace.Config.SplitRatio); other modes ignore it, so a client may
	// send it with every request. nil: none asked.
	SplitRatio *float64
}

// parseRelayOptions reads the `relay` field of a request body.
func parseRelayOptions(raw json.RawMessage) (relayOptions, error) {
	var o struct {
		Mode       string          `json:"mode"`
		SplitRatio json.RawMessage `json:"split_ratio"`
	}
	if string(raw) == "null" {
		return relayOptions{}, nil
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return relayOptions{}, errInvalidRelayField
	}
	opts := relayOptions{Mode: o.Mode}
	if o.SplitRatio != nil && string(o.SplitRatio) != "null" {
		var r float64
		if err := json.Unmarshal(o.SplitRatio, &r); err != nil || checkSplitRatio(r) != nil {
			return relayOptions{}, errInvalidSplitRatio(string(o.SplitRatio))
		}
		opts.SplitRatio = &r
	}
	return opts, nil
}

// checkSplitRatio checks a split ratio: a share, 0 to 1.
func checkSplitRatio(r float64) error {
	if !(r >= 0 && r <= 1) {
		return fmt.Errorf("split_ratio %v is not a share: give a number from 0 to 1, such as 0.35 (the reasoning lane's share of the emissions while both lanes have text)", r)
	}
	return nil
}
