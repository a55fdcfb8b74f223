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
// Caddyfile: `key <token> [<name>] [budget <usd> per day|month]`, with an
// optional block of limits; each field below gives its line. The grammar is
// the README's Caddyfile section (README.md#caddyfile).
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

	// `rpm <n>`: requests a minute for the key's name, and `tpm <n>`:
	// tokens a minute (the prompt's estimate when the request comes, set
	// right by its usage when it ends). Over either, 429
	// rate_limit_exceeded with Retry-After and OpenAI's
	// x-ratelimit-* headers, which every answer for the name carries. Like
	// the budget, one name has one limit: give it on one line or the same
	// on each. 0 or absent: none.
	RPM int `json:"rpm,omitempty"`
	TPM int `json:"tpm,omitempty"`

	// `max_concurrent <n>`: requests of the key's name in flight at once
	// (a stream counts until it ends); one more gets 429
	// rate_limit_exceeded with Retry-After 1. Per name, like rpm. 0 or
	// absent: none.
	MaxConcurrent int `json:"max_concurrent,omitempty"`

	// `allow_ip <cidr...>`: the client addresses this token is accepted
	// from (an address alone is a /32 or /128), as Caddy resolves the
	// client IP (its trusted_proxies). Elsewhere: 403 ip_not_allowed.
	// Absent: anywhere.
	AllowIP []string `json:"allow_ip,omitempty"`

	// `not_before <date>` and `expires <date>`: the token is valid from
	// not_before until expires (a date such as 2027-03-01, 00:00 UTC, or
	// an RFC 3339 time). Outside: 401 key_expired. Per token, so two
	// tokens of one name can overlap during a rotation.
	NotBefore string `json:"not_before,omitempty"`
	Expires   string `json:"expires,omitempty"`

	// `reasoning_budget <tokens> per day|month`: the reasoning tokens the
	// key's name may use in the current UTC day or month (counted from
	// usage, as spend is; with `state redis`, the fleet's). Once used up,
	// 429 reasoning_budget_exceeded with Retry-After to the period's end.
	// Per name, like budget. In JSON, reasoning_budget is tokens
	// (positive; 0 or absent: none) and reasoning_budget_period `day` (the
	// default) or `month`. Not the model level's reasoning_budget, which
	// caps one request's reasoning.
	ReasoningBudget       int64  `json:"reasoning_budget,omitempty"`
	ReasoningBudgetPeriod string `json:"reasoning_budget_period,omitempty"`
}

// Upstream is one provider endpoint.
//
// Caddyfile: `upstream <name> <base_url> { ... }`; each field below gives
// its line. The grammar is the README's Caddyfile section
// (README.md#caddyfile).
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

	// `continue_with prefill|prefix|continue_final_message|instruct`: how
	// this upstream is asked to continue an answer that broke on another
	// target (failover `after_commit continue`, docs/continuation.md):
	//   - `prefill`: the answer so far as a trailing assistant turn, which
	//     the model continues (Anthropic's Messages API does).
	//   - `prefix`: the same, marked `"prefix": true` (DeepSeek's and
	//     Mistral's chat prefix completion).
	//   - `continue_final_message`: the same, with vLLM's and SGLang's
	//     `continue_final_message: true, add_generation_prompt: false`.
	//   - `instruct`: the answer so far as an assistant turn, then a user
	//     turn asking to continue exactly where it stopped (any provider).
	// Default: `prefill` for `api anthropic`, `instruct` for the others.
	ContinueWith string `json:"continue_with,omitempty"`

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

	// `region <code>`: where the upstream runs, e.g. `eu` or `nrt`
	// (compared case-insensitively). A request's `X-Region-Hint: <code>`
	// prefers healthy targets in that region within each tier of its
	// chain, `<code>!` keeps to them, a model's `region_pin` too, and
	// `GET /v1/ping` with the hint times a round trip to the region
	// (docs/routing.md#regions). Default: none.
	Region string `json:"region,omitempty"`

	// `health_check { ... }`: active probes of this upstream.
	HealthCheck *HealthCheck `json:"health_check,omitempty"`

	// `max_concurrent <n>`: the most requests in flight to this upstream
	// at once, over every model that routes to it (a provider's
	// concurrency limit). A stream counts until its end. As it fills,
	// the `capacity` stages apply: spill-over to the next target of the
	// chain, degradation, then no new request. Default: 0, no cap.
	MaxConcurrent int `json:"max_concurrent,omitempty"`

	// `trace_provider <name>`: gen_ai.provider.name on the spans of this
	// upstream's attempts (with Caddy's `tracing` on; docs/tracing.md),
	// one of the GenAI conventions' names (openai, anthropic, gcp.gemini,
	// deepseek, groq, mistral_ai, x_ai, ...) or your own. Default: the
	// provider of a well-known host, else the api's (openai for `openai`
	// and `chat`, anthropic, gcp.gemini).
	TraceProvider string `json:"trace_provider,omitempty"`

	// `trace_propagation on|off`: whether requests to this upstream carry
	// the attempt's W3C trace context (traceparent, tracestate). `off`
	// sends none, the client's included: for a provider that should not
	// learn your trace ids. Default: on.
	TracePropagation *bool `json:"trace_propagation,omitempty"`

	// Where the upstream's models write their reasoning: `reasoning_format`,
	// `reasoning_tags`, `starts_in_reasoning`, `reasoning_end_marker`. A
	// target may override each (see Target).
	InlineReasoning
}

