package anthropic

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// jsonEqual compares two JSON documents by value.
func jsonEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestFromChatRequestRows(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"minimal, default max_tokens",
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`},
		{"system and developer hoisted, in order",
			`{"model":"m","messages":[{"role":"system","content":"a"},{"role":"user","content":"hi"},{"role":"developer","content":[{"type":"text","text":"b"}]}]}`,
			`{"model":"m","max_tokens":4096,"system":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`},
		{"one system text is a string",
			`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`,
			`{"max_tokens":4096,"system":"be brief","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`},
		{"images: data URL and https URL",
			`{"messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}},{"type":"image_url","image_url":{"url":"https://x.test/a.jpg","detail":"high"}}]}]}`,
			`{"max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}},{"type":"image","source":{"type":"url","url":"https://x.test/a.jpg"}}]}]}`},
		{"tool round trip: calls, results merged into one user turn",
			`{"messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{\"city\": \"Paris\"}"}},{"id":"c2","type":"function","function":{"name":"w","arguments":""}}]},{"role":"tool","tool_call_id":"c1","content":"sunny"},{"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"rain"},{"type":"text","text":"cold"}]}]}`,
			`{"max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"weather?"}]},{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"w","input":{"city":"Paris"}},{"type":"tool_use","id":"c2","name":"w","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"sunny"},{"type":"tool_result","tool_use_id":"c2","content":[{"type":"text","text":"rain"},{"type":"text","text":"cold"}]}]}]}`},
		{"tool ids made valid for Messages, the same on both sides",
			`{"messages":[{"role":"assistant","tool_calls":[{"id":"functions.w:0","type":"function","function":{"name":"w","arguments":"{}"}}]},{"role":"tool","tool_call_id":"functions.w:0","content":"ok"}]}`,
			`{"max_tokens":4096,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"functions_w_0","name":"w","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"functions_w_0","content":"ok"}]}]}`},
		{"tools, tool_choice required, parallel off",
			`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"w","description":"d","parameters":{"type":"object","properties":{"c":{"type":"string"}}}}},{"type":"function","function":{"name":"v"}}],"tool_choice":"required","parallel_tool_calls":false}`,
			`{"max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"tools":[{"name":"w","description":"d","input_schema":{"type":"object","properties":{"c":{"type":"string"}}}},{"name":"v","input_schema":{"type":"object"}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`},
		{"tool_choice a named function",
			`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"w"}}],"tool_choice":{"type":"function","function":{"name":"w"}}}`,
			`{"max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"tools":[{"name":"w","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"w"}}`},
		{"sampling, stop, user, stream, max_completion_tokens wins",
			`{"messages":[{"role":"user","content":"x"}],"max_tokens":10,"max_completion_tokens":20,"stop":"END","temperature":1.5,"top_p":0.9,"user":"u-1","stream":true,"stream_options":{"include_usage":true},"seed":3,"presence_penalty":1}`,
			`{"max_tokens":20,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"metadata":{"user_id":"u-1"},"stop_sequences":["END"],"stream":true,"temperature":1,"top_p":0.9}`},
		{"reasoning_effort: thinking budget, max_tokens raised, sampling dropped",
			`{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"medium","max_tokens":1000,"temperature":0.2}`,
			`{"max_tokens":12288,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"thinking":{"type":"enabled","budget_tokens":8192}}`},
		{"no thinking when a tool is forced",
			`{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"high","tools":[{"type":"function","function":{"name":"w"}}],"tool_choice":"required"}`,
			`{"max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"tools":[{"name":"w","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"}}`},
		{"no thinking in the middle of a tool loop",
			`{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"w","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}],"reasoning_effort":"low"}`,
			`{"max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]},{"role":"assistant","content":[{"type":"tool_use","id":"c","name":"w","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"c","content":"r"}]}]}`},
		{"reasoning.effort none: no thinking",
			`{"messages":[{"role":"user","content":"x"}],"reasoning":{"effort":"none"}}`,
			`{"max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := FromChatRequest([]byte(tc.in), chat.Options{})
			if err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, out, tc.want)
		})
	}
}

func TestFromChatRequestRefuses(t *testing.T) {
	for _, tc := range []struct{ in, param string }{
		{`{"messages":[],"n":2}`, "n"},
		{`{"messages":[],"logprobs":true}`, "logprobs"},
		{`{"messages":[],"response_format":{"type":"json_schema"}}`, "response_format"},
		{`{"messages":[],"modalities":["text","audio"]}`, "audio"},
		{`{"messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`, "messages[0].content[0].type"},
		{`{"messages":[{"role":"function","content":"x"}]}`, "messages[0].role"},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/tiff;base64,AA"}}]}]}`, "messages[0].content[0].image_url.url"},
		{`{"messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x"}}]}]}`, "messages[0].content[0].image_url.url"},
		{`{"messages":[],"tools":[{"type":"custom","custom":{}}]}`, "tools[0].type"},
		{`{"messages":"nope"}`, "messages"},
		{`not json`, ""},
	} {
		_, err := FromChatRequest([]byte(tc.in), chat.Options{})
		var re *chat.RequestError
		if !errors.As(err, &re) {
			t.Errorf("%s: err %v, want a *chat.RequestError", tc.in, err)
			continue
		}
		if re.Param != tc.param || re.Message == "" {
			t.Errorf("%s: param %q message %q, want param %q", tc.in, re.Param, re.Message, tc.param)
		}
	}
}

func TestToChatRequestRows(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		opt            chat.Options
	}{
		{"system string, user string",
			`{"model":"m","max_tokens":64,"system":"be brief","messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"max_tokens":64}`, chat.Options{}},
		{"OpenAI: max_completion_tokens",
			`{"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
			`{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":64}`, chat.Options{MaxTokensField: "max_completion_tokens"}},
		{"system blocks with cache_control, a system message in place (Claude Code)",
			`{"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"b"}],"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"text","text":"y"}]},{"role":"system","content":[{"type":"text","text":"env","cache_control":{"type":"ephemeral"}}]}]}`,
			`{"messages":[{"role":"system","content":"a\n\nb"},{"role":"user","content":"x\n\ny"},{"role":"system","content":"env"}]}`, chat.Options{}},
		{"images",
			`{"messages":[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}},{"type":"image","source":{"type":"url","url":"https://x.test/a.png"}}]}]}`,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}},{"type":"image_url","image_url":{"url":"https://x.test/a.png"}}]}]}`, chat.Options{}},
		{"tool round trip; thinking dropped; results before the rest of the turn",
			`{"messages":[{"role":"user","content":"w?"},{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"let me see"},{"type":"tool_use","id":"t1","name":"w","input":{"city": "Paris"}}]},{"role":"user","content":[{"type":"text","text":"also"},{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"sunny"}]},{"type":"tool_result","tool_use_id":"t2","content":"boom","is_error":true}]}]}`,
			`{"messages":[{"role":"user","content":"w?"},{"role":"assistant","content":"let me see","tool_calls":[{"id":"t1","type":"function","function":{"name":"w","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"t1","content":"sunny"},{"role":"tool","tool_call_id":"t2","content":"Error: boom"},{"role":"user","content":"also"}]}`, chat.Options{}},
		{"tools, tool_choice any, parallel off, defer_loading dropped",
			`{"messages":[{"role":"user","content":"x"}],"tools":[{"name":"w","description":"d","input_schema":{"type":"object"},"defer_loading":true,"cache_control":{"type":"ephemeral"}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`,
			`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"w","description":"d","parameters":{"type":"object"}}}],"tool_choice":"required","parallel_tool_calls":false}`, chat.Options{}},
		{"tool_choice tool",
			`{"messages":[{"role":"user","content":"x"}],"tools":[{"name":"w","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"w"}}`,
			`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"w","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"w"}}}`, chat.Options{}},
		{"stop, sampling, user, stream with usage, top_k dropped",
			`{"messages":[{"role":"user","content":"x"}],"stop_sequences":["END"],"temperature":0.5,"top_p":0.9,"top_k":5,"metadata":{"user_id":"u"},"stream":true}`,
			`{"messages":[{"role":"user","content":"x"}],"stop":["END"],"temperature":0.5,"top_p":0.9,"user":"u","stream":true,"stream_options":{"include_usage":true}}`, chat.Options{}},
		{"thinking budget → effort",
			`{"messages":[{"role":"user","content":"x"}],"thinking":{"type":"enabled","budget_tokens":5000}}`,
			`{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"medium"}`, chat.Options{}},
		{"adaptive thinking with output_config.effort (Claude Code)",
			`{"messages":[{"role":"user","content":"x"}],"thinking":{"type":"adaptive","display":"omitted"},"output_config":{"effort":"high"},"context_management":{"edits":[]}}`,
			`{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"high"}`, chat.Options{}},
		{"adaptive alone, disabled: no effort",
			`{"messages":[{"role":"user","content":"x"}],"thinking":{"type":"adaptive"}}`,
			`{"messages":[{"role":"user","content":"x"}]}`, chat.Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ToChatRequest([]byte(tc.in), tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, out, tc.want)
		})
	}
}

func TestToChatRequestRefuses(t *testing.T) {
	for _, tc := range []struct{ in, param string }{
		{`{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","data":"x"}}]}]}`, "messages[0].content[0].type"},
		{`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"image","source":{"type":"url","url":"https://x"}}]}]}]}`, "messages[0].content[0].content[0].type"},
		{`{"messages":[],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, "tools[0].type"},
		{`{"messages":[{"role":"tool","content":"x"}]}`, "messages[0].role"},
		{`{"messages":[{"role":"assistant","content":[{"type":"server_tool_use"}]}]}`, "messages[0].content[0].type"},
		{`{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}`, "messages[0].content[0].source.type"},
		{`[]`, ""},
	} {
		_, err := ToChatRequest([]byte(tc.in), chat.Options{})
		var re *chat.RequestError
		if !errors.As(err, &re) {
			t.Errorf("%s: err %v, want a *chat.RequestError", tc.in, err)
			continue
		}
		if re.Param != tc.param || re.Message == "" {
			t.Errorf("%s: param %q message %q, want param %q", tc.in, re.Param, re.Message, tc.param)
		}
	}
}

// What Claude Code sends (testdata/claudecode/request.json, captured from
// the real CLI) translates, and everything it asks survives the round trip
// back to Messages but what Chat cannot carry.
func TestClaudeCodeRequestTranslates(t *testing.T) {
	raw, err := os.ReadFile("../../../testdata/claudecode/request.json")
	if err != nil {
		t.Skip("no capture yet:", err)
	}
	var capture struct {
		Requests []struct {
			Body json.RawMessage `json:"body"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(raw, &capture); err != nil || len(capture.Requests) == 0 {
		t.Fatalf("capture: %v", err)
	}
	out, err := ToChatRequest(capture.Requests[0].Body, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var chat struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		Tools           []json.RawMessage `json:"tools"`
		ReasoningEffort string            `json:"reasoning_effort"`
		MaxTokens       int               `json:"max_tokens"`
		Stream          bool              `json:"stream"`
	}
	if err := json.Unmarshal(out, &chat); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range chat.Messages {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "system,user,system" {
		t.Errorf("roles %s, want system,user,system", got)
	}
	if !strings.HasSuffix(chat.Messages[1].Content, "Say hi") || len(chat.Tools) != 12 || chat.ReasoningEffort != "high" || chat.MaxTokens != 32000 || !chat.Stream {
		t.Errorf("translated: user %q, %d tools, effort %q, max_tokens %d, stream %v", chat.Messages[1].Content, len(chat.Tools), chat.ReasoningEffort, chat.MaxTokens, chat.Stream)
	}
}

// A Chat request survives the trip to Messages and back in everything
// both dialects carry.
func TestRequestRoundTrip(t *testing.T) {
	in := `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"q"},{"role":"assistant","content":"a","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}],"max_tokens":100,"stop":["E"],"temperature":0.5,"top_p":0.5,"user":"u","tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}],"tool_choice":"auto","stream":true}`
	msg, err := FromChatRequest([]byte(in), chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	back, err := ToChatRequest(msg, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, back, `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"q"},{"role":"assistant","content":"a","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}],"max_tokens":100,"stop":["E"],"temperature":0.5,"top_p":0.5,"user":"u","tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}],"tool_choice":"auto","stream":true,"stream_options":{"include_usage":true}}`)
}

// Prompts keep <, > and & as they are: no \u003c.
func TestRequestKeepsMarkup(t *testing.T) {
	out, err := FromChatRequest([]byte(`{"messages":[{"role":"user","content":"<a> & <b>"}]}`), chat.Options{})
	if err != nil || !strings.Contains(string(out), `"<a> & <b>"`) {
		t.Fatalf("%v: %s", err, out)
	}
}
