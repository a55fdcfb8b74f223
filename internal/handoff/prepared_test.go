package handoff

import (
	"bytes"
	"strings"
	"testing"
)

// preparedBodies are client bodies of each dialect in the shapes Answer
// edits: string and array contents, a client prefill, a conversation
// that ends with tool results, history reasoning, reasoning knobs,
// system prompts of each form, cache markers, HTML characters and
// non-ASCII text the encoder escapes or keeps.
var preparedBodies = []struct {
	d    Dialect
	body string
}{
	{Chat, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
	{Chat, `{"model":"m","stream":true,"stream_options":{"include_usage":false},"reasoning_effort":"high","messages":[{"role":"system","content":"Be <terse> & kind"},{"role":"user","content":"a"},{"role":"assistant","content":"b","reasoning_content":"old"},{"role":"user","content":[{"type":"text","text":"c \u2028 é"}]}]}`},
	{Chat, `{"model":"m","messages":[{"role":"developer","content":[{"type":"text","text":"dev"}]},{"role":"user","content":"q"},{"role":"assistant","content":"Sure:"}]}`},
	{Chat, `{"model":"m","messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"t","content":"42"}],"tools":[{"type":"function","function":{"name":"f"}}]}`},
	{Messages, `{"model":"m","max_tokens":100,"thinking":{"type":"enabled","budget_tokens":1024},"system":"sys","messages":[{"role":"user","content":"hi"}]}`},
	{Messages, `{"model":"m","max_tokens":100,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"x"},{"type":"text","text":"b"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"u","content":"r"}]}]}`},
	{Messages, `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"Prefilled <b>"}]}`},
	{Responses, `{"model":"m","input":"hi","reasoning":{"effort":"low"},"instructions":"be brief"}`},
	{Responses, `{"model":"m","include":["reasoning.encrypted_content"],"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"a"}]},{"type":"reasoning","summary":[]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"b"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"c"}]}]}`},
}

// preparedReasonings are reasonings whose encoding is not their bytes:
// HTML characters, quotes, control characters, U+2028, invalid UTF-8 (at
// the ends too), and whitespace Wrap trims.
var preparedReasonings = []string{
	"plain",
	"  \n spaced out \t\n",
	`<tag> & "quotes" \ back`,
	"line\u2028sep\u2029 and \x01 control",
	"é 漢字 😀",
	"bad \xff utf8 \xe2\x82",
	"\xe2\x82",
	"ends with a partial rune \xf0\x9f",
}

// TestPreparedFill: a prepared body filled with a reasoning is Answer's
// body for it, byte for byte, in every dialect and position; a blank
// reasoning is left to Answer.
func TestPreparedFill(t *testing.T) {
	for _, tc := range preparedBodies {
		for _, where := range []Inject{Prefill, User, System} {
			p, ok := Prepare(tc.d, []byte(tc.body), where)
			if !ok {
				t.Fatalf("dialect %d, %s: Prepare declined %s", tc.d, where, tc.body)
			}
			for _, r := range preparedReasonings {
				want, err := Answer(tc.d, []byte(tc.body), r, where)
				if err != nil {
					t.Fatal(err)
				}
				got, ok := p.Fill(r)
				if !ok || !bytes.Equal(got, want) {
					t.Errorf("dialect %d, %s, reasoning %q:\n got %s\nwant %s", tc.d, where, r, got, want)
				}
			}
			if _, ok := p.Fill(" \n\t"); ok {
				t.Errorf("dialect %d, %s: a blank reasoning filled; Answer injects nothing for it", tc.d, where)
			}
		}
	}
}

// TestAnswerFromReasonBody: the answer leg's body made from the reasoning
// leg's is the one made from the client's (Reason's edits are Answer's
// too, and the same twice), so the relay keeps only the reasoning leg's
// body while the reasoning streams.
func TestAnswerFromReasonBody(t *testing.T) {
	for _, tc := range preparedBodies {
		reason, err := Reason(tc.d, []byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		for _, where := range []Inject{Prefill, User, System} {
			for _, r := range append([]string{""}, preparedReasonings...) {
				want, err := Answer(tc.d, []byte(tc.body), r, where)
				if err != nil {
					t.Fatal(err)
				}
				got, err := Answer(tc.d, reason, r, where)
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("dialect %d, %s, reasoning %q: from the reasoning leg's body\n got %s (%v)\nwant %s", tc.d, where, r, got, err, want)
				}
			}
		}
	}
}

// TestPrepareDeclinesMarker: a client body that holds the marker is not
// prepared (the reasoning's place would be ambiguous).
func TestPrepareDeclinesMarker(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"say ` + marker + `"}]}`
	if _, ok := Prepare(Chat, []byte(body), User); ok {
		t.Fatal("prepared a body that holds the marker")
	}
	if _, ok := Prepare(Chat, []byte(`[1]`), User); ok {
		t.Fatal("prepared a body that is not an object")
	}
}

// bigChat is a Chat body with a conversation of about n bytes.
func bigChat(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"m","stream":true,"messages":[{"role":"system","content":"You are terse."}`)
	for i := 0; b.Len() < n; i++ {
		b.WriteString(`,{"role":"user","content":"the relay streams tokens, and \"quotes\" <tag> 50% of the time"},{"role":"assistant","content":"ok, noted: the relay streams tokens"}`)
	}
	b.WriteString(`,{"role":"user","content":"now?"}]}`)
	return []byte(b.String())
}

// The hand-off's cost of the answer leg's body, 100 KB conversation, 1 KB
// of reasoning: Answer from scratch against Fill of a prepared body.
func BenchmarkAnswer100KB(b *testing.B) {
	body, r := bigChat(100_000), strings.Repeat("thinking about it; ", 50)
	for b.Loop() {
		if _, err := Answer(Chat, body, r, User); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFill100KB(b *testing.B) {
	body, r := bigChat(100_000), strings.Repeat("thinking about it; ", 50)
	p, ok := Prepare(Chat, body, User)
	if !ok {
		b.Fatal("not prepared")
	}
	for b.Loop() {
		if _, ok := p.Fill(r); !ok {
			b.Fatal("not filled")
		}
	}
}
