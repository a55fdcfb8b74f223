package responses

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// jsonEq compares two JSON texts by value.
func jsonEq(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %v: %s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestToChatRequest(t *testing.T) {
	cases := []struct {
		name, in string
		opt      chat.Options
		want     string
	}{
		{"input string", `{"model":"m","input":"hi"}`, chat.Options{},
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"instructions first", `{"model":"m","instructions":"be brief","input":"hi"}`, chat.Options{},
			`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`},
		{"message items and parts", `{"model":"m","input":[
			{"role":"developer","content":"dev"},
			{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
			{"type":"message","role":"assistant","content":[{"type":"output_text","text":"c","annotations":[]}]},
			{"type":"message","role":"system","content":"sys"}]}`, chat.Options{},
			`{"model":"m","messages":[{"role":"system","content":"dev"},{"role":"user","content":"ab"},
			{"role":"assistant","content":"c"},{"role":"system","content":"sys"}]}`},
		{"image", `{"input":[{"role":"user","content":[{"type":"input_text","text":"what"},{"type":"input_image","image_url":"data:image/png;base64,AA","detail":"low"}]}]}`, chat.Options{},
			`{"messages":[{"role":"user","content":[{"type":"text","text":"what"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA","detail":"low"}}]}]}`},
		{"calls and outputs, reasoning dropped", `{"input":[
			{"role":"user","content":"go"},
			{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA"},
			{"type":"message","role":"assistant","content":[{"type":"output_text","text":"calling"}]},
			{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":"{\"a\":1}"},
			{"type":"function_call","call_id":"call_2","name":"g","arguments":"{}"},
			{"type":"function_call_output","call_id":"call_1","output":"one"},
			{"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"two"}]},
			{"type":"function_call","call_id":"call_3","name":"h","arguments":"{}"}]}`, chat.Options{},
			`{"messages":[{"role":"user","content":"go"},
			{"role":"assistant","content":"calling","tool_calls":[
				{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},
				{"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"call_1","content":"one"},
			{"role":"tool","tool_call_id":"call_2","content":"two"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"call_3","type":"function","function":{"name":"h","arguments":"{}"}}]}]}`},
		{"tools and choice", `{"input":"x","parallel_tool_calls":false,"tool_choice":{"type":"function","name":"f"},
			"tools":[{"type":"function","name":"f","description":"d","parameters":{"type":"object"},"strict":true},{"type":"function","name":"g"}]}`, chat.Options{},
			`{"messages":[{"role":"user","content":"x"}],"parallel_tool_calls":false,"tool_choice":{"type":"function","function":{"name":"f"}},
			"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"},"strict":true}},
			{"type":"function","function":{"name":"g","parameters":{"type":"object","properties":{}}}}]}`},
		{"tool_choice string", `{"input":"x","tool_choice":"required","tools":[{"type":"function","name":"f","parameters":{}}]}`, chat.Options{},
			`{"messages":[{"role":"user","content":"x"}],"tool_choice":"required","tools":[{"type":"function","function":{"name":"f","parameters":{}}}]}`},
		{"no tools: tool_choice and parallel_tool_calls dropped", `{"input":"x","tool_choice":"auto","parallel_tool_calls":true,"tools":[]}`, chat.Options{},
			`{"messages":[{"role":"user","content":"x"}]}`},
		{"max_output_tokens default", `{"input":"x","max_output_tokens":100}`, chat.Options{},
			`{"messages":[{"role":"user","content":"x"}],"max_tokens":100}`},
		{"max_output_tokens openai", `{"input":"x","max_output_tokens":100}`, chat.Options{MaxTokensField: "max_completion_tokens"},
			`{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":100}`},
		{"reasoning effort, summary dropped", `{"input":"x","reasoning":{"effort":"high","summary":"auto"}}`, chat.Options{},
			`{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"high"}`},
		{"json_schema", `{"input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"},"strict":true}}}`, chat.Options{},
			`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"},"strict":true}}}`},
		{"json_object", `{"input":"x","text":{"format":{"type":"json_object"}}}`, chat.Options{},
			`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`},
		{"text format", `{"input":"x","text":{"format":{"type":"text"},"verbosity":"low"}}`, chat.Options{},
			`{"messages":[{"role":"user","content":"x"}]}`},
		{"sampling, user, stream, dropped members", `{"input":"x","temperature":0.5,"top_p":0.9,"safety_identifier":"u1","stream":true,
			"metadata":{"k":"v"},"include":["reasoning.encrypted_content"],"store":false,"previous_response_id":null,"background":false}`, chat.Options{},
			`{"messages":[{"role":"user","content":"x"}],"temperature":0.5,"top_p":0.9,"user":"u1","stream":true,"stream_options":{"include_usage":true}}`},
		{"user", `{"input":"x","user":"u0"}`, chat.Options{},
			`{"messages":[{"role":"user","content":"x"}],"user":"u0"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ToChatRequest([]byte(c.in), c.opt)
			if err != nil {
				t.Fatal(err)
			}
			jsonEq(t, got, c.want)
		})
	}
}

func TestToChatRequestRefusals(t *testing.T) {
	cases := []struct{ name, in, param string }{
		{"not json", `{`, ""},
		{"previous_response_id", `{"input":"x","previous_response_id":"resp_1"}`, "previous_response_id"},
		{"store", `{"input":"x","store":true}`, "store"},
		{"background", `{"input":"x","background":true}`, "background"},
		{"conversation", `{"input":"x","conversation":"conv_1"}`, "conversation"},
		{"item_reference", `{"input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].type"},
		{"output without call_id", `{"input":[{"type":"function_call_output","output":"x"}]}`, "input[0].call_id"},
		{"call without name", `{"input":[{"type":"function_call","call_id":"c","arguments":"{}"}]}`, "input[0].name"},
		{"bad role", `{"input":[{"role":"tool","content":"x"}]}`, "input[0].role"},
		{"input_file", `{"input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, "input[0].content[0].type"},
		{"image by file_id", `{"input":[{"role":"user","content":[{"type":"input_image","file_id":"f"}]}]}`, "input[0].content[0]"},
		{"bad tool_choice", `{"input":"x","tool_choice":{"type":"web_search"}}`, "tool_choice"},
		{"bad format", `{"input":"x","text":{"format":{"type":"xml"}}}`, "text.format.type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ToChatRequest([]byte(c.in), chat.Options{})
			var re *chat.RequestError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want a *chat.RequestError", err)
			}
			if re.Param != c.param || re.Message == "" {
				t.Errorf("param %q message %q, want param %q", re.Param, re.Message, c.param)
			}
		})
	}
}

// Codex CLI offers hosted tools (web_search, a namespace) beside its
// functions with every request: they are dropped, the functions kept.
func TestHostedToolsDropped(t *testing.T) {
	out, err := ToChatRequest([]byte(`{"input":"x","tools":[{"type":"function","name":"f","parameters":{"type":"object"}},{"type":"web_search"},{"type":"namespace","name":"multi_agent_v1","tools":[]},{"type":"custom","name":"c"}],"tool_choice":"auto"}`), chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var chat struct {
		Tools []struct {
			Function struct{ Name string } `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(out, &chat); err != nil || len(chat.Tools) != 1 || chat.Tools[0].Function.Name != "f" {
		t.Fatalf("%v: %s", err, out)
	}
}

// What Codex CLI sends (testdata/codex/request.json, captured from the
// real CLI) translates: its messages in order, its function tools, no
// hosted tools, no encrypted reasoning asked for.
func TestCodexRequestTranslates(t *testing.T) {
	raw, err := os.ReadFile("../../../testdata/codex/request.json")
	if err != nil {
		t.Fatal(err)
	}
	var capture struct {
		Requests []struct {
			Body json.RawMessage `json:"body"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(raw, &capture); err != nil || len(capture.Requests) != 1 {
		t.Fatalf("capture: %v", err)
	}
	out, err := ToChatRequest(capture.Requests[0].Body, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var chat struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
		Tools   []json.RawMessage `json:"tools"`
		Stream  bool              `json:"stream"`
		Include json.RawMessage   `json:"include"`
	}
	if err := json.Unmarshal(out, &chat); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range chat.Messages {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "system,system,user,user" || len(chat.Tools) != 7 || !chat.Stream || chat.Include != nil {
		t.Errorf("roles %s, %d tools, stream %v, include %s", got, len(chat.Tools), chat.Stream, chat.Include)
	}
}
