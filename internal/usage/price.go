package usage

import (
	"encoding/json"
	"sort"
	"strings"
)

// Price is a model's price in USD per million tokens.
type Price struct {
	Input  float64 // prompt tokens not served from cache
	Output float64 // completion tokens, reasoning included
	// CachedInput prices prompt tokens served from the provider's prompt
	// cache; 0 means the same as Input.
	CachedInput float64
	// CacheWrite prices prompt tokens written to the provider's prompt
	// cache (Anthropic's cache_creation_input_tokens, billed above Input);
	// 0 means the same as Input.
	CacheWrite float64
}

// Usage is one response's token counts, with OpenAI's semantics:
// Completion includes Reasoning (completion_tokens includes
// completion_tokens_details.reasoning_tokens) and Prompt includes Cached
// (prompt_tokens includes prompt_tokens_details.cached_tokens). A provider
// that reports reasoning tokens apart from its completion tokens must be
// normalised to this (see Normalize).
type Usage struct {
	Prompt, Completion, Reasoning, Cached int
	// CacheWrite counts the prompt tokens written to the provider's
	// cache, inside Prompt like Cached (Anthropic reports them apart).
	CacheWrite int
	// Estimated is set when the counts are local estimates (the upstream
	// reported no usage), not the provider's.
	Estimated bool
}

// Normalize builds a Usage from a provider's counts. If reasoning is not
// inside completion (reasoningInsideCompletion false), it is added to it.
// Negative counts become 0, Cached is capped at Prompt and Reasoning at
// Completion.
func Normalize(prompt, completion, reasoning, cached int, reasoningInsideCompletion bool) Usage {
	prompt, completion, reasoning, cached = max(prompt, 0), max(completion, 0), max(reasoning, 0), max(cached, 0)
	if !reasoningInsideCompletion {
		completion += reasoning
	}
	return Usage{
		Prompt:     prompt,
		Completion: completion,
		Reasoning:  min(reasoning, completion),
		Cached:     min(cached, prompt),
	}
}

// Total is Prompt + Completion.
func (u Usage) Total() int { return u.Prompt + u.Completion }

// Add returns the sum of two usages (Estimated if either is).
func (u Usage) Add(v Usage) Usage {
	return Usage{
		Prompt:     u.Prompt + v.Prompt,
		Completion: u.Completion + v.Completion,
		Reasoning:  u.Reasoning + v.Reasoning,
		Cached:     u.Cached + v.Cached,
		CacheWrite: u.CacheWrite + v.CacheWrite,
		Estimated:  u.Estimated || v.Estimated,
	}
}

// Cost is the price of u in USD:
//
//	((Prompt-Cached-CacheWrite)*Input + Cached*CachedInput
//	 + CacheWrite*CacheWrite price + Completion*Output) / 1e6
//
// Reasoning tokens are billed as output through Completion, which already
// includes them; they are not added again. Cached is taken as at most
// Prompt, CacheWrite as at most what is left of it, and negative counts
// as 0.
func (p Price) Cost(u Usage) float64 {
	prompt, completion := max(u.Prompt, 0), max(u.Completion, 0)
	cached := min(max(u.Cached, 0), prompt)
	written := min(max(u.CacheWrite, 0), prompt-cached)
	ci := p.CachedInput
	if ci == 0 {
		ci = p.Input
	}
	cw := p.CacheWrite
	if cw == 0 {
		cw = p.Input
	}
	return (float64(prompt-cached-written)*p.Input + float64(cached)*ci + float64(written)*cw + float64(completion)*p.Output) / 1e6
}

// PriceTable maps model names to prices. A name is looked up exactly
// first; then among the patterns, names ending in '*' (e.g. "gpt-4o*"),
// the one with the longest prefix before the '*' that the name starts
// with ("gpt-4o-mini*" wins over "gpt-4o*" for "gpt-4o-mini-2024-07-18").
// "*" alone matches every name: a default price. Matching is
// case-sensitive. A PriceTable is immutable, so safe for concurrent use;
// the nil table has no prices.
type PriceTable struct {
	exact    map[string]Price
	patterns []pricePattern // longest prefix first
}

type pricePattern struct {
	prefix string
	price  Price
}

