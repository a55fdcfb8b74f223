package handoff

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzContinue: whatever the body and the answer, Continue does not
// panic; what it returns is a JSON object that asks for a stream. With an
// answer to add (not blank, valid UTF-8), the body ends as how says: the
// answer's assistant turn last (its text the answer right-trimmed, at the
// end of the client's own prefill when there was one) and no reasoning
// knob, or that turn (the answer as sent) and the instruction after it;
// a Chat prefill takes its mark. Without one, it is the client's body as
// a stream.
func FuzzContinue(f *testing.F) {
	for _, b := range []string{
		`{"model":"m","reasoning_effort":"high","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Sure:"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"x"}]}]}`,
		`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c"}]},{"role":"tool","tool_call_id":"c","content":"4"}]}`,
		`{"model":"m","thinking":{"type":"adaptive"},"output_config":{"effort":"max"},"context_management":{"edits":[{"type":"clear_thinking_20251015"}]},"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"4"}]}]}`,
		`{"model":"m","input":"hi","reasoning":{"effort":"low"},"include":["reasoning.encrypted_content"]}`,
		`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"4"}]}`,
		`{"messages":null,"input":null}`,
		`{}`,
	} {
		for d := range 3 {
			for h := range 4 {
				f.Add([]byte(b), "The answer is 4 \n", uint8(d), uint8(h))
				f.Add([]byte(b), "", uint8(d), uint8(h))
			}
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, answer string, d, h uint8) {
		dl, how := Dialect(d%3), How(h%4)
		out, err := Continue(dl, body, answer, how)
		if err != nil {
			return
		}
		var top map[string]any
		if err := json.Unmarshal(out, &top); err != nil || top == nil {
			t.Fatalf("not a JSON object: %v: %s", err, out)
		}
		if top["stream"] != true {
			t.Fatalf("no stream: %s", out)
		}
		if strings.TrimSpace(answer) == "" {
			in, _ := decode(body)
			streamOn(dl, in)
			want, _ := json.Marshal(in)
			var w map[string]any
			_ = json.Unmarshal(want, &w)
			if !reflect.DeepEqual(top, w) {
				t.Fatalf("no answer, yet the body changed:\n got %s\nwant %s", out, want)
			}
			return
		}
		if !utf8.ValidString(answer) {
			return // json.Marshal replaced what is not UTF-8
		}
		key := "messages"
		if dl == Responses {
			key = "input"
		}
		list, _ := top[key].([]any)
		n := 1
		if how == Instruct {
			n = 2
		}
		if len(list) < n {
			t.Fatalf("%v %v: %d turns: %s", dl, how, len(list), out)
		}
		if how == Instruct {
			ins, _ := list[len(list)-1].(map[string]any)
			if ins["role"] != "user" || textOf(ins["content"]) != ContinueInstruction {
				t.Fatalf("%v: no instruction last: %s", dl, out)
			}
		}
		turn, _ := list[len(list)-n].(map[string]any)
		text := lastText(turn["content"])
		want := answer
		in, _ := decode(body)
		for _, k := range knobs[dl] {
			_, sent := in[k]
			_, kept := top[k]
			if kept != (sent && how == Instruct) {
				t.Fatalf("%v %v: %s sent %v, kept %v: %s", dl, how, k, sent, kept, out)
			}
		}
		if how != Instruct {
			want = strings.TrimRightFunc(answer, unicode.IsSpace)
			if strings.TrimRightFunc(text, unicode.IsSpace) != text {
				t.Fatalf("%v %v: a prefill that ends with whitespace: %q", dl, how, text)
			}
		}
		if turn["role"] != "assistant" || !strings.HasSuffix(text, want) {
			t.Fatalf("%v %v: the answer's turn is %v, want assistant ending %q: %s", dl, how, turn, want, out)
		}
		if dl == Chat && how != Instruct {
			marked, err := how.Mark(out)
			if err != nil {
				t.Fatalf("%v: Mark: %v: %s", how, err, out)
			}
			var m struct {
				Messages []map[string]any `json:"messages"`
				Continue any              `json:"continue_final_message"`
				AddGen   any              `json:"add_generation_prompt"`
			}
			if err := json.Unmarshal(marked, &m); err != nil || len(m.Messages) == 0 {
				t.Fatalf("%v: Mark made %v: %s", how, err, marked)
			}
			prefix := m.Messages[len(m.Messages)-1]["prefix"] == true
			flags := m.Continue == true && m.AddGen == false
			if prefix != (how == Prefix) || flags != (how == ContinueFinal) {
				t.Fatalf("%v: Mark made prefix %v, vLLM flags %v: %s", how, prefix, flags, marked)
			}
		}
	})
}

// textOf is a content's text: a string, or its parts' texts joined.
func textOf(content any) string {
	switch c := content.(type) {
	case string:
		return c
	case []any:
		var s strings.Builder
		for _, p := range c {
			if m, ok := p.(map[string]any); ok {
				t, _ := m["text"].(string)
				s.WriteString(t)
			}
		}
		return s.String()
	}
	return ""
}

// lastText is a string content, or the text of an array's last part.
func lastText(content any) string {
	if c, ok := content.([]any); ok {
		if len(c) == 0 {
			return ""
		}
		return textOf(c[len(c)-1:])
	}
	return textOf(content)
}
