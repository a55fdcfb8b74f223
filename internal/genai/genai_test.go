package genai

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestProviderName(t *testing.T) {
	for _, c := range []struct{ override, api, url, want string }{
		{"", "openai", "https://api.openai.com/v1", "openai"},
		{"", "chat", "https://api.deepseek.com/v1", "deepseek"},
		{"", "chat", "https://generativelanguage.googleapis.com/v1beta/openai", "gcp.gemini"},
		{"", "anthropic", "https://api.anthropic.com/v1", "anthropic"},
		{"", "gemini", "http://127.0.0.1:9150/v1beta", "gcp.gemini"},
		{"", "chat", "http://127.0.0.1:8000/v1", "openai"},
		{"", "openai", "https://myres.openai.azure.com/openai/v1", "azure.ai.openai"},
		{"vllm", "chat", "http://127.0.0.1:8000/v1", "vllm"},
	} {
		if got := ProviderName(c.override, c.api, c.url); got != c.want {
			t.Errorf("%+v: %q", c, got)
		}
	}
}

func TestOperationAndServer(t *testing.T) {
	for _, c := range []struct{ api, rest, want string }{
		{"openai", "chat/completions", "chat"}, {"anthropic", "messages", "chat"}, {"openai", "responses", "chat"},
		{"gemini", "models/gemini-2.5-flash:streamGenerateContent", "generate_content"},
		{"openai", "completions", "text_completion"}, {"openai", "embeddings", "embeddings"},
		{"openai", "audio/speech", "audio/speech"},
	} {
		if got := Operation(c.api, c.rest); got != c.want {
			t.Errorf("%+v: %q", c, got)
		}
	}
	if h, p := Server("https://api.openai.com/v1"); h != "api.openai.com" || p != 443 {
		t.Errorf("%s %d", h, p)
	}
	if h, p := Server("http://127.0.0.1:9160/sim/v1"); h != "127.0.0.1" || p != 9160 {
		t.Errorf("%s %d", h, p)
	}
	if ErrorTypeOf("status", 503) != "503" || ErrorTypeOf("timeout", 0) != "timeout" || ErrorTypeOf("", 0) != "_OTHER" {
		t.Error("error.type")
	}
}

// TestFacts reads the id, model and finish reasons of each dialect's
// stream and whole answer.
func TestFacts(t *testing.T) {
	var f Facts
	for _, ev := range []string{
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","model":"gpt-x","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","model":"gpt-x","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	} {
		f.ScanEvent(DialectChat, []byte(ev))
	}
	if f.ID != "chatcmpl-1" || f.Model != "gpt-x" || strings.Join(f.FinishReasons, ",") != "tool_calls" {
		t.Errorf("chat: %+v", f)
	}
	f = Facts{}
	f.ScanEvent(DialectMessages, []byte(`{"type":"message_start","message":{"id":"msg_1","model":"claude-x","usage":{}}}`))
	f.ScanEvent(DialectMessages, []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"stop_reason"}}`))
	f.ScanEvent(DialectMessages, []byte(`{"type":"message_delta","delta":{"stop_reason":"end_turn"}}`))
	if f.ID != "msg_1" || f.Model != "claude-x" || strings.Join(f.FinishReasons, ",") != "end_turn" {
		t.Errorf("messages: %+v", f)
	}
	f = Facts{}
	f.ScanEvent(DialectResponses, []byte(`{"type":"response.created","response":{"id":"resp_1","model":"gpt-y","status":"in_progress"}}`))
	f.ScanEvent(DialectResponses, []byte(`{"type":"response.completed","response":{"id":"resp_1","model":"gpt-y","status":"completed"}}`))
	if f.ID != "resp_1" || f.Model != "gpt-y" || strings.Join(f.FinishReasons, ",") != "completed" {
		t.Errorf("responses: %+v", f)
	}
	f = Facts{}
	f.ScanAnswer(DialectChat, []byte(`{"id":"c2","model":"m","choices":[{"finish_reason":"stop"},{"finish_reason":"length"}]}`))
	if f.ID != "c2" || strings.Join(f.FinishReasons, ",") != "stop,length" {
		t.Errorf("whole chat: %+v", f)
	}
	f = Facts{}
	f.ScanAnswer(DialectResponses, []byte(`{"id":"resp_2","model":"m","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}`))
	if f.ID != "resp_2" || strings.Join(f.FinishReasons, ",") != "max_output_tokens" {
		t.Errorf("whole responses: %+v", f)
	}
}

