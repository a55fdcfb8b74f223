// Package llmrelay is a Caddy HTTP handler that relays LLM API requests
// (OpenAI Chat Completions and Anthropic Messages, translated between them
// where a chain crosses providers) to an ordered chain of upstream
// providers, failing over invisibly until the response is committed to the
// client.
package llmrelay

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/llmrelay/caddy-llm-relay/internal/usage"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(Relay{})
}

// defaultMaxBody is the request body limit when max_body is not set.
const defaultMaxBody = 16 << 20

// Relay is the `llm_relay` handler: one endpoint, speaking OpenAI's and
// Anthropic's APIs, in front of several providers. A request to
// `/v1/<rest>` whose JSON body names a `model` is sent to the first target
// of that model's chain that answers;
// failures before the first byte reaches the client move on to the next
// target invisibly.
//
// Placeholders it sets, for the access log and later handlers:
//
// Placeholder | Description
// ------------|-------------
// `{http.llm_relay.upstream}` | name of the upstream that answered
// `{http.llm_relay.model}` | model name sent to that upstream
// `{http.llm_relay.attempts}` | number of upstream attempts made
// `{http.llm_relay.key}` | name of the client key used
// `{http.llm_relay.error}` | code of the relay's own error response, if any
type Relay struct {
	// `key <token> [<name>]`: client keys. Repeatable. Without any key the
	// relay is open to anyone who can reach it (logged once at load).
	Keys []ClientKey `json:"keys,omitempty"`

	// `max_body <size>`: the largest request body accepted, e.g. `16MiB`;
	// larger bodies get 413 request_too_large. Default: 16MiB.
	MaxBody int64 `json:"max_body,omitempty"`

	// `upstream <name> <base_url> { ... }`: the providers. Repeatable.
	Upstreams []*Upstream `json:"upstreams,omitempty"`

	// `model <alias> { to ... }`: the model aliases and their failover
	// chains. Repeatable.
	Models []*ModelRoute `json:"models,omitempty"`

	// `failover { ... }`: when and how often to move to the next target.
	Failover *Failover `json:"failover,omitempty"`

	// `smoothing [<mode>] { ... }`: the SSE re-pacer and heartbeats for
	// streaming answers. Without it streams are forwarded as they come,
	// with a heartbeat after 15s of silence.
	Smoothing *Smoothing `json:"smoothing,omitempty"`

	// `slo { ... }`: the service level every target must meet to keep its
	// place in its chain (a model block may override it).
	SLO *SLO `json:"slo,omitempty"`

	// `reasoning_budget <tokens> [<action>]`: see ReasoningBudget.
	ReasoningBudget *ReasoningBudget `json:"reasoning_budget,omitempty"`

	// `adaptive_effort { ... }`: see AdaptiveEffort.
	AdaptiveEffort *AdaptiveEffort `json:"adaptive_effort,omitempty"`

	// `reasoning_field reasoning_content|reasoning|both|inline`: where
	// OpenAI Chat clients get reasoning text, in stream deltas and
	// non-stream messages, whatever the provider sent (DeepSeek and
	// SGLang send `reasoning_content`, vLLM, OpenRouter and Ollama
	// `reasoning`; a Claude target's thinking and tagged reasoning arrive
	// as `reasoning_content`): that one name; `both` names with the same
	// text; or `inline`, back in content between <think> tags. A model
	// block may override it. Default: as the upstream sent it (tagged
	// reasoning as `reasoning_content`). See docs/reasoning.md.
	ReasoningField string `json:"reasoning_field,omitempty"`

	// `price <model> { ... }`: the price table for cost per request and
	// key budgets. Keyed by model name (or prefix ending in `*`).
	Prices map[string]Price `json:"prices,omitempty"`

	// `builtin_prices on|off`: whether a model no price block matches is
	// priced from the relay's built-in list (the GPT, Claude, Gemini and
	// DeepSeek models users name most, each with its source and date: see
	// docs/usage.md). Any price block that matches wins. Default: on.
	BuiltinPrices *bool `json:"builtin_prices,omitempty"`

	// `region <code>`: where this edge runs, e.g. `eu-west`, as
	// GET /v1/ping reports it so clients can compare edges. Default: none.
	Region string `json:"region,omitempty"`

	// `state off|local|redis ...`: where spend, canary roll-outs and
	// ejections are kept across restarts, and whether a fleet shares
	// them. Default: local (Caddy's storage). See StateConfig.
	State *StateConfig `json:"state,omitempty"`

	// `capacity { ... }`: what happens as targets with max_concurrent
	// fill up (spill-over, degradation, queueing and shedding). Default:
	// the stages at 70, 85 and 95 %, no queueing. See Capacity.
	Capacity *Capacity `json:"capacity,omitempty"`

	// `resume { ... }`: resumable streams. Every committed stream is
	// journaled as its client is sent it, so a client whose connection
	// broke resumes it from a cursor, a retry re-attaches to it instead of
	// paying for a second generation, and a generation outlives its
	// client for a while. Default: off. See Resume and docs/resume.md.
	Resume *Resume `json:"resume,omitempty"`

	// `trace_content on|off`: whether the spans of relayed requests (with
	// Caddy's `tracing` on) record the messages: the request's as
	// gen_ai.input.messages, the answer's reasoning, text and tool calls
	// (as the client was sent them) as gen_ai.output.messages, each at
	// most 16 KiB. Prompts and answers
	// are often what traces must not hold: off by default. See
	// docs/tracing.md.
	TraceContent bool `json:"trace_content,omitempty"`

	logger      *zap.Logger
	keys        keyring
	upstreams   map[string]*upstreamRuntime
	routes      map[string]*route
	wildcard    *route
	modelList   []byte // the GET /v1/models answer, built once
	triggers    triggerSet
	backoff     backoffPolicy
	attempts    int
	firstByte   time.Duration
	tryDur      time.Duration
	streamIdle  time.Duration
	poolKeys    []poolKey // references held in the health, canary and shadow pools
	prices      *usage.PriceTable
	keyPeriods  map[string]string // key name → budget period, for keys with a budget
	keyBudgets  map[string]usage.Budget
	keyLimits   map[string]*keyLimits // key name → its rpm and tpm buckets
	budgetsOnce *sync.Once
	provisioned time.Time
	probes      []*prober
	life        context.Context // the config's lifetime: cancelled at Cleanup (see lifetime.go)
	endLife     context.CancelFunc
	inflight    *inflight   // requests and shadow copies of this config in flight
	durable     bool        // attached to the durable store (durable.go)
	fleet       *fleetState // the shared state (state redis), or nil
	fleetKey    string      // its key in fleetPool
	capacity    capacityPolicy
	resume      *resumer         // nil: resume off (resume.go)
	resumeKey   string           // its journal store's key in resumePool
	resumePool  *caddy.UsagePool // localStores or redisStores

	// Cost (cost.go): each key name's reasoning token budget (names with
	// one), the (upstream, model) of every configured target, the only
	// model labels of the cost metric, and the price of every configured
	// target's (model, alias), resolved once (priceOf).
	reasoningBudgets map[string]usage.ReasoningBudget
	targetModels     map[[2]string]bool
	targetPrices     map[[2]string]targetPrice
}

