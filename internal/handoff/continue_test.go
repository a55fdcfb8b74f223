package handoff

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

var hows = []How{PrefillTurn, Prefix, ContinueFinal, Instruct}

func TestParseHow(t *testing.T) {
	for _, h := range hows {
		got, ok := ParseHow(h.String())
		if !ok || got != h {
			t.Errorf("ParseHow(%q) = %v, %v", h.String(), got, ok)
		}
	}
	want := map[How]string{PrefillTurn: "prefill", Prefix: "prefix", ContinueFinal: "continue_final_message", Instruct: "instruct"}
	for h, s := range want {
		if h.String() != s {
			t.Errorf("%d.String() = %q, want %q", h, h.String(), s)
		}
	}
	for _, s := range []string{"", "Prefill", "continue", "user"} {
		if _, ok := ParseHow(s); ok {
			t.Errorf("ParseHow(%q) accepted", s)
		}
	}
}

const (
	// ansW is an answer so far that ends in whitespace; a prefill
	// carries it right-trimmed, as ans.
	ans  = "The answer is 4"
	ansW = ans + " \n"

	chatStream = `"stream":true,"stream_options":{"include_usage":true}`
	tool       = `"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"auto"`
)

var instrQ = q(ContinueInstruction)

func TestContinue(t *testing.T) {
	cases := []struct {
		name string
		d    Dialect
		hows []How
		in   string
		ans  string
		want string
	}{
		{"chat prefill: knobs removed, trimmed, the rest kept", Chat, []How{PrefillTurn, Prefix, ContinueFinal},
			`{"model":"m","reasoning_effort":"high","reasoning":{"effort":"high"},"thinking":{"type":"enabled"},"temperature":0.3,"metadata":{"a":"b"},"n":2,` + tool + `,"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}`,
			ansW,
			`{"model":"m","temperature":0.3,"metadata":{"a":"b"},` + chatStream + `,` + tool + `,"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"},{"role":"assistant","content":` + q(ans) + `}]}`},
		{"chat instruct: knobs kept, the answer as sent, the instruction last", Chat, []How{Instruct},
			`{"model":"m","reasoning_effort":"high","temperature":0.3,` + tool + `,"messages":[{"role":"user","content":"hi"}]}`,
			ansW,
			`{"model":"m","reasoning_effort":"high","temperature":0.3,` + chatStream + `,` + tool + `,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":` + q(ansW) + `},{"role":"user","content":` + instrQ + `}]}`},
		{"chat after tool results", Chat, []How{PrefillTurn},
			`{"model":"m",` + tool + `,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"4"}]}`,
			ansW,
			`{"model":"m",` + chatStream + `,` + tool + `,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"4"},{"role":"assistant","content":` + q(ans) + `}]}`},
		{"chat instruct after tool results", Chat, []How{Instruct},
			`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"4"}]}`,
			ans,
			`{"model":"m",` + chatStream + `,"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"4"},{"role":"assistant","content":` + q(ans) + `},{"role":"user","content":` + instrQ + `}]}`},
		{"chat: the client's own prefill goes on", Chat, []How{PrefillTurn},
			`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Sure:"}]}`,
			" " + ansW,
			`{"model":"m",` + chatStream + `,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":` + q("Sure: "+ans) + `}]}`},
		{"chat: an assistant turn of tool calls is not a prefill", Chat, []How{PrefillTurn},
			`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Checking.","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
			ans,
			`{"model":"m",` + chatStream + `,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Checking.","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"assistant","content":` + q(ans) + `}]}`},
		{"chat: the client's own prefill in parts", Chat, []How{Instruct},
			`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"Sure:"}]}]}`,
			ansW,
			`{"model":"m",` + chatStream + `,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":` + q("Sure:"+ansW) + `}]},{"role":"user","content":` + instrQ + `}]}`},
		{"chat: the client's own prefill ends with a part of another type", Chat, []How{PrefillTurn},
			`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"Sure:"},{"type":"refusal","refusal":"no"}]}]}`,
			ansW,
			`{"model":"m",` + chatStream + `,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"Sure:"},{"type":"refusal","refusal":"no"},{"type":"text","text":` + q(ans) + `}]}]}`},

		{"messages prefill: thinking, its edits and effort removed, cache markers kept", Messages, []How{PrefillTurn, Prefix, ContinueFinal},
			`{"model":"m","max_tokens":9,"thinking":{"type":"adaptive"},"output_config":{"effort":"high"},"context_management":{"edits":[{"type":"clear_thinking_20251015"}]},"metadata":{"user_id":"u"},"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`,
			ansW,
			`{"model":"m","max_tokens":9,"stream":true,"metadata":{"user_id":"u"},"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]},{"role":"assistant","content":[{"type":"text","text":` + q(ans) + `}]}]}`},
		{"messages prefill: the rest of output_config and the other edits stay", Messages, []How{PrefillTurn},
			`{"model":"m","max_tokens":9,"thinking":{"type":"enabled","budget_tokens":2048},"output_config":{"effort":"low","format":{"type":"json_schema"}},"context_management":{"edits":[{"type":"clear_thinking_20251015"},{"type":"clear_tool_uses_20250919"}]},"messages":[{"role":"user","content":"hi"}]}`,
			ans,
			`{"model":"m","max_tokens":9,"stream":true,"output_config":{"format":{"type":"json_schema"}},"context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]},"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":` + q(ans) + `}]}]}`},
		{"messages after tool results", Messages, []How{PrefillTurn},
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"4"}]}]}`,
			ansW,
			`{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"4"}]},{"role":"assistant","content":[{"type":"text","text":` + q(ans) + `}]}]}`},
		{"messages instruct: thinking kept", Messages, []How{Instruct},
			`{"model":"m","max_tokens":9,"thinking":{"type":"adaptive"},"output_config":{"effort":"high"},"messages":[{"role":"user","content":"hi"}]}`,
			ansW,
			`{"model":"m","max_tokens":9,"stream":true,"thinking":{"type":"adaptive"},"output_config":{"effort":"high"},"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":` + q(ansW) + `}]},{"role":"user","content":` + instrQ + `}]}`},
		{"messages: the client's own prefill in blocks goes on in its last text block", Messages, []How{PrefillTurn},
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"Here:"},{"type":"text","text":"{","cache_control":{"type":"ephemeral"}}]}]}`,
			`"a": 1 `,
			`{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"Here:"},{"type":"text","text":"{\"a\": 1","cache_control":{"type":"ephemeral"}}]}]}`},
		{"messages: the client's own prefill goes on", Messages, []How{PrefillTurn},
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"{"}]}`,
			`"a": 1 `,
			`{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"{\"a\": 1"}]}`},

		{"responses prefill: a string input, reasoning and its include removed", Responses, []How{PrefillTurn, Prefix, ContinueFinal},
			`{"model":"m","instructions":"s","input":"hi","reasoning":{"effort":"high"},"include":["reasoning.encrypted_content"],"store":false,` + tool + `}`,
			ansW,
			`{"model":"m","instructions":"s","stream":true,"store":false,` + tool + `,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":` + q(ans) + `}]}]}`},
		{"responses after function call output", Responses, []How{PrefillTurn},
			`{"model":"m","input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"4"}]}`,
			ans,
			`{"model":"m","stream":true,"input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"4"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":` + q(ans) + `}]}]}`},
		{"responses instruct: reasoning kept", Responses, []How{Instruct},
			`{"model":"m","input":[{"role":"user","content":"hi"}],"reasoning":{"effort":"high"},"include":["reasoning.encrypted_content"]}`,
			ansW,
			`{"model":"m","stream":true,"reasoning":{"effort":"high"},"include":["reasoning.encrypted_content"],"input":[{"role":"user","content":"hi"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":` + q(ansW) + `}]},{"type":"message","role":"user","content":[{"type":"input_text","text":` + instrQ + `}]}]}`},
	}
	for _, c := range cases {
		for _, h := range c.hows {
			got, err := Continue(c.d, []byte(c.in), c.ans, h)
			if err != nil {
				t.Errorf("%s (%v): %v", c.name, h, err)
				continue
			}
			sameJSON(t, c.name+" ("+h.String()+")", got, c.want)
		}
	}
}

