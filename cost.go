package llmrelay

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/llmrelay/caddy-llm-relay/internal/prices"
	"github.com/llmrelay/caddy-llm-relay/internal/sharedstate"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// Cost as operators read it: which price applies to a model (a price
// block, else the built-in list, else none), the cost of a whole answer
// in its X-Relay-Cost-USD header and of a stream in an SSE comment at its
// end, the cost by alias and model in a metric, and a reasoning token
// budget per key and period, shared by a fleet like spend.

// Where a model's price comes from.
const (
	priceConfig  = "config"  // a price block
	priceBuiltin = "builtin" // the built-in list (internal/prices)
	priceNone    = "none"    // no price: no cost is shown or counted
)

// priceInfo is which price applies to a model and where it comes from,
// as the status view shows it for each target.
type priceInfo struct {
	From string `json:"from"` // config, builtin or none
	// Match is the price block's model or pattern (ending in *), or the
	// built-in entry's name, that matched.
	Match string `json:"match,omitempty"`
	// USD per million tokens (cached_input and cache_write 0: as input).
	Input       float64 `json:"input,omitempty"`
	Output      float64 `json:"output,omitempty"`
	CachedInput float64 `json:"cached_input,omitempty"`
	CacheWrite  float64 `json:"cache_write,omitempty"`
	// Source and Taken, for a built-in price: the public page its figures
	// were read from, and when (YYYY-MM-DD).
	Source string `json:"source,omitempty"`
	Taken  string `json:"taken,omitempty"`
}

// builtinPricesOn reports whether the built-in list prices what no price
// block matches (builtin_prices, default on).
func (h *Relay) builtinPricesOn() bool { return h.BuiltinPrices == nil || *h.BuiltinPrices }

// priceFor is the price of a model sent upstream: the price table's for
// the model, else for the alias (a price block names either), else the
// built-in list's for the model (prices.Lookup's rule), else none.
func (h *Relay) priceFor(model, alias string) (usage.Price, priceInfo) {
	for _, name := range [2]string{model, alias} {
		if p, m, ok := h.prices.Match(name); ok {
			return p, priceInfo{From: priceConfig, Match: m, Input: p.Input, Output: p.Output,
				CachedInput: p.CachedInput, CacheWrite: p.CacheWrite}
		}
	}
	if h.builtinPricesOn() {
		if e, m, ok := prices.Lookup(model); ok {
			p := usage.Price{Input: e.Input, Output: e.Output, CachedInput: e.CachedInput, CacheWrite: e.CacheWrite}
			return p, priceInfo{From: priceBuiltin, Match: m, Input: p.Input, Output: p.Output,
				CachedInput: p.CachedInput, CacheWrite: p.CacheWrite, Source: e.Source, Taken: e.Taken}
		}
	}
	return usage.Price{}, priceInfo{From: priceNone}
}

// compileCost sets up the key names' reasoning budgets and the cost
// metric's model labels (after compileRoutes; checkConfig has checked the
// keys).
func (h *Relay) compileCost() error {
	var err error
	if h.reasoningBudgets, err = keyReasoningBudgets(h.Keys); err != nil {
		return err
	}
	for name, b := range h.reasoningBudgets {
		if b.Limit > 0 {
			reasoningKeys.Store(name, true)
		}
	}
	h.targetModels = map[[2]string]bool{}
	h.targetPrices = map[[2]string]targetPrice{}
	add := func(rt *route, alias string) {
		ts := rt.targets
		if c := rt.canary; c != nil {
			ts = append(ts[:len(ts):len(ts)], c.target)
		}
		for _, t := range ts {
			h.targetModels[[2]string{t.up.name, t.model}] = true
			if t.model != "" { // else the client's model: priced per request
				p, info := h.priceFor(t.model, alias)
				h.targetPrices[[2]string{t.model, alias}] = targetPrice{p, info.From != priceNone}
			}
		}
	}
	for _, rt := range h.routesInOrder() {
		add(rt, rt.alias)
		if rt.handoff != nil {
			add(rt.handoff.reason, rt.alias)
		}
	}
	return nil
}

// targetPrice is a configured target's price (priced false: none).
type targetPrice struct {
	price  usage.Price
	priced bool
}

// reasoningKeys are the key names that had a reasoning budget in a config
// this process loaded: a fleet shares their reasoning tokens.
var reasoningKeys sync.Map

// keyReasoningBudgets merges the key lines' reasoning budgets by name, as
// keyBudgets does budgets: every name has an entry (Limit 0: none), a
// budget on one line applies to the name, two different ones fail.
func keyReasoningBudgets(keys []ClientKey) (map[string]usage.ReasoningBudget, error) {
	out := make(map[string]usage.ReasoningBudget, len(keys))
	for i, k := range keys {
		name := keyName(keys, i)
		b := usage.ReasoningBudget{Limit: k.ReasoningBudget, Period: usage.Day}
		if k.ReasoningBudgetPeriod == "month" {
			b.Period = usage.Month
		}
		prev, seen := out[name]
		switch {
		case !seen || prev.Limit == 0:
			out[name] = b
		case b.Limit == 0:
		case b != prev:
			return nil, fmt.Errorf("key %q: reasoning_budget %d per %s conflicts with %d per %s on an earlier key of the same name; keys of one name share one reasoning budget: give the same on each line, or on one line only",
				name, b.Limit, b.Period, prev.Limit, prev.Period)
		}
	}
	return out, nil
}

