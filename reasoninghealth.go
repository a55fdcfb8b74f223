package llmrelay

import (
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/anthropic"
	"github.com/llmrelay/caddy-llm-relay/internal/reasoninghealth"
)

// Reasoning health (issue 29, section 3): a provider degrading under load
// keeps answering 200 while its reasoning is cut short or comes in
// clusters. Each finished answer's reasoning tokens and cluster rate feed
// its target's reasoninghealth.Tracker; a target that breaks its SLO's
// reasoning_floor or cluster_rate is flagged Degraded in its health (so
// it goes behind the healthy targets, shows on /status with the reason,
// and gets the degraded targets' recheck request, whose answer is the
// half-open trial that can end the flag). docs/reasoning-health.md.

// checkReasoning checks the slo block's reasoning_floor and cluster_rate.
func (s *SLO) checkReasoning() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"reasoning_floor", s.ReasoningFloor}, {"cluster_rate", s.ClusterRate}} {
		if f.v != 0 {
			if err := checkRatio(f.name, f.v); err != nil {
				return fmt.Errorf("%w (a share between 0 and 1, e.g. %s)", err, map[string]string{"reasoning_floor": "0.5", "cluster_rate": "0.8"}[f.name])
			}
		}
	}
	return nil
}

// resolveReasoningSLO merges a model's reasoning_floor and cluster_rate
// over the relay's.
func resolveReasoningSLO(relay, model *SLO) reasoninghealth.Config {
	var c reasoninghealth.Config
	for _, b := range []*SLO{relay, model} {
		if b == nil {
			continue
		}
		if b.ReasoningFloor != 0 {
			c.Floor = b.ReasoningFloor
		}
		if b.ClusterRate != 0 {
			c.ClusterRate = b.ClusterRate
		}
	}
	return c
}

// effortLabels are the efforts a baseline is kept for; anything else a
// client sends counts as "other", so a client's string never grows the
// relay's state or a label.
var effortLabels = map[string]bool{"none": true, "minimal": true, "low": true, "medium": true, "high": true, "xhigh": true}

// requestEffort is the reasoning effort a request (as sent upstream, after
// adaptive_effort) states: `reasoning_effort`, `reasoning.effort`, or an
// Anthropic thinking budget read back as its effort; "default" when it
// states none.
func requestEffort(body *requestBody) string {
	var e string
	if raw, ok := body.fields["reasoning_effort"]; ok {
		_ = json.Unmarshal(raw, &e)
	}
	if e == "" {
		var nested struct {
			Effort string `json:"effort"`
		}
		if raw, ok := body.fields["reasoning"]; ok && json.Unmarshal(raw, &nested) == nil {
			e = nested.Effort
		}
	}
	if e == "" {
		var th struct {
			Type   string `json:"type"`
			Budget int    `json:"budget_tokens"`
		}
		if raw, ok := body.fields["thinking"]; ok && json.Unmarshal(raw, &th) == nil && th.Budget > 0 {
			e = anthropic.EffortForBudget(th.Budget)
		}
	}
	switch {
	case e == "":
		return reasoninghealth.DefaultEffort
	case effortLabels[e]:
		return e
	}
	return "other"
}

// judgeReasoning feeds a finished request's answer to its target's
// reasoning health: only a complete answer (2xx, not broken, not cut by
// the client) from a target whose SLO judges reasoning, and not a
// hand-off (its legs are two targets). A change flags or clears the
// target's health, is logged, and a degradation is counted.
func (h *Relay) judgeReasoning(req *requestState) {
	t := req.target
	if t == nil || t.entry == nil || t.entry.reasoning == nil {
		return
	}
	if !t.rslo.On() {
		return
	}
	now := time.Now()
	// Only a whole answer at the effort the request stated counts: not
	// one the capacity stage sent at a lower effort (req.degraded).
	if req.handoff != nil || len(req.continued) > 0 || req.usage == nil || req.degraded ||
		req.status < 200 || req.status >= 300 || req.streamError != "" || req.idleTimeout || req.budgetHits > 0 {
		return
	}
	s := reasoninghealth.Sample{At: now, Effort: req.effortKey, Reasoning: req.usage.Reasoning}
	if st := req.smooth; st != nil && st.Cluster.Known {
		s.Cluster, s.ClusterKnown = st.Cluster.In, true
	}
	c := t.entry.reasoning.Add(s, t.rslo)
	if c == nil {
		return
	}
	reason := ""
	if c.Degraded {
		reason = c.Reason
		metricReasoningDegraded.WithLabelValues(t.up.name, modelLabel(t.model), string(c.Signal)).Inc()
	}
	ch := t.health.Flag(reason, now, t.slo)
	if ch == nil {
		// Already degraded (or ejected) for another reason: the flag
		// is set all the same; say so.
		if c.Degraded {
			h.logger.Warn("target reasoning degraded", zapTarget(t, c.Reason)...)
		} else {
			h.logger.Info("target reasoning recovered", zapTarget(t, c.Reason)...)
		}
		return
	}
	if !c.Degraded {
		ch.Reason = c.Reason
	}
	h.logChange(ch)
}

// setReasoningSLO gives a route's targets (chain, canary, shadow) the
// model's reasoning SLO, and its shadow the judge of its verdict.
func setReasoningSLO(rt *route, m *ModelRoute, c reasoninghealth.Config) {
	for _, t := range rt.targets {
		t.rslo = c
	}
	if rt.canary != nil {
		rt.canary.target.rslo = c
	}
	rt.judgesEffort = c.On() || (rt.canary != nil && m.Canary.Guard.ReasoningFloor > 0)
	if sr := rt.shadow; sr != nil {
		sr.target.rslo = c
		sr.alias = rt.alias
		sr.judge = shadowJudge(sr.target.slo, c, m.Shadow)
	}
}

// zapTarget are the log fields of a target's reasoning change.
func zapTarget(t *target, reason string) []zap.Field {
	return []zap.Field{zap.String("target", t.health.Name()), zap.String("reason", reason)}
}

// reasoningStatus is a target's reasoning health for the status view, nil
// when its SLO judges no reasoning.
func reasoningStatus(t *target) *reasoninghealth.Snapshot {
	if !t.rslo.On() || t.entry == nil || t.entry.reasoning == nil {
		return nil
	}
	s := t.entry.reasoning.Snapshot()
	return &s
}

// clearUnjudgedReasoning ends the reasoning degradation of every target
// of this config whose SLO, in every route of the config that uses it, no
// longer judges reasoning (a reload took reasoning_floor and cluster_rate
// away): nothing would ever end it otherwise. A target some route still
// judges keeps its state, whoever's answer comes next.
func (h *Relay) clearUnjudgedReasoning() {
	judged := map[*healthEntry]bool{}
	var all []*target
	h.eachTarget(func(t *target) {
		if t.entry == nil || t.entry.reasoning == nil {
			return
		}
		judged[t.entry] = judged[t.entry] || t.rslo.On()
		all = append(all, t)
	})
	now := time.Now()
	for _, t := range all {
		if !judged[t.entry] && t.entry.reasoning.Clear(now) {
			if c := t.health.Flag("", now, t.slo); c != nil {
				c.Reason = "the slo no longer judges reasoning"
				h.logChange(c)
			}
		}
	}
}
