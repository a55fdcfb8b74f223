package prices

import (
	"strings"
)

// Entry is one model's price, USD per million tokens, and where it comes
// from.
type Entry struct {
	// Names are the model names the entry prices (the provider's API
	// names; more than one where a provider or gateway spells it two
	// ways, e.g. claude-sonnet-4-5 and claude-sonnet-4.5).
	Names []string
	// Input: prompt tokens not read from or written to a cache.
	Input float64
	// Output: completion tokens, reasoning (thinking) included.
	Output float64
	// CachedInput: prompt tokens read from the provider's cache; 0: the
	// page gave none (priced as Input).
	CachedInput float64
	// CacheWrite: prompt tokens written to the provider's cache
	// (Anthropic's 5-minute writes); 0: none given (priced as Input).
	CacheWrite float64
	// Source is the address of the public page the figures were read
	// from; Taken the date they were taken (YYYY-MM-DD).
	Source string
	Taken  string
}

// withoutSnapshot is name without the dated-snapshot suffix providers
// append to a model's name (OpenAI's -2025-08-07, Anthropic's -20250929,
// Vertex AI's @20250929), or name when it has none. By hand, not a
// regexp: Lookup runs on every priced request for every unlisted model.
func withoutSnapshot(name string) string {
	digits := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		}
		return true
	}
	n := len(name)
	// -YYYY-MM-DD
	if n > 11 && name[n-11] == '-' && name[n-6] == '-' && name[n-3] == '-' &&
		digits(name[n-10:n-6]) && digits(name[n-5:n-3]) && digits(name[n-2:]) {
		return name[:n-11]
	}
	// -YYYYMMDD or @YYYYMMDD
	if n > 9 && (name[n-9] == '-' || name[n-9] == '@') && digits(name[n-8:]) {
		return name[:n-9]
	}
	return name
}

// index maps every name of every entry to its entry.
var index = func() map[string]*Entry {
	m := make(map[string]*Entry, 2*len(List))
	for i := range List {
		for _, n := range List[i].Names {
			m[n] = &List[i]
		}
	}
	return m
}()

// Lookup returns the entry that prices model, by this rule, in order:
//
//  1. the name exactly (case-sensitive, as providers name models);
//  2. the name without a provider prefix, up to its last '/'
//     (openai/gpt-5, anthropic/claude-sonnet-4.5: OpenRouter's and
//     other gateways' names);
//  3. either of those without a dated-snapshot suffix (gpt-5-2025-08-07
//     → gpt-5, claude-sonnet-4-5-20250929 → claude-sonnet-4-5,
//     claude-opus-4-1@20250805 → claude-opus-4-1).
//
// Nothing else matches: gpt-5-mini is not gpt-5, and an unknown model is
// not priced (ok false).
func Lookup(model string) (e Entry, matched string, ok bool) {
	cands := []string{model}
	if i := strings.LastIndexByte(model, '/'); i >= 0 && i+1 < len(model) {
		cands = append(cands, model[i+1:])
	}
	for _, c := range cands {
		if p, ok := index[c]; ok {
			return *p, c, true
		}
	}
	for _, c := range cands {
		if base := withoutSnapshot(c); base != c {
			if p, ok := index[base]; ok {
				return *p, base, true
			}
		}
	}
	return Entry{}, "", false
}
