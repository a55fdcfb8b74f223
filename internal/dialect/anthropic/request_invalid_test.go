package anthropic

import (
	"errors"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// Issue 25: a request that is not valid in the client's own dialect is
// refused as Invalid, naming the member, instead of losing that member in
// translation; a valid request the other dialect cannot express is
// refused too, but not as Invalid (the relay then skips the target).

type requestCase struct {
	name, in, param string
	invalid         bool
}

func checkRequestErrors(t *testing.T, translate func([]byte) ([]byte, error), cases []requestCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := translate([]byte(c.in))
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

// TestToChatRequestInvalid: Messages requests. Failed before the fix: the
// empty turns, the nameless tool_choice, the schemas and the budgets were
// translated (dropped, or replaced by a default), and every refusal was
// alike.
func TestToChatRequestInvalid(t *testing.T) {
	const user = `{"role":"user","content":"hi"}`
	checkRequestErrors(t, func(b []byte) ([]byte, error) { return ToChatRequest(b, chat.Options{}) }, []requestCase{
		{"content null", `{"messages":[{"role":"user","content":null}]}`, "messages[0].content", true},
		{"content absent", `{"messages":[` + user + `,{"role":"assistant"},` + user + `]}`, "messages[1].content", true},
		{"content empty string", `{"messages":[{"role":"user","content":""}]}`, "messages[0].content", true},
		{"content empty array", `{"messages":[` + user + `,{"role":"assistant","content":[]},` + user + `]}`, "messages[1].content", true},
		{"only empty text blocks", `{"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`, "messages[0].content", true},
		{"content a number", `{"messages":[{"role":"user","content":5}]}`, "messages[0].content", true},
		{"unknown role", `{"messages":[{"role":"bot","content":"x"}]}`, "messages[0].role", true},
		{"tool_choice tool without a name", `{"messages":[` + user + `],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool"}}`, "tool_choice.name", true},
		{"tool_choice tool without a name, no tools", `{"messages":[` + user + `],"tool_choice":{"type":"tool"}}`, "tool_choice.name", true},
		{"tool_choice of an unknown type", `{"messages":[` + user + `],"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"some"}}`, "tool_choice.type", true},
		{"tool_choice not an object", `{"messages":[` + user + `],"tools":[{"name":"f","input_schema":{}}],"tool_choice":"auto"}`, "tool_choice", true},
		{"input_schema a string", `{"messages":[` + user + `],"tools":[{"name":"f","input_schema":"object"}]}`, "tools[0].input_schema", true},
		{"input_schema an array", `{"messages":[` + user + `],"tools":[{"name":"f","input_schema":[]}]}`, "tools[0].input_schema", true},
		{"input_schema missing", `{"messages":[` + user + `],"tools":[{"name":"f"}]}`, "tools[0].input_schema", true},
		{"tool without a name", `{"messages":[` + user + `],"tools":[{"input_schema":{"type":"object"}}]}`, "tools[0].name", true},
		{"negative budget", `{"messages":[` + user + `],"thinking":{"type":"enabled","budget_tokens":-5}}`, "thinking.budget_tokens", true},
		{"budget below Anthropic's least", `{"messages":[` + user + `],"thinking":{"type":"enabled","budget_tokens":1023}}`, "thinking.budget_tokens", true},
		{"fractional budget", `{"messages":[` + user + `],"thinking":{"type":"enabled","budget_tokens":2048.5}}`, "thinking.budget_tokens", true},
		{"budget a string", `{"messages":[` + user + `],"thinking":{"type":"enabled","budget_tokens":"high"}}`, "thinking.budget_tokens", true},
		{"budget missing", `{"messages":[` + user + `],"thinking":{"type":"enabled"}}`, "thinking.budget_tokens", true},
		{"unknown thinking type", `{"messages":[` + user + `],"thinking":{"type":"deep"}}`, "thinking.type", true},
		{"unknown effort", `{"messages":[` + user + `],"thinking":{"type":"adaptive"},"output_config":{"effort":"extreme"}}`, "output_config.effort", true},
		{"a member of the wrong type", `{"messages":[` + user + `],"max_tokens":"many"}`, "max_tokens", true},
		{"an image without a source", `{"messages":[{"role":"user","content":[{"type":"image"}]}]}`, "messages[0].content[0].source", true},

		// Valid Messages that Chat cannot express: not Invalid.
		{"document block", `{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","data":"x"}}]}]}`, "messages[0].content[0].type", false},
		{"server tool", `{"messages":[` + user + `],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, "tools[0].type", false},
		{"file image source", `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}`, "messages[0].content[0].source.type", false},
	})
}

// TestToChatRequestValidEdges: what Messages allows is still translated.
func TestToChatRequestValidEdges(t *testing.T) {
	for _, in := range []string{
		// The final assistant turn may be empty (nothing to prefill).
		`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":""}]}`,
		// A turn of thinking only is dropped as documented, not refused.
		`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"}]},{"role":"user","content":"go"}]}`,
		// Budgets at Anthropic's least and far above.
		`{"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":1024}}`,
		`{"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":31999}}`,
		`{"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"}}`,
		`{"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"adaptive"},"output_config":{"effort":"max"}}`,
		// An empty schema object is an object.
		`{"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":"f"}}`,
	} {
		if out, err := ToChatRequest([]byte(in), chat.Options{}); err != nil {
			t.Errorf("%s: %v (%s)", in, err, out)
		}
	}
}

// TestFromChatRequestInvalid: Chat Completions requests for a Messages
// upstream. Failed before the fix: null turns vanished, an unknown effort
// turned thinking off, a non-object schema became {"type":"object"}, and
// every refusal was alike.
func TestFromChatRequestInvalid(t *testing.T) {
	const user = `{"role":"user","content":"hi"}`
	const tools = `"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`
	checkRequestErrors(t, func(b []byte) ([]byte, error) { return FromChatRequest(b, chat.Options{}) }, []requestCase{
		{"user content null", `{"messages":[{"role":"user","content":null}]}`, "messages[0].content", true},
		{"user content absent", `{"messages":[` + user + `,{"role":"user"}]}`, "messages[1].content", true},
		{"system content null", `{"messages":[{"role":"system","content":null},` + user + `]}`, "messages[0].content", true},
		{"tool content null", `{"messages":[` + user + `,{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":null}]}`, "messages[2].content", true},
		{"assistant with neither content nor calls", `{"messages":[` + user + `,{"role":"assistant","content":null},` + user + `]}`, "messages[1].content", true},
		{"unknown role", `{"messages":[{"role":"bot","content":"x"}]}`, "messages[0].role", true},
		{"tool_calls on a system message", `{"messages":[{"role":"system","content":"s","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},` + user + `]}`, "messages[0].tool_calls", true},
		{"tool_choice function without a name", `{"messages":[` + user + `],` + tools + `,"tool_choice":{"type":"function","function":{}}}`, "tool_choice.function.name", true},
		{"tool_choice function without a name, no tools", `{"messages":[` + user + `],"tool_choice":{"type":"function","function":{}}}`, "tool_choice.function.name", true},
		{"tool_choice unknown string", `{"messages":[` + user + `],` + tools + `,"tool_choice":"always"}`, "tool_choice", true},
		{"tool_choice of an unknown type", `{"messages":[` + user + `],` + tools + `,"tool_choice":{"type":"some"}}`, "tool_choice.type", true},
		{"parameters a string", `{"messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f","parameters":"object"}}]}`, "tools[0].function.parameters", true},
		{"parameters an array", `{"messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f","parameters":[1]}}]}`, "tools[0].function.parameters", true},
		{"function without a name", `{"messages":[` + user + `],"tools":[{"type":"function","function":{"parameters":{}}}]}`, "tools[0].function.name", true},
		{"unknown reasoning_effort", `{"messages":[` + user + `],"reasoning_effort":"extreme"}`, "reasoning_effort", true},
		{"unknown reasoning.effort", `{"messages":[` + user + `],"reasoning":{"effort":"loud"}}`, "reasoning.effort", true},
		{"stop a number", `{"messages":[` + user + `],"stop":5}`, "stop", true},
		{"a member of the wrong type", `{"messages":[` + user + `],"max_tokens":"many"}`, "max_tokens", true},

		// Valid Chat that Messages cannot express: not Invalid.
		{"n", `{"messages":[` + user + `],"n":2}`, "n", false},
		{"role function", `{"messages":[{"role":"function","name":"f","content":"x"}]}`, "messages[0].role", false},
		{"audio part", `{"messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`, "messages[0].content[0].type", false},
		{"allowed_tools choice", `{"messages":[` + user + `],` + tools + `,"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}}`, "tool_choice.type", false},
		{"custom tool", `{"messages":[` + user + `],"tools":[{"type":"custom","custom":{"name":"c"}}]}`, "tools[0].type", false},
	})
}

// TestFromChatRequestValidEdges: what Chat allows is still translated.
func TestFromChatRequestValidEdges(t *testing.T) {
	for _, in := range []string{
		`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}]}`,
		`{"messages":[{"role":"user","content":"hi"}],"reasoning_effort":"none"}`,
		`{"messages":[{"role":"user","content":"hi"}],"reasoning_effort":"xhigh"}`,
		`{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto"}`,
		`{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":null}}]}`,
		// tool_choice without tools means nothing, as before.
		`{"messages":[{"role":"user","content":"hi"}],"tool_choice":"none"}`,
	} {
		if out, err := FromChatRequest([]byte(in), chat.Options{}); err != nil {
			t.Errorf("%s: %v (%s)", in, err, out)
		}
	}
}
