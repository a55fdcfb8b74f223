package llmrelay

// The llm_simulator module lives in its own package so it can be built
// and tested without the relay, but anyone who imports the relay (as
// cmd/caddy does) gets it registered too, the way caddy-l4 pulls in its
// sub-modules.
import _ "github.com/llmrelay/caddy-llm-relay/simulator"