// A break before any answer (in the reasoning), or after whitespace
// only, re-sends the client's body as a stream: knobs and all.
func TestContinueNoAnswerStartsOver(t *testing.T) {
	bodies := map[Dialect]string{
		Chat:      `{"model":"m","reasoning_effort":"high","messages":[{"role":"user","content":"hi"}]}`,
		Messages:  `{"model":"m","max_tokens":9,"thinking":{"type":"adaptive"},"output_config":{"effort":"high"},"messages":[{"role":"user","content":"hi"}]}`,
		Responses: `{"model":"m","input":"hi","reasoning":{"effort":"high"},"include":["reasoning.encrypted_content"]}`,
	}
	for d, in := range bodies {
		top, _ := decode([]byte(in))
		streamOn(d, top)
		want, _ := json.Marshal(top)
		for _, h := range hows {
			for _, a := range []string{"", " \n\t"} {
				got, err := Continue(d, []byte(in), a, h)
				if err != nil {
					t.Fatal(err)
				}
				sameJSON(t, "no answer", got, string(want))
			}
		}
	}
}

// Anthropic refuses a final assistant turn that ends with whitespace:
// whatever the answer's tail, no prefill ends with any.
func TestContinuePrefillNeverEndsWithWhitespace(t *testing.T) {
	for _, tail := range []string{" ", "\n", "\n\n", "\t ", "\u00a0", "\u3000"} {
		for _, d := range []Dialect{Chat, Messages, Responses} {
			in := `{"model":"m","messages":[{"role":"user","content":"hi"}],"input":"hi"}`
			out, err := Continue(d, []byte(in), "x"+tail, PrefillTurn)
			if err != nil {
				t.Fatal(err)
			}
			if s := string(out); !strings.Contains(s, `"x"`) || strings.Contains(s, q("x"+tail)) {
				t.Errorf("%v, tail %q: %s", d, tail, out)
			}
		}
	}
}

