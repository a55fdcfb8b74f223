package llmrelay

import "github.com/caddyserver/caddy/v2"

// HealthCheck actively probes an upstream, feeding the same health state
// as live traffic and measuring its round-trip time.
//
// Caddyfile (in an `upstream` block):
//
//	health_check {
//	    uri <path>
//	    interval <duration>
//	    timeout <duration>
//	}
type HealthCheck struct {
	// `uri <path>`: what to GET, relative to the base URL, with the
	// upstream's API key and headers. Default: `/models`.
	URI string `json:"uri,omitempty"`

	// `interval <duration>`: time between probes. Default: `30s`.
	Interval caddy.Duration `json:"interval,omitempty"`

	// `timeout <duration>`: a probe that takes longer fails. Default: `5s`.
	Timeout caddy.Duration `json:"timeout,omitempty"`
}

// SLO is the service level a target must meet to keep its place in the
// chain. A target whose recent window breaks it is skipped in favour of the
// next target of the chain until it recovers; if every target is out, the
// least bad one is still tried.
//
// Caddyfile (in `llm_relay`, or in a `model` block to override it there):
//
//	slo {
//	    ttft <duration>
//	    success <ratio>
//	    window <n>
//	    min_samples <n>
//	}
type SLO struct {
	// `ttft <duration>`: the window's p90 time to first token must not
	// exceed this. Default: not judged.
	TTFT caddy.Duration `json:"ttft,omitempty"`

	// `success <ratio>`: the window's share of successful attempts must be
	// at least this, e.g. `0.95`. Default: not judged.
	Success float64 `json:"success,omitempty"`

	// `window <n>`: how many recent attempts are judged. Default: 50.
	Window int `json:"window,omitempty"`

	// `min_samples <n>`: no judgement on fewer attempts. Default: 10.
	MinSamples int `json:"min_samples,omitempty"`

	at string // where the Caddyfile block was, for load errors
}

// Canary sends a stable slice of requests to a new target first, and
// rolls it back by itself when it misbehaves.
//
// Caddyfile (in a `model` block):
//
//	canary <upstream> [<model>] <percent> {
//	    key header <name> | body user | client_ip
//	    guard {
//	        ttft_p99 <duration>
//	        error_rate <ratio>
//	        min_samples <n>
//	        window <n>
//	    }
//	    promote <percent...> every <duration>
//	}
type Canary struct {
	// The canary target: an upstream and the model sent to it (default:
	// the client's model).
	Upstream string `json:"upstream"`
	Model    string `json:"model,omitempty"`

	// The starting share of requests, in percent.
	Percent float64 `json:"percent"`

	// `key ...`: what picks a request's bucket (SHA-256, stable across
	// restarts and instances): `header <name>`, `body user` (the OpenAI
	// `user` field) or `client_ip`. Written in JSON as `header:<name>`,
	// `body:user` or `client_ip`. Default: `client_ip`.
	Key string `json:"key,omitempty"`

	// `guard { ... }`: when the canary's window breaks these, its share
	// drops to 0 at once.
	Guard CanaryGuard `json:"guard,omitzero"`

	// `promote <percent...> every <duration>`: the next shares, each taken
	// after the guard held for the duration.
	Promote      []float64      `json:"promote,omitempty"`
	PromoteEvery caddy.Duration `json:"promote_every,omitempty"`
}

// CanaryGuard is a canary's rollback thresholds.
type CanaryGuard struct {
	// `ttft_p99 <duration>`: p99 time to first token of the window.
	TTFTP99 caddy.Duration `json:"ttft_p99,omitempty"`
	// `error_rate <ratio>`: share of failed attempts, e.g. `0.05`.
	ErrorRate float64 `json:"error_rate,omitempty"`
	// `min_samples <n>`: no judgement on fewer attempts. Default: 20.
	MinSamples int `json:"min_samples,omitempty"`
	// `window <n>`: attempts judged. Default: 100.
	Window int `json:"window,omitempty"`
}

// Shadow copies a sample of requests to another target in the background,
// to compare it with the real answer; the client never sees it.
//
// Caddyfile (in a `model` block):
//
//	shadow <upstream> [<model>] <percent> {
//	    max_concurrent <n>
//	}
type Shadow struct {
	Upstream string  `json:"upstream"`
	Model    string  `json:"model,omitempty"`
	Percent  float64 `json:"percent"`
	// `max_concurrent <n>`: copies in flight at most; a copy beyond it is
	// dropped and counted, never queued. Default: 4.
	MaxConcurrent int `json:"max_concurrent,omitempty"`
}