// CaddyModule returns the Caddy module information.
func (Relay) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_relay",
		New: func() caddy.Module { return new(Relay) },
	}
}

// Provision resolves secrets, loads transports and compiles the routes.
func (h *Relay) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	h.life, h.endLife = context.WithCancel(ctx)
	h.inflight = new(inflight)
	repl := caddy.NewReplacer()
	if err := h.checkConfig(); err != nil {
		return err
	}

	if h.MaxBody == 0 {
		h.MaxBody = defaultMaxBody
	}
	var err error
	if h.keys, err = newKeyring(h.Keys, repl); err != nil {
		return err
	}
	if h.keys.open() {
		h.logger.Warn("no client keys configured: the relay is open to every client that can reach it")
	}

	h.upstreams = make(map[string]*upstreamRuntime, len(h.Upstreams))
	seen := make(map[string]bool, len(h.Upstreams))
	for i, u := range h.Upstreams {
		if u == nil {
			return fmt.Errorf("upstream %d: a name is required; give each upstream a unique name", i+1)
		}
		if err := checkUpstreamName(u.Name, seen); err != nil {
			return fmt.Errorf("upstream %d: %w", i+1, err)
		}
		seen[u.Name] = true
		rt, err := provisionUpstream(ctx, u, repl)
		if err != nil {
			return fmt.Errorf("upstream %q: %w", u.Name, err)
		}
		h.upstreams[u.Name] = rt
	}

	if h.capacity, err = resolveCapacity(h.Capacity); err != nil {
		return err
	}

	// The saved state first: the routes' canaries and targets adopt it
	// as they are created.
	durable.attach(ctx, h.logger, h.State != nil && h.State.Backend == "off")
	h.durable = true
	if err := h.compileRoutes(); err != nil {
		return err
	}
	h.clearUnjudgedReasoning()
	if err := h.compileFailover(); err != nil {
		return err
	}
	if err := h.compileSpend(); err != nil {
		return err
	}
	if err := h.compileKeyLimits(); err != nil {
		return err
	}
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	if err := h.attachFleet(repl); err != nil {
		return err
	}
	if h.fleet != nil {
		h.fleet.register(h)
	}
	h.provisionResume() // after the fleet: state redis journals in Redis
	h.startProbes(ctx)
	h.provisioned = time.Now()
	registerRelay(h)
	h.logger.Info("llm_relay ready",
		zap.Int("upstreams", len(h.upstreams)),
		zap.Int("models", len(h.Models)),
		zap.Int("client_keys", len(h.Keys)),
		zap.String("max_body", humanize.IBytes(uint64(h.MaxBody))))
	return nil
}

