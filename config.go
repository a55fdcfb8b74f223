package llmrelay

import (
	"encoding/json"

	"github.com/caddyserver/caddy/v2"
)

// ClientKey is one key a client may present to the relay. The relay looks
// for it in `Authorization: Bearer <token>` (OpenAI SDKs), `x-api-key`
// (Anthropic SDKs), `api-key` (Azure OpenAI SDKs) and `x-goog-api-key`
// (Gemini SDKs), in that order, and takes the first that yields a token
// (an `Authorization: Basic` of a `basic_auth` in front yields none). Once
// the request is let in, these headers are removed from it: no later
// handler, placeholder or upstream sees them.
//
// Several keys may share a name (a team rotating its token keeps the old
// and the new one valid for a while): one name is one principal, with one
// spend and one budget. The budget may be given on one of its lines or
// on each, identically; two different budgets for one name fail the load.
//
// Caddyfile: `key <token> [<name>] [budget <usd> per day|month]`
type ClientKey struct {
	// The token. It may be a placeholder such as `{env.RELAY_KEY}`, resolved
	// once at load (an empty value fails the load), or `sha256:<hex>`, the
	// hex SHA-256 of the token, so the config need not hold the secret.
	Token string `json:"token"`

	// A name for logs and metrics; the token itself is never logged.
	// Default: `key-<n>`, n counting from 1 in config order.
	Name string `json:"name,omitempty"`

	// `budget <usd> per day|month` (after the name): once the key's name
	// has spent this much (by the price table) in the current UTC day or
	// month, it gets 429 budget_exceeded until the period rolls over. In
	// JSON, budget is in US dollars (positive; 0 or absent: none) and
	// budget_period is `day` (the default) or `month`.
	Budget       float64 `json:"budget,omitempty"`
	BudgetPeriod string  `json:"budget_period,omitempty"`
}

// Upstream is one provider endpoint.
//
// Caddyfile:
//
//	upstream <name> <base_url> {
//	    api openai|chat|anthropic
//	    api_key <key>
//	    header <field> <value>
//	    transport http { ... }
//	    region <code>
//	    health_check { ... }
//	}
type Upstream struct {
	// The name that model routes (`to <name>`), logs and the
	// X-Relay-Upstream response header use. Required, unique.
	Name string `json:"name"`

	// The base URL, ending in `/v1`. A client request to `/v1/<rest>` goes
	// to `<base_url>/<rest>`. Required.
	BaseURL string `json:"base_url"`

	// `api openai|chat|anthropic`: the wire format the upstream speaks.
	//   - `openai` (the default): OpenAI's own API. Every endpoint passes
	//     through; Chat Completions get the relay's stream rules.
	//   - `chat`: a Chat Completions–only provider (DeepSeek, vLLM, Ollama,
	//     OpenRouter, Gemini's OpenAI-compatible endpoint). Anthropic
	//     clients' /v1/messages requests are translated to it.
	//   - `anthropic`: Anthropic Messages. The key goes in `x-api-key`, with
	//     `anthropic-version: 2023-06-01` (a `header` line overrides it);
	//     OpenAI clients' /v1/chat/completions requests are translated to it.
	API string `json:"api,omitempty"`

	// `api_key <key>` is sent upstream as `Authorization: Bearer <key>`
	// (`x-api-key: <key>` for `api anthropic`).
	// Use `{env.X}` or `{file./path}`: it is resolved at load, and an empty
	// value fails the load. Never logged, never sent to clients.
	APIKey string `json:"api_key,omitempty"`

	// `header <field> <value>` adds a request header sent to this upstream,
	// after the client's credentials were removed. Repeatable; values may use
	// `{env.X}` placeholders, resolved at load.
	Headers map[string][]string `json:"headers,omitempty"`

	// `transport http { ... }`: the same transport block as reverse_proxy's
	// (timeouts, TLS, keepalive, versions). Default: reverse_proxy's http
	// transport with its defaults (3s dial timeout).
	TransportRaw json.RawMessage `json:"transport,omitempty" caddy:"namespace=http.reverse_proxy.transport inline_key=protocol"`

	// `region <code>`: where the upstream runs, e.g. `eu`. A request's
	// `X-Region-Hint: <code>` prefers healthy targets in that region.
	Region string `json:"region,omitempty"`

	// `health_check { ... }`: active probes of this upstream.
	HealthCheck *HealthCheck `json:"health_check,omitempty"`
}