// InlineReasoning says where a Chat Completions upstream's model writes its
// reasoning: in a field of its own (`reasoning_content`, `reasoning`), or
// inline in `content` between tags, as self-hosted reasoning models do when
// their server runs no reasoning parser (docs/reasoning.md has a table of
// servers and models and what to set for each). Tagged reasoning is moved
// into `reasoning_content` as it arrives, so that every reasoning feature
// reads it as a field, and every client dialect gets it in its own form.
// Only Chat Completions answers are read (`api chat`, and `api openai` on
// /v1/chat/completions); the other APIs have reasoning of their own.
type InlineReasoning struct {
	// `reasoning_format fields|tags|auto`:
	//   - `fields`: reasoning comes in a field; content is passed as it
	//     is. The default, unless a line below is given (then `tags`).
	//   - `tags`: reasoning blocks are recognised anywhere in content
	//     (several blocks, between tool calls, too).
	//   - `auto`: a block is recognised only at the start of the answer
	//     (after whitespace), so an answer that merely mentions <think>
	//     is not split; after a first block, later ones anywhere. An
	//     answer that begins with text costs nothing more.
	Format string `json:"reasoning_format,omitempty"`

	// `reasoning_tags <open> <close>`: a tag family recognised, one line
	// each. Default: `<think> </think>` and `<thinking> </thinking>`.
	Tags []ReasoningTag `json:"reasoning_tags,omitempty"`

	// `starts_in_reasoning [true|false]`: the answer begins inside a
	// block whose opening tag never comes, for chat templates that end
	// the prompt with `<think>` (DeepSeek-R1 and its distills, QwQ,
	// Qwen3.5, Qwen3 Thinking-2507, MiniMax-M2). An opening tag the model
	// writes anyway, first, is taken as that block's. Only for models
	// that always reason: a hybrid model's plain answer would be taken
	// for reasoning. Default: false.
	StartsInReasoning *bool `json:"starts_in_reasoning,omitempty"`

	// `reasoning_end_marker <text>|qwen3.5`: a string that ends a
	// reasoning block without its closing tag, and is answer text itself
	// (a tool call a model opens inside its thinking). `qwen3.5` is
	// Qwen3.5's "<tool_call>\n<function=". Repeatable. Default: none.
	EndMarkers []string `json:"reasoning_end_markers,omitempty"`
}

// ReasoningTag is one family of reasoning tags (`reasoning_tags`).
type ReasoningTag struct {
	Open  string `json:"open"`
	Close string `json:"close"`
}

