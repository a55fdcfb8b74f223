// Package usage estimates token counts, prices requests, and keeps per-key
// spend with budgets and threshold alerts.
//
//   - EstimateTokens and EstimatePrompt: a cheap, allocation-free estimate of
//     how many tokens an OpenAI-style BPE tokenizer (o200k_base, and roughly
//     cl100k_base for Latin text) would produce, for requests whose upstream
//     reports no usage.
//   - Price, Usage, PriceTable, ParseUsage: per-model prices and the cost of
//     one response's usage, with OpenAI's token semantics.
//   - Ledger: per-key spend in UTC calendar periods (day or month), budgets
//     that block a key once spent, and 50/80/100 % alerts.
//
// Nothing here reads the clock: every time-dependent call takes now.
package usage
