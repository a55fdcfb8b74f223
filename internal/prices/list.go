package prices

// The pages the figures were read from. The relay has no internet access
// when the list is made: each is the stored copy of a public page, read on
// Taken. Where the provider's own page was stored, it is the source;
// otherwise a page that quotes the provider's page (and says so) is.
const (
	anthropicPricing  = "https://platform.claude.com/docs/zh-CN/about-claude/pricing"
	anthropicPricing2 = "https://platform.claude.com/docs/en/about-claude/pricing?ref=optimizesmart.com"
	deepseekPricing   = "https://api-docs.deepseek.com/quick_start/pricing-details-usd"
	// Quotes platform.openai.com/docs/pricing, "last updated on 2025-06-03".
	openaiGPT41 = "https://hex.pm/packages/openai_responses/0.4.1/files/lib/responses/pricing.ex"
	// "Data from OpenAI pricing page, March 2026."
	openaiGPT5 = "https://deploybase.ai/articles/openai-pricing"
	// GPT-5.2 and GPT-5 mini with their cached input.
	openaiGPT52 = "https://nicolalazzari.ai/articles/openai-api-pricing-explained-2026"
	// "As listed on the official pricing page ... as of June 2026."
	openaiGPT54 = "https://www.morphllm.com/openai-api-pricing"
	// "Data from Google's official pricing page (March 2026)."
	geminiPricing = "https://deploybase.ai/articles/gemini-api-pricing"
	// Quotes ai.google.dev/gemini-api/docs/pricing, accessed 2026-07-04.
	gemini3Flash = "https://factquire.com/models/google/gemini-3-flash-preview.json"
	// "Based on verified Google AI Studio data (2026-02-04)."
	gemini3Pro = "https://www.aifreeapi.com/en/posts/gemini-3-api-pricing-quota"
	// Flash-Lite, January 2026.
	geminiLite = "https://aifreeapi.com/en/posts/gemini-api-pricing-2026"
)

// taken is when the list was taken from the stored pages.
const taken = "2026-12-07"

