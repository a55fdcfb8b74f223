package handoff

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

func reasoningChunk(id, field, text string) []byte {
	return []byte(`{"id":"` + id + `","object":"chat.completion.chunk","created":1,"model":"r1","choices":[{"index":0,"delta":{"` + field + `":` + q(text) + `},"finish_reason":null}]}`)
}

// decoded is what a client reads of a chunk.
type decoded struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Created int64  `json:"created"`
	Choices []struct {
		Delta struct {
			Role             string          `json:"role"`
			Content          *string         `json:"content"`
			ReasoningContent string          `json:"reasoning_content"`
			ToolCalls        json.RawMessage `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		Prompt     int `json:"prompt_tokens"`
		Completion int `json:"completion_tokens"`
		Total      int `json:"total_tokens"`
		Details    struct {
			Reasoning int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
}

func dec(t *testing.T, b []byte) decoded {
	t.Helper()
	var d decoded
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return d
}

func TestSplicerReasoningUpToTheHandoffPoint(t *testing.T) {
	s := &Splicer{Model: "alias", Created: 7}
	var got []decoded
	for _, c := range [][]byte{
		[]byte(`{"id":"a","object":"chat.completion.chunk","created":1,"model":"r1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`),
		reasoningChunk("a", "reasoning_content", "think "),
		reasoningChunk("a", "reasoning", "more"),
	} {
		out, over := s.Reason(c)
		if over {
			t.Fatalf("handed off at %s", c)
		}
		for _, o := range out {
			got = append(got, dec(t, o))
		}
	}
	// Reasoning and answer in one chunk: the reasoning goes out, the
	// answer does not, and it is the hand-off point.
	out, over := s.Reason([]byte(`{"id":"a","choices":[{"index":0,"delta":{"reasoning_content":" end","content":"ANSWER"}}]}`))
	if !over || len(out) != 1 {
		t.Fatalf("mixed chunk: over %v, %d chunks", over, len(out))
	}
	got = append(got, dec(t, out[0]))
	if len(got) != 4 || got[0].Choices[0].Delta.Role != "assistant" {
		t.Fatalf("want the role chunk then 3 reasoning chunks, got %+v", got)
	}
	var text string
	for _, d := range got {
		if d.ID != "a" || d.Model != "alias" || d.Created != 7 {
			t.Errorf("chunk named %q %q %d; want a, alias, 7", d.ID, d.Model, d.Created)
		}
		text += d.Choices[0].Delta.ReasoningContent
		if c := d.Choices[0].Delta.Content; c != nil && *c != "" {
			t.Errorf("answer text leaked: %q", *c)
		}
	}
	if text != "think more end" || s.Reasoning() != text {
		t.Errorf("reasoning %q / %q", text, s.Reasoning())
	}
	if s.ReasoningTokens() != 4 { // 14 runes
		t.Errorf("ReasoningTokens = %d", s.ReasoningTokens())
	}
}

func TestSplicerHandoffPoints(t *testing.T) {
	for name, c := range map[string]string{
		"text":      `{"choices":[{"index":0,"delta":{"content":"x"}}]}`,
		"tool call": `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":""}}]}}]}`,
		"finish":    `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		"refusal":   `{"choices":[{"index":0,"delta":{"refusal":"no"}}]}`,
	} {
		s := &Splicer{Model: "m"}
		s.Reason(reasoningChunk("a", "reasoning_content", "r"))
		out, over := s.Reason([]byte(c))
		if !over || len(out) != 0 {
			t.Errorf("%s: over %v, %d chunks out; want a hand-off with nothing forwarded", name, over, len(out))
		}
	}
	// Not hand-off points: an empty text, a role chunk, something that is
	// not a chunk (another choice is: TestSplicerUnreadable).
	s := &Splicer{Model: "m"}
	for _, c := range []string{`{"choices":[{"index":0,"delta":{"content":""}}]}`, `not json`, `{"choices":[]}`} {
		if out, over := s.Reason([]byte(c)); over || len(out) != 0 {
			t.Errorf("%s: over %v, %d out", c, over, len(out))
		}
	}
}

func TestSplicerMaxReasoning(t *testing.T) {
	s := &Splicer{Model: "m", MaxReasoning: 2}
	if _, over := s.Reason(reasoningChunk("a", "reasoning_content", "abcd")); over {
		t.Fatal("over at 1 token")
	}
	if out, over := s.Reason(reasoningChunk("a", "reasoning_content", "efgh")); !over || len(out) != 1 {
		t.Fatalf("at 2 tokens: over %v, %d out; want the chunk that reaches the bound, then the hand-off", over, len(out))
	}
}

func TestSplicerAnswer(t *testing.T) {
	s := &Splicer{Model: "alias", Created: 7, ReasonPrompt: 100}
	s.Reason(reasoningChunk("a", "reasoning_content", "abcdefgh")) // 2 tokens
	in := []string{
		`{"id":"b","object":"chat.completion.chunk","created":9,"model":"claude","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		`{"id":"b","object":"chat.completion.chunk","created":9,"model":"claude","choices":[{"index":0,"delta":{"reasoning_content":"own"},"finish_reason":null}]}`,
		`{"id":"b","object":"chat.completion.chunk","created":9,"model":"claude","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]}`,
		`{"id":"b","object":"chat.completion.chunk","created":9,"model":"claude","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]}`,
		`{"id":"b","object":"chat.completion.chunk","created":9,"model":"claude","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"id":"b","object":"chat.completion.chunk","created":9,"model":"claude","choices":[],"usage":{"prompt_tokens":50,"completion_tokens":10,"total_tokens":60,"prompt_tokens_details":{"cached_tokens":40}}}`,
	}
	var outs []decoded
	for _, c := range in {
		for _, o := range answer(t, s, c) {
			outs = append(outs, dec(t, o))
		}
	}
	if len(outs) != 5 {
		t.Fatalf("%d chunks out; want text, the tool call's head and arguments, finish, usage (the role and the answer leg's reasoning dropped): %+v", len(outs), outs)
	}
	for _, d := range outs {
		if d.ID != "a" || d.Model != "alias" || d.Created != 7 {
			t.Errorf("chunk named %q %q %d", d.ID, d.Model, d.Created)
		}
		if len(d.Choices) > 0 && (d.Choices[0].Delta.Role != "" || d.Choices[0].Delta.ReasoningContent != "") {
			t.Errorf("a second role or the answer leg's reasoning went out: %+v", d)
		}
	}
	if c := outs[0].Choices[0].Delta.Content; c == nil || *c != "Hi" {
		t.Errorf("text chunk %+v", outs[0])
	}
	if len(outs[1].Choices[0].Delta.ToolCalls) == 0 || !strings.Contains(string(outs[2].Choices[0].Delta.ToolCalls), `"{}"`) || *outs[3].Choices[0].FinishReason != "tool_calls" {
		t.Errorf("tool call or finish lost: %+v %+v %+v", outs[1], outs[2], outs[3])
	}
	u := outs[4].Usage
	// 150 prompt (both legs), 10 + 2 completion, reasoning 2 (the
	// reasoning leg's) + 1 (the answer leg's "own", estimated).
	if u == nil || u.Prompt != 150 || u.Completion != 12 || u.Total != 162 || u.Details.Reasoning != 3 {
		t.Errorf("usage %+v", u)
	}
	if s.AnswerPrompt != 50 || s.AnswerCompletion != 10 || s.AnswerCached != 40 {
		t.Errorf("answer leg's own usage %d/%d, %d cached", s.AnswerPrompt, s.AnswerCompletion, s.AnswerCached)
	}
	// An error object passes as it is.
	e := `{"error":{"message":"overloaded","type":"server_error"}}`
	if o := answer(t, s, e); len(o) != 1 || string(o[0]) != e {
		t.Errorf("error chunk rewritten: %s", o)
	}
}

// TestSplicerNoReasoning: with no reasoning leg, the answer's own role
// chunk goes out (the stream still starts with the assistant role).
func TestSplicerNoReasoning(t *testing.T) {
	s := &Splicer{Model: "alias"}
	s.Begin("minted")
	if o := answer(t, s, `{"id":"b","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`); len(o) != 0 {
		t.Errorf("an empty role chunk went out: %s", o)
	}
	o := answer(t, s, `{"id":"b","choices":[{"index":0,"delta":{"content":"hi"}}]}`)
	if len(o) != 2 || !strings.Contains(string(o[0]), `"role":"assistant"`) || !strings.Contains(string(o[1]), `"minted"`) {
		t.Errorf("want the role chunk, then the text: %s", o)
	}
	for _, c := range o {
		if !json.Valid(c) {
			t.Errorf("a chunk out is not JSON (a buffer reused under it?): %s", c)
		}
	}
	if d := dec(t, o[1]); d.Choices[0].Delta.Content == nil || *d.Choices[0].Delta.Content != "hi" {
		t.Errorf("text chunk %s", o[1])
	}
}

// TestSplicerContentParts: Mistral writes reasoning and answer as content
// parts; the splice reads them as the translators do.
func TestSplicerContentParts(t *testing.T) {
	s := &Splicer{Model: "alias"}
	out, over := s.Reason([]byte(`{"id":"m","choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"Okay"}]}]}}]}`))
	if over || len(out) != 2 || s.Reasoning() != "Okay" {
		t.Fatalf("thinking part: over %v, %d out, reasoning %q", over, len(out), s.Reasoning())
	}
	if _, over := s.Reason([]byte(`{"id":"m","choices":[{"index":0,"delta":{"content":[{"type":"text","text":"Hi"}]}}]}`)); !over {
		t.Error("a text part is no hand-off point")
	}
	o := answer(t, s, `{"id":"n","choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"hmm"}]},{"type":"text","text":"Hi"}]}}]}`)
	if len(o) != 1 || !strings.Contains(string(o[0]), `"content":"Hi"`) || strings.Contains(string(o[0]), "hmm") {
		t.Errorf("answer parts: %s", o)
	}
}

// answer is s.Answer of data, which must be readable.
func answer(t *testing.T, s *Splicer, data string) [][]byte {
	t.Helper()
	out, err := s.Answer([]byte(data))
	if err != nil {
		t.Fatalf("Answer(%s): %v", data, err)
	}
	return out
}

// TestSplicerUnreadable: a chunk the translators cannot read ends the
// reasoning (the answer leg writes what it held), and in the answer leg
// is an error, so the stream ends with the in-band error instead of
// going on without what the chunk carried.
func TestSplicerUnreadable(t *testing.T) {
	unreadable := []string{
		`{"choices":[{"index":0,"delta":{"content":[{"type":"image_url","image_url":{"url":"x"}}]}}]}`,
		`{"choices":[{"index":1,"delta":{"content":"second choice"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":5}}]}`,
	}
	for _, c := range unreadable {
		s := &Splicer{Model: "m"}
		s.Reason(reasoningChunk("a", "reasoning_content", "r"))
		if out, over := s.Reason([]byte(c)); !over || len(out) != 0 || s.End != EndUnreadable {
			t.Errorf("reasoning leg %s: over %v, %d out, End %q; want a hand-off (unreadable)", c, over, len(out), s.End)
		}
		if out, err := s.Answer([]byte(c)); err == nil || !errors.As(err, new(*chat.UnreadableError)) || len(out) != 0 {
			t.Errorf("answer leg %s: %d out, err %v; want a *chat.UnreadableError", c, len(out), err)
		}
	}
	if _, err := (&Splicer{}).Answer([]byte(`data that is not JSON`)); err == nil {
		t.Error("answer leg: data that is not JSON passed")
	}
}
