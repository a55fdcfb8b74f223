package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// FuzzToChatRequestKeeps fuzzes the translation for loss (issue 25):
// whatever the body, either it is refused (a *chat.RequestError), or the Chat
// request carries every text, function call, function output and
// function tool of the input, and a named tool_choice. The body is read
// here on its own terms, not with the translator's types.
func FuzzToChatRequestKeeps(f *testing.F) {
	f.Add([]byte(`{"model":"m","instructions":"be brief","input":[{"role":"user","content":[{"type":"input_text","text":"a"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"o"},{"role":"assistant","content":"b"}],"tools":[{"type":"function","name":"f","parameters":{}},{"type":"web_search"}],"tool_choice":{"type":"function","name":"f"}}`))
	f.Add([]byte(`{"input":[{"role":"user","content":null}],"tools":[{"type":"web_search"}],"tool_choice":"required"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := ToChatRequest(b, chat.Options{})
		if err != nil {
			return // FuzzToChatRequest checks the error's type
		}
		var in struct {
			Instructions string          `json:"instructions"`
			Input        json.RawMessage `json:"input"`
			Tools        []struct {
				Type string `json:"type"`
			} `json:"tools"`
			ToolChoice struct {
				Type, Name string
			} `json:"tool_choice"`
		}
		_ = json.Unmarshal(b, &in)
		texts := []string{in.Instructions}
		calls, outputs, fns := 0, 0, 0
		var s string
		if json.Unmarshal(in.Input, &s) == nil {
			texts = append(texts, s)
		}
		var items []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
			Output  json.RawMessage `json:"output"`
		}
		_ = json.Unmarshal(in.Input, &items)
		for _, it := range items {
			switch it.Type {
			case "function_call":
				calls++
			case "function_call_output":
				outputs++
				texts = append(texts, partTexts(it.Output)...)
			case "", "message":
				texts = append(texts, partTexts(it.Content)...)
			}
		}
		for _, tl := range in.Tools {
			if tl.Type == "function" {
				fns++
			}
		}
		var got struct {
			Messages []struct {
				Role      string            `json:"role"`
				ToolCalls []json.RawMessage `json:"tool_calls"`
			} `json:"messages"`
			Tools      []json.RawMessage `json:"tools"`
			ToolChoice struct {
				Function struct{ Name string } `json:"function"`
			} `json:"tool_choice"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("output %s: %v", out, err)
		}
		gotCalls, gotOutputs := 0, 0
		for _, m := range got.Messages {
			gotCalls += len(m.ToolCalls)
			if m.Role == "tool" {
				gotOutputs++
			}
		}
		if gotCalls != calls || gotOutputs != outputs || len(got.Tools) != fns {
			t.Fatalf("calls %d of %d, outputs %d of %d, tools %d of %d: %s\n→ %s", gotCalls, calls, gotOutputs, outputs, len(got.Tools), fns, b, out)
		}
		for _, s := range texts {
			if enc := strings.Trim(string(marshal(s)), `"`); s != "" && !strings.Contains(string(out), enc) {
				t.Fatalf("text %q lost: %s\n→ %s", s, b, out)
			}
		}
		if in.ToolChoice.Type == "function" && fns > 0 && got.ToolChoice.Function.Name != in.ToolChoice.Name {
			t.Fatalf("tool_choice %q lost: %s\n→ %s", in.ToolChoice.Name, b, out)
		}
	})
}

// partTexts is the text of a content or output member: a string, or the
// text of its parts.
func partTexts(raw json.RawMessage) []string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}
	}
	var parts []struct {
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	}
	_ = json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		out = append(out, p.Text, p.Refusal)
	}
	return out
}