// checkReasoningBudget checks one key line's reasoning budget.
func (k ClientKey) checkReasoningBudget(name string) error {
	switch {
	case k.ReasoningBudget < 0:
		return fmt.Errorf("key %q: reasoning_budget %d is negative; give a positive number of tokens, or leave it out for none", name, k.ReasoningBudget)
	case k.ReasoningBudgetPeriod != "" && k.ReasoningBudgetPeriod != "day" && k.ReasoningBudgetPeriod != "month":
		return fmt.Errorf("key %q: reasoning_budget_period %q is not a period; write day or month (Caddyfile: `reasoning_budget <tokens> per day|month`)", name, k.ReasoningBudgetPeriod)
	case k.ReasoningBudgetPeriod != "" && k.ReasoningBudget == 0:
		return fmt.Errorf("key %q: reasoning_budget_period %q without a reasoning_budget; give reasoning_budget in tokens, or remove reasoning_budget_period", name, k.ReasoningBudgetPeriod)
	}
	return nil
}

// overReasoningBudget answers 429 reasoning_budget_exceeded for a key
// whose name has used up its reasoning budget (the fleet's use, with
// state redis), until the period ends.
func (h *Relay) overReasoningBudget(key string, now time.Time) *apiError {
	if b := h.reasoningBudgets[key]; b.Limit == 0 {
		return nil
	}
	h.applyBudgets()
	s, ok := ledger.Reasoning(key, now)
	if !ok || !s.Blocked {
		return nil
	}
	return &apiError{Status: http.StatusTooManyRequests, Type: "insufficient_quota", Code: "reasoning_budget_exceeded",
		Message: "The key '" + key + "' has used up its " + s.Budget.Period.Adjective() + " reasoning budget of " +
			strconv.FormatInt(s.Budget.Limit, 10) + " tokens on this relay; it renews at the start of the next " +
			s.Budget.Period.String() + " (UTC).",
		RetryAfter: s.End.Sub(now)}
}

// costHeader carries a whole answer's cost; costEstimatedHeader says the
// usage it was priced from is the relay's estimate.
const (
	costHeader          = "X-Relay-Cost-USD"
	costEstimatedHeader = "X-Relay-Cost-Estimated"
)

// formatCost writes a cost in US dollars as X-Relay-Cost-USD and the
// stream comment give it: a plain decimal (no exponent), to the
// nano-dollar the ledger keeps, trailing zeros dropped ("0.00123",
// "0.000000042", "0").
func formatCost(usd float64) string {
	return strconv.FormatFloat(math.Round(usd*1e9)/1e9, 'f', -1, 64)
}

// answerRead is what setAnswerCost read from a whole answer.
type answerRead struct {
	usage    json.RawMessage
	outRunes int
}

// setAnswerCost sets X-Relay-Cost-USD on a whole (non-stream) answer
// about to be written: the cost the request will be accounted (measure
// and costOf on the same bytes accountRequest reads from the capture). No
// header when no price applies: absent means unpriced, never $0. A usage
// the relay estimated adds X-Relay-Cost-Estimated: true.
func (h *Relay) setAnswerCost(hdr http.Header, req *requestState, answer []byte) {
	if req.capture == nil || !req.ep.conversation() {
		return
	}
	usageRaw, outRunes := req.answerUsage(answer[:min(len(answer), maxCapture)], wholeUsage(answer))
	req.answerRead = &answerRead{usage: usageRaw, outRunes: outRunes}
	u, ok := h.measure(req, usageRaw, req.estimator(req.raw, outRunes))
	if !ok {
		return
	}
	cost, priced := h.costOf(req, u)
	if !priced {
		return
	}
	hdr.Set(costHeader, formatCost(cost))
	if u.Estimated {
		hdr.Set(costEstimatedHeader, "true")
	}
}

// wholeUsage is the usage member of a whole answer (nil: none).
func wholeUsage(b []byte) json.RawMessage {
	if raw, ok := usage.Member(b); ok {
		return raw
	}
	var v struct {
		Usage json.RawMessage `json:"usage"`
	}
	if json.Unmarshal(b, &v) == nil {
		return v.Usage
	}
	return nil
}

// writeStreamCost ends an accounted, priced SSE stream with its cost, as
// an SSE comment after the stream's own end (`: relay-cost-usd=0.00123`,
// with ` estimated` when the usage was the relay's estimate). Not every
// dialect's final usage has a place for it; SSE clients ignore comment
// lines, and the official SDKs were checked to (docs/usage.md).
func (h *Relay) writeStreamCost(w http.ResponseWriter, req *requestState) {
	if !req.priced || req.usage == nil || req.status >= 300 || !isEventStream(w.Header()) {
		return
	}
	line := ": relay-cost-usd=" + formatCost(req.cost)
	if req.usage.Estimated {
		line += " estimated"
	}
	if _, err := w.Write([]byte(line + "\n\n")); err == nil {
		_ = http.NewResponseController(w).Flush()
	}
}

