package anthropic

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// The request translators, fuzzed for loss (issue 25): whatever the body,
// either the translator refuses it (a *chat.RequestError, checked by
// checkTranslation), or its output carries every text, every tool call,
// every tool result, every tool and a named tool_choice of the input, and
// thinking when the input asked for it. The body is read here on its own
// terms, not with the translators' types.

// reqText is any content member: a string, or parts with a type and text.
func reqTexts(raw json.RawMessage) []string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}
	}
	var parts []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		switch p.Type {
		case "text":
			out = append(out, p.Text)
		case "tool_result":
			out = append(out, reqTexts(p.Content)...)
		}
	}
	return out
}

// missingTexts returns the non-empty texts of in not found in out's bytes
// (out holds them as JSON strings: each is looked for encoded).
func missingTexts(in []string, out []byte) []string {
	var missing []string
	for _, s := range in {
		if s == "" {
			continue
		}
		enc := strings.Trim(string(marshal(s)), `"`)
		if !strings.Contains(string(out), enc) {
			missing = append(missing, s)
		}
	}
	return missing
}

func FuzzToChatRequestKeeps(f *testing.F) {
	f.Add([]byte(`{"model":"m","max_tokens":5,"system":"s","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"tool_use","id":"t","name":"f","input":{"x":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"},{"type":"text","text":"go"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"},"thinking":{"type":"enabled","budget_tokens":2048}}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":null},{"role":"assistant","content":[]}],"tool_choice":{"type":"tool"},"thinking":{"type":"enabled","budget_tokens":-1}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := ToChatRequest(b, chat.Options{})
		checkTranslation(t, out, err)
		if err != nil {
			return
		}
		var in struct {
			System   json.RawMessage `json:"system"`
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
			Tools      []json.RawMessage `json:"tools"`
			ToolChoice struct {
				Type, Name string
			} `json:"tool_choice"`
			Thinking struct{ Type string } `json:"thinking"`
		}
		_ = json.Unmarshal(b, &in)
		var texts []string
		uses, results := 0, 0
		for _, m := range in.Messages {
			texts = append(texts, reqTexts(m.Content)...)
			uses += strings.Count(string(m.Content), `"tool_use"`)
			results += strings.Count(string(m.Content), `"tool_result"`)
		}
		texts = append(texts, reqTexts(in.System)...)
		var got struct {
			Messages []struct {
				Role      string            `json:"role"`
				ToolCalls []json.RawMessage `json:"tool_calls"`
			} `json:"messages"`
			Tools      []json.RawMessage `json:"tools"`
			ToolChoice struct {
				Function struct{ Name string } `json:"function"`
			} `json:"tool_choice"`
			ReasoningEffort string `json:"reasoning_effort"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("output %s: %v", out, err)
		}
		calls, tools := 0, 0
		for _, m := range got.Messages {
			calls += len(m.ToolCalls)
			if m.Role == "tool" {
				tools++
			}
		}
		// A tool_use or tool_result block counts where its type is named
		// (a text may say "tool_use" too: then the counts only bound).
		if calls > uses || tools > results {
			t.Fatalf("more calls or results than the input named: %s\n→ %s", b, out)
		}
		if missing := missingTexts(texts, out); len(missing) > 0 {
			t.Fatalf("texts lost %q: %s\n→ %s", missing, b, out)
		}
		if len(got.Tools) != len(in.Tools) {
			t.Fatalf("%d tools of %d: %s\n→ %s", len(got.Tools), len(in.Tools), b, out)
		}
		if in.ToolChoice.Type == "tool" && len(in.Tools) > 0 && got.ToolChoice.Function.Name != in.ToolChoice.Name {
			t.Fatalf("tool_choice %q lost: %s\n→ %s", in.ToolChoice.Name, b, out)
		}
		if in.Thinking.Type == "enabled" && got.ReasoningEffort == "" {
			t.Fatalf("thinking lost: %s\n→ %s", b, out)
		}
	})
}

func FuzzFromChatRequestKeeps(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":"a","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},{"role":"tool","tool_call_id":"c","content":"r"},{"role":"user","content":"go"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}},"reasoning_effort":"low"}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":null},{"role":"assistant"}],"tool_choice":{"type":"function","function":{}},"reasoning_effort":"extreme"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := FromChatRequest(b, chat.Options{})
		checkTranslation(t, out, err)
		if err != nil {
			return
		}
		var in struct {
			Messages []struct {
				Role      string            `json:"role"`
				Content   json.RawMessage   `json:"content"`
				ToolCalls []json.RawMessage `json:"tool_calls"`
			} `json:"messages"`
			Tools      []json.RawMessage `json:"tools"`
			ToolChoice struct {
				Type     string
				Function struct{ Name string }
			} `json:"tool_choice"`
		}
		_ = json.Unmarshal(b, &in)
		var texts []string
		calls, results := 0, 0
		for _, m := range in.Messages {
			texts = append(texts, reqTexts(m.Content)...)
			calls += len(m.ToolCalls)
			if m.Role == "tool" {
				results++
			}
		}
		var got struct {
			Messages []struct {
				Content []struct{ Type string } `json:"content"`
			} `json:"messages"`
			Tools      []json.RawMessage           `json:"tools"`
			ToolChoice struct{ Type, Name string } `json:"tool_choice"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("output %s: %v", out, err)
		}
		uses, tres := 0, 0
		for _, m := range got.Messages {
			for _, c := range m.Content {
				switch c.Type {
				case "tool_use":
					uses++
				case "tool_result":
					tres++
				}
			}
		}
		if uses != calls || tres != results {
			t.Fatalf("%d tool_use of %d calls, %d tool_result of %d tool messages: %s\n→ %s", uses, calls, tres, results, b, out)
		}
		if missing := missingTexts(texts, out); len(missing) > 0 {
			t.Fatalf("texts lost %q: %s\n→ %s", missing, b, out)
		}
		if len(got.Tools) != len(in.Tools) {
			t.Fatalf("%d tools of %d: %s\n→ %s", len(got.Tools), len(in.Tools), b, out)
		}
		if in.ToolChoice.Type == "function" && len(in.Tools) > 0 && got.ToolChoice.Name != in.ToolChoice.Function.Name {
			t.Fatalf("tool_choice %q lost: %s\n→ %s", in.ToolChoice.Function.Name, b, out)
		}
	})
}