// List is the built-in price list. Add an entry only with a page that
// gives its figures; TestList checks every entry has a source, a date and
// no negative price, and that no name is listed twice.
var List = []Entry{
	// OpenAI: GPT-5 family, GPT-4.1, o-series, Codex.
	{Names: []string{"gpt-5"}, Input: 1.25, Output: 10, Source: openaiGPT5, Taken: taken},
	{Names: []string{"gpt-5-mini"}, Input: 0.25, Output: 2, CachedInput: 0.025, Source: openaiGPT52, Taken: taken},
	{Names: []string{"gpt-5-nano"}, Input: 0.05, Output: 0.40, Source: openaiGPT5, Taken: taken},
	{Names: []string{"gpt-5-codex"}, Input: 1.25, Output: 10, Source: openaiGPT5, Taken: taken},
	{Names: []string{"gpt-5.1"}, Input: 1.25, Output: 10, Source: openaiGPT5, Taken: taken},
	{Names: []string{"gpt-5.2"}, Input: 1.75, Output: 14, CachedInput: 0.175, Source: openaiGPT52, Taken: taken},
	{Names: []string{"gpt-5.4"}, Input: 2.50, Output: 15, CachedInput: 0.25, Source: openaiGPT54, Taken: taken},
	{Names: []string{"gpt-5.4-mini"}, Input: 0.75, Output: 4.50, CachedInput: 0.075, Source: openaiGPT54, Taken: taken},
	{Names: []string{"gpt-5.4-nano"}, Input: 0.20, Output: 1.25, CachedInput: 0.02, Source: openaiGPT54, Taken: taken},
	{Names: []string{"gpt-5.5"}, Input: 5, Output: 30, CachedInput: 0.50, Source: openaiGPT54, Taken: taken},
	{Names: []string{"gpt-4.1"}, Input: 2, Output: 8, CachedInput: 0.50, Source: openaiGPT41, Taken: taken},
	{Names: []string{"gpt-4.1-mini"}, Input: 0.40, Output: 1.60, CachedInput: 0.10, Source: openaiGPT41, Taken: taken},
	{Names: []string{"gpt-4.1-nano"}, Input: 0.10, Output: 0.40, CachedInput: 0.025, Source: openaiGPT41, Taken: taken},
	{Names: []string{"gpt-4o"}, Input: 2.50, Output: 10, CachedInput: 1.25, Source: openaiGPT41, Taken: taken},
	{Names: []string{"o3"}, Input: 2, Output: 8, Source: openaiGPT5, Taken: taken},
	{Names: []string{"o4-mini"}, Input: 1.10, Output: 4.40, Source: openaiGPT5, Taken: taken},

	// Anthropic: Claude 4.x (5-minute cache writes).
	{Names: []string{"claude-opus-4-8", "claude-opus-4.8"}, Input: 5, Output: 25, CachedInput: 0.50, CacheWrite: 6.25, Source: anthropicPricing2, Taken: taken},
	{Names: []string{"claude-opus-4-7", "claude-opus-4.7"}, Input: 5, Output: 25, CachedInput: 0.50, CacheWrite: 6.25, Source: anthropicPricing2, Taken: taken},
	{Names: []string{"claude-opus-4-6", "claude-opus-4.6"}, Input: 5, Output: 25, CachedInput: 0.50, CacheWrite: 6.25, Source: anthropicPricing, Taken: taken},
	{Names: []string{"claude-opus-4-5", "claude-opus-4.5"}, Input: 5, Output: 25, CachedInput: 0.50, CacheWrite: 6.25, Source: anthropicPricing, Taken: taken},
	{Names: []string{"claude-opus-4-1", "claude-opus-4.1"}, Input: 15, Output: 75, CachedInput: 1.50, CacheWrite: 18.75, Source: anthropicPricing, Taken: taken},
	{Names: []string{"claude-opus-4-0", "claude-opus-4"}, Input: 15, Output: 75, CachedInput: 1.50, CacheWrite: 18.75, Source: anthropicPricing, Taken: taken},
	{Names: []string{"claude-sonnet-4-6", "claude-sonnet-4.6"}, Input: 3, Output: 15, CachedInput: 0.30, CacheWrite: 3.75, Source: anthropicPricing, Taken: taken},
	{Names: []string{"claude-sonnet-4-5", "claude-sonnet-4.5"}, Input: 3, Output: 15, CachedInput: 0.30, CacheWrite: 3.75, Source: anthropicPricing, Taken: taken},
	{Names: []string{"claude-sonnet-4-0", "claude-sonnet-4"}, Input: 3, Output: 15, CachedInput: 0.30, CacheWrite: 3.75, Source: anthropicPricing, Taken: taken},
	{Names: []string{"claude-haiku-4-5", "claude-haiku-4.5"}, Input: 1, Output: 5, CachedInput: 0.10, CacheWrite: 1.25, Source: anthropicPricing, Taken: taken},

	// Google: Gemini 2.5 and 3 (prompts up to 200k tokens).
	{Names: []string{"gemini-2.5-pro"}, Input: 1.25, Output: 10, Source: geminiPricing, Taken: taken},
	{Names: []string{"gemini-2.5-flash"}, Input: 0.30, Output: 2.50, Source: geminiPricing, Taken: taken},
	{Names: []string{"gemini-2.5-flash-lite"}, Input: 0.10, Output: 0.40, Source: geminiLite, Taken: taken},
	{Names: []string{"gemini-3-pro-preview"}, Input: 2, Output: 12, Source: gemini3Pro, Taken: taken},
	{Names: []string{"gemini-3-flash-preview"}, Input: 0.50, Output: 3, CachedInput: 0.05, Source: gemini3Flash, Taken: taken},

	// DeepSeek (input: cache miss; cached input: cache hit).
	{Names: []string{"deepseek-chat"}, Input: 0.27, Output: 1.10, CachedInput: 0.07, Source: deepseekPricing, Taken: taken},
	{Names: []string{"deepseek-reasoner"}, Input: 0.55, Output: 2.19, CachedInput: 0.14, Source: deepseekPricing, Taken: taken},
}
