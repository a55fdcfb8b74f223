package anthropic

import "testing"

func TestReasonRoundTrip(t *testing.T) {
	for _, stop := range []string{"end_turn", "max_tokens", "tool_use", "refusal"} {
		if got := StopReason(FinishReason(stop)); got != stop {
			t.Errorf("StopReason(FinishReason(%q)) = %q", stop, got)
		}
	}
}

func TestEffortBudgetRoundTrip(t *testing.T) {
	for _, e := range []string{"minimal", "low", "medium", "high"} {
		b, ok := BudgetForEffort(e)
		if !ok || EffortForBudget(b) != e {
			t.Errorf("effort %q: budget %d ok %v, back %q", e, b, ok, EffortForBudget(b))
		}
	}
	if _, ok := BudgetForEffort("none"); ok {
		t.Error(`"none" must mean no thinking`)
	}
}

func TestErrorTypes(t *testing.T) {
	for status, want := range map[int]string{400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error", 529: "overloaded_error", 500: "api_error", 422: "invalid_request_error"} {
		if got := ErrorType(status); got != want {
			t.Errorf("ErrorType(%d) = %q, want %q", status, got, want)
		}
	}
}