// compileFailover applies the failover block's defaults (checkConfig has
// checked its values).
func (h *Relay) compileFailover() error {
	f := h.Failover
	if f == nil {
		f = new(Failover)
	}
	on := f.On
	if len(on) == 0 {
		on = defaultFailoverOn
	}
	var err error
	if h.triggers, err = parseTriggers(on); err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	if h.backoff, err = resolveBackoff(f); err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	h.attempts = f.Attempts
	h.firstByte = durationOr(f.FirstByteTimeout, defaultFirstByteTimeout)
	h.tryDur = durationOr(f.TryDuration, defaultTryDuration)
	h.streamIdle = durationOr(f.StreamIdleTimeout, defaultStreamIdle)
	return nil
}

func durationOr(d caddy.Duration, def time.Duration) time.Duration {
	if d > 0 {
		return time.Duration(d)
	}
	return def
}

// Validate checks the provisioned configuration as a whole; the values
// of each block were checked at Provision (checkConfig, compileRoutes).
func (h *Relay) Validate() error {
	if len(h.Upstreams) == 0 {
		return fmt.Errorf("at least one upstream is required; add `upstream <name> <base_url>` (JSON: upstreams)")
	}
	if len(h.Models) == 0 {
		return fmt.Errorf("at least one model route is required; add `model <alias> { to <upstream> }` (JSON: models)")
	}
	return nil
}

// Cleanup ends the config's background work (probes, shadow copies) and
// closes its idle upstream connections. In-flight requests keep running:
// Caddy cleans up an old config while its streams may still be served;
// their connections are closed when the last of them ends.
func (h *Relay) Cleanup() error {
	unregisterRelay(h)
	if h.durable {
		// Saved before this config lets go of its canaries and targets:
		// at shutdown it is the last to hold them.
		durable.detach()
	}
	if h.endLife != nil {
		h.endLife()
	}
	for _, p := range h.probes {
		p.stop()
	}
	for _, pk := range h.poolKeys {
		_, _ = pk.pool.Delete(pk.key)
	}
	for _, u := range h.upstreams {
		u.cleanup()
	}
	if h.fleet != nil {
		_, _ = fleetPool.Delete(h.fleetKey)
	}
	if h.resumePool != nil {
		_, _ = h.resumePool.Delete(h.resumeKey)
	}
	h.inflight.retire(func() {
		for _, u := range h.upstreams {
			u.closeIdle()
		}
	})
	return nil
}

// ServeHTTP relays the request. The relay is terminal, except for CORS
// preflights: an OPTIONS request carries no credentials by design, so it
// goes to the next handler, where Caddy's own `header` and `respond`
// answer it (see the CORS snippet in docs/configuration.md).
func (h *Relay) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if r.Method == http.MethodOptions {
		return next.ServeHTTP(w, r)
	}
	h.inflight.enter()
	defer h.inflight.leave()
	if gc, prefix := geminiCallFor(r); gc != nil {
		h.serveGemini(w, r, gc, prefix) // gemini.go
		return nil
	}
	if strings.Contains(r.URL.Path, "/v1/"+restStreams) {
		r = markGeminiResume(r) // gemini.go
	}
	h.serve(w, r)
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Relay)(nil)
	_ caddy.Validator             = (*Relay)(nil)
	_ caddy.CleanerUpper          = (*Relay)(nil)
	_ caddyhttp.MiddlewareHandler = (*Relay)(nil)
)
