package responses

import (
	"errors"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// TestToChatRequestInvalid: a Responses request that is not valid
// Responses is refused as Invalid, naming the member; a valid one that
// Chat cannot express is refused, not as Invalid (the relay then skips
// the target). Failed before the fix (issue 25): a null content became an
// empty message, a nameless function tool_choice and an unknown effort
// passed or were refused alike, a hosted tool with tool_choice required
// lost both.
func TestToChatRequestInvalid(t *testing.T) {
	const fn = `{"type":"function","name":"f","parameters":{"type":"object"}}`
	cases := []struct {
		name, in, param string
		invalid         bool
	}{
		{"content null", `{"input":[{"role":"user","content":null}]}`, "input[0].content", true},
		{"content absent", `{"input":[{"role":"user","content":"a"},{"type":"message","role":"assistant"}]}`, "input[1].content", true},
		{"content a number", `{"input":[{"role":"user","content":5}]}`, "input[0].content", true},
		{"unknown role", `{"input":[{"role":"bot","content":"x"}]}`, "input[0].role", true},
		{"call without a name", `{"input":[{"type":"function_call","call_id":"c","arguments":"{}"}]}`, "input[0].name", true},
		{"call without a call_id", `{"input":[{"type":"function_call","name":"f","arguments":"{}"}]}`, "input[0].call_id", true},
		{"output without a call_id", `{"input":[{"type":"function_call_output","output":"x"}]}`, "input[0].call_id", true},
		{"output a number", `{"input":[{"type":"function_call_output","call_id":"c","output":5}]}`, "input[0].output", true},
		{"tool_choice function without a name", `{"input":"x","tools":[` + fn + `],"tool_choice":{"type":"function"}}`, "tool_choice.name", true},
		{"tool_choice function without a name, no tools", `{"input":"x","tool_choice":{"type":"function"}}`, "tool_choice.name", true},
		{"tool_choice unknown string", `{"input":"x","tools":[` + fn + `],"tool_choice":"always"}`, "tool_choice", true},
		{"tool_choice not a string or object", `{"input":"x","tools":[` + fn + `],"tool_choice":5}`, "tool_choice", true},
		{"function without a name", `{"input":"x","tools":[{"type":"function","parameters":{}}]}`, "tools[0].name", true},
		{"parameters a string", `{"input":"x","tools":[{"type":"function","name":"f","parameters":"object"}]}`, "tools[0].parameters", true},
		{"unknown effort", `{"input":"x","reasoning":{"effort":"extreme"}}`, "reasoning.effort", true},
		{"unknown format", `{"input":"x","text":{"format":{"type":"xml"}}}`, "text.format.type", true},
		{"a member of the wrong type", `{"input":"x","max_output_tokens":"many"}`, "max_output_tokens", true},

		// Valid Responses that Chat cannot express: not Invalid.
		{"hosted tool with tool_choice required", `{"input":"x","tools":[{"type":"web_search"}],"tool_choice":"required"}`, "tool_choice", false},
		{"hosted tool beside a function, tool_choice required", `{"input":"x","tools":[` + fn + `,{"type":"web_search"}],"tool_choice":"required"}`, "tool_choice", false},
		{"hosted tool_choice", `{"input":"x","tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search"}}`, "tool_choice", false},
		{"previous_response_id", `{"input":"x","previous_response_id":"resp_1"}`, "previous_response_id", false},
		{"item_reference", `{"input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].type", false},
		{"input_file", `{"input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, "input[0].content[0].type", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := ToChatRequest([]byte(c.in), chat.Options{})
			re, ok := errors.AsType[*chat.RequestError](err)
			if !ok {
				t.Fatalf("err %v (output %s), want a *chat.RequestError", err, out)
			}
			if re.Param != c.param || re.Invalid != c.invalid || re.Message == "" {
				t.Fatalf("%+v, want param %q invalid %v and a message", re, c.param, c.invalid)
			}
		})
	}
}

// TestToChatRequestValidEdges: what Responses allows is still translated.
func TestToChatRequestValidEdges(t *testing.T) {
	for _, in := range []string{
		`{"input":[{"role":"user","content":""}]}`,
		`{"input":"x","reasoning":{"effort":"xhigh"}}`,
		`{"input":"x","reasoning":{"effort":null}}`,
		`{"input":"x","tools":[{"type":"function","name":"f","parameters":null}],"tool_choice":"required"}`,
		// Hosted tools are dropped when nothing forces a tool (Codex CLI).
		`{"input":"x","tools":[{"type":"function","name":"f","parameters":{}},{"type":"web_search"}],"tool_choice":"auto"}`,
		`{"input":"x","tools":[{"type":"function","name":"f","parameters":{}},{"type":"web_search"}],"tool_choice":{"type":"function","name":"f"}}`,
	} {
		if out, err := ToChatRequest([]byte(in), chat.Options{}); err != nil {
			t.Errorf("%s: %v (%s)", in, err, out)
		}
	}
}
