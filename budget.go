package llmrelay

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// budgetHeader lets a client ask for a smaller reasoning budget.
const budgetHeader = "X-Relay-Reasoning-Budget"

// budgetPlaceholder, as the value of a target's `set`, is replaced by the
// request's reasoning budget (or the edit skipped when there is none).
const budgetPlaceholder = `"{llm_relay.reasoning_budget}"`

// reasoningPolicy is a route's resolved reasoning budget and effort rules.
type reasoningPolicy struct {
	budget int // 0: none
	action pace.BudgetAction
	effort *AdaptiveEffort
}

// resolveReasoning merges a model's settings over the relay's.
func resolveReasoning(h *Relay, m *ModelRoute) (reasoningPolicy, error) {
	var p reasoningPolicy
	b := h.ReasoningBudget
	if m.ReasoningBudget != nil {
		b = m.ReasoningBudget
	}
	if b != nil {
		if err := b.check(); err != nil {
			return p, err
		}
		a, _ := pace.ParseBudgetAction(b.Action) // checked
		p.budget, p.action = b.Tokens, a
	}
	p.effort = h.AdaptiveEffort
	if m.AdaptiveEffort != nil {
		p.effort = m.AdaptiveEffort
	}
	return p, nil
}

// requestBudget applies a client's X-Relay-Reasoning-Budget: it may lower
// the cap, never raise it.
func requestBudget(r *http.Request, p reasoningPolicy) (reasoningPolicy, error) {
	v := r.Header.Get(budgetHeader)
	if v == "" {
		return p, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return p, errInvalidReasoningBudget(v)
	}
	if p.budget == 0 || n < p.budget {
		p.budget = n
	}
	return p, nil
}

// applyEffort sets reasoning_effort from the estimated prompt size, per
// the adaptive_effort rules. It reports the effort set ("" if none).
func applyEffort(body *requestBody, raw []byte, a *AdaptiveEffort) string {
	if a == nil {
		return ""
	}
	if _, set := body.fields["reasoning_effort"]; set && a.ClientEffort != "override" {
		return ""
	}
	n := usage.EstimatePrompt(raw)
	effort := a.Else
	for _, rule := range a.Rules {
		if n < rule.Below {
			effort = rule.Effort
			break
		}
	}
	if effort == "" {
		return ""
	}
	v, _ := json.Marshal(effort)
	body.fields["reasoning_effort"] = v
	return effort
}

// askForUsage makes a stream request ask the upstream for its usage chunk,
// and reports whether the client did not ask for it itself (so the
// relay drops that chunk from the client's stream).
func askForUsage(body *requestBody) (drop bool) {
	if !body.stream {
		return false
	}
	opts := map[string]json.RawMessage{}
	if raw, ok := body.fields["stream_options"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &opts) != nil {
			return false // not an object: leave it to the upstream to judge
		}
	}
	var asked bool
	if raw, ok := opts["include_usage"]; ok {
		_ = json.Unmarshal(raw, &asked)
	}
	if asked {
		return false
	}
	opts["include_usage"] = json.RawMessage("true")
	b, _ := json.Marshal(opts)
	body.fields["stream_options"] = b
	return true
}
