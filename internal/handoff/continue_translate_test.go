package handoff

import (
	"encoding/json"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/anthropic"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/responses"
)

// The continuation's body goes through the relay's own translators when
// the next target speaks another dialect: these tests check that what
// they make still ends with the answer's assistant turn (which the
// target continues), or, for Instruct, with that turn and the
// instruction after it, neither dropped nor merged.

// turn is a translated message, its text gathered from a string content
// or from its text parts or blocks.
type turn struct {
	Role string
	Text string
	raw  map[string]any
}

// tail is the last n messages of a Chat or Messages payload.
func tail(t *testing.T, payload []byte, n int) []turn {
	t.Helper()
	var p struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		t.Fatalf("not a payload: %v: %s", err, payload)
	}
	if len(p.Messages) < n {
		t.Fatalf("%d messages, want at least %d: %s", len(p.Messages), n, payload)
	}
	var out []turn
	for _, m := range p.Messages[len(p.Messages)-n:] {
		tr := turn{raw: m}
		tr.Role, _ = m["role"].(string)
		switch c := m["content"].(type) {
		case string:
			tr.Text = c
		case []any:
			for _, p := range c {
				if b, ok := p.(map[string]any); ok && b["type"] == "text" {
					tr.Text += b["text"].(string)
				}
			}
		}
		out = append(out, tr)
	}
	return out
}

func members(t *testing.T, payload []byte) map[string]json.RawMessage {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(payload, &top); err != nil {
		t.Fatal(err)
	}
	return top
}

// wantEnd checks that payload ends with the answer's assistant turn
// (prefill) or with it and the instruction (instruct), the turn before
// them of role before.
func wantEnd(t *testing.T, what string, payload []byte, how How, answer, before string) {
	t.Helper()
	n := 2
	if how == Instruct {
		n = 3
	}
	got := tail(t, payload, n)
	if got[0].Role != before {
		t.Errorf("%s: the turn before the answer is %q, want %q: %s", what, got[0].Role, before, payload)
	}
	if got[1].Role != "assistant" || got[1].Text != answer {
		t.Errorf("%s: the answer's turn is %s %q, want assistant %q: %s", what, got[1].Role, got[1].Text, answer, payload)
	}
	if how == Instruct && (got[2].Role != "user" || got[2].Text != ContinueInstruction) {
		t.Errorf("%s: last turn %s %q, want the instruction: %s", what, got[2].Role, got[2].Text, payload)
	}
}

func continued(t *testing.T, d Dialect, body string, answer string, how How) []byte {
	t.Helper()
	out, err := Continue(d, []byte(body), answer, how)
	if err != nil {
		t.Fatalf("Continue(%v, %v): %v", d, how, err)
	}
	return out
}

// A Chat client whose chain reaches Anthropic: anthropic.FromChatRequest.
func TestContinueChatToAnthropic(t *testing.T) {
	bodies := map[string]struct{ body, before string }{
		"plain": {`{"model":"m","reasoning_effort":"high","max_tokens":100,"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}`, "user"},
		"tool results": {`{"model":"m","reasoning_effort":"high","max_tokens":100,` + tool + `,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"4"}]}`,
			"user"}, // the tool message becomes a user turn of tool_result blocks
		"own prefill": {`{"model":"m","reasoning_effort":"high","max_tokens":100,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Sure:"}]}`, "user"},
	}
	for name, b := range bodies {
		for _, how := range hows {
			cont := continued(t, Chat, b.body, " "+ansW, how)
			out, err := anthropic.FromChatRequest(cont, chat.Options{})
			if err != nil {
				t.Fatalf("%s %v: FromChatRequest: %v", name, how, err)
			}
			want := " " + ansW
			if how != Instruct {
				want = " " + ans
			}
			if name == "own prefill" {
				want = "Sure:" + want
			}
			wantEnd(t, name+" "+how.String(), out, how, want, b.before)
			_, thinks := members(t, out)["thinking"]
			if how != Instruct && thinks {
				t.Errorf("%s %v: a prefill with thinking on (Anthropic refuses it): %s", name, how, out)
			}
			if how == Instruct && !thinks {
				t.Errorf("%s: instruct lost the client's reasoning: %s", name, out)
			}
		}
	}
}

