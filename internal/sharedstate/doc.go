// Package sharedstate holds the pure parts of a fleet's shared state on
// Redis (the root package's fleet.go): what the relay may take from a
// Redis that other programs, older relays and instances with wrong
// clocks also write under its prefix.
//
//   - Script: the one Lua script every key goes through. It writes this
//     instance's fields and reads the hash back within bounds (so many
//     fields, so many bytes a name, a value and the whole), and never
//     touches a key of another type; or it claims a budget alert and
//     reads back, bounded, who holds the claim. DecodeHash and
//     DecodeClaim read its replies; FromMap applies the same bounds to a
//     plain HGETALL, for a Redis that refuses scripts.
//   - The values' checks: ParseSpend, ParseFigures (key limits),
//     CheckCanary, CheckEjection, IsInstanceID; each returns why a value
//     is not one a relay writes, in words for the log and the status view.
//   - Liveness: whether another instance's requests in flight still count,
//     judged by when this instance saw its figures change, on its own
//     clock, so another's clock (ahead or behind) cannot hold slots.
//   - Problems: the keys and fields skipped, each named once until it
//     changes or goes.
//
// Nothing here imports Caddy or Redis; clocks are parameters.
package sharedstate
