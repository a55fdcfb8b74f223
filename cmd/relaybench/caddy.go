package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/caddyserver/caddy/v2"

	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile" // registers the caddyfile adapter
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/llmrelay/caddy-llm-relay"
	"github.com/llmrelay/caddy-llm-relay/cmd/internal/inproc"
)

// caddyfileTemplate is the benchmark's Caddy config. Everything listens on
// 127.0.0.1 only; the admin API is off and nothing is written to disk.
// Logging is at -log-level, INFO by default as in any Caddy: the relay
// then logs one line per request, which reverse_proxy does not, and that
// line is part of its cost.
const caddyfileTemplate = `{
	admin off
	persist_config off
	auto_https off
	skip_install_trust
	default_bind 127.0.0.1
	grace_period 2s
	log {
		output stderr
		level %[10]s
	}
}

# sim: a small fixed completion, immediate unless -tokens-per-sec is set
http://:%[1]d {
	bind 127.0.0.1
	llm_simulator {
		seed 1
		reasoning_tokens %[4]d
		content_tokens %[5]d
		pattern steady %[6]s
		ttfb 0
	}
}

# relay: llm_relay in front of sim
http://:%[2]d {
	bind 127.0.0.1
	llm_relay {
		upstream sim http://127.0.0.1:%[1]d/v1
		model sim-reasoner {
			to sim
		}
	}
}

# reverse_proxy: the baseline, a plain proxy in front of sim
http://:%[3]d {
	bind 127.0.0.1
	reverse_proxy 127.0.0.1:%[1]d
}

# relay+shadow (-shadow): the relay with every request also copied to a
# slow shadow simulator (200 ms to first byte), for comparison with relay
http://:%[7]d {
	bind 127.0.0.1
	llm_relay {
		upstream sim http://127.0.0.1:%[1]d/v1
		upstream slow http://127.0.0.1:%[8]d/v1
		model sim-reasoner {
			to sim
			shadow slow 100 {
				max_concurrent 16
			}
		}
	}
}

# relay-claude (-translate, -translate-responses): the relay in front of
# sim as an Anthropic upstream (OpenAI clients' requests are translated),
# and for Responses clients as a Chat provider (translated) and as OpenAI
# itself (native)
http://:%[9]d {
	bind 127.0.0.1
	llm_relay {
		upstream sim http://127.0.0.1:%[1]d/v1 {
			api anthropic
		}
		upstream simchat http://127.0.0.1:%[1]d/v1 {
			api chat
		}
		upstream native http://127.0.0.1:%[1]d/v1
		model sim-reasoner {
			to sim
		}
		model sim-chat {
			to simchat sim-reasoner
		}
		model sim-native {
			to native sim-reasoner
		}
	}
}

http://:%[8]d {
	bind 127.0.0.1
	llm_simulator {
		seed 2
		reasoning_tokens %[4]d
		content_tokens %[5]d
		pattern steady %[6]s
		ttfb 200ms
	}
}
`

// siteURLs are the base URLs of the three sites.
type siteURLs struct {
	sim, relay, proxy, shadowed, claude string
}

// startCaddy picks three free ports, adapts the Caddyfile and loads it.
func startCaddy(o options) (siteURLs, error) {
	ports, err := inproc.FreePorts(6)
	if err != nil {
		return siteURLs{}, err
	}
	src := fmt.Sprintf(caddyfileTemplate, ports[0], ports[1], ports[2], o.reasoningTokens, o.contentTokens,
		strconv.FormatFloat(o.tokensPerSec, 'f', -1, 64), ports[3], ports[4], ports[5], o.logLevel)
	cfg, err := inproc.Adapt(src, "relaybench.Caddyfile", os.Stderr)
	if err != nil {
		return siteURLs{}, err
	}
	if o.printConfig {
		fmt.Printf("%s\n%s\n", src, cfg)
		os.Exit(0)
	}
	if err := caddy.Load(cfg, true); err != nil {
		return siteURLs{}, fmt.Errorf("loading the config: %w", err)
	}
	base := func(p int) string { return fmt.Sprintf("http://127.0.0.1:%d", p) }
	return siteURLs{sim: base(ports[0]), relay: base(ports[1]), proxy: base(ports[2]), shadowed: base(ports[3]), claude: base(ports[5])}, nil
}

var stopOnce sync.Once

// stopCaddy stops the running config; it is safe to call more than once.
func stopCaddy() {
	stopOnce.Do(func() {
		if err := caddy.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "relaybench: stopping Caddy: %v\n", err)
		}
	})
}
