package gemini

import (
	"net/http"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// The tables both directions share; docs/gemini.md repeats them for
// operators.

// FinishReason maps a Gemini finishReason to a Chat finish_reason. calls
// says the candidate called functions: Gemini ends a turn of calls with
// STOP, Chat with "tool_calls".
//
//	STOP, FINISH_REASON_UNSPECIFIED, OTHER, ""        stop (tool_calls with calls)
//	MAX_TOKENS                                        length
//	SAFETY, RECITATION, BLOCKLIST, PROHIBITED_CONTENT,
//	  SPII, LANGUAGE, IMAGE_SAFETY, IMAGE_RECITATION,
//	  IMAGE_PROHIBITED_CONTENT, IMAGE_OTHER           content_filter
//	MALFORMED_FUNCTION_CALL, UNEXPECTED_TOOL_CALL,
//	  TOO_MANY_TOOL_CALLS, NO_IMAGE, anything new     stop (tool_calls with calls)
//
// A malformed call is not a Chat tool call (there is nothing to run), and
// Chat has no word for it: the turn ends as a plain stop.
func FinishReason(reason string, calls bool) string {
	switch reason {
	case "MAX_TOKENS":
		return "length"
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "LANGUAGE",
		"IMAGE_SAFETY", "IMAGE_RECITATION", "IMAGE_PROHIBITED_CONTENT", "IMAGE_OTHER":
		return "content_filter"
	}
	if calls {
		return "tool_calls"
	}
	return "stop"
}

// GeminiFinishReason maps a Chat finish_reason to a Gemini finishReason.
func GeminiFinishReason(finish string) string {
	switch finish {
	case "length":
		return "MAX_TOKENS"
	case "content_filter":
		return "SAFETY"
	default: // stop, tool_calls (Gemini ends a turn of calls with STOP), anything new
		return "STOP"
	}
}

// Status is Google's canonical status name for an HTTP status, as the
// Gemini API writes it in error.status. A status without a name of its
// own is INVALID_ARGUMENT (4xx) or INTERNAL (anything else).
func Status(code int) string {
	if s, ok := statusNames[code]; ok {
		return s
	}
	if code >= 400 && code < 500 {
		return "INVALID_ARGUMENT"
	}
	return "INTERNAL"
}

var statusNames = map[int]string{
	http.StatusBadRequest:          "INVALID_ARGUMENT",
	http.StatusUnauthorized:        "UNAUTHENTICATED",
	http.StatusForbidden:           "PERMISSION_DENIED",
	http.StatusNotFound:            "NOT_FOUND",
	http.StatusConflict:            "ABORTED",
	http.StatusTooManyRequests:     "RESOURCE_EXHAUSTED",
	499:                            "CANCELLED",
	http.StatusInternalServerError: "INTERNAL",
	http.StatusNotImplemented:      "UNIMPLEMENTED",
	http.StatusServiceUnavailable:  "UNAVAILABLE",
	http.StatusGatewayTimeout:      "DEADLINE_EXCEEDED",
	529:                            "UNAVAILABLE", // Anthropic's overloaded: Gemini's word for it
}

// StatusCode is the HTTP status of a Google status name (the reverse of
// Status), 0 for a name it does not know.
func StatusCode(status string) int {
	switch status {
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return http.StatusBadRequest
	case "UNAUTHENTICATED":
		return http.StatusUnauthorized
	case "PERMISSION_DENIED":
		return http.StatusForbidden
	case "NOT_FOUND":
		return http.StatusNotFound
	case "ABORTED", "ALREADY_EXISTS":
		return http.StatusConflict
	case "RESOURCE_EXHAUSTED":
		return http.StatusTooManyRequests
	case "CANCELLED":
		return 499
	case "INTERNAL", "UNKNOWN", "DATA_LOSS":
		return http.StatusInternalServerError
	case "UNIMPLEMENTED":
		return http.StatusNotImplemented
	case "UNAVAILABLE":
		return http.StatusServiceUnavailable
	case "DEADLINE_EXCEEDED":
		return http.StatusGatewayTimeout
	}
	return 0
}

// The thinking-budget table: a Chat reasoning_effort becomes a Gemini
// thinkingBudget, and a thinkingBudget an effort, by the ladder every
// dialect shares (chat.BudgetForEffort), so that an effort crosses the
// Anthropic dialect and this one and comes back the same.
const (
	BudgetMinimal = chat.BudgetMinimal
	BudgetLow     = chat.BudgetLow
	BudgetMedium  = chat.BudgetMedium
	BudgetHigh    = chat.BudgetHigh // Gemini 2.5 Flash's largest budget
)

// BudgetForEffort is the thinkingBudget for a reasoning_effort: 0 for
// "none" (no thinking; Gemini 2.5 Pro cannot think less than 128 tokens
// and refuses it), ok false for "" and efforts it does not know.
func BudgetForEffort(effort string) (budget int, ok bool) {
	if effort == "none" {
		return 0, true
	}
	return chat.BudgetForEffort(effort)
}

// EffortForBudget is the reasoning_effort of a thinkingBudget: "none" for
// 0, "" for -1 (dynamic thinking: the model decides, as it does when
// Chat names no effort), else the shared ladder's.
func EffortForBudget(budget int) string {
	switch {
	case budget == 0:
		return "none"
	case budget < 0:
		return ""
	}
	return chat.EffortForBudget(budget)
}

// EffortForLevel is the reasoning_effort of a Gemini 3 thinkingLevel
// (MINIMAL, LOW, MEDIUM, HIGH, any case); ok is false for one it does not
// know.
func EffortForLevel(level string) (effort string, ok bool) {
	switch level {
	case "MINIMAL", "minimal":
		return "minimal", true
	case "LOW", "low":
		return "low", true
	case "MEDIUM", "medium":
		return "medium", true
	case "HIGH", "high":
		return "high", true
	case "THINKING_LEVEL_UNSPECIFIED", "":
		return "", true
	}
	return "", false
}

// UsageMetadata is Gemini's usage. promptTokenCount includes the cached
// tokens (cachedContentTokenCount); candidatesTokenCount excludes the
// thoughts (thoughtsTokenCount); totalTokenCount is all of them and the
// tool-use prompt tokens. In a stream every chunk may carry the running
// totals: the last one counts.
type UsageMetadata struct {
	PromptTokenCount        int `json:"promptTokenCount,omitempty"`
	CandidatesTokenCount    int `json:"candidatesTokenCount,omitempty"`
	TotalTokenCount         int `json:"totalTokenCount,omitempty"`
	CachedContentTokenCount int `json:"cachedContentTokenCount,omitempty"`
	ToolUsePromptTokenCount int `json:"toolUsePromptTokenCount,omitempty"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount,omitempty"`
}

// chatUsage is u in Chat's terms:
//
//	promptTokenCount (+ toolUsePromptTokenCount)  prompt_tokens
//	candidatesTokenCount + thoughtsTokenCount     completion_tokens (Chat counts
//	                                              reasoning as completion)
//	totalTokenCount (the sum when absent)         total_tokens
//	cachedContentTokenCount                       prompt_tokens_details.cached_tokens
//	thoughtsTokenCount                            completion_tokens_details.reasoning_tokens
func (u UsageMetadata) chatUsage() (c chat.ChunkUsage) {
	c.Prompt = u.PromptTokenCount + u.ToolUsePromptTokenCount
	c.Completion = u.CandidatesTokenCount + u.ThoughtsTokenCount
	c.Total = u.TotalTokenCount
	if c.Total < c.Prompt+c.Completion {
		c.Total = c.Prompt + c.Completion
	}
	c.Cached = min(u.CachedContentTokenCount, c.Prompt)
	c.Reasoning = u.ThoughtsTokenCount
	return c
}

// usageMetadata is Chat usage in Gemini's terms, the reverse of chatUsage.
func usageMetadata(prompt, completion, total, cached, reasoning int) UsageMetadata {
	reasoning = min(max(reasoning, 0), max(completion, 0))
	u := UsageMetadata{
		PromptTokenCount:        prompt,
		CandidatesTokenCount:    completion - reasoning,
		ThoughtsTokenCount:      reasoning,
		CachedContentTokenCount: min(max(cached, 0), max(prompt, 0)),
		TotalTokenCount:         total,
	}
	if u.TotalTokenCount < prompt+completion {
		u.TotalTokenCount = prompt + completion
	}
	return u
}
