package handoff

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// strs walks a JSON value's strings.
func strs(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case []any:
		for _, e := range x {
			strs(e, f)
		}
	case map[string]any:
		for _, e := range x {
			strs(e, f)
		}
	}
}

// FuzzAnswer: whatever the body, Answer does not panic; what it returns is
// a JSON object that asks for a stream and, when there was reasoning to
// inject, carries it verbatim in one of its strings.
func FuzzAnswer(f *testing.F) {
	for _, b := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":"x"}]}`,
		`{"model":"m","system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","input":"hi","instructions":"s"}`,
		`{"model":"m","input":[{"type":"reasoning"},{"role":"user","content":"hi"}]}`,
		`{}`,
	} {
		for d := range 3 {
			for w := range 3 {
				f.Add([]byte(b), "step \"one\"\n", uint8(d), uint8(w))
			}
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, reasoning string, d, w uint8) {
		dl, where := Dialect(d%3), Inject(w%3)
		out, err := Answer(dl, body, reasoning, where)
		if err != nil {
			return
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("not a JSON object: %v: %s", err, out)
		}
		if v["stream"] != true {
			t.Fatalf("no stream: %s", out)
		}
		if strings.TrimSpace(reasoning) == "" || !json.Valid([]byte(q(reasoning))) {
			return
		}
		want := Injected(reasoning, where)
		if !strings.ContainsRune(reasoning, '\uFFFD') && strings.ToValidUTF8(reasoning, "") == reasoning {
			found := false
			strs(v, func(s string) { found = found || strings.Contains(s, want) })
			if !found {
				t.Fatalf("reasoning %q not injected (%v/%v): %s", reasoning, dl, where, out)
			}
		}
	})
}

// FuzzSplicer: any sequence of chunks goes through without a panic; every
// chunk out is JSON named by the splice, and the reasoning the client
// reads is exactly what the splicer hands to the answer leg.
func FuzzSplicer(f *testing.F) {
	f.Add([]byte(`{"id":"a","choices":[{"index":0,"delta":{"reasoning_content":"x"}}]}`+"\n"+`{"choices":[{"index":0,"delta":{"content":"y"}}]}`), uint8(0))
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"reasoning":"é","content":"z"}}]}`+"\n"+`{"choices":[],"usage":{"prompt_tokens":1}}`), uint8(2))
	f.Fuzz(func(t *testing.T, stream []byte, max uint8) {
		s := &Splicer{Model: "alias", MaxReasoning: int(max % 5)}
		var client strings.Builder
		lines := strings.Split(string(stream), "\n")
		i := 0
		for ; i < len(lines); i++ {
			out, over := s.Reason([]byte(lines[i]))
			for _, o := range out {
				var d decoded
				if err := json.Unmarshal(o, &d); err != nil {
					t.Fatalf("reasoning chunk not JSON: %s", o)
				}
				if d.Model != "alias" {
					t.Fatalf("model %q", d.Model)
				}
				for _, c := range d.Choices {
					client.WriteString(c.Delta.ReasoningContent)
				}
			}
			if over {
				i++
				break
			}
		}
		if client.String() != s.Reasoning() {
			t.Fatalf("client read %q, answer leg gets %q", client.String(), s.Reasoning())
		}
		for ; i < len(lines); i++ {
			out, _ := s.Answer([]byte(lines[i])) // an error ends the stream: checked in TestSplicerUnreadable
			for _, o := range out {
				if !json.Valid(o) {
					t.Fatalf("answer chunk not JSON: %s", o)
				}
			}
		}
	})
}

// FuzzSplicerEvent: the hot path (ReasonEvent, AnswerEvent, through
// pace.Classify) gives exactly what Reason and Answer give, chunk by
// chunk, for any stream.
func FuzzSplicerEvent(f *testing.F) {
	f.Add([]byte(`{"id":"a","choices":[{"index":0,"delta":{"reasoning_content":"x"}}]}`+"\n"+`{"id":"a","choices":[{"index":0,"delta":{"reasoning_content":"y"}}]}`+"\n"+
		`{"id":"a","choices":[{"index":0,"delta":{"content":"z"}}]}`+"\n"+`{"id":"b","choices":[{"index":0,"delta":{"content":"w"}}]}`+"\n"+
		`{"id":"b","choices":[{"index":0,"delta":{"content":"v"},"finish_reason":"stop"}]}`), uint8(0), uint8(3))
	f.Add([]byte(`{"id":"a","choices":[{"index":0,"delta":{"reasoning":"é"}}]}`+"\n"+`{"id":"a","choices":[{"index":1,"delta":{"reasoning":"x"}}]}`), uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, stream []byte, max, split uint8) {
		slow, fast := &Splicer{Model: "m", MaxReasoning: int(max % 5)}, &Splicer{Model: "m", MaxReasoning: int(max % 5)}
		lines := strings.Split(string(stream), "\n")
		handedOff := false
		for i, l := range lines {
			ev := sse.NewEvent("", []byte(l))
			if !handedOff && i < int(split)%(len(lines)+1) {
				o1, h1 := slow.Reason([]byte(l))
				o2, h2 := fast.ReasonEvent(&ev)
				if h1 != h2 || fmt.Sprint(o1) != fmt.Sprint(o2) || slow.End != fast.End {
					t.Fatalf("Reason %q: %q %v %q; ReasonEvent: %q %v %q", l, o1, h1, slow.End, o2, h2, fast.End)
				}
				handedOff = h1
				continue
			}
			o1, e1 := slow.Answer([]byte(l))
			o2, e2 := fast.AnswerEvent(&ev)
			if (e1 == nil) != (e2 == nil) || fmt.Sprint(o1) != fmt.Sprint(o2) {
				t.Fatalf("Answer %q: %q %v; AnswerEvent: %q %v", l, o1, e1, o2, e2)
			}
		}
		if slow.Reasoning() != fast.Reasoning() || slow.answerReasoning != fast.answerReasoning {
			t.Fatalf("reasoning %q / %q, answer leg's %d / %d", slow.Reasoning(), fast.Reasoning(), slow.answerReasoning, fast.answerReasoning)
		}
	})
}
