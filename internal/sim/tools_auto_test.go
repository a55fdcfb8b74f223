package sim

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestToolCallsAuto: in the auto mode (config or X-Sim-Tool-Calls) a
// request with tools that leaves the choice to the model gets a call of
// its first tool, in every dialect; "none", a tool result as the last
// turn, or the forced mode gets text.
func TestToolCallsAuto(t *testing.T) {
	type dialect struct {
		path, call, first string // first: the call of the first tool
		// bodies: the choice left to the model (absent, then explicit
		// auto), refused, and after the tool's result.
		absent, auto, none, answered string
	}
	dialects := map[string]dialect{
		"chat": {"/v1/chat/completions", `"tool_calls"`, `"name":"first","arguments"`,
			`{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"first"}},{"type":"function","function":{"name":"second"}}]}`,
			`{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"first"}}],"tool_choice":"auto"}`,
			`{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"first"}}],"tool_choice":"none"}`,
			`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"first","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}],"tools":[{"type":"function","function":{"name":"first"}}]}`},
		"messages": {"/v1/messages", `"type":"tool_use"`, `"name":"first","input"`,
			`{"max_tokens":9,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"first"},{"name":"second"}]}`,
			`{"max_tokens":9,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"first"}],"tool_choice":{"type":"auto"}}`,
			`{"max_tokens":9,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"first"}],"tool_choice":{"type":"none"}}`,
			`{"max_tokens":9,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"first","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}],"tools":[{"name":"first"}]}`},
		"responses": {"/v1/responses", `"type":"function_call"`, `"name":"first","arguments"`,
			`{"input":"hi","tools":[{"type":"function","name":"first"},{"type":"function","name":"second"}]}`,
			`{"input":"hi","tools":[{"type":"function","name":"first"}],"tool_choice":"auto"}`,
			`{"input":"hi","tools":[{"type":"function","name":"first"}],"tool_choice":"none"}`,
			`{"input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c","name":"first","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok"}],"tools":[{"type":"function","name":"first"}]}`},
		"gemini": {"/v1beta/models/m:generateContent", `"functionCall"`, `"name":"first","args"`,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"first"},{"name":"second"}]}]}`,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"first"}]}],"toolConfig":{"functionCallingConfig":{"mode":"AUTO"}}}`,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"first"}]}],"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}}`,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"functionCall":{"name":"first","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"first","response":{}}}]}],"tools":[{"functionDeclarations":[{"name":"first"}]}]}`},
	}
	cfg := Config{ReasoningTokens: new(2), ContentTokens: new(3), ReasoningPattern: fast, ContentPattern: fast}
	auto := cfg
	auto.ToolCalls = ToolCallsAuto
	_, forcedTS := startServer(t, cfg)
	_, autoTS := startServer(t, auto)

	ask := func(t *testing.T, base, path, header, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if header != "" {
			req.Header.Set(ToolCallsHeader, header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for name, d := range dialects {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				what, base, header, body string
				call                     bool
			}{
				{"config auto, no choice", autoTS.URL, "", d.absent, true},
				{"config auto, auto", autoTS.URL, "", d.auto, true},
				{"config auto, none", autoTS.URL, "", d.none, false},
				{"config auto, after the result", autoTS.URL, "", d.answered, false},
				{"header forced over config auto", autoTS.URL, ToolCallsForced, d.absent, false},
				{"header auto", forcedTS.URL, ToolCallsAuto, d.absent, true},
				{"forced, no choice", forcedTS.URL, "", d.absent, false},
			} {
				code, body := ask(t, tc.base, d.path, tc.header, tc.body)
				if code != 200 {
					t.Fatalf("%s: %d %s", tc.what, code, body)
				}
				if got := strings.Contains(body, d.call); got != tc.call {
					t.Errorf("%s: call %v, want %v: %s", tc.what, got, tc.call, body)
				}
				if tc.call && !strings.Contains(body, d.first) {
					t.Errorf("%s: not a call of the first tool: %s", tc.what, body)
				}
			}
			if code, body := ask(t, forcedTS.URL, d.path, "sometimes", d.absent); code != 400 || !strings.Contains(body, ToolCallsHeader) {
				t.Errorf("bad header: %d %s", code, body)
			}
		})
	}
	if _, err := New(Config{ToolCalls: "always"}); err == nil || !strings.Contains(err.Error(), "tool calls") {
		t.Errorf("New with an unknown mode: %v", err)
	}
}
