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
	if Render([]Message{{Role: "user"}}, 0) != "" {
		t.Error("empty")
	}
}

// TestOutput: an answer's output message from a whole Chat answer and
// from a stream in each client dialect (the relay's own translations of
// one answer: reasoning, text and two tool calls), the same message.
func TestOutput(t *testing.T) {
	want := `[{"role":"assistant","parts":[{"type":"reasoning","content":"thinking"},{"type":"text","content":"hello"},{"type":"tool_call","id":"call_1","name":"get_weather","arguments":{"city":"Paris"}},{"type":"tool_call","id":"call_2","name":"get_time","arguments":{"tz":"CET"}}],"finish_reason":"tool_call"}]`
	whole := `{"id":"c","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"hello","reasoning_content":"thinking",
	  "tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
	                {"id":"call_2","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"CET\"}"}}]}}]}`
	if got := OutputFromChat([]byte(whole), 4096); got != want {
		t.Errorf("whole:\n got %s\nwant %s", got, want)
	}
	if OutputFromChat([]byte(`{"choices":[{"message":{"content":""}}]}`), 4096) != "" || OutputFromChat([]byte(`not json`), 4096) != "" {
		t.Error("an answer without content has an output message")
	}
	streams := map[string][]string{
		DialectChat: {
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"get_time","arguments":"{\"tz\""}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}},{"index":1,"function":{"arguments":":\"CET\"}"}}]}}]}`,
			`{"choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"id":"call_9","function":{"name":"other_choice"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		},
		DialectMessages: {
			`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"call_1","name":"get_weather","input":{}}}`,
			`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`,
			`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}`,
			`{"type":"content_block_stop","index":2}`,
			`{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"call_2","name":"get_time","input":{"tz":"CET"}}}`,
		},
		DialectResponses: {
			`{"type":"response.output_item.added","output_index":2,"item":{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":""}}`,
			`{"type":"response.function_call_arguments.delta","output_index":2,"delta":"{\"city\":"}`,
			`{"type":"response.output_item.done","output_index":2,"item":{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}`,
			`{"type":"response.output_item.done","output_index":3,"item":{"type":"function_call","call_id":"call_2","name":"get_time","arguments":"{\"tz\":\"CET\"}"}}`,
		},
	}
	for dialect, events := range streams {
		c := NewCollector(4096)
		c.AddText(true, []byte("think"))
		c.AddText(true, []byte("ing"))
		c.AddText(false, []byte("hello"))
		for _, e := range events {
			c.ScanEvent(dialect, []byte(e))
		}
		finish := map[string]string{DialectChat: "tool_calls", DialectMessages: "tool_use", DialectResponses: "completed"}[dialect]
		if got := c.Output(dialect, finish); got != want {
			t.Errorf("%s stream:\n got %s\nwant %s", dialect, got, want)
		}
	}
	// A call cut short keeps its arguments as a string; the text is
	// bounded.
	c := NewCollector(200)
	c.AddText(false, []byte(strings.Repeat("x", 300)))
	c.ScanEvent(DialectChat, []byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\":"}}]}}]}`))
	if got := c.Output(DialectChat, ""); len(got) > 200 || !json.Valid([]byte(got)) || !strings.Contains(got, Truncated) {
		t.Errorf("bounded: %s", got)
	}
	c = NewCollector(4096)
	c.ScanEvent(DialectChat, []byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\":"}}]}}]}`))
	if got := c.Output(DialectChat, ""); got != `[{"role":"assistant","parts":[{"type":"tool_call","id":"c","name":"f","arguments":"{\"a\":"}]}]` {
		t.Errorf("cut short: %s", got)
	}
	if NewCollector(4096).Output(DialectChat, "stop") != "" {
		t.Error("nothing gathered, an output message")
	}
	for _, c := range []struct{ dialect, reason, want string }{
		{DialectChat, "stop", "stop"}, {DialectMessages, "end_turn", "stop"}, {DialectMessages, "max_tokens", "length"},
		{DialectResponses, "completed", "stop"}, {DialectResponses, "max_output_tokens", "length"}, {DialectChat, "content_filter", "content_filter"},
		{DialectMessages, "refusal", "content_filter"}, {DialectChat, "odd", "odd"},
	} {
		if got := OutputFinishReason(c.dialect, c.reason, false); got != c.want {
			t.Errorf("%s %s: %s, want %s", c.dialect, c.reason, got, c.want)
		}
	}
}

// FuzzCollector: any events in any dialect and any answer, no panic, the
// output valid JSON within the bound, the calls bounded.
func FuzzCollector(f *testing.F) {
	f.Add("chat", []byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]}}]}`), 200)
	f.Add("messages", []byte(`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{"a":1}}}`), 100)
	f.Add("responses", []byte(`{"type":"response.output_item.done","output_index":0,"item":{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}}`), 100)
	f.Fuzz(func(t *testing.T, dialect string, data []byte, max int) {
		max = max % 5000
		c := NewCollector(max)
		for i := range 20 {
			c.AddText(i%2 == 0, data)
			c.ScanEvent(dialect, data)
		}
		if len(c.calls) > maxCalls {
			t.Fatalf("%d calls", len(c.calls))
		}
		for _, got := range []string{c.Output(dialect, "stop"), OutputFromChat(data, max)} {
			if got != "" && (len(got) > max || !json.Valid([]byte(got))) {
				t.Fatalf("max %d: %s", max, got)
			}
		}
	})
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
