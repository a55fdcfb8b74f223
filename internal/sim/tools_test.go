package sim

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestToolRuleChat(t *testing.T) {
	const tools = `"tools":[{"type":"function","function":{"name":"first"}},{"type":"function","function":{"name":"second"}}]`
	const user = `"messages":[{"role":"user","content":"hi"}]`
	const result = `"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"first","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"42"}]`
	for _, tc := range []struct{ name, body, want string }{
		{"required", tools + `,"tool_choice":"required",` + user, "first"},
		{"named", tools + `,"tool_choice":{"type":"function","function":{"name":"second"}},` + user, "second"},
		{"named without a name", tools + `,"tool_choice":{"type":"function"},` + user, "first"},
		{"auto", tools + `,"tool_choice":"auto",` + user, ""},
		{"none", tools + `,"tool_choice":"none",` + user, ""},
		{"no choice", tools + `,` + user, ""},
		{"no tools", `"tool_choice":"required",` + user, ""},
		{"odd choice", tools + `,"tool_choice":{"type":"allowed_tools"},` + user, ""},
		{"after a tool result", tools + `,"tool_choice":"required",` + result, ""},
		{"no messages", tools + `,"tool_choice":"required"`, "first"},
	} {
		var req chatRequest
		if err := json.Unmarshal([]byte("{"+tc.body+"}"), &req); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := ""
		if call := req.chatToolCall(); call != nil {
			got = call.name
		}
		if got != tc.want {
			t.Errorf("%s: tool %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestToolRuleMessages(t *testing.T) {
	const tools = `"tools":[{"name":"first","input_schema":{"type":"object"}},{"name":"second","input_schema":{"type":"object"}}]`
	const user = `"messages":[{"role":"user","content":"hi"}]`
	const result = `"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"first","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"42"}]}]`
	const resultThenAssistant = `"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"42"}]},{"role":"assistant","content":"prefill"}]`
	const laterUser = `"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"42"}]},{"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"text","text":"again"}]}]`
	for _, tc := range []struct{ name, body, want string }{
		{"any", tools + `,"tool_choice":{"type":"any"},` + user, "first"},
		{"named", tools + `,"tool_choice":{"type":"tool","name":"second"},` + user, "second"},
		{"auto", tools + `,"tool_choice":{"type":"auto"},` + user, ""},
		{"none", tools + `,"tool_choice":{"type":"none"},` + user, ""},
		{"no choice", tools + `,` + user, ""},
		{"no tools", `"tool_choice":{"type":"any"},` + user, ""},
		{"after a tool result", tools + `,"tool_choice":{"type":"any"},` + result, ""},
		{"named after a tool result", tools + `,"tool_choice":{"type":"tool","name":"second"},` + result, ""},
		{"result in the last user turn", tools + `,"tool_choice":{"type":"any"},` + resultThenAssistant, ""},
		{"a newer user turn", tools + `,"tool_choice":{"type":"any"},` + laterUser, "first"},
	} {
		var req messagesRequest
		if err := json.Unmarshal([]byte("{"+tc.body+"}"), &req); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := ""
		if call := req.messagesToolCall(); call != nil {
			got = call.name
		}
		if got != tc.want {
			t.Errorf("%s: tool %q, want %q", tc.name, got, tc.want)
		}
	}
}

const msgToolBody = `{"model":"m","max_tokens":64,"tools":[{"name":"lookup","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"hi"}]`

func TestToolUseMessages(t *testing.T) {
	_, ts := startServer(t, msgCfg)
	m := decodeMsg(t, postTo(t, ts, "/v1/messages", msgToolBody+`}`))
	if m.StopReason != "tool_use" || len(m.Content) != 1 {
		t.Fatalf("stop %q, content %+v", m.StopReason, m.Content)
	}
	if b := m.Content[0]; b.Type != "tool_use" || b.ID != "toolu_sim_1" || b.Name != "lookup" || string(b.Input) != ToolInput {
		t.Errorf("tool_use block %+v input %s", b, b.Input)
	}
	if m.Usage["output_tokens"] != len(ToolInputFragments) {
		t.Errorf("output_tokens %d", m.Usage["output_tokens"])
	}

	resp := postTo(t, ts, "/v1/messages", msgToolBody+`,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024}}`)
	events, err := readMsgEvents(t, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := reassemble(t, events)
	wantR, _ := Texts(msgCfg)
	if r.stopReason != "tool_use" || r.json != ToolInput || r.text != "" || r.thinking != strings.Join(wantR, "") {
		t.Errorf("stream: stop %q, json %q, text %q, thinking %q", r.stopReason, r.json, r.text, r.thinking)
	}
	if len(r.blocks) != 2 || r.blocks[1]["type"] != "tool_use" || r.blocks[1]["id"] != "toolu_sim_2" ||
		r.blocks[1]["name"] != "lookup" || len(r.blocks[1]["input"].(map[string]any)) != 0 {
		t.Errorf("blocks %v", r.blocks)
	}
	fragments := 0
	for _, ev := range events {
		if d, ok := ev.data["delta"].(map[string]any); ok && d["type"] == "input_json_delta" {
			fragments++
		}
	}
	if fragments < 2 {
		t.Errorf("input in %d fragments, want 2 or more", fragments)
	}

	// The round trip: the tool result comes back and the answer is text.
	next := `{"model":"m","max_tokens":64,"tools":[{"name":"lookup","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},"messages":[` +
		`{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_sim_1","name":"lookup","input":{"input":"sim"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_sim_1","content":"found"}]}]}`
	m = decodeMsg(t, postTo(t, ts, "/v1/messages", next))
	if m.StopReason != "end_turn" || len(m.Content) != 1 || m.Content[0].Type != "text" {
		t.Errorf("after the tool result: stop %q content %+v", m.StopReason, m.Content)
	}
}

const chatToolBody = `{"model":"m","tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}],"tool_choice":"required","messages":[{"role":"user","content":"hi"}]`

func TestToolCallsChat(t *testing.T) {
	_, ts := startServer(t, msgCfg)
	var c struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID, Type string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage usage `json:"usage"`
	}
	resp := mustPost(t, ts, chatToolBody+`}`)
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	ch := c.Choices[0]
	if ch.FinishReason != "tool_calls" || ch.Message.Content != nil || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("choice %+v", ch)
	}
	if tc := ch.Message.ToolCalls[0]; tc.ID != "call_sim_1" || tc.Type != "function" || tc.Function.Name != "lookup" || tc.Function.Arguments != ToolInput {
		t.Errorf("tool call %+v", tc)
	}

	events, err := readEvents(mustPost(t, ts, chatToolBody+`,"stream":true}`).Body)
	if err != nil {
		t.Fatal(err)
	}
	var args strings.Builder
	var id, name, finish string
	fragments := 0
	for _, ev := range events[:len(events)-1] {
		var k struct {
			Choices []struct {
				Delta struct {
					Content   *string
					ToolCalls []struct {
						Index    *int
						ID       string
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
				FinishReason *string `json:"finish_reason"`
			}
		}
		if err := json.Unmarshal([]byte(ev.data), &k); err != nil {
			t.Fatal(err)
		}
		for _, tc := range k.Choices[0].Delta.ToolCalls {
			if tc.Index == nil || *tc.Index != 0 {
				t.Errorf("tool call delta without index 0: %s", ev.data)
			}
			id += tc.ID
			name += tc.Function.Name
			if tc.Function.Arguments != "" {
				fragments++
				args.WriteString(tc.Function.Arguments)
			}
		}
		if c := k.Choices[0].Delta.Content; c != nil && *c != "" {
			t.Errorf("content in a tool call answer: %s", ev.data)
		}
		if f := k.Choices[0].FinishReason; f != nil {
			finish = *f
		}
	}
	if id != "call_sim_2" || name != "lookup" || args.String() != ToolInput || fragments < 2 || finish != "tool_calls" {
		t.Errorf("stream: id %q name %q args %q in %d fragments, finish %q", id, name, args.String(), fragments, finish)
	}

	// The round trip: a tool message last gets the text answer.
	var done completion
	next := `{"model":"m","tools":[{"type":"function","function":{"name":"lookup"}}],"tool_choice":"required","messages":[` +
		`{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_sim_1","type":"function","function":{"name":"lookup","arguments":"{\"input\":\"sim\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_sim_1","content":"found"}]}`
	if err := json.NewDecoder(mustPost(t, ts, next).Body).Decode(&done); err != nil {
		t.Fatal(err)
	}
	_, wantC := Texts(msgCfg)
	if m := done.Choices[0]; m.FinishReason != "stop" || m.Message.Content == nil || *m.Message.Content != strings.Join(wantC, "") || m.Message.ToolCalls != nil {
		t.Errorf("after the tool result: %+v", m)
	}
}
