package tagged

import (
	"encoding/json"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
)

// completion is a whole chat.completion of vLLM's shape whose choices are
// choices.
func completion(choices string) string {
	return `{"id":"chatcmpl-9f2c","object":"chat.completion","created":1718000000,"model":"Qwen/Qwen3-8B","choices":[` + choices +
		`],"usage":{"prompt_tokens":12,"total_tokens":40,"completion_tokens":28},"prompt_logprobs":null}`
}

// message is a choice of index i with message members.
func message(i, members string) string {
	return `{"index":` + i + `,"message":{"role":"assistant",` + members + `,"tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}`
}

func TestAnswer(t *testing.T) {
	r1 := thinktag.MustNew(thinktag.Config{StartsInReasoning: true})
	auto := thinktag.MustNew(thinktag.Config{AtStart: true})
	cases := []struct {
		name    string
		syn     *thinktag.Syntax
		field   string
		body    string
		want    string // "" when unchanged
		blocks  int
		unclosd bool
	}{
		{
			name: "tags", syn: synDefault, field: chat.FieldReasoningContent,
			body: completion(message("0", `"content":"<think>\nHmm, <b> & \"q\".\n</think>\n\nHi <b>!"`)),
			// Every other byte kept; the reasoning before the content,
			// written as the stream's text is (no HTML escaping).
			want:   completion(message("0", `"reasoning_content":"Hmm, <b> & \"q\".\n","content":"Hi <b>!"`)),
			blocks: 1,
		},
		{
			name: "reasoning field", syn: synDefault, field: chat.FieldReasoning,
			body:   completion(message("0", `"content":"<think>x</think>y"`)),
			want:   completion(message("0", `"reasoning":"x","content":"y"`)),
			blocks: 1,
		},
		{
			name: "no tags", syn: synDefault, field: chat.FieldReasoningContent,
			body: completion(message("0", `"content":"Just an answer, a < b."`)),
		},
		{
			name: "auto, a mention", syn: auto, field: chat.FieldReasoningContent,
			body: completion(message("0", `"content":"Say <think> to think."`)),
		},
		{
			name: "existing reasoning first", syn: synDefault, field: chat.FieldReasoningContent,
			body:   completion(message("0", `"reasoning_content":"Earlier. ","content":"<think>Later.</think>Answer"`)),
			want:   completion(message("0", `"reasoning_content":"Earlier. Later.","content":"Answer"`)),
			blocks: 1,
		},
		{
			// SGLang writes the member null when it has none.
			name: "existing null field", syn: synDefault, field: chat.FieldReasoningContent,
			body:   completion(message("0", `"content":"<think>a</think>b","reasoning_content":null`)),
			want:   completion(message("0", `"content":"b","reasoning_content":"a"`)),
			blocks: 1,
		},
		{
			name: "R1, unclosed", syn: r1, field: chat.FieldReasoningContent,
			body:   completion(message("0", `"content":"Okay, so the max_tokens ran out"`)),
			want:   completion(message("0", `"reasoning_content":"Okay, so the max_tokens ran out","content":""`)),
			blocks: 1, unclosd: true,
		},
		{
			name: "escapes", syn: synDefault, field: chat.FieldReasoningContent,
			body:   completion(message("0", `"content":"\u003cthink\u003e\u65e5\u672c\ud83d\ude42\u003c/think\u003e\u00e9"`)),
			want:   completion(message("0", `"reasoning_content":"日本🙂","content":"é"`)),
			blocks: 1,
		},
		{
			name: "n=2: choice 0 only", syn: synDefault, field: chat.FieldReasoningContent,
			body:   completion(message("1", `"content":"<think>one</think>1"`) + "," + message("0", `"content":"<think>zero</think>0"`)),
			want:   completion(message("1", `"content":"<think>one</think>1"`) + "," + message("0", `"reasoning_content":"zero","content":"0"`)),
			blocks: 1,
		},
		{
			name: "no index: choice 0", syn: synDefault, field: chat.FieldReasoningContent,
			body:   `{"choices":[{"message":{"content":"<think>a</think>b"}}]}`,
			want:   `{"choices":[{"message":{"reasoning_content":"a","content":"b"}}]}`,
			blocks: 1,
		},
		{name: "only another choice", syn: synDefault, field: chat.FieldReasoningContent,
			body: completion(message("1", `"content":"<think>one</think>1"`))},
		{name: "content null", syn: synDefault, field: chat.FieldReasoningContent,
			body: completion(message("0", `"content":null`))},
		{name: "content parts", syn: synDefault, field: chat.FieldReasoningContent,
			body: completion(message("0", `"content":[{"type":"text","text":"<think>a</think>b"}]`))},
		{name: "an error", syn: synDefault, field: chat.FieldReasoningContent,
			body: `{"error":{"message":"<think> is not allowed","content":"<think>x</think>"}}`},
		{name: "not JSON", syn: synDefault, field: chat.FieldReasoningContent,
			body: `{"choices":[{"message":{"content":"<think>a</think>b"}}]`},
		{name: "a chunk", syn: synDefault, field: chat.FieldReasoningContent,
			body: `{"choices":[{"index":0,"delta":{"content":"<think>a</think>b"}}]}`},
		{name: "two contents", syn: synDefault, field: chat.FieldReasoningContent,
			body: `{"choices":[{"message":{"content":"<think>a</think>b","content":"c"}}]}`},
		{name: "empty", syn: synDefault, field: chat.FieldReasoningContent, body: ``},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, st, changed := Answer([]byte(c.body), c.syn, c.field)
			if c.want == "" {
				if changed || string(out) != c.body {
					t.Fatalf("changed:\n%s", out)
				}
				return
			}
			if !changed || string(out) != c.want {
				t.Fatalf("changed %v:\n got %s\nwant %s", changed, out, c.want)
			}
			if !json.Valid(out) {
				t.Fatalf("not JSON: %s", out)
			}
			if st.Blocks != c.blocks || st.Unclosed != c.unclosd {
				t.Fatalf("state %+v", st)
			}
		})
	}
}

// TestAnswerAsAssembled: the answer rewritten reads, to an OpenAI SDK's
// accumulator, as the stream of the same text rewritten does.
func TestAnswerAsAssembled(t *testing.T) {
	text := "<think>\nOkay.\n</think>\n\nHi"
	for _, field := range fields {
		body := completion(message("0", `"content":"<think>\nOkay.\n</think>\n\nHi"`))
		out, _, _ := Answer([]byte(body), synDefault, field)
		var a chat.Assembler
		a.AddCompletion(out)
		whole := a.Completion(0, false).Choices[0].Message
		g := checkStream(t, streamOf(pieces(text[:9], text[9:20], text[20:])), synDefault, field)
		if reasoningOf(whole, field) != string(g.reasoning) || ptr(whole.Content) != string(g.content) {
			t.Fatalf("%s: whole %q/%q, stream %q/%q", field, reasoningOf(whole, field), ptr(whole.Content), g.reasoning, g.content)
		}
	}
}