// ModelRoute maps a model alias that clients ask for to an ordered failover
// chain of targets.
//
// Caddyfile: `model <alias> { to ... }`; each field below gives its line.
// The grammar is the README's Caddyfile section (README.md#caddyfile).
type ModelRoute struct {
	// The model name clients use. `*` matches any model name that has no
	// route of its own; the client's name is then forwarded unchanged
	// (unless a target sets a model).
	Alias string `json:"alias"`

	// `to ...` lines, in failover order. At least one. On a hand-off
	// alias (one with `reason` lines) they are the answer leg's chain.
	Targets []Target `json:"targets"`

	// `reason <upstream> [<upstream_model>] { ... }` lines make the alias a
	// hand-off alias (docs/handoff.md): these targets, in failover order,
	// are the reasoning leg's chain; the reasoning they stream goes to the
	// client and into the answer leg's request. Each takes everything a
	// `to` line takes. Default: none (an ordinary alias).
	Reason []Target `json:"reason,omitempty"`

	// `handoff { ... }`: how a hand-off alias passes the reasoning to its
	// answer leg. Needs `reason` lines. Default: the defaults of each
	// field.
	Handoff *Handoff `json:"handoff,omitempty"`

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

	// `reasoning_field reasoning_content|reasoning|both|inline`: overrides
	// the relay-level reasoning_field for this model.
	ReasoningField string `json:"reasoning_field,omitempty"`

	// `region_pin <code>`: data residency for this model. Only targets
	// whose upstream has this region are tried (both legs of a hand-off
	// alias), never failing over out of it; when none answers, 503
	// region_unavailable. The canary and shadow must be in the region
	// too. A client's `X-Region-Hint: <other>!` gets 400 region_conflict.
	// The code must be the region of an upstream of the model's chain.
	// Default: none (a client may still pin with `X-Region-Hint: <code>!`).
	RegionPin string `json:"region_pin,omitempty"`

	// `failover { after_commit ...; continue_reasoning ... }`: this model's
	// continuation after the commit point, overriding the relay-level
	// block's (only these two settings; the rest of failover is the
	// relay's). Default: the relay-level values.
	Failover *Failover `json:"failover,omitempty"`

	regionPinAt string // where the Caddyfile line was, for load errors
}

// Handoff is how a hand-off alias passes the reasoning leg's reasoning to
// its answer leg (`handoff { ... }`, docs/handoff.md).
type Handoff struct {
	// `inject prefill|user|system`: where the answer leg's request carries
	// the reasoning: prefill, a trailing assistant turn that opens with
	// the reasoning in <think> tags, which the model continues; user,
	// appended to the last user turn under a short preamble; system,
	// appended to the system prompt under the same preamble. Default:
	// prefill for `api anthropic` targets, user for the others.
	Inject string `json:"inject,omitempty"`

	// `max_reasoning <tokens>`: hand off when the reasoning reaches this
	// many tokens (estimated as a quarter of its characters); the
	// reasoning leg is stopped there. Default: 0, no bound (the reasoning
	// leg's own end is the hand-off point).
	MaxReasoning int `json:"max_reasoning,omitempty"`

	// `on_reason_failure answer|error`: when the whole reasoning chain
	// fails before any reasoning, answer without reasoning (answer, the
	// default: the answer leg is asked as an ordinary alias would be, and
	// the response says so) or fail the request (error).
	OnReasonFailure string `json:"on_reason_failure,omitempty"`
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

	// `max_concurrent <n>`: the most requests in flight to this target
	// (this `to` line) at once; the upstream's own cap, if any, applies
	// too, and the fuller of the two sets the target's occupancy.
	// Default: 0, no cap of its own.
	MaxConcurrent int `json:"max_concurrent,omitempty"`

	// `reasoning_format`, `reasoning_tags`, `starts_in_reasoning`,
	// `reasoning_end_marker` for this target's model, each overriding the
	// upstream's (see InlineReasoning): one server may serve a tagged
	// model and a parsed one.
	InlineReasoning
}