// ModelRoute maps a model alias that clients ask for to an ordered failover
// chain of targets.
//
// Caddyfile:
//
//	model <alias> {
//	    to <upstream> [<upstream_model>] [{
//	        set <json_field> <value>
//	        unset <json_field>
//	        rank <n>
//	        weight <n>
//	    }]
//	    smoothing [<mode>] { ... }
//	    slo { ... }
//	    canary <upstream> [<model>] <percent> { ... }
//	    shadow <upstream> [<model>] <percent> { ... }
//	}
type ModelRoute struct {
	// The model name clients use. `*` matches any model name that has no
	// route of its own; the client's name is then forwarded unchanged
	// (unless a target sets a model).
	Alias string `json:"alias"`

	// `to ...` lines, in failover order. At least one.
	Targets []Target `json:"targets"`

	// `smoothing ...`: overrides the relay-level smoothing for this model;
	// settings left out keep the relay-level values.
	Smoothing *Smoothing `json:"smoothing,omitempty"`

	// `slo { ... }`: overrides the relay-level SLO for this model's
	// targets; settings left out keep the relay-level values.
	SLO *SLO `json:"slo,omitempty"`

	// `canary ...`: a canary target tried first for a stable slice of
	// requests.
	Canary *Canary `json:"canary,omitempty"`

	// `shadow ...`: a target that gets background copies of requests.
	Shadow *Shadow `json:"shadow,omitempty"`

	// `reasoning_budget ...` and `adaptive_effort { ... }`: override the
	// relay-level ones for this model.
	ReasoningBudget *ReasoningBudget `json:"reasoning_budget,omitempty"`
	AdaptiveEffort  *AdaptiveEffort  `json:"adaptive_effort,omitempty"`

	// `reasoning_field reasoning_content|reasoning`: overrides the
	// relay-level reasoning_field for this model.
	ReasoningField string `json:"reasoning_field,omitempty"`
}

// Target is one step of a failover chain: an upstream and what to send it.
type Target struct {
	// The upstream's name.
	Upstream string `json:"upstream"`

	// The model name sent upstream. Default: the model the client asked for.
	Model string `json:"model,omitempty"`

	// `set <json_field> <value>` sets a field of the request body for this
	// target. A dotted field (`reasoning.max_tokens`) sets a nested field.
	// The value is used as JSON if it parses as JSON, else as a string.
	Set map[string]json.RawMessage `json:"set,omitempty"`

	// `unset <json_field>` removes a field (dotted for nested) of the request
	// body for this target.
	Unset []string `json:"unset,omitempty"`

	// `rank <n>`: targets of equal rank form a pool, tried in a
	// latency-aware weighted order before the next rank. Default: the
	// target's position in the chain (1, 2, ...), i.e. no pooling.
	Rank int `json:"rank,omitempty"`

	// `weight <n>`: the target's share within its pool. Default: 1.
	Weight int `json:"weight,omitempty"`
}

// Failover says when and how often the relay moves on to the next target.
//
// Caddyfile:
//
//	failover {
//	    on <class...>
//	    attempts <n>
//	    backoff <base> <max>
//	    first_byte_timeout <duration>
//	    try_duration <duration>
//	    stream_idle_timeout <duration>
//	}
type Failover struct {
	// `on <class...>`: the failures that move to the next attempt. Words:
	// `connect` (the upstream could not be reached), `timeout`
	// (first_byte_timeout ran out), a status class such as `5xx`, or an exact
	// status such as `429`. Any other upstream answer is passed through to
	// the client unchanged. A 200 stream that ends or errors before its first
	// data event always moves on. Default: `connect timeout 429 5xx`.
	On []string `json:"on,omitempty"`

	// `attempts <n>`: the total number of attempts over the chain; beyond
	// the chain's length the chain repeats from its start. Default: the
	// chain's length.
	Attempts int `json:"attempts,omitempty"`

	// `backoff <base> <max>`: before a target is tried again by the same
	// request, wait a random time up to base*2^(n-1), capped at max (full
	// jitter). Default: `100ms 2s`.
	BackoffBase caddy.Duration `json:"backoff_base,omitempty"`
	BackoffMax  caddy.Duration `json:"backoff_max,omitempty"`

	// `first_byte_timeout <duration>`: per attempt, how long to wait for the
	// first upstream data event of a stream (or the first byte of a
	// non-stream body). Default: `30s`.
	FirstByteTimeout caddy.Duration `json:"first_byte_timeout,omitempty"`

	// `try_duration <duration>`: how long all attempts of one request may
	// take together, until the response is committed. Default: `60s`.
	TryDuration caddy.Duration `json:"try_duration,omitempty"`

	// `stream_idle_timeout <duration>`: after the commit point, the longest
	// the relay waits for the next bytes of the upstream's answer. When it
	// runs out, a stream ends with one in-band `upstream_timeout` error
	// event and a non-stream body aborts the client's connection (as
	// reverse_proxy does with a broken body). The relay's own heartbeats
	// do not count as activity. Default: `5m` (Envoy's stream idle
	// default).
	StreamIdleTimeout caddy.Duration `json:"stream_idle_timeout,omitempty"`
}
