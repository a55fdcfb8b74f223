package main

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"

	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile" // registers the caddyfile adapter
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/llmrelay/caddy-llm-relay"
	"github.com/llmrelay/caddy-llm-relay/cmd/internal/inproc"
	"github.com/llmrelay/caddy-llm-relay/internal/chaos"
)

// The relay's timeouts, short so the suite finishes; the client's own
// deadlines are derived from them.
const (
	firstByteTimeout  = 2 * time.Second
	tryDuration       = 8 * time.Second
	streamIdleTimeout = 3 * time.Second
	heartbeat         = time.Second
	clientMargin      = 2 * time.Second
)

// chaosCase is one kind of request the chaos workers send: a model alias
// of the relay whose chain exercises one upstream behaviour.
type chaosCase struct {
	name  string
	alias string
	path  string // after /v1/
	chain string // the model block's body
	want  chaos.Want
	about string // what it exercises, for -list

	// dialect: the client's API (with its path); its streams are checked
	// as that API's clients read them (chaos.CheckStream). streamOnly:
	// every request streams.
	dialect    chaos.Dialect
	streamOnly bool
}

// cases returns every chaos case. Chains with a fallback to sim test
// pre-commit failures (must end complete, invisibly); single-target
// chains test failures after the commit point or of the last resort.
func cases() []chaosCase {
	to := func(b chaos.Behaviour) string { return "to bad " + string(b) }
	const sim = "to sim sim-reasoner"
	return append([]chaosCase{
		{name: "stall-first", chain: lines(to(chaos.StallFirst), sim), about: "200 and headers, then silence before any data; fallback sim"},
		{name: "stall-after", chain: to(chaos.StallAfter), want: chaos.Want{BodyAbort: true}, about: "stream: 2 events then silence; non-stream: 200 and half a body then silence"},
		{name: "cr-only", chain: to(chaos.CROnly), about: "a complete stream whose lines end in bare CR"},
		{name: "cr-tail", chain: to(chaos.CRTail), about: `an event ending "\n\r", then the connection drops`},
		{name: "non-sse", chain: lines(to(chaos.NonSSE), sim), about: "200 application/json to a stream request; fallback sim"},
		{name: "redirect", chain: lines(to(chaos.Redirect), sim), about: "302 with an internal Location; fallback sim"},
		{name: "garbage", chain: lines(to(chaos.Garbage), sim), about: "bytes that are not HTTP; fallback sim"},
		{name: "drop", chain: to(chaos.Drop), want: chaos.Want{BodyAbort: true}, about: "2 events (or half a body), then the connection drops"},
		{name: "eof", chain: to(chaos.EOFNoDone), about: "stream: 2 events, then a clean end without [DONE]"},
		{name: "429", chain: lines(to(chaos.RateLimited), sim), about: "429 with Retry-After; fallback sim"},
		{name: "429-only", chain: to(chaos.RateLimited), want: chaos.Want{ErrorStatus: 429, RetryAfter: true},
			about: "429 with Retry-After from the only target: the client must get 429 with Retry-After"},
		{name: "503-storm", chain: lines(to(chaos.Storm503), sim), about: "503 in storms (half of every 4 s); fallback sim"},
		{name: "refused", chain: lines("to dead", sim), about: "a target on a closed port; fallback sim"},
		{name: "responses", path: "responses", chain: to(chaos.Responses), want: chaos.Want{Complete: true},
			about: "a complete /v1/responses answer (its stream ends without [DONE])"},
		{name: "budget", chain: lines("reasoning_budget 4 failover", sim, "to plain sim-plain"),
			about: "reasoning over a 4-token budget: failover on the committed stream"},
		{name: "shadow", chain: lines(sim, "shadow bad stall-first 100 {\n\t\t\t\tmax_concurrent 4\n\t\t\t}"),
			about: "every request copied to a stalling shadow target"},
	}, contCases()...)
}

func lines(ls ...string) string { return strings.Join(ls, "\n\t\t\t") }

// ports are the listening ports of the run.
type ports struct {
	sim, relay, chaos, proxy, bad, dead, resume int
}