// metricModelCost is the cost by alias and target; the model label is a
// configured target's model, or "*" (the client's model forwarded
// unchanged), so the series stay bounded.
var metricModelCost = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "llm_relay", Name: "model_cost_usd_total",
	Help: "Cost in US dollars by model alias, the upstream that answered and the model sent (\"*\" for the client's model forwarded unchanged), from the price table or the built-in list; a hand-off's legs each under its own target.",
}, []string{"alias", "upstream", "model"})

func init() { collectors = append(collectors, metricModelCost) }

// observeCost counts a priced request's cost by alias and target.
func (h *Relay) observeCost(req *requestState) {
	if ho := req.handoff; ho != nil {
		if ho.reasonUpstream != "" {
			metricModelCost.WithLabelValues(req.alias, ho.reasonUpstream, h.costModelLabel(ho.reasonUpstream, ho.reasonModel)).Add(ho.reasonCost)
		}
		if ho.answerUpstream != "" {
			metricModelCost.WithLabelValues(req.alias, ho.answerUpstream, h.costModelLabel(ho.answerUpstream, ho.answerModel)).Add(ho.answerCost)
		}
		return
	}
	metricModelCost.WithLabelValues(req.alias, req.upstream, h.costModelLabel(req.upstream, req.model)).Add(req.cost)
}

// costModelLabel is model when a configured target sends it to upstream,
// else "*": a client's model name is never a label.
func (h *Relay) costModelLabel(upstream, model string) string {
	if h.targetModels[[2]string{upstream, model}] {
		return model
	}
	return "*"
}

// chainPrices gives each link of a chain view the price that applies to
// its target (the status view's chains).
func (h *Relay) chainPrices(c *chainView, rt *route) {
	for i, t := range rt.targets {
		if i >= len(c.Targets) {
			break
		}
		if t.model == "" {
			// The client's model, forwarded: priced per request.
			c.Targets[i].Price = &priceInfo{From: "per_request"}
			continue
		}
		_, info := h.priceFor(t.model, rt.alias)
		c.Targets[i].Price = &info
	}
}

// The fleet's reasoning tokens (state redis): each instance writes its own
// per key and period, an absolute figure in a hash of its own next to the
// spend's, and reads the others', as spend is shared (fleet.go).

func (f *fleetState) reasoningKey(key string, p usage.Period, start time.Time) string {
	return f.prefix + "reasoning:" + key + ":" + p.String() + ":" + start.Format("2006-01-02")
}

// queueReasoning writes this instance's reasoning tokens per key with a
// reasoning budget and period, and reads every instance's.
func (f *fleetState) queueReasoning(ctx context.Context, pipe redis.Pipeliner, r *round, scripted bool) {
	for _, k := range r.keys {
		if _, ok := reasoningKeys.Load(k); !ok {
			continue
		}
		r.reasoning = f.queueOwn(ctx, pipe, r, scripted, k, r.reasoning, f.reasoningKey, func(w usage.WindowState) int64 { return w.Reasoning })
	}
}

// applyReasoning gives the ledger the other instances' reasoning tokens;
// each figure is checked (a whole number within sharedstate's bounds).
func (f *fleetState) applyReasoning(r *round) {
	for _, s := range r.reasoning {
		h, err := s.op.result()
		if err != nil {
			r.problems[s.op.key] = []sharedstate.Problem{{What: err.Error()}}
			continue
		}
		probs := h.Skipped
		var others int64
		for inst, v := range h.Fields {
			if inst == f.instance {
				continue
			}
			n, err := sharedstate.ParseSpend(v)
			if err != nil {
				probs = append(probs, sharedstate.Problem{Field: inst, What: strings.Replace(err.Error(), "nano-dollars", "tokens", 1)})
				continue
			}
			others = sharedstate.AddSpend(others, n)
		}
		r.problems[s.op.key] = probs
		ledger.SetOthersReasoning(s.key, s.period, s.start, others, r.now)
	}
}

// reasoningBudgetView is a key's reasoning budget on GET /v1/balance.
type reasoningBudgetView struct {
	Tokens    int64     `json:"tokens"`
	Period    string    `json:"period"` // day or month (UTC)
	Used      int64     `json:"used"`   // the fleet's, with state redis
	Remaining int64     `json:"remaining"`
	ResetsAt  time.Time `json:"resets_at"`
}

// reasoningBalance is key's reasoning budget now (nil: none).
func reasoningBalance(key string, now time.Time) *reasoningBudgetView {
	s, ok := ledger.Reasoning(key, now)
	if !ok {
		return nil
	}
	return &reasoningBudgetView{Tokens: s.Budget.Limit, Period: s.Budget.Period.String(), Used: s.Used,
		Remaining: max(s.Budget.Limit-s.Used, 0), ResetsAt: s.End}
}