// Failover says when and how often the relay moves on to the next target.
//
// Caddyfile: `failover { ... }`; each field below gives its line. The
// grammar is the README's Caddyfile section (README.md#caddyfile).
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
	// chain's length. At most 20: each attempt is a request to a provider.
	Attempts int `json:"attempts,omitempty"`

	// `backoff <base> <max>`: before a target is tried again by the same
	// request, wait a random time up to base*2^(n-1), capped at max (full
	// jitter). Default: `100ms 2s`.
	BackoffBase caddy.Duration `json:"backoff_base,omitempty"`
	BackoffMax  caddy.Duration `json:"backoff_max,omitempty"`

	// `first_byte_timeout <duration>`: per attempt, how long to wait for the
	// first upstream data event of a stream (or the first byte of a
	// non-stream body). Default: `30s`. At least `100ms`.
	FirstByteTimeout caddy.Duration `json:"first_byte_timeout,omitempty"`

	// `try_duration <duration>`: how long all attempts of one request may
	// take together, until the response is committed. Default: `60s`. At
	// least `100ms`.
	TryDuration caddy.Duration `json:"try_duration,omitempty"`

	// `stream_idle_timeout <duration>`: after the commit point, the longest
	// the relay waits for the next bytes of the upstream's answer. When it
	// runs out, a stream ends with one in-band `upstream_timeout` error
	// event and a non-stream body aborts the client's connection (as
	// reverse_proxy does with a broken body). The relay's own heartbeats
	// do not count as activity. At least `100ms`. Default: `5m` (Envoy's stream idle
	// default).
	StreamIdleTimeout caddy.Duration `json:"stream_idle_timeout,omitempty"`

	// `after_commit continue|error`: what a stream that breaks after the
	// commit point (a dropped connection, stream_idle_timeout, an upstream
	// error event with a 5xx, 429 or overloaded code) does
	// (docs/continuation.md). `continue`: the next target of the chain
	// (the same order, attempts, backoff and health) is asked to continue
	// the answer, and its stream is spliced into the client's; tool calls
	// are held until the end of the message, so a break never sends half
	// of one. `error`: the stream ends with one in-band error event, as
	// before. Also in a `model` block's `failover { }`, for that model.
	// Default: `continue` (the relay's failover is meant to be invisible,
	// and a client that gets the in-band error can only start over and
	// pay for the whole answer again).
	AfterCommit string `json:"after_commit,omitempty"`

	// `continue_reasoning mark|hide`: when the break falls in the
	// reasoning, the next target reasons again from the start: `mark`
	// sends a separator on the client's reasoning lane, then the new
	// reasoning; `hide` sends none of the new reasoning, only the answer.
	// Also in a `model` block. Default: `mark`.
	ContinueReasoning string `json:"continue_reasoning,omitempty"`
}

// HealthCheck actively probes an upstream, feeding the same health state
// as live traffic and measuring its round-trip time.
//
// Caddyfile: `health_check { ... }` in an `upstream` block; each field below
// gives its line. The grammar is the README's Caddyfile section
// (README.md#caddyfile).
type HealthCheck struct {
	// `uri <path>`: what to GET, relative to the base URL, with the
	// upstream's API key and headers (for `api anthropic`: `x-api-key` and
	// `anthropic-version`, as its own GET /v1/models wants). Default:
	// `/models`.
	URI string `json:"uri,omitempty"`

	// `interval <duration>`: time between probes. Default: `30s`. At least
	// `1s`: each probe is a request to the provider, with its key.
	Interval caddy.Duration `json:"interval,omitempty"`

	// `timeout <duration>`: a probe that takes longer fails. Default: `5s`.
	// At least `100ms`.
	Timeout caddy.Duration `json:"timeout,omitempty"`
}

// SLO is the service level a target must meet to keep its place in the
// chain. A target whose recent window breaks it is skipped in favour of the
// next target of the chain until it recovers; if every target is out, the
// least bad one is still tried.
//
// Caddyfile: `slo { ... }` in `llm_relay`, or in a `model` block to override
// it there; each field below gives its line. The grammar is the README's
// Caddyfile section (README.md#caddyfile).
type SLO struct {
	// `ttft <duration>`: the window's p90 time to first token must not
	// exceed this. Default: not judged.
	TTFT caddy.Duration `json:"ttft,omitempty"`

	// `success <ratio>`: the window's share of successful attempts must be
	// at least this, e.g. `0.95`. Default: not judged.
	Success float64 `json:"success,omitempty"`

	// `window <n>`: how many recent attempts are judged. Default: 50. At
	// most 10000.
	Window int `json:"window,omitempty"`

	// `min_samples <n>`: no judgement on fewer attempts. Default: 10.
	MinSamples int `json:"min_samples,omitempty"`

	// `reasoning_floor <ratio>`: a target whose recent reasoning tokens
	// per request (the mean of its last 5 answers at one reasoning
	// effort) fall below this share of its own baseline at that effort
	// (a slow mean over about the last 50, frozen while degraded) is
	// degraded, e.g. `0.5`. Judged once the baseline has 20 answers.
	// 0 < ratio <= 1. Default: not judged. See docs/reasoning-health.md.
	ReasoningFloor float64 `json:"reasoning_floor,omitempty"`

	// `cluster_rate <ratio>`: a target whose recent reasoning cluster
	// rate (the mean over its last 5 streams with reasoning of the share
	// of the reasoning that came in the late half of its phase: 0.5
	// even, 0.7-0.8 clustered) is above this is degraded, e.g. `0.8`.
	// 0 < ratio <= 1. Default: not judged.
	ClusterRate float64 `json:"cluster_rate,omitempty"`

	at string // where the Caddyfile block was, for load errors
}

