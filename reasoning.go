package llmrelay

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/anthropic"
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

// applyEffort sets the request's reasoning effort from the estimated
// prompt size, per the adaptive_effort rules, and reports the effort set
// ("" if none), in the form of the endpoint ep.
//
// A client states its effort as `reasoning_effort` (Chat Completions) or
// `reasoning.effort` (Responses API, OpenRouter). With client_effort keep
// (the default) a client effort in either form means the relay adds
// nothing. With override, the relay's effort replaces the client's in the
// form the client used. When the client sent none, the relay writes the
// form of the endpoint: `reasoning_effort` for chat/completions and
// completions, `reasoning.effort` for responses, and nothing for other
// endpoints, whose dialect the relay does not know. The relay never adds
// a second form next to the client's: an upstream given both may obey
// either.
func applyEffort(body *requestBody, raw []byte, a *AdaptiveEffort, ep endpoint) string {
	if a == nil {
		return ""
	}
	form := ep.effort()
	if form == effortThinking {
		return applyThinkingEffort(body, raw, a)
	}
	flat, nested, objOK := clientEffort(body)
	if (flat || nested) && a.ClientEffort != "override" {
		return ""
	}
	if !flat && !nested {
		switch form {
		case effortFlat:
			flat = true
		case effortNested:
			nested = true
			if !objOK {
				return "" // `reasoning` is not an object: nothing to merge into
			}
		default:
			return ""
		}
	}
	effort := a.effortFor(raw)
	if effort == "" {
		return ""
	}
	v, _ := json.Marshal(effort)
	if flat {
		body.set("reasoning_effort", v)
	}
	if nested {
		_ = body.setPath([]string{"reasoning", "effort"}, v) // an object, checked above
	}
	return effort
}

// effortFor picks the effort of the first rule whose bound the prompt's
// estimated size is below, else the `else` effort ("" if none).
func (a *AdaptiveEffort) effortFor(raw []byte) string {
	n := usage.EstimatePrompt(raw)
	for _, rule := range a.Rules {
		if n < rule.Below {
			return rule.Effort
		}
	}
	return a.Else
}

// applyThinkingEffort is applyEffort for Anthropic Messages, whose effort
// is a thinking budget: the effort becomes `thinking: {"type":"enabled",
// "budget_tokens": n}` by the table in internal/dialect/anthropic
// (minimal 1024, low 2048, medium 8192, high 24576), and max_tokens is
// raised above the budget when it is not (Anthropic refuses a budget that
// is not below max_tokens). A client's own `thinking` (any value but
// null) counts as its effort: with client_effort keep, nothing changes.
// Effort `none` removes thinking (override) or adds nothing.
func applyThinkingEffort(body *requestBody, raw []byte, a *AdaptiveEffort) string {
	if t, set := body.fields["thinking"]; set && string(t) != "null" && a.ClientEffort != "override" {
		return ""
	}
	effort := a.effortFor(raw)
	if effort == "" {
		return ""
	}
	budget, ok := anthropic.BudgetForEffort(effort)
	if ok && forcesTool(body.fields["tool_choice"]) {
		// Messages refuses thinking together with a forced tool.
		return ""
	}
	if !ok {
		body.del("thinking")
		return effort
	}
	body.set("thinking", json.RawMessage(`{"type":"enabled","budget_tokens":`+strconv.Itoa(budget)+`}`))
	var maxTokens int
	_ = json.Unmarshal(body.fields["max_tokens"], &maxTokens)
	if maxTokens <= budget {
		body.set("max_tokens", json.RawMessage(strconv.Itoa(budget+anthropic.DefaultMaxTokens)))
	}
	return effort
}

// forcesTool reports a Messages tool_choice of type any or tool.
func forcesTool(raw json.RawMessage) bool {
	var c struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(raw, &c) == nil && (c.Type == "any" || c.Type == "tool")
}

// clientEffort reports which forms of effort the client set:
// `reasoning_effort`, `reasoning.effort` (null counts as unset). objOK is
// false when `reasoning` is present but neither an object nor null.
func clientEffort(body *requestBody) (flat, nested, objOK bool) {
	if raw, set := body.fields["reasoning_effort"]; set && string(raw) != "null" {
		flat = true
	}
	raw, set := body.fields["reasoning"]
	if !set || string(raw) == "null" {
		return flat, false, true
	}
	var r map[string]json.RawMessage
	if json.Unmarshal(raw, &r) != nil {
		return flat, false, false
	}
	if e, set := r["effort"]; set && string(e) != "null" {
		nested = true
	}
	return flat, nested, true
}

// askForUsage makes a stream request ask the upstream for its usage chunk,
// and reports whether the client did not ask for it itself (so the
// relay drops that chunk from the client's stream).
func askForUsage(body *requestBody) (drop bool) {
	if !body.stream {
		return false
	}
	raw, ok := body.fields["stream_options"]
	if !ok || string(raw) == "null" {
		// The common case, without a map and an encode per stream.
		body.set("stream_options", json.RawMessage(`{"include_usage":true}`))
		return true
	}
	opts := map[string]json.RawMessage{}
	if json.Unmarshal(raw, &opts) != nil {
		return false // not an object: leave it to the upstream to judge
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
	body.set("stream_options", b)
	return true
}