// TestContent renders the conventions' message forms, within the bound.
func TestContent(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"weather?"}]},
	  {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
	  {"role":"tool","tool_call_id":"call_1","content":"sunny"}]}`
	got := InputFromChat([]byte(body), 4096)
	want := `[{"role":"system","parts":[{"type":"text","content":"be brief"}]},{"role":"user","parts":[{"type":"text","content":"weather?"}]},{"role":"assistant","parts":[{"type":"tool_call","id":"call_1","name":"get_weather","arguments":{"city":"Paris"}}]},{"role":"tool","parts":[{"type":"tool_call_response","id":"call_1","response":"sunny"}]}]`
	if got != want {
		t.Errorf("input:\n got %s\nwant %s", got, want)
	}
	long := `{"messages":[{"role":"user","content":"` + strings.Repeat("é", 5000) + `"},{"role":"user","content":"last"}]}`
	got = InputFromChat([]byte(long), 1024)
	if len(got) > 1024 || !json.Valid([]byte(got)) || !strings.Contains(got, Truncated) || !strings.Contains(got, `"last"`) {
		t.Errorf("bounded input (%d bytes): %s", len(got), got)
	}
	out := Output("hello", "thinking", "stop", 4096)
	if out != `[{"role":"assistant","parts":[{"type":"reasoning","content":"thinking"},{"type":"text","content":"hello"}],"finish_reason":"stop"}]` {
		t.Errorf("output: %s", out)
	}
	if Output("", "", "stop", 100) != "" || Render([]Message{{Role: "user"}}, 0) != "" {
		t.Error("empty")
	}
}

// FuzzRender: whatever the texts and the bound, the result is valid JSON
// within the bound, or "".
func FuzzRender(f *testing.F) {
	f.Add("hello", "why", `{"a":1}`, 64)
	f.Add(strings.Repeat("x", 300), "", "not json", 40)
	f.Fuzz(func(t *testing.T, text, reasoning, args string, max int) {
		max = max % 5000
		msgs := []Message{{Role: "user", Parts: []Part{{Type: "text", Content: reasoning}}},
			{Role: "assistant", Parts: []Part{{Type: "text", Content: text}, {Type: "tool_call", Name: "f", Arguments: mustJSON(args)}}}}
		got := Render(msgs, max)
		if got == "" {
			return
		}
		if len(got) > max || !json.Valid([]byte(got)) {
			t.Fatalf("max %d: %d bytes, valid %v: %s", max, len(got), json.Valid([]byte(got)), got)
		}
	})
}

func mustJSON(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// FuzzFacts: any event or answer in any dialect, no panic, the finish
// reasons bounded.
func FuzzFacts(f *testing.F) {
	f.Add("chat", []byte(`{"id":"x","choices":[{"finish_reason":"stop"}]}`))
	f.Add("messages", []byte(`{"type":"message_start","message":{"id":"m"}}`))
	f.Add("responses", []byte(`{"type":"response.completed","response":{"status":"completed"}}`))
	f.Fuzz(func(t *testing.T, dialect string, data []byte) {
		var f Facts
		for range 20 {
			f.ScanEvent(dialect, data)
			f.ScanAnswer(dialect, data)
		}
		if len(f.FinishReasons) > maxFinishReasons {
			t.Fatalf("%d finish reasons", len(f.FinishReasons))
		}
	})
}

// FuzzInputFromChat: any body, within the bound.
func FuzzInputFromChat(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"}]}`), 100)
	f.Fuzz(func(t *testing.T, body []byte, max int) {
		max = max % 5000
		got := InputFromChat(body, max)
		if got != "" && (len(got) > max || !json.Valid([]byte(got))) {
			t.Fatalf("max %d: %s", max, got)
		}
	})
}