// Canary sends a stable slice of requests to a new target first, and
// rolls it back by itself when it misbehaves.
//
// Caddyfile: `canary <upstream> [<model>] [<percent>] { ... }` in a `model`
// block; each field below gives its line. The grammar is the README's
// Caddyfile section (README.md#caddyfile).
type Canary struct {
	// The canary target: an upstream and the model sent to it (default:
	// the client's model).
	Upstream string `json:"upstream"`
	Model    string `json:"model,omitempty"`

	// The starting share of requests, in percent. With Phases it may be
	// left out (it is the first phase's); given, it must be the same.
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

	// `promote <percent> for <duration>, ..., <percent>`: the roll-out by
	// phases of their own lengths, e.g. `promote 5% for 3d, 50% for 7d,
	// 100%`. The first phase is the starting share; each phase but the
	// last lasts its duration at least (the next one also waits for
	// min_samples attempts since the phase began and a window that holds
	// the guard); the last has none and is kept. Either this or
	// promote/promote_every, not both.
	Phases []CanaryPhase `json:"phases,omitempty"`
}

// CanaryPhase is one phase of a canary's roll-out.
type CanaryPhase struct {
	// The share of requests in the phase, in percent (0 to 100).
	Percent float64 `json:"percent"`
	// How long the phase lasts at least; required on every phase but the
	// last, which has none. JSON: a duration string such as "3d" or "12h",
	// or nanoseconds.
	For caddy.Duration `json:"for,omitempty"`
}

// CanaryGuard is a canary's rollback thresholds.
type CanaryGuard struct {
	// `ttft_p99 <duration>`: p99 time to first token of the window.
	TTFTP99 caddy.Duration `json:"ttft_p99,omitempty"`
	// `error_rate <ratio>`: share of failed attempts, e.g. `0.05`.
	ErrorRate float64 `json:"error_rate,omitempty"`
	// `min_samples <n>`: no judgement on fewer attempts. Default: 20.
	MinSamples int `json:"min_samples,omitempty"`
	// `window <n>`: attempts judged. Default: 100. At most 10000.
	Window int `json:"window,omitempty"`
	// `ttft_mean <duration>`: the most the mean time to first token of
	// the window's successful attempts may be (judged on min_samples of
	// them). Default: not judged.
	TTFTMean caddy.Duration `json:"ttft_mean,omitempty"`
	// `cluster_rate <ratio>`: the most the reasoning cluster rate may be:
	// the mean, over the canary's last `window` streams with reasoning, of
	// each stream's share of its reasoning in the late half of its
	// reasoning phase, as received from the upstream (about 0.5 for an
	// even flow, 0.7-0.8 clustered; the llm_relay_reasoning_cluster_rate
	// metric, side "in"). Judged on min_samples such streams; streams
	// without reasoning, and answers that are not streamed, do not count.
	// Default: not judged.
	ClusterRate float64 `json:"cluster_rate,omitempty"`
	// `reasoning_floor <ratio>`: the least share (above 0, at most 1) of
	// the stable targets' reasoning the canary's may be: roll back when,
	// at some reasoning effort, the canary's mean reasoning tokens per
	// complete 2xx answer over its last `window` answers at that effort
	// fall below ratio × the mean of the answers the model's other
	// targets gave at that effort over the same period. Judged once both
	// sides have min_samples answers at the effort and the stable side
	// reasons at all. Default: not judged.
	ReasoningFloor float64 `json:"reasoning_floor,omitempty"`
}

