// Command caddy runs Caddy with the llm_relay and llm_simulator modules
// compiled in, so `go run ./cmd/caddy run --config examples/demo.Caddyfile`
// works without xcaddy.
package main

import (
	_ "time/tzdata"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/llmrelay/caddy-llm-relay"
)

func main() {
	caddycmd.Main()
}