// NewPriceTable builds a table from m (which it does not keep).
func NewPriceTable(m map[string]Price) *PriceTable {
	t := &PriceTable{exact: make(map[string]Price, len(m))}
	for name, p := range m {
		if prefix, ok := strings.CutSuffix(name, "*"); ok {
			t.patterns = append(t.patterns, pricePattern{prefix, p})
		} else {
			t.exact[name] = p
		}
	}
	sort.Slice(t.patterns, func(i, j int) bool {
		a, b := t.patterns[i].prefix, t.patterns[j].prefix
		if len(a) != len(b) {
			return len(a) > len(b)
		}
		return a < b
	})
	return t
}

// Lookup returns the price of model, and whether the table has one.
func (t *PriceTable) Lookup(model string) (Price, bool) {
	p, _, ok := t.Match(model)
	return p, ok
}

// Match is Lookup, with the name or pattern (ending in '*') that matched.
func (t *PriceTable) Match(model string) (Price, string, bool) {
	if t == nil {
		return Price{}, "", false
	}
	if p, ok := t.exact[model]; ok {
		return p, model, true
	}
	for _, pt := range t.patterns {
		if strings.HasPrefix(model, pt.prefix) {
			return pt.price, pt.prefix + "*", true
		}
	}
	return Price{}, "", false
}

// Len is the number of names and patterns in the table.
func (t *PriceTable) Len() int {
	if t == nil {
		return 0
	}
	return len(t.exact) + len(t.patterns)
}

// rawUsage is the union of the usage objects ParseUsage reads.
type rawUsage struct {
	PromptTokens        *int `json:"prompt_tokens"`
	CompletionTokens    *int `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	PromptCacheHitTokens int `json:"prompt_cache_hit_tokens"` // DeepSeek
	CachedTokens         int `json:"cached_tokens"`           // Moonshot (Kimi), beside prompt_tokens

	// The Responses API's names.
	InputTokens        *int `json:"input_tokens"`
	OutputTokens       *int `json:"output_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`

	// Anthropic's: input_tokens excludes both.
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
}

// ParseUsage reads an OpenAI "usage" JSON object: prompt_tokens,
// completion_tokens, completion_tokens_details.reasoning_tokens and
// prompt_tokens_details.cached_tokens. Anthropic's input_tokens,
// output_tokens, cache_creation_input_tokens and cache_read_input_tokens
// are read too (its input_tokens excludes both cache counts, which are
// added to Prompt). DeepSeek's prompt_cache_hit_tokens
// counts as cached (the larger of the two if both are given), and the
// Responses API's input_tokens, output_tokens, input_tokens_details and
// output_tokens_details are read when prompt_tokens and completion_tokens
// are absent. Reasoning is taken as inside completion, as OpenAI and
// DeepSeek report it. ok is false if raw is not an object with
// prompt_tokens or completion_tokens (or their Responses API names), e.g.
// null.
func ParseUsage(raw []byte) (Usage, bool) {
	r, ok := scanRawUsage(raw)
	if !ok {
		// What the scanner does not take on (keys that match only
		// case-insensitively, numbers that are not plain integers,
		// values of the wrong type, broken JSON) encoding/json decides.
		var slow rawUsage // its own variable: only this branch moves it to the heap
		if err := json.Unmarshal(raw, &slow); err != nil {
			return Usage{}, false
		}
		r = slow
	}
	prompt, completion := r.PromptTokens, r.CompletionTokens
	cached, reasoning := r.PromptTokensDetails.CachedTokens, r.CompletionTokensDetails.ReasoningTokens
	written := deref(r.CacheCreationInputTokens) // the relay's chat translation keeps it
	if prompt == nil && completion == nil {
		prompt, completion = r.InputTokens, r.OutputTokens
		cached, reasoning = r.InputTokensDetails.CachedTokens, r.OutputTokensDetails.ReasoningTokens
		if r.CacheCreationInputTokens != nil || r.CacheReadInputTokens != nil {
			// Anthropic: input_tokens counts neither cache reads nor writes.
			cached = deref(r.CacheReadInputTokens)
			p := deref(prompt) + written + cached
			prompt = &p
		}
	}
	if prompt == nil && completion == nil {
		return Usage{}, false
	}
	cached = max(cached, r.PromptCacheHitTokens, r.CachedTokens)
	u := Normalize(deref(prompt), deref(completion), reasoning, cached, true)
	u.CacheWrite = min(max(written, 0), u.Prompt-u.Cached)
	return u, true
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