// caddyfile renders the config of generation gen. Every generation
// differs (a response header), so each load is a real reload, as an
// admin API POST /load of an edited config would be.
func caddyfile(p ports, gen int, cs []chaosCase, rcs []resumeCase, logOutput, logLevel string) string {
	var models strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&models, "\t\tmodel %s {\n\t\t\t%s\n\t\t}\n", c.alias, c.chain)
	}
	common := fmt.Sprintf(`		failover {
			first_byte_timeout %s
			try_duration %s
			stream_idle_timeout %s
			backoff 50ms 200ms
		}
		smoothing off {
			heartbeat %s
		}
`, firstByteTimeout, tryDuration, streamIdleTimeout, heartbeat)
	return fmt.Sprintf(`{
	admin off
	persist_config off
	auto_https off
	skip_install_trust
	default_bind 127.0.0.1
	grace_period 2s
	log {
		output %[7]s
		level %[15]s
	}
}

# sim: the healthy upstream; /plain/* answers without reasoning
http://127.0.0.1:%[1]d {
	bind 127.0.0.1
	header X-Chaos-Gen %[6]d
	handle /plain/* {
		llm_simulator {
			seed 2
			reasoning_tokens 0
			content_tokens 24
			pattern steady 400
			ttfb 0
		}
	}
	handle {
		llm_simulator {
			seed 1
			reasoning_tokens 8
			content_tokens 24
			pattern steady 400
			ttfb 0
		}
	}
}

# relay: llm_relay in front of sim, for the reload comparison
http://127.0.0.1:%[2]d {
	bind 127.0.0.1
	header X-Chaos-Gen %[6]d
	llm_relay {
		upstream sim http://127.0.0.1:%[1]d/v1
%[13]s		model healthy {
			to sim sim-reasoner
		}
	}
}

# chaos: the same relay config, plus the misbehaving upstream, a closed
# port and one model alias per chaos case (its own site, so the chaos
# load does not change the reload comparison's connections)
http://127.0.0.1:%[14]d {
	bind 127.0.0.1
	header X-Chaos-Gen %[6]d
	llm_relay {
		upstream sim http://127.0.0.1:%[1]d/v1
		upstream plain http://127.0.0.1:%[1]d/plain/v1
		upstream bad http://127.0.0.1:%[4]d/v1
		upstream dead http://127.0.0.1:%[5]d/v1
		upstream conta http://127.0.0.1:%[4]d/a/v1 {
			api chat
		}
		upstream contb http://127.0.0.1:%[4]d/b/v1 {
			api chat
			continue_with prefill
		}
		upstream contc http://127.0.0.1:%[4]d/c/v1 {
			api chat
		}
%[13]s		model healthy {
			to sim sim-reasoner
		}
%[12]s	}
}

# reverse_proxy: the baseline for reload failures, a plain proxy in front
# of sim. Its idle upstream connections time out after 3s: on a reload
# Caddy cleans up the old config while its requests still run, and the
# connections those requests return to the cleaned-up transport would
# otherwise idle for keepalive's default 2m and hide the relay's own
# leaks in the after check.
http://127.0.0.1:%[3]d {
	bind 127.0.0.1
	header X-Chaos-Gen %[6]d
	reverse_proxy 127.0.0.1:%[1]d {
		transport http {
			keepalive 3s
		}
	}
}
`, p.sim, p.relay, p.proxy, p.bad, p.dead, gen, logOutput,
		firstByteTimeout, tryDuration, streamIdleTimeout, heartbeat, models.String(), common, p.chaos, logLevel) +
		resumeSite(p, gen, rcs, common)
}

// loader adapts and loads generations of the config.
type loader struct {
	ports     ports
	cases     []chaosCase
	resumes   []resumeCase
	logOutput string
	logLevel  string

	mu      sync.Mutex
	gen     int
	reloads []span // every load after the first
}

type span struct{ start, end time.Time }

// load adapts and loads the next generation.
func (l *loader) load() error {
	l.mu.Lock()
	l.gen++
	gen := l.gen
	l.mu.Unlock()
	src := caddyfile(l.ports, gen, l.cases, l.resumes, l.logOutput, l.logLevel)
	cfg, err := inproc.Adapt(src, "relaychaos.Caddyfile", nil)
	if err != nil {
		return err
	}
	// The span is recorded before the load starts, so failures seen
	// while it runs are attributed to it (a zero end means "running").
	l.mu.Lock()
	i := len(l.reloads)
	l.reloads = append(l.reloads, span{start: time.Now()})
	l.mu.Unlock()
	err = caddy.Load(cfg, true)
	l.mu.Lock()
	l.reloads[i].end = time.Now()
	if gen == 1 {
		l.reloads = l.reloads[:0] // the first load is a start, not a reload
	}
	l.mu.Unlock()
	if err != nil {
		return fmt.Errorf("loading config generation %d: %w", gen, err)
	}
	return nil
}

// reloadSlack widens a reload's span past caddy.Load's return: on a
// reload (not on exit) Caddy does not wait for the old servers'
// Shutdown, which goes on for up to grace_period (2s here), closing each
// connection as its request ends; a client that reuses one sees EOF.
const reloadSlack = 2*time.Second + 500*time.Millisecond

// overlaps reports whether a reload ran between from and to.
func (l *loader) overlaps(from, to time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.reloads) - 1; i >= 0; i-- {
		r := l.reloads[i]
		if r.end.IsZero() {
			r.end = to // still running
		}
		if !r.start.After(to) && !r.end.Add(reloadSlack).Before(from) {
			return true
		}
		if r.end.Add(reloadSlack).Before(from) {
			break
		}
	}
	return false
}

func (l *loader) stats() (n int, mean, maxDur time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var sum time.Duration
	for _, r := range l.reloads {
		d := r.end.Sub(r.start)
		sum += d
		maxDur = max(maxDur, d)
	}
	if len(l.reloads) > 0 {
		mean = sum / time.Duration(len(l.reloads))
	}
	return len(l.reloads), mean, maxDur
}
