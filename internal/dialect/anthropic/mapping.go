package anthropic

import (
	"net/http"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// Version is the anthropic-version header the relay sends to Anthropic
// upstreams unless the upstream's own `header` sets another.
const Version = "2023-06-01"

// DefaultMaxTokens is the max_tokens sent to a Messages upstream when a
// Chat Completions client set neither max_tokens nor
// max_completion_tokens: Messages requires it. Operators change it per
// target with `set max_tokens <n>` (edits apply after translation).
const DefaultMaxTokens = 4096

// FinishReason maps a Messages stop_reason to a Chat Completions
// finish_reason.
//
// pause_turn (Anthropic paused a long turn of its server tools; sending
// the answer back continues it) is not a finished answer, and Chat has no
// word for it: it becomes "length", the one finish_reason Chat clients
// read as "not done" (the OpenAI SDKs' parse helpers raise on it, agents
// continue or report a cut answer), where "stop" would pass the paused
// turn off as complete.
func FinishReason(stopReason string) string {
	switch stopReason {
	case "max_tokens", "model_context_window_exceeded", "pause_turn":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	default: // end_turn, stop_sequence, anything new
		return "stop"
	}
}

// StopReason maps a Chat Completions finish_reason to a Messages
// stop_reason.
func StopReason(finishReason string) string {
	switch finishReason {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	default: // stop, anything new
		return "end_turn"
	}
}

// StatusOverloaded is Anthropic's "overloaded_error" status. The relay
// treats it as retryable, like 503.
const StatusOverloaded = 529

// ErrorType is the Messages error type for an HTTP status.
func ErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case StatusOverloaded, http.StatusServiceUnavailable:
		return "overloaded_error"
	}
	if status >= 400 && status < 500 {
		return "invalid_request_error"
	}
	return "api_error"
}

// The reasoning-effort table: a Chat Completions reasoning_effort becomes a
// Messages thinking budget, and a thinking budget (or Claude Code's
// output_config.effort) becomes an effort, by the ladder every dialect
// shares (chat.BudgetForEffort).
const (
	BudgetMinimal = chat.BudgetMinimal // Anthropic's smallest budget_tokens
	BudgetLow     = chat.BudgetLow
	BudgetMedium  = chat.BudgetMedium
	BudgetHigh    = chat.BudgetHigh
)

// BudgetForEffort returns the thinking budget for a reasoning_effort; ok
// is false for "none" and unknown values (no thinking).
func BudgetForEffort(effort string) (budget int, ok bool) { return chat.BudgetForEffort(effort) }

// EffortForBudget returns the reasoning_effort whose budget is the
// smallest at or above budget_tokens ("high" above BudgetMedium).
func EffortForBudget(budget int) string { return chat.EffortForBudget(budget) }