// Shadow copies a sample of requests to another target in the background,
// to compare it with the real answer; the client never sees it.
//
// Caddyfile: `shadow <upstream> [<model>] <percent> { ... }` in a `model`
// block; each field below gives its line. The grammar is the README's
// Caddyfile section (README.md#caddyfile).
type Shadow struct {
	Upstream string  `json:"upstream"`
	Model    string  `json:"model,omitempty"`
	Percent  float64 `json:"percent"`
	// `max_concurrent <n>`: copies in flight at most; a copy beyond it is
	// dropped and counted, never queued. Default: 4.
	MaxConcurrent int `json:"max_concurrent,omitempty"`
	// `warn_similarity <ratio>`: a WARN log line when the mean similarity
	// of the shadow's recent answers to the primary's (over the SLO's
	// window of copies, once it holds min_samples compared) falls below
	// this, and an INFO line when it is back at or above it: once per
	// crossing. 0 < ratio <= 1. Default: off, since how alike two models'
	// answers read depends on the models (the verdict's own WARN, when it
	// turns to fail, is always on). See docs/routing.md#shadow-verdicts.
	WarnSimilarity float64 `json:"warn_similarity,omitempty"`
}

// ReasoningBudget caps the reasoning tokens of a request, counted on the
// stream (estimated from the text) whatever the upstream does.
//
// Caddyfile (in `llm_relay`, or in a `model` block to override it there):
//
//	reasoning_budget <tokens> [truncate|failover|error]
//
// A request may ask for less with the header
// `X-Relay-Reasoning-Budget: <tokens>` (never more than this cap; without
// a configured cap the header sets one, with the truncate action). To
// pass the budget to an upstream's own knob, write the placeholder
// `{llm_relay.reasoning_budget}` as the value of a target's `set`, e.g.
// `set reasoning.max_tokens {llm_relay.reasoning_budget}`.
type ReasoningBudget struct {
	// The cap, in tokens.
	Tokens int `json:"tokens"`

	// What happens when a stream's reasoning passes it: `truncate` stops
	// forwarding reasoning and lets the answer through; `failover` (only
	// before any answer text came) cancels the attempt and moves to the
	// next target, on the same client stream; `error` ends the stream
	// with the in-band error `reasoning_budget_exceeded`. Default:
	// `truncate`.
	Action string `json:"action,omitempty"`
}

// AdaptiveEffort sets the reasoning effort from an estimate of the
// prompt's token count: long prompts get lower effort.
//
// A client's own effort counts in either form, `reasoning_effort` (Chat
// Completions) or `reasoning.effort` (Responses API, OpenRouter). The
// relay writes its effort in the form the client used, or, when the
// client sent none, in the endpoint's form: `reasoning_effort` for
// /v1/chat/completions and /v1/completions, `reasoning.effort` for
// /v1/responses (other endpoints are left alone). It never adds a second
// form next to the client's.
//
// Caddyfile: `adaptive_effort { ... }` in `llm_relay`, or in a `model` block
// to override it there; each field below gives its line. The grammar is the
// README's Caddyfile section (README.md#caddyfile).
type AdaptiveEffort struct {
	// `below <tokens> <effort>`, repeatable: the first rule whose bound
	// the estimate is below applies. Rules must be listed in increasing
	// order of tokens. Efforts: none, minimal, low, medium, high.
	Rules []EffortRule `json:"rules,omitempty"`

	// `else <effort>`: the effort when no rule applies. Default: leave
	// the request as it is.
	Else string `json:"else,omitempty"`

	// `client_effort keep|override`: whether an effort the client set
	// itself (in either form) is kept (default) or replaced.
	ClientEffort string `json:"client_effort,omitempty"`
}

// EffortRule is one `below <tokens> <effort>` line.
type EffortRule struct {
	Below  int    `json:"below"`
	Effort string `json:"effort"`
}

// Price is what a model costs, in US dollars per million tokens.
//
// Caddyfile: `price <model> { ... }`, repeatable; each field below gives its
// line. The grammar is the README's Caddyfile section (README.md#caddyfile).
//
// <model> is the model name sent upstream (as in `to`), or a prefix
// ending in `*` such as `gpt-4o*`. Reasoning tokens are billed as output.
type Price struct {
	// Prompt tokens not read from or written to the provider's cache.
	Input float64 `json:"input"`
	// Completion tokens, reasoning (thinking) included.
	Output float64 `json:"output"`
	// Prompt tokens read from the provider's cache (OpenAI's
	// cached_tokens, Anthropic's cache_read_input_tokens). Default: input.
	CachedInput float64 `json:"cached_input,omitempty"`
	// Prompt tokens written to the provider's cache (Anthropic's
	// cache_creation_input_tokens, e.g. 1.25x input). Default: input.
	CacheWrite float64 `json:"cache_write,omitempty"`
}

