package sim

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzChatTools posts arbitrary bodies to chat completions. A 200 answer
// is either text (finish "stop", content set) or one tool call (finish
// "tool_calls", content null, the fixed input), and the stream of the
// same request makes the same choice with the same name and arguments.
func FuzzChatTools(f *testing.F) {
	f.Add(chatToolBody + `}`)
	f.Add(`{"tools":[{"function":{"name":"a"}}],"tool_choice":{"type":"function","function":{"name":"b"}},"messages":[{"role":"user","content":"x"}]}`)
	f.Add(`{"tools":[{"function":{"name":"a"}}],"tool_choice":"required","messages":[{"role":"tool","content":"42"}]}`)
	f.Add(`{"tools":[{}],"tool_choice":"auto"}`)
	f.Add(`{"tools":null,"tool_choice":7}`)
	f.Add(streamBody)
	s, err := New(Config{Seed: 5, ReasoningTokens: new(3), ContentTokens: new(4), ReasoningPattern: fast, ContentPattern: fast})
	if err != nil {
		f.Fatal(err)
	}
	type answer struct{ finish, name, args, content string }
	f.Fuzz(func(t *testing.T, body string) {
		var req map[string]any
		if json.Unmarshal([]byte(body), &req) != nil || req == nil {
			return
		}
		req["stream"] = false
		plain, _ := json.Marshal(req)
		rec := serveRec(s, "/v1/chat/completions", string(plain))
		if rec.Code != 200 {
			if rec.Code != 400 {
				t.Fatalf("status %d", rec.Code)
			}
			return
		}
		var c completion
		if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("bad answer %s: %v", rec.Body, err)
		}
		ch := c.Choices[0]
		var want answer
		want.finish = ch.FinishReason
		switch {
		case ch.FinishReason == "tool_calls" && ch.Message.Content == nil && len(ch.Message.ToolCalls) == 1:
			want.name, want.args = ch.Message.ToolCalls[0].Function.Name, ch.Message.ToolCalls[0].Function.Arguments
			if want.args != ToolInput || !strings.HasPrefix(ch.Message.ToolCalls[0].ID, "call_sim_") {
				t.Fatalf("tool call %s", rec.Body)
			}
		case ch.FinishReason == "stop" && ch.Message.Content != nil && ch.Message.ToolCalls == nil:
			want.content = *ch.Message.Content
		default:
			t.Fatalf("neither text nor a tool call: %s", rec.Body)
		}

		req["stream"] = true
		streamed, _ := json.Marshal(req)
		rec = serveRec(s, "/v1/chat/completions", string(streamed))
		events, err := readEvents(rec.Body)
		if err != nil || rec.Code != 200 || len(events) < 2 {
			t.Fatalf("stream: %d %v", rec.Code, err)
		}
		var got answer
		for _, ev := range events[:len(events)-1] {
			var k struct {
				Choices []struct {
					Delta        delta   `json:"delta"`
					FinishReason *string `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(ev.data), &k); err != nil {
				t.Fatal(err)
			}
			for _, kc := range k.Choices {
				if kc.Delta.Content != nil {
					got.content += *kc.Delta.Content
				}
				for _, tc := range kc.Delta.ToolCalls {
					got.name += tc.Function.Name
					got.args += tc.Function.Arguments
				}
				if kc.FinishReason != nil {
					got.finish = *kc.FinishReason
				}
			}
		}
		if got != want {
			t.Fatalf("stream %+v, answer %+v", got, want)
		}
	})
}
