package handoff

import "testing"

// TestSplicerEnd: the Splicer says what ended the reasoning, for the log
// line's handoff.why: answer text, a tool call, a bare finish, or
// max_reasoning.
func TestSplicerEnd(t *testing.T) {
	const r = `{"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"abcdefgh"}}]}`
	for _, tc := range []struct {
		name, last string
		max        int
		want       string
	}{
		{"answer", `{"id":"x","choices":[{"index":0,"delta":{"content":"hi"}}]}`, 0, EndAnswer},
		{"refusal", `{"id":"x","choices":[{"index":0,"delta":{"refusal":"no"}}]}`, 0, EndAnswer},
		{"tool call", `{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":""}}]}}]}`, 0, EndToolCall},
		{"function call", `{"id":"x","choices":[{"index":0,"delta":{"function_call":{"name":"f"}}}]}`, 0, EndToolCall},
		{"finish", `{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, 0, EndFinish},
		{"max_reasoning", r, 4, EndMaxReasoning},
	} {
		s := Splicer{MaxReasoning: tc.max}
		if _, over := s.Reason([]byte(r)); over || s.End != "" {
			t.Fatalf("%s: the first reasoning chunk (2 of %d tokens) handed off: %v, End %q", tc.name, tc.max, over, s.End)
		}
		if _, over := s.Reason([]byte(tc.last)); !over || s.End != tc.want {
			t.Errorf("%s: hand-off %v, End %q; want true and %q", tc.name, over, s.End, tc.want)
		}
	}
}
