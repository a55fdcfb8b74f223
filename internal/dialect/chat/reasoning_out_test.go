package chat

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDuplicateReasoning(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"choices":[{"index":0,"delta":{"reasoning_content":"a\"b"}}]}`, `{"choices":[{"index":0,"delta":{"reasoning_content":"a\"b","reasoning":"a\"b"}}]}`},
		{`{"choices":[{"delta":{"reasoning" : "x","content":null}}]}`, `{"choices":[{"delta":{"reasoning" : "x","reasoning_content":"x","content":null}}]}`},
		{`{"choices":[{"message":{"role":"assistant","reasoning_content":"r","content":"c"}}]}`, `{"choices":[{"message":{"role":"assistant","reasoning_content":"r","reasoning":"r","content":"c"}}]}`},
		{`{"choices":[{"delta":{"reasoning_content":"r","reasoning":"r"}}]}`, ``},
		{`{"choices":[{"delta":{"content":"c"}}]}`, ``},
		{`{"choices":[{"delta":{"reasoning":{"effort":"low"}}}]}`, ``},
		{`not json "reasoning"`, ``},
	} {
		got, changed := DuplicateReasoning([]byte(c.in))
		if c.want == "" {
			if changed || string(got) != c.in {
				t.Errorf("%s: changed to %s", c.in, got)
			}
			continue
		}
		if !changed || string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.in, got, c.want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: invalid JSON %s", c.in, got)
		}
	}
}

func TestInlinerStream(t *testing.T) {
	chunks := []string{
		`{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
		`{"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"think "}}]}`,
		`{"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"more"}}]}`,
		`{"id":"x","choices":[{"index":0,"delta":{"content":"Answer"}}]}`,
		`{"id":"x","choices":[{"index":0,"delta":{"content":" two"}}]}`,
		`{"id":"x","choices":[{"index":0,"delta":{"reasoning":"again"}}]}`,
		`{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`{"id":"x","choices":[],"usage":{"completion_tokens":3}}`,
	}
	var in Inliner
	var content strings.Builder
	for _, c := range chunks {
		out, _ := in.Chunk([]byte(c))
		var v struct {
			Choices []struct {
				Delta map[string]any `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		for _, ch := range v.Choices {
			if _, ok := ch.Delta["reasoning_content"]; ok {
				t.Errorf("reasoning left in %s", out)
			}
			if _, ok := ch.Delta["reasoning"]; ok {
				t.Errorf("reasoning left in %s", out)
			}
			if s, ok := ch.Delta["content"].(string); ok {
				content.WriteString(s)
			}
		}
	}
	want := "<think>\nthink more\n</think>\n\nAnswer two<think>\nagain\n</think>\n\n"
	if content.String() != want {
		t.Errorf("content %q, want %q", content.String(), want)
	}
}

func TestInlinerMessage(t *testing.T) {
	var in Inliner
	out, changed := in.Message([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","reasoning_content":"r","content":"c"},"finish_reason":"stop"}]}`))
	if !changed || !strings.Contains(string(out), `"content":"\u003cthink\u003e\nr\n\u003c/think\u003e\n\nc"`) && !strings.Contains(string(out), `"content":"<think>\nr\n</think>\n\nc"`) {
		t.Errorf("got %s", out)
	}
	if strings.Contains(string(out), "reasoning_content") {
		t.Errorf("reasoning left: %s", out)
	}
}

// Reasoning that ends with a newline (tagged reasoning keeps the one
// before </think>) gets no second one before the closing tag.
func TestInlinerNewlineBeforeClose(t *testing.T) {
	var in Inliner
	var content strings.Builder
	for _, c := range []string{
		`{"choices":[{"index":0,"delta":{"reasoning_content":"r\n"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"a"}}]}`,
	} {
		out, _ := in.Chunk([]byte(c))
		var v struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		_ = json.Unmarshal(out, &v)
		content.WriteString(v.Choices[0].Delta.Content)
	}
	if want := "<think>\nr\n</think>\n\na"; content.String() != want {
		t.Errorf("content %q, want %q", content.String(), want)
	}
}