// StateConfig is where the relay keeps the state that outlives a process
// (spend per key and the budget alerts raised, canary roll-outs and
// rollbacks, ejected targets), and with whom it shares it.
//
// Caddyfile: `state off|local`, or `state redis <address> { ... }`,
// `state redis sentinel <master_name> <sentinel_address...> { ... }` or
// `state redis cluster <node_address...> { ... }`; each field below gives
// its line. The grammar is the README's Caddyfile section
// (README.md#caddyfile).
type StateConfig struct {
	// Backend: "local" (the default, also without a state line: Caddy's
	// storage, this instance only, kept across restarts), "redis" (shared
	// by every instance that names the same Redis, and kept in Caddy's
	// storage too) or "off" (nothing is kept across restarts; reloads
	// still keep it).
	Backend string `json:"backend,omitempty"`

	// Address (redis): host:port, or a unix socket as unix:/path or an
	// absolute path. One server (or a proxy in front of several); empty
	// with a Mode, whose servers are in Addresses.
	Address string `json:"address,omitempty"`

	// Mode (redis): how the Redis is deployed. Default "": one server at
	// Address. "sentinel": a master and its replicas watched by Redis
	// Sentinel; the relay asks the sentinels (Addresses) which server is
	// the master named MasterName, and follows a failover. "cluster": a
	// Redis Cluster; Addresses are some of its nodes, from which the relay
	// learns the others and which node holds which key (database 0 only).
	// Valkey is the same in each mode.
	Mode string `json:"mode,omitempty"`

	// MasterName (redis, sentinel mode): the name the sentinels monitor
	// the master under (`sentinel monitor <name> ...`). Required there.
	MasterName string `json:"master_name,omitempty"`

	// Addresses (redis, sentinel and cluster modes): host:port of the
	// sentinels, or of cluster nodes. At least one; list several so the
	// relay finds the deployment while one of them is down.
	Addresses []string `json:"addresses,omitempty"`

	// SentinelPassword (redis, sentinel mode): the sentinels' own
	// password (requirepass in sentinel.conf), when they have one;
	// Password is the master's. Use a placeholder. Never logged.
	SentinelPassword string `json:"sentinel_password,omitempty"`

	// Password (redis): AUTH password; use a placeholder such as
	// {env.REDIS_PASSWORD}. Never logged.
	Password string `json:"password,omitempty"`

	// DB (redis): the database number. Default 0. A Redis Cluster has
	// only database 0.
	DB int `json:"db,omitempty"`

	// Prefix (redis): put before every key the relay writes, so several
	// fleets (or other applications) share one Redis. Default "llm_relay:".
	Prefix string `json:"prefix,omitempty"`

	// TLS (redis): connect with TLS (the system's roots).
	TLS bool `json:"tls,omitempty"`

	// SyncInterval (redis): how often spend is written and the fleet's
	// read. A key's budget is checked against a view of the fleet's spend
	// at most two intervals old. Default 500ms.
	SyncInterval caddy.Duration `json:"sync_interval,omitempty"`

	// ShareHealth (redis): share ejections, so a target ejected by one
	// instance is skipped by every instance until its cooldown ends.
	// Default true.
	ShareHealth *bool `json:"share_health,omitempty"`
}

