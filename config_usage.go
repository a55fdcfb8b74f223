package llmrelay

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
// Caddyfile (in `llm_relay`, or in a `model` block to override it there):
//
//	adaptive_effort {
//	    below <tokens> <effort>
//	    else <effort>
//	    client_effort keep|override
//	}
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
// Caddyfile (in `llm_relay`, repeatable):
//
//	price <model> {
//	    input <usd per MTok>
//	    output <usd per MTok>
//	    cached_input <usd per MTok>
//	    cache_write <usd per MTok>
//	}
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
