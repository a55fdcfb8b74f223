// Package prices is the relay's built-in price list: what the models users
// name most cost, in US dollars per million tokens, each entry with the
// public page its figures were read from and the date they were taken.
//
// The list is data (list.go); Lookup finds a model's entry by a fixed,
// documented rule (see Lookup). It is used only where no `price` block of
// the config matches, and can be switched off (`builtin_prices off`).
//
// Decisions:
//   - A model whose price no stored public page gave is left out rather
//     than guessed: an unpriced model shows as such (no cost), never as a
//     silently wrong figure.
//   - An entry without a cached-input (or cache-write) figure on its page
//     leaves it 0, which prices those tokens as input: an overestimate, the
//     safe side for budgets.
//   - Tiered prices (Gemini 2.5 Pro above 200k prompt tokens, long-context
//     Claude) are not modelled: the entry is the standard (shorter prompt)
//     tier, so very long prompts cost more than the list says.
//
// Nothing here reads the clock or imports Caddy.
package prices
