package llmrelay

import (
	"bytes"
	"encoding/json"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// ledger is the process-wide spend per key name: it survives config
// reloads, and two sites naming the same key share it.
var ledger = usage.NewLedger()

// compileSpend sets up the price table and the key budgets, one per key
// name (keyBudgets).
func (h *Relay) compileSpend() error {
	table := make(map[string]usage.Price, len(h.Prices))
	for m, p := range h.Prices {
		table[m] = usage.Price{Input: p.Input, Output: p.Output, CachedInput: p.CachedInput, CacheWrite: p.CacheWrite}
	}
	h.prices = usage.NewPriceTable(table)
	h.keyPeriods = map[string]string{}
	h.budgetsOnce = new(sync.Once)
	var err error
	if h.keyBudgets, err = keyBudgets(h.Keys); err != nil {
		return err
	}
	for name, b := range h.keyBudgets {
		if b.Limit > 0 {
			h.keyPeriods[name] = b.Period.String()
		}
	}
	return h.compileCost()
}

// applyBudgets hands this handler's key budgets to the ledger. It runs at
// the handler's first request, not at Provision: a config that fails to
// load after this handler was provisioned must not change the budgets the
// running config enforces. (Two sites giving one key name different
// budgets share one ledger entry: the last one to serve a request wins.)
func (h *Relay) applyBudgets() {
	h.budgetsOnce.Do(func() {
		for name, b := range h.keyBudgets {
			ledger.SetBudget(name, b)
		}
		for name, b := range h.reasoningBudgets {
			ledger.SetReasoningBudget(name, b)
		}
	})
}

// overBudget reports whether the key has used up its budget.
func (h *Relay) overBudget(key string) (period string, over bool) {
	h.applyBudgets()
	period, has := h.keyPeriods[key]
	if !has {
		return "", false
	}
	ok, _ := ledger.Allow(key, time.Now())
	return period, !ok
}

// account records a finished request's usage and cost against its key,
// logs the budget alerts it crossed, and updates the metrics.
func (h *Relay) account(req *requestState, raw json.RawMessage, estimate func() usage.Usage) {
	u, ok := h.measure(req, raw, estimate)
	if !ok {
		return
	}
	req.usage = &u
	if req.tokenEstimate > 0 {
		req.limits.settleTokens(req.tokenEstimate, u.Prompt+u.Completion, time.Now())
		req.tokenEstimate = 0 // settled
	}
	if req.budget > 0 && u.Reasoning > req.budget && !u.Estimated {
		// The upstream reasoned past the budget: a non-stream answer it
		// sent whole (only its own knob applies), or a stream (or an
		// assembled answer) whose reasoning the relay truncated while the
		// upstream went on.
		h.logger.Warn("reasoning budget overrun", zap.String("key", req.key), zap.String("alias", req.alias),
			zap.String("upstream", req.upstream), zap.Int("reasoning_tokens", u.Reasoning), zap.Int("budget", req.budget),
			zap.Bool("stream", req.stream))
	}
	req.cost, req.priced = h.costOf(req, u)
	priced := req.priced
	key := req.key
	if key == "" {
		key = "anonymous"
	}
	alerts := ledger.Add(key, req.cost, u, time.Now())
	if h.fleet != nil {
		h.fleet.noteKey(key)
	}
	for _, a := range alerts {
		if h.fleet != nil {
			h.fleet.claimAlert(a) // logged by the instance that claims it first
			continue
		}
		logBudgetAlert(h.logger, a, false)
	}
	alias := req.alias
	metricTokens.WithLabelValues(key, alias, "prompt").Add(float64(u.Prompt))
	metricTokens.WithLabelValues(key, alias, "completion").Add(float64(u.Completion))
	metricTokens.WithLabelValues(key, alias, "reasoning").Add(float64(u.Reasoning))
	metricTokens.WithLabelValues(key, alias, "cached").Add(float64(u.Cached))
	metricTokens.WithLabelValues(key, alias, "cache_write").Add(float64(u.CacheWrite))
	if priced {
		metricCost.WithLabelValues(key).Add(req.cost)
		h.observeCost(req)
	}
}

// measure is the usage a finished request is accounted with: the
// upstream's (raw), else estimate's, marked estimated; with the reasoning
// the relay read where the usage counts none (withReasoning) and the
// usage of streams given up for a reasoning budget failover. ok is false
// when there is nothing to account.
func (h *Relay) measure(req *requestState, raw json.RawMessage, estimate func() usage.Usage) (u usage.Usage, ok bool) {
	u, ok = usage.ParseUsage(raw)
	switch {
	case ok:
	case estimate != nil:
		u = estimate()
		u.Estimated = true
	case req.earlier == (usage.Usage{}):
		return u, false
	}
	if req.usageEstimated {
		// What the client got was the relay's estimate (usagemeter.go).
		u.Estimated = true
		u.Completion = max(u.Completion, req.outEstimate)
	}
	u = withReasoning(u, req.upstreamReasoning, req.reasoningRunes)
	return u.Add(req.earlier), true // streams given up for a reasoning budget failover
}

// costOf prices a request's usage u: a hand-off's legs each at its own
// model's price (handoff.go), else the model's (priceOf). priced is false
// when no price applies.
func (h *Relay) costOf(req *requestState, u usage.Usage) (cost float64, priced bool) {
	if ho := req.handoff; ho != nil {
		return ho.cost(func(model string) (usage.Price, bool) { return h.priceOf(model, req.alias) })
	}
	if p, ok := h.priceOf(req.model, req.alias); ok {
		return p.Cost(u), true
	}
	return 0, false
}

// priceOf is the price of a model sent upstream (priceFor): the price
// table's for the model, else for the alias, else the built-in list's.
// A configured target's was resolved at provision (compileCost); only a
// client's model forwarded unchanged is looked up here.
func (h *Relay) priceOf(model, alias string) (usage.Price, bool) {
	if tp, ok := h.targetPrices[[2]string{model, alias}]; ok {
		return tp.price, tp.priced
	}
	p, info := h.priceFor(model, alias)
	return p, info.From != priceNone
}

// withReasoning gives u, a usage that counts no reasoning tokens, the
// reasoning of the answer: upstream, the count the upstream gave before
// its answer was translated into a dialect that has no place for it (a
// Chat provider's reasoning_tokens for a Messages client); else, when the
// relay read reasoning (runes), a quarter of its runes, as the output of
// an answer without usage is estimated, marked estimated. So an upstream
// that writes its reasoning inline between tags (it counts it in
// completion_tokens only), one with a reasoning field it does not count
// (vLLM's reasoning parser) and Anthropic's thinking (output_tokens only)
// are accounted with their reasoning. What the client got is left as it
// was. The reasoning is at most the completion, which counts it.
func withReasoning(u usage.Usage, upstream, runes int) usage.Usage {
	switch {
	case u.Reasoning > 0:
	case upstream > 0:
		u.Reasoning = min(upstream, u.Completion)
	case runes > 0:
		u.Reasoning, u.Estimated = min((runes+3)/4, u.Completion), true
	}
	return u
}

// accountRequest accounts a relayed request: the upstream's usage (the
// stream's usage chunk, or the body's usage object), else an estimate
// marked as such.
func (h *Relay) accountRequest(req *requestState, raw []byte) {
	if req.upstream == "" || req.status >= 300 && req.status != statusClientClosed {
		return // nothing was generated for the client
	}
	var usageRaw json.RawMessage
	outRunes := 0
	switch {
	case req.smooth != nil:
		usageRaw = req.smooth.Usage
		outRunes = req.smooth.RunesOut + req.smooth.ToolRunes
	case req.answerRead != nil: // the same bytes, read for the cost header
		usageRaw, outRunes = req.answerRead.usage, req.answerRead.outRunes
	case req.capture != nil:
		usageRaw, outRunes = req.answerUsage(req.capture.buf.Bytes(), req.capture.usage())
	}
	h.account(req, usageRaw, req.estimator(raw, outRunes))
}

// answerUsage reads a whole (non-stream) answer b: its usage (usageRaw,
// the usage member as read), else a provider's own member (Groq's
// x_groq.usage, Moonshot's in the choice), and, for a usage that counts
// no reasoning, the runes of its reasoning field (withReasoning). outRunes
// is the answer's size for an estimate of its output.
func (req *requestState) answerUsage(b []byte, usageRaw json.RawMessage) (_ json.RawMessage, outRunes int) {
	if u := string(usageRaw); u == "" || u == "null" {
		usageRaw, _ = usage.ProviderUsage(b)
	}
	if req.reasoningRunes == 0 && req.ep.dialect == dialectChat && bytes.Contains(b, []byte(`"reasoning`)) {
		// An answer passed through as it came: its reasoning field,
		// for a usage that counts no reasoning (withReasoning). Read
		// only then: decoding every answer cost the non-stream path
		// about 4 % of its requests a second (relaybench).
		if u, ok := usage.ParseUsage(usageRaw); !ok || u.Reasoning == 0 {
			req.reasoningRunes = answerReasoningRunes(b)
		}
	}
	return usageRaw, len(b) / 2
}

// estimator estimates a conversation turn's usage, delivered whole or
// broken off after some of it went out (the provider generated, and
// bills, what it sent): the prompt from the client's body raw, the output
// from outRunes. Other endpoints get none: the formula means nothing for
// them (and an error answer generated nothing: accountRequest).
func (req *requestState) estimator(raw []byte, outRunes int) func() usage.Usage {
	if !req.ep.conversation() {
		return nil
	}
	return func() usage.Usage {
		return usage.Usage{Prompt: usage.EstimatePrompt(raw), Completion: (outRunes + 3) / 4}
	}
}

// logBudgetAlert logs a budget alert; fleet says it was claimed for the
// fleet (state redis), where the figures are the fleet's.
func logBudgetAlert(logger *zap.Logger, a usage.Alert, fleet bool) {
	logger.Warn("key budget alert", zap.String("key", a.Key), zap.Int("threshold_percent", a.Threshold),
		zap.String("spent", usage.FormatUSD(a.Spent)), zap.String("budget", usage.FormatUSD(a.Limit)),
		zap.String("period", a.Period), zap.String("alert", a.String()), zap.Bool("fleet", fleet))
}
