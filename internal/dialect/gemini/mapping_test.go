package gemini

import "testing"

// TestFinishReasons: every Gemini finishReason lands on the Chat word its
// table gives, and every Chat word comes back to one Gemini says.
func TestFinishReasons(t *testing.T) {
	for reason, want := range map[string]string{
		"STOP": "stop", "": "stop", "OTHER": "stop", "FINISH_REASON_UNSPECIFIED": "stop", "MALFORMED_FUNCTION_CALL": "stop",
		"MAX_TOKENS": "length", "SAFETY": "content_filter", "RECITATION": "content_filter", "BLOCKLIST": "content_filter",
		"PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter", "IMAGE_SAFETY": "content_filter", "LANGUAGE": "content_filter",
	} {
		if got := FinishReason(reason, false); got != want {
			t.Errorf("FinishReason(%q) = %q, want %q", reason, got, want)
		}
	}
	if FinishReason("STOP", true) != "tool_calls" || FinishReason("MAX_TOKENS", true) != "length" {
		t.Error("a turn of calls")
	}
	for finish, want := range map[string]string{"stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS", "content_filter": "SAFETY", "": "STOP"} {
		if got := GeminiFinishReason(finish); got != want {
			t.Errorf("GeminiFinishReason(%q) = %q, want %q", finish, got, want)
		}
		if back := FinishReason(GeminiFinishReason(finish), finish == "tool_calls"); finish != "" && back != finish {
			t.Errorf("%q → %q → %q", finish, GeminiFinishReason(finish), back)
		}
	}
}

// TestUsage: Gemini's counts in Chat's terms and back.
func TestUsage(t *testing.T) {
	u := UsageMetadata{PromptTokenCount: 100, CandidatesTokenCount: 20, ThoughtsTokenCount: 30, CachedContentTokenCount: 60, TotalTokenCount: 150}
	c := u.chatUsage()
	if c.Prompt != 100 || c.Completion != 50 || c.Total != 150 || c.Cached != 60 || c.Reasoning != 30 {
		t.Fatalf("%+v", c)
	}
	if back := usageMetadata(c.Prompt, c.Completion, c.Total, c.Cached, c.Reasoning); back != u {
		t.Fatalf("%+v, want %+v", back, u)
	}
}
