package chat

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func reasoningChunk(field, text string) string {
	b, _ := json.Marshal(text)
	return `{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"` + field + `":` + string(b) + `},"finish_reason":null}]}`
}

func contentChunk(text string) string { return reasoningChunk("content", text) }

// assembleAll adds chunks one millisecond apart, from 1 ms.
func assembleAll(t *testing.T, chunks ...string) *Assembler {
	t.Helper()
	a := &Assembler{Created: 99}
	for i, c := range chunks {
		if !a.Add([]byte(c), time.Duration(i+1)*time.Millisecond, false) {
			t.Fatalf("chunk %d refused: %s", i, c)
		}
	}
	return a
}

func TestAssembleTextReasoningUsage(t *testing.T) {
	a := assembleAll(t,
		`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		reasoningChunk("reasoning_content", "Let me "),
		reasoningChunk("reasoning_content", "think."),
		contentChunk("Hello <b>"),
		contentChunk("world"),
		`{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`{"id":"c1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`,
	)
	c := a.Completion(10*time.Millisecond, true)
	got := string(c.JSON())
	want := `{"id":"c1","object":"chat.completion","created":7,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello <b>world","refusal":null,"reasoning_content":"Let me think.","reasoning_trace":[{"position":0.2,"text":"Let me "},{"position":0.3,"text":"think."}]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8},"system_fingerprint":"fp"}`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// Without a trace the member is absent.
	c = a.Completion(10*time.Millisecond, false)
	if strings.Contains(string(c.JSON()), "reasoning_trace") {
		t.Fatalf("trace not asked for, yet present: %s", c.JSON())
	}
}

func TestAssembleKeepsReasoningName(t *testing.T) {
	a := assembleAll(t, reasoningChunk("reasoning", "hm"), contentChunk("ok"),
		// OpenRouter's reasoning details object is not text: ignored, not fatal.
		`{"choices":[{"index":0,"delta":{"reasoning":{"effort":"low"},"content":"!"}}]}`)
	m := a.Completion(time.Second, true).Choices[0].Message
	if m.Reasoning == nil || *m.Reasoning != "hm" || m.ReasoningContent != nil || *m.Content != "ok!" {
		t.Fatalf("message %+v", m)
	}
	if len(*m.ReasoningTrace) != 1 {
		t.Fatalf("trace %+v", *m.ReasoningTrace)
	}
}

func TestAssembleDropReasoning(t *testing.T) {
	a := &Assembler{}
	a.Add([]byte(reasoningChunk("reasoning_content", "kept ")), time.Millisecond, false)
	a.Add([]byte(`{"choices":[{"index":0,"delta":{"reasoning_content":"dropped","content":"c"}}]}`), 2*time.Millisecond, true)
	m := a.Completion(2*time.Millisecond, true).Choices[0].Message
	if *m.ReasoningContent != "kept " || *m.Content != "c" || len(*m.ReasoningTrace) != 1 || (*m.ReasoningTrace)[0].Position != 0.5 {
		t.Fatalf("message %+v trace %+v", m, *m.ReasoningTrace)
	}
}

func TestAssembleToolCallsAndChoices(t *testing.T) {
	a := assembleAll(t,
		`{"id":"x","choices":[{"index":1,"delta":{"role":"assistant","content":"second"}}]}`,
		`{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_","arguments":""}}]}}]}`,
		`{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"weather","arguments":"{\"city\":"}},{"index":1,"id":"call_2","function":{"name":"time","arguments":"{}"}}]}}]}`,
		`{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Oslo\"}"}}]},"finish_reason":"tool_calls","logprobs":{"content":[{"token":"a"}]}}]}`,
		`{"id":"x","choices":[{"index":1,"delta":{},"finish_reason":"stop"}]}`,
	)
	c := a.Completion(time.Second, false)
	if len(c.Choices) != 2 || c.Choices[0].Index != 0 || c.Choices[1].Index != 1 {
		t.Fatalf("choices %+v", c.Choices)
	}
	m0 := c.Choices[0].Message
	if m0.Content != nil {
		t.Errorf("tool-call message content = %q, want null", *m0.Content)
	}
	want := []ToolCall{
		{ID: "call_1", Type: "function", Function: FunctionCall{Name: "get_weather", Arguments: `{"city":"Oslo"}`}},
		{ID: "call_2", Type: "function", Function: FunctionCall{Name: "time", Arguments: "{}"}},
	}
	if len(m0.ToolCalls) != 2 || m0.ToolCalls[0] != want[0] || m0.ToolCalls[1] != want[1] {
		t.Errorf("tool calls %+v", m0.ToolCalls)
	}
	if *c.Choices[0].FinishReason != "tool_calls" || string(c.Choices[0].Logprobs) != `{"content":[{"token":"a"}],"refusal":null}` {
		t.Errorf("finish %q logprobs %s", *c.Choices[0].FinishReason, c.Choices[0].Logprobs)
	}
	if *c.Choices[1].Message.Content != "second" || *c.Choices[1].FinishReason != "stop" {
		t.Errorf("choice 1 %+v", c.Choices[1])
	}
	if string(c.Created) != "99" {
		t.Errorf("created %s, want the fallback 99", c.Created)
	}
}

func TestAssembleSkipsBadChunks(t *testing.T) {
	a := &Assembler{}
	for _, bad := range []string{`[DONE]`, `not json`, `{"choices":[{"index":"zero"}]}`} {
		if a.Add([]byte(bad), 0, false) {
			t.Errorf("%q accepted", bad)
		}
	}
	c := a.Completion(0, true)
	if len(c.Choices) != 0 || c.Object != "chat.completion" || !json.Valid(c.JSON()) {
		t.Fatalf("%s", c.JSON())
	}
}

func TestPosition(t *testing.T) {
	for _, tc := range []struct {
		at, end time.Duration
		want    float64
	}{
		{0, 0, 0}, {5, 0, 0}, {-1, 10, 0}, {10, 10, 1}, {11, 10, 1},
		{1, 3, 0.3333}, {2, 3, 0.6667}, {123456, 1000000, 0.1235},
	} {
		if got := Position(tc.at, tc.end); got != tc.want {
			t.Errorf("Position(%d, %d) = %v, want %v", tc.at, tc.end, got, tc.want)
		}
	}
}

// FuzzAssemble: whatever the chunks and times, the assembler never
// panics, its answer is valid JSON, each choice's content and reasoning
// are its deltas concatenated, and the trace's texts are the reasoning
// with positions non-decreasing within [0, 1].
func FuzzAssemble(f *testing.F) {
	f.Add("Let me ", "think", "Hello", uint16(3), uint16(9), false)
	f.Add("", "\u00e9\"\\", "<&>", uint16(0), uint16(0), true)
	f.Add("a", "b", "c", uint16(9), uint16(1), false)
	f.Fuzz(func(t *testing.T, r1, r2, content string, gap, end uint16, reasoningName bool) {
		field := "reasoning_content"
		if reasoningName {
			field = "reasoning"
		}
		a := &Assembler{}
		chunks := []string{reasoningChunk(field, r1), reasoningChunk(field, r2), contentChunk(content), content, r1}
		for i, c := range chunks {
			// Times may go backwards: the assembler keeps them ordered.
			at := time.Duration(int(gap)*i) - time.Duration(i%2)*time.Duration(gap)*3
			a.Add([]byte(c), at, false)
		}
		c := a.Completion(time.Duration(end), true)
		out := c.JSON()
		if !json.Valid(out) {
			t.Fatalf("invalid JSON: %s", out)
		}
		var back struct {
			Choices []struct {
				Message map[string]json.RawMessage `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(out, &back); err != nil || len(back.Choices) != 1 {
			t.Fatalf("%v: %s", err, out)
		}
		m := back.Choices[0].Message
		var gotContent, gotReasoning string
		_ = json.Unmarshal(m["content"], &gotContent)
		_ = json.Unmarshal(m[field], &gotReasoning)
		// A string decodes with invalid UTF-8 replaced; compare like for like.
		norm := func(s string) string { b, _ := json.Marshal(s); var o string; _ = json.Unmarshal(b, &o); return o }
		if gotContent != norm(content) {
			t.Fatalf("content %q, want %q", gotContent, norm(content))
		}
		// Each chunk is a JSON document of its own: a rune split between
		// r1 and r2 is invalid in each, as a provider could not send it.
		if gotReasoning != norm(r1)+norm(r2) {
			t.Fatalf("reasoning %q, want %q", gotReasoning, norm(r1)+norm(r2))
		}
		var trace []TraceEntry
		if err := json.Unmarshal(m["reasoning_trace"], &trace); err != nil {
			t.Fatalf("trace: %v: %s", err, out)
		}
		var joined strings.Builder
		last := 0.0
		for _, e := range trace {
			if e.Position < last || e.Position > 1 || e.Text == "" {
				t.Fatalf("trace entry %+v after %v", e, last)
			}
			last = e.Position
			joined.WriteString(e.Text)
		}
		if joined.String() != gotReasoning {
			t.Fatalf("trace texts %q, reasoning %q", joined.String(), gotReasoning)
		}
	})
}

// TestAddCompletion: a whole answer is assembled as the stream of the
// same answer is: the completion comes back as it was.
func TestAddCompletion(t *testing.T) {
	for _, whole := range []string{
		`{"id":"c1","object":"chat.completion","created":7,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello <b>","refusal":null,"reasoning_content":"hm","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},{"id":"call_2","type":"function","function":{"name":"g","arguments":""}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8},"system_fingerprint":"fp"}`,
		`{"id":"c2","object":"chat.completion","created":7,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"no"},"logprobs":{"content":[{"token":"x"}],"refusal":[{"token":"no"}]},"finish_reason":"stop"},{"index":1,"message":{"role":"assistant","content":"two","refusal":null,"reasoning":"r"},"logprobs":null,"finish_reason":"length"}]}`,
	} {
		var a Assembler
		if !a.AddCompletion([]byte(whole)) {
			t.Fatalf("refused: %s", whole)
		}
		c := a.Completion(0, false)
		if got := string(c.JSON()); got != whole {
			t.Errorf("got\n%s\nwant\n%s", got, whole)
		}
	}
	var a Assembler
	if a.AddCompletion([]byte(`<html>`)) {
		t.Error("a body that is not JSON was taken")
	}
}
