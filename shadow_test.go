package llmrelay

import (
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
)

// TestShadowReadsEveryDialect: the comparison reads the same answer alike
// in every dialect, streamed or whole: its text (no reasoning) and usage.
func TestShadowReadsEveryDialect(t *testing.T) {
	msgEv := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	cases := []struct {
		name   string
		d      dialect
		stream bool
		in     string
		want   shadowAnswer
	}{
		{"chat stream", dialectChat, true,
			`data: {"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n" +
				`data: {"id":"c","choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]}` + "\n\n" +
				`data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hello "}}]}` + "\n\n" +
				`data: {"id":"c","choices":[{"index":0,"delta":{"content":"there"},"finish_reason":"stop"}]}` + "\n\n" +
				`data: {"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":6,"total_tokens":9,"completion_tokens_details":{"reasoning_tokens":2}}}` + "\n\n" +
				"data: [DONE]\n\n",
			shadowAnswer{text: "Hello there", completion: 6, reasoning: 2, saw: true}},
		{"chat whole", dialectChat, false,
			`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there","reasoning_content":"hm"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":6,"total_tokens":9,"completion_tokens_details":{"reasoning_tokens":2}}}`,
			shadowAnswer{text: "Hello there", completion: 6, reasoning: 2, saw: true}},
		{"messages stream", dialectMessages, true,
			msgEv("message_start", `{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":3,"output_tokens":1}}}`) +
				msgEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`) +
				msgEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}`) +
				msgEv("content_block_stop", `{"type":"content_block_stop","index":0}`) +
				msgEv("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`) +
				msgEv("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello there"}}`) +
				msgEv("content_block_stop", `{"type":"content_block_stop","index":1}`) +
				msgEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":6}}`) +
				msgEv("message_stop", `{"type":"message_stop"}`),
			// Anthropic counts thinking in output_tokens only: estimated.
			shadowAnswer{text: "Hello there", completion: 6, reasoning: 1, saw: true}},
		{"messages whole", dialectMessages, false,
			`{"id":"m","type":"message","role":"assistant","model":"c","content":[{"type":"thinking","thinking":"hm","signature":""},{"type":"text","text":"Hello there"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":6}}`,
			shadowAnswer{text: "Hello there", completion: 6, reasoning: 1, saw: true}},
		{"responses stream", dialectResponses, true,
			msgEv("response.created", `{"type":"response.created","response":{"id":"resp_1","object":"response","status":"in_progress","model":"g","output":[]}}`) +
				msgEv("response.output_item.added", `{"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","id":"rs","summary":[]}}`) +
				msgEv("response.reasoning_summary_text.delta", `{"type":"response.reasoning_summary_text.delta","output_index":0,"summary_index":0,"delta":"hm"}`) +
				msgEv("response.output_item.added", `{"type":"response.output_item.added","output_index":1,"item":{"type":"message","id":"msg","content":[]}}`) +
				msgEv("response.output_text.delta", `{"type":"response.output_text.delta","output_index":1,"content_index":0,"delta":"Hello "}`) +
				msgEv("response.output_text.delta", `{"type":"response.output_text.delta","output_index":1,"content_index":0,"delta":"there"}`) +
				msgEv("response.completed", `{"type":"response.completed","response":{"id":"resp_1","object":"response","status":"completed","model":"g","output":[],"usage":{"input_tokens":3,"output_tokens":6,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":9}}}`),
			shadowAnswer{text: "Hello there", completion: 6, reasoning: 2, saw: true}},
		{"responses whole", dialectResponses, false,
			`{"id":"resp_1","object":"response","status":"completed","model":"g","output":[{"type":"reasoning","id":"rs","summary":[{"type":"summary_text","text":"hm"}]},{"type":"message","id":"msg","content":[{"type":"output_text","text":"Hello there","annotations":[]}]}],"usage":{"input_tokens":3,"output_tokens":6,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":9}}`,
			shadowAnswer{text: "Hello there", completion: 6, reasoning: 2, saw: true}},
		{"not an answer", dialectChat, false, `<html>bad gateway</html>`, shadowAnswer{}},
		{"a stream cut short", dialectChat, true,
			`data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hel"}}]}` + "\n\n" + `data: {"id":"c","cho`,
			shadowAnswer{text: "Hel", saw: true}},
	}
	for _, c := range cases {
		chunks := 0
		got := readAnswer(strings.NewReader(c.in), c.stream, c.d, func() { chunks++ })
		if got != c.want || c.stream && c.want.saw && chunks == 0 {
			t.Errorf("%s: %+v (%d chunks), want %+v", c.name, got, chunks, c.want)
		}
	}
}

// TestShadowReadsInlineReasoning: a shadow upstream whose model writes its
// reasoning inline (its target's tag syntax) is read without it, streamed
// (tags cut across deltas) or whole, and the reasoning its usage does not
// count is estimated; without the syntax the tags are the answer's text.
func TestShadowReadsInlineReasoning(t *testing.T) {
	syn, err := thinktag.New(thinktag.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const usage = `"usage":{"prompt_tokens":3,"completion_tokens":9,"total_tokens":12}`
	stream := `data: {"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":"<th"}}]}` + "\n\n" +
		`data: {"id":"c","choices":[{"index":0,"delta":{"content":"ink>\nLet me think"}}]}` + "\n\n" +
		`data: {"id":"c","choices":[{"index":0,"delta":{"content":" hard\n</think>\n\nHello "}}]}` + "\n\n" +
		`data: {"id":"c","choices":[{"index":0,"delta":{"content":"there"},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"c","choices":[],` + usage + `}` + "\n\n" + "data: [DONE]\n\n"
	whole := `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"<think>\nLet me think hard\n</think>\n\nHello there"},"finish_reason":"stop"}],` + usage + `}`
	// "Let me think hard\n": 18 runes, 5 tokens by the estimate.
	want := shadowAnswer{text: "Hello there", completion: 9, reasoning: 5, saw: true}
	for _, c := range []struct {
		name   string
		stream bool
		in     string
	}{{"stream", true, stream}, {"whole", false, whole}} {
		x := exchange{upstream: dialectChat, think: syn}
		if got := readUpstreamAnswer(strings.NewReader(c.in), c.stream, x, func() {}); got != want {
			t.Errorf("%s: %+v, want %+v", c.name, got, want)
		}
		x.think = nil
		if got := readUpstreamAnswer(strings.NewReader(c.in), c.stream, x, func() {}); !strings.HasPrefix(got.text, "<think>") {
			t.Errorf("%s without the syntax: text %q, want the tags in it", c.name, got.text)
		}
	}
}