// A Messages client whose chain reaches a Chat provider:
// anthropic.ToChatRequest, then How.Mark.
func TestContinueMessagesToChat(t *testing.T) {
	bodies := map[string]struct {
		body, before string
		effort       bool // the body asks for reasoning
	}{
		"plain":       {`{"model":"m","max_tokens":100,"thinking":{"type":"enabled","budget_tokens":4096},"system":"s","messages":[{"role":"user","content":"hi"}]}`, "user", true},
		"own prefill": {`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"Sure:"}]}]}`, "user", false},
		"tool results": {`{"model":"m","max_tokens":100,"thinking":{"type":"adaptive"},"output_config":{"effort":"high"},"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"4"}]}]}`,
			"tool", true},
	}
	for name, b := range bodies {
		for _, how := range hows {
			cont := continued(t, Messages, b.body, ansW, how)
			out, err := anthropic.ToChatRequest(cont, chat.Options{})
			if err != nil {
				t.Fatalf("%s %v: ToChatRequest: %v", name, how, err)
			}
			want := ans
			if how == Instruct {
				want = ansW
			}
			if name == "own prefill" {
				// one text: the translation joins blocks with a blank line
				want = "Sure:" + want
			}
			wantEnd(t, name+" "+how.String(), out, how, want, b.before)
			_, effort := members(t, out)["reasoning_effort"]
			if effort != (how == Instruct && b.effort) {
				t.Errorf("%s %v: reasoning_effort %v: %s", name, how, effort, out)
			}
			marked, err := how.Mark(out)
			if how == Instruct {
				continue
			}
			if err != nil {
				t.Fatalf("%s %v: Mark: %v", name, how, err)
			}
			last := tail(t, marked, 1)[0]
			top := members(t, marked)
			switch how {
			case Prefix:
				if last.raw["prefix"] != true {
					t.Errorf("%s: no prefix: %s", name, marked)
				}
			case ContinueFinal:
				if string(top["continue_final_message"]) != "true" || string(top["add_generation_prompt"]) != "false" {
					t.Errorf("%s: no vLLM flags: %s", name, marked)
				}
			}
		}
	}
}

// A Responses client whose chain reaches a Chat provider
// (responses.ToChatRequest) or Anthropic (then anthropic.FromChatRequest).
func TestContinueResponsesToChatAndAnthropic(t *testing.T) {
	bodies := map[string]struct{ body, before string }{
		"string input": {`{"model":"m","instructions":"s","input":"hi","max_output_tokens":100,"reasoning":{"effort":"high"},"include":["reasoning.encrypted_content"]}`, "user"},
		"function call output": {`{"model":"m","max_output_tokens":100,"reasoning":{"effort":"high"},"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"4"}]}`,
			"tool"},
	}
	for name, b := range bodies {
		for _, how := range hows {
			cont := continued(t, Responses, b.body, ansW, how)
			viaChat, err := responses.ToChatRequest(cont, chat.Options{})
			if err != nil {
				t.Fatalf("%s %v: ToChatRequest: %v", name, how, err)
			}
			want := ans
			if how == Instruct {
				want = ansW
			}
			wantEnd(t, name+" "+how.String()+" (chat)", viaChat, how, want, b.before)
			_, effort := members(t, viaChat)["reasoning_effort"]
			if effort != (how == Instruct) {
				t.Errorf("%s %v: reasoning_effort %v: %s", name, how, effort, viaChat)
			}

			out, err := anthropic.FromChatRequest(viaChat, chat.Options{})
			if err != nil {
				t.Fatalf("%s %v: FromChatRequest: %v", name, how, err)
			}
			wantEnd(t, name+" "+how.String()+" (anthropic)", out, how, want, "user")
			if _, thinks := members(t, out)["thinking"]; thinks && how != Instruct {
				t.Errorf("%s %v: a prefill with thinking on: %s", name, how, out)
			}
		}
	}
}
