// Package chaos holds the pure parts of the chaos suite (cmd/relaychaos):
// the misbehaving upstream's behaviours, a strict LF-based SSE parser of
// the kind the official SDKs use, the classifier that sorts every client
// response into complete, explicit error, documented abort, reload
// failure, hang, silent truncation or malformed, and the process resource
// snapshot (goroutines, open fds, RSS) with its baseline check.
//
// Nothing here imports Caddy; clocks, timeouts and limits are parameters,
// so every rule is unit-tested and the parser is fuzzed.
package chaos