func TestContinueRefuses(t *testing.T) {
	for _, c := range []struct {
		d    Dialect
		body string
	}{
		{Chat, `[]`},
		{Chat, `{"messages":{}}`},
		{Chat, `{"messages":[1]}`},
		{Messages, `{"messages":"hi"}`},
		{Responses, `{"input":{}}`},
		{Responses, `nope`},
	} {
		if out, err := Continue(c.d, []byte(c.body), ans, PrefillTurn); err == nil {
			t.Errorf("%v %s: no error: %s", c.d, c.body, out)
		}
	}
	if _, err := Continue(Chat, []byte(`7`), "", PrefillTurn); !errors.Is(err, ErrNotObject) {
		t.Errorf("not an object, no answer: %v", err)
	}
}

func TestMark(t *testing.T) {
	in := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x"}]}`
	got, err := MarkPrefix([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "MarkPrefix", got, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x","prefix":true}]}`)
	got, err = MarkContinueFinal([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "MarkContinueFinal", got, `{"model":"m","stream":true,"continue_final_message":true,"add_generation_prompt":false,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x"}]}`)

	for h, want := range map[How]string{
		PrefillTurn:   in,
		Instruct:      in,
		Prefix:        `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x","prefix":true}]}`,
		ContinueFinal: `{"model":"m","stream":true,"continue_final_message":true,"add_generation_prompt":false,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x"}]}`,
	} {
		got, err := h.Mark([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, h.String()+".Mark", got, want)
	}

	for _, bad := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"assistant","content":"x"},{"role":"tool","tool_call_id":"c","content":"4"}]}`,
		`{"messages":[]}`,
		`{"model":"m"}`,
		`{"messages":[null]}`,
	} {
		for _, mark := range []func([]byte) ([]byte, error){MarkPrefix, MarkContinueFinal} {
			if _, err := mark([]byte(bad)); !errors.Is(err, ErrNotPrefilled) {
				t.Errorf("%s: %v, want ErrNotPrefilled", bad, err)
			}
		}
	}
	for _, bad := range []string{`[]`, `{"messages":{}}`, `{"messages":[{"role":"assistant","content":"x"},1]}`} {
		for _, mark := range []func([]byte) ([]byte, error){MarkPrefix, MarkContinueFinal} {
			if _, err := mark([]byte(bad)); err == nil || errors.Is(err, ErrNotPrefilled) {
				t.Errorf("%s: %v, want a shape error", bad, err)
			}
		}
	}
}