// Capacity is what the relay does as targets with a `max_concurrent` (on
// the upstream or the `to` line) fill up. A target's occupancy is its
// requests in flight over its cap (the fuller of the two caps); a target
// without a cap is never full. Three stages, by occupancy when a request
// is sent:
//
//  1. spill_at: the request prefers the next target of its chain that is
//     below spill_at (spill-over, before anything waits). When none is,
//     the chain's order stands.
//  2. degrade_at: a request sent to the target gets the `degrade` edit
//     (default: one reasoning effort step down).
//  3. shed_at: the target takes no new request. When no target of the
//     chain has room, the request waits up to queue_timeout for one, then
//     gets 503 `overloaded` with Retry-After.
//
// Caddyfile: `capacity { ... }`; each field below gives its line. The
// grammar is the README's Caddyfile section (README.md#caddyfile).
type Capacity struct {
	// SpillAt: the occupancy, in percent (0-100], from which new requests
	// prefer another target of the chain with room. Default 70.
	SpillAt float64 `json:"spill_at,omitempty"`

	// DegradeAt: the occupancy, in percent, from which a request sent to
	// the target is degraded. Default 85. At least spill_at.
	DegradeAt float64 `json:"degrade_at,omitempty"`

	// ShedAt: the occupancy, in percent, from which the target takes no
	// new request. Default 95: a cap of 20 admits 19 at once, keeping
	// one slot of headroom; 100 uses every slot. At least degrade_at.
	ShedAt float64 `json:"shed_at,omitempty"`

	// QueueTimeout: how long a request whose chain has no target with
	// room waits for one before its 503. Default 0: it does not wait.
	QueueTimeout caddy.Duration `json:"queue_timeout,omitempty"`

	// Degrade: the edit a degraded request gets, in the client's body
	// before any translation (like a target's set/unset). Default: one
	// reasoning effort step down where the request states an effort
	// (`reasoning_effort` or `reasoning.effort`: xhigh to high, high to
	// medium, medium to low, low to minimal) and, for Anthropic
	// Messages, half the thinking budget (at least 1024 tokens).
	Degrade *DegradeEdit `json:"degrade,omitempty"`
}

// DegradeEdit is the `degrade { set ...; unset ... }` of a capacity block.
type DegradeEdit struct {
	// `set <json_field> <value>`, as on a target.
	Set map[string]json.RawMessage `json:"set,omitempty"`
	// `unset <json_field>`, as on a target.
	Unset []string `json:"unset,omitempty"`
}

// Resume makes streams outlive their connection (resume.go,
// docs/resume.md). With it, every committed stream of a conversation
// endpoint (Chat Completions, Messages, Responses) is journaled as its
// client is sent it: each event gets an SSE `id:` (the stream's id and
// its position), the first a `retry:` hint, and the response the headers
// X-Relay-Stream-Id and X-Relay-Stream (the URL to resume it at). Where
// the journal lives follows `state`: this instance's memory (state off or
// local) or Redis Streams (state redis), where any edge of the fleet
// reads it.
type Resume struct {
	// TTL is how long a stream's journal is kept after the stream ends,
	// for late resumes and re-attaching retries. Default 5m.
	TTL caddy.Duration `json:"ttl,omitempty"`

	// MaxBytes bounds one stream's journal, in bytes of events; beyond
	// it the oldest events go (counted), and a resume from before them
	// gets a 404 that says so. Default 8MiB.
	MaxBytes int64 `json:"max_bytes,omitempty"`

	// MaxStreams bounds the journals this instance keeps in memory
	// (state local; Redis bounds its own by ttl and max_bytes): beyond
	// it the oldest ended journal goes first, then the oldest detached
	// stream (which is stopped); when every journal is a stream still
	// connected to its client, a new stream runs unjournaled (counted).
	// Default 1000.
	MaxStreams int `json:"max_streams,omitempty"`

	// Coalesce is the window in which a request identical to an earlier
	// one of the same key (same method, path and body) re-attaches to
	// that earlier stream, when every client of it went away before its
	// end: a client's retry after a broken stream replays the generation
	// from its start instead of paying for a second. A stream whose
	// client is still connected is never joined this way (two identical
	// requests at once are two samples), nor one that ended with its
	// client there. A request with an Idempotency-Key header re-attaches
	// to the stream started with that key whatever this says. "off" (-1
	// in JSON) turns body matching off. Default 2m.
	Coalesce caddy.Duration `json:"coalesce,omitempty"`

	// Detach is how long a generation goes on after its last client
	// went away, so that a client that reconnects finds it complete; a
	// client that resumes meanwhile stops the clock. Key limits, budgets
	// and capacity count the generation until it ends. An explicit
	// cancel (POST /v1/responses/{id}/cancel, DELETE on the stream URL)
	// stops it at once. "off" (-1 in JSON): the upstream is cancelled
	// when the client goes, as without resume. Default 2m.
	Detach caddy.Duration `json:"detach,omitempty"`

	// Retry is the reconnection delay hinted to EventSource clients (the
	// first event's `retry:` field). Default 1s.
	Retry caddy.Duration `json:"retry,omitempty"`
}
