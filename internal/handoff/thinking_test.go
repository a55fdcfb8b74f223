package handoff

import (
	"encoding/json"
	"testing"
)

// TestAnswerDropsThinkingEdits: the answer leg's Messages body loses its
// thinking knob, and with it the context edits Anthropic refuses without
// thinking ("`clear_thinking_20251015` strategy requires `thinking` to be
// enabled or adaptive"), which Claude Code sends on every request; other
// edits, and the reasoning leg's body, keep theirs.
func TestAnswerDropsThinkingEdits(t *testing.T) {
	for _, tc := range []struct{ name, cm, want string }{
		{"thinking edit alone", `{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]}`, ``},
		{"with a tool edit", `{"edits":[{"type":"clear_thinking_20251015","keep":"all"},{"type":"clear_tool_uses_20250919"}]}`, `{"edits":[{"type":"clear_tool_uses_20250919"}]}`},
		{"tool edit alone", `{"edits":[{"type":"clear_tool_uses_20250919"}]}`, `{"edits":[{"type":"clear_tool_uses_20250919"}]}`},
		{"other members stay", `{"edits":[{"type":"clear_thinking_20251015"}],"x":1}`, `{"x":1}`},
		{"not an object", `"odd"`, `"odd"`},
	} {
		body := `{"model":"m","max_tokens":9,"thinking":{"type":"adaptive"},"context_management":` + tc.cm + `,"messages":[{"role":"user","content":"hi"}]}`
		out, err := Answer(Messages, []byte(body), "r", Prefill)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(out, &top); err != nil {
			t.Fatal(err)
		}
		if _, ok := top["thinking"]; ok {
			t.Errorf("%s: thinking kept", tc.name)
		}
		got := string(top["context_management"])
		if got != tc.want {
			t.Errorf("%s: context_management %s; want %s", tc.name, got, tc.want)
		}
		reason, err := Reason(Messages, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		var rtop map[string]json.RawMessage
		_ = json.Unmarshal(reason, &rtop)
		if rtop["context_management"] == nil || rtop["thinking"] == nil {
			t.Errorf("%s: the reasoning leg's body lost its thinking or its edits: %s", tc.name, reason)
		}
	}
}

// TestReasonShowsThinking: the reasoning leg is asked for its thinking's
// text whatever display the client asked for (Claude Code: "updates",
// "omitted"), which would leave its thinking blocks empty; a body without
// a display is left as it is (an upstream may not know the member).
func TestReasonShowsThinking(t *testing.T) {
	for _, tc := range []struct{ thinking, want string }{
		{`{"type":"adaptive","display":"omitted"}`, `{"display":"summarized","type":"adaptive"}`},
		{`{"type":"adaptive","display":"updates"}`, `{"display":"summarized","type":"adaptive"}`},
		{`{"type":"enabled","budget_tokens":2048,"display":"summarized"}`, `{"type":"enabled","budget_tokens":2048,"display":"summarized"}`},
		{`{"type":"enabled","budget_tokens":2048}`, `{"type":"enabled","budget_tokens":2048}`},
		{`{"type":"disabled"}`, `{"type":"disabled"}`},
	} {
		body := `{"model":"m","max_tokens":9,"thinking":` + tc.thinking + `,"messages":[{"role":"user","content":"hi"}]}`
		out, err := Reason(Messages, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		var top map[string]json.RawMessage
		_ = json.Unmarshal(out, &top)
		if got := string(top["thinking"]); got != tc.want {
			t.Errorf("thinking %s: the reasoning leg's is %s; want %s", tc.thinking, got, tc.want)
		}
		// The answer leg is not asked to think at all.
		ans, _ := Answer(Messages, []byte(body), "r", Prefill)
		var atop map[string]json.RawMessage
		_ = json.Unmarshal(ans, &atop)
		if _, ok := atop["thinking"]; ok {
			t.Errorf("thinking %s: the answer leg's body keeps it", tc.thinking)
		}
	}
}

// TestAnswerDropsReasoningInclude: the answer leg's Responses body is not
// asked for the reasoning's encrypted content, which OpenAI refuses for a
// model that does not reason and Codex asks for on every request; other
// include values stay, and the reasoning leg keeps it all.
func TestAnswerDropsReasoningInclude(t *testing.T) {
	for _, tc := range []struct{ include, want string }{
		{`["reasoning.encrypted_content"]`, ``},
		{`["reasoning.encrypted_content","file_search_call.results"]`, `["file_search_call.results"]`},
		{`["file_search_call.results"]`, `["file_search_call.results"]`},
		{`"odd"`, `"odd"`},
	} {
		body := `{"model":"m","reasoning":{"summary":"auto"},"include":` + tc.include + `,"input":"hi"}`
		out, err := Answer(Responses, []byte(body), "r", User)
		if err != nil {
			t.Fatal(err)
		}
		var top map[string]json.RawMessage
		_ = json.Unmarshal(out, &top)
		if got := string(top["include"]); got != tc.want {
			t.Errorf("include %s: the answer leg's is %s; want %s", tc.include, got, tc.want)
		}
		if _, ok := top["reasoning"]; ok {
			t.Errorf("include %s: the answer leg keeps reasoning", tc.include)
		}
		reason, _ := Reason(Responses, []byte(body))
		var rtop map[string]json.RawMessage
		_ = json.Unmarshal(reason, &rtop)
		if string(rtop["include"]) != tc.include {
			t.Errorf("include %s: the reasoning leg's is %s", tc.include, rtop["include"])
		}
	}
}
