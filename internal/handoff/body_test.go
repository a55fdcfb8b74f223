package handoff

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// norm decodes JSON for comparison regardless of member order.
func norm(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return v
}

func sameJSON(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	if !reflect.DeepEqual(norm(t, got), norm(t, []byte(want))) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}

const r = "  step one\nstep two \n"

// wrapped and pre are the injected texts of r.
var (
	wrapped = Wrap(r)
	pre     = Preamble + Wrap(r)
)

func q(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestWrapHasNoTrailingWhitespace(t *testing.T) {
	if w := Wrap(r); w != "<think>\nstep one\nstep two\n</think>" {
		t.Fatalf("Wrap = %q", w)
	}
	if Injected(r, Prefill) != wrapped || Injected(r, User) != pre || Injected(r, System) != pre {
		t.Fatal("Injected differs from Wrap/Preamble")
	}
}

func TestAnswerInjects(t *testing.T) {
	cases := []struct {
		name  string
		d     Dialect
		where Inject
		in    string
		want  string
	}{
		{"chat prefill", Chat, Prefill,
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":` + q(wrapped) + `}]}`},
		{"chat user string", Chat, User,
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":` + q("hi\n\n"+pre) + `}]}`},
		{"chat user parts", Chat, User,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
			`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"text","text":` + q(pre) + `}]}]}`},
		{"chat user after tool results", Chat, User,
			`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"42"}]}`,
			`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"42"},{"role":"user","content":` + q(pre) + `}]}`},
		{"chat user before the client's prefill", Chat, User,
			`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Sure:"}]}`,
			`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":` + q("hi\n\n"+pre) + `},{"role":"assistant","content":"Sure:"}]}`},
		{"chat prefill before the client's prefill", Chat, Prefill,
			`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Sure:"}]}`,
			`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":` + q(wrapped+"\n\nSure:") + `}]}`},
		{"chat system existing", Chat, System,
			`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`,
			`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":` + q("be brief\n\n"+pre) + `},{"role":"user","content":"hi"}]}`},
		{"chat system new", Chat, System,
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":` + q(pre) + `},{"role":"user","content":"hi"}]}`},
		{"messages prefill", Messages, Prefill,
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":` + q(wrapped) + `}]}]}`},
		{"messages user string keeps the client's text as a block", Messages, User,
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"text","text":` + q(pre) + `}]}]}`},
		{"messages user after cache_control and tool results", Messages, User,
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"42","cache_control":{"type":"ephemeral"}}]}]}`,
			`{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"42","cache_control":{"type":"ephemeral"}},{"type":"text","text":` + q(pre) + `}]}]}`},
		{"messages system blocks", Messages, System,
			`{"model":"m","max_tokens":9,"system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","max_tokens":9,"stream":true,"system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}},{"type":"text","text":` + q(pre) + `}],"messages":[{"role":"user","content":"hi"}]}`},
		{"messages system none", Messages, System,
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","max_tokens":9,"stream":true,"system":` + q(pre) + `,"messages":[{"role":"user","content":"hi"}]}`},
		{"responses prefill from a string input", Responses, Prefill,
			`{"model":"m","input":"hi"}`,
			`{"model":"m","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":` + q(wrapped) + `}]}]}`},
		{"responses user", Responses, User,
			`{"model":"m","input":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","stream":true,"input":[{"role":"user","content":"hi"},{"type":"message","role":"user","content":[{"type":"input_text","text":` + q(pre) + `}]}]}`},
		{"responses system", Responses, System,
			`{"model":"m","instructions":"be brief","input":"hi"}`,
			`{"model":"m","stream":true,"instructions":` + q("be brief\n\n"+pre) + `,"input":"hi"}`},
	}
	for _, tc := range cases {
		got, err := Answer(tc.d, []byte(tc.in), r, tc.where)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		sameJSON(t, tc.name, got, tc.want)
	}
}

// TestAnswerRemovesKnobsAndHistory: the answer leg is not asked to reason
// again, and no reasoning of earlier turns goes back to any provider.
func TestAnswerRemovesKnobsAndHistory(t *testing.T) {
	cases := []struct {
		d        Dialect
		in, want string
	}{
		{Chat,
			`{"model":"m","n":3,"reasoning_effort":"high","reasoning":{"effort":"high"},"thinking":{"type":"enabled"},"stream_options":{"continuous_usage_stats":true},"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b","reasoning_content":"r1","reasoning":"r2","reasoning_details":[]},{"role":"user","content":"c"}]}`,
			`{"model":"m","stream":true,"stream_options":{"continuous_usage_stats":true,"include_usage":true},"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`},
		{Messages,
			`{"model":"m","max_tokens":9,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"thinking","thinking":"r","signature":""},{"type":"text","text":"b"}]},{"role":"assistant","content":[{"type":"redacted_thinking","data":"x"}]},{"role":"user","content":"c"}]}`,
			`{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"}]},{"role":"user","content":"c"}]}`},
		{Responses,
			`{"model":"m","reasoning":{"effort":"high","summary":"auto"},"input":[{"role":"user","content":"a"},{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"r"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"b"}]},{"role":"user","content":"c"}]}`,
			`{"model":"m","stream":true,"input":[{"role":"user","content":"a"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"b"}]},{"role":"user","content":"c"}]}`},
	}
	for _, tc := range cases {
		got, err := Answer(tc.d, []byte(tc.in), "", User)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, "answer", got, tc.want)
		// The reasoning leg keeps the knobs: it is the one that reasons.
		reason, err := Reason(tc.d, []byte(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		var top map[string]json.RawMessage
		_ = json.Unmarshal(reason, &top)
		for _, k := range knobs[tc.d] {
			if !strings.Contains(tc.in, `"`+k+`":{`) && !strings.Contains(tc.in, `"`+k+`":"`) {
				continue
			}
			if top[k] == nil {
				t.Errorf("dialect %d: Reason dropped the knob %s", tc.d, k)
			}
		}
		if strings.Contains(string(reason), `"r1"`) || strings.Contains(string(reason), `"thinking":"r"`) || strings.Contains(string(reason), `rs_1`) {
			t.Errorf("dialect %d: Reason kept history reasoning: %s", tc.d, reason)
		}
	}
}

func TestAnswerWithoutReasoningInjectsNothing(t *testing.T) {
	in := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	got, err := Answer(Chat, []byte(in), " \n ", Prefill)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "empty reasoning", got, `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
}

func TestBodiesRefuseWhatIsNotAnObject(t *testing.T) {
	for _, in := range []string{``, `[]`, `null`, `"x"`, `{`} {
		if _, err := Answer(Chat, []byte(in), r, User); !errors.Is(err, ErrNotObject) {
			t.Errorf("Answer(%q): %v", in, err)
		}
		if _, err := Reason(Messages, []byte(in)); !errors.Is(err, ErrNotObject) {
			t.Errorf("Reason(%q): %v", in, err)
		}
	}
	if _, err := Answer(Chat, []byte(`{"messages":"x"}`), r, User); err == nil {
		t.Error("messages that are not an array: no error")
	}
}

func TestParseInject(t *testing.T) {
	for _, w := range []Inject{Prefill, User, System} {
		if got, ok := ParseInject(w.String()); !ok || got != w {
			t.Errorf("ParseInject(%q) = %v %v", w.String(), got, ok)
		}
	}
	if _, ok := ParseInject("assistant"); ok {
		t.Error("assistant accepted")
	}
}

func TestReasonRefusesLogprobs(t *testing.T) {
	for _, tc := range []struct {
		d    Dialect
		body string
		want bool
	}{
		{Chat, `{"logprobs":true}`, true},
		{Chat, `{"top_logprobs":5}`, true},
		{Chat, `{"logprobs":false}`, false},
		{Chat, `{"logprobs":null,"top_logprobs":0}`, false},
		{Responses, `{"top_logprobs":1}`, true},
		{Responses, `{"include":["reasoning.encrypted_content","message.output_text.logprobs"]}`, true},
		{Responses, `{"include":["reasoning.encrypted_content"]}`, false},
		{Messages, `{"logprobs":true}`, false},
	} {
		_, err := Reason(tc.d, []byte(tc.body))
		if got := errors.Is(err, ErrLogprobs); got != tc.want {
			t.Errorf("%v %s: refused %v (err %v), want %v", tc.d, tc.body, got, err, tc.want)
		}
	}
}
