package tagged

import (
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
)

// Streams that must come out byte for byte as they came.

// checkSame checks that stream comes out of a Source unchanged, under
// each of cfgs.
func checkSame(t *testing.T, stream string, cfgs ...thinktag.Config) {
	t.Helper()
	for _, cfg := range cfgs {
		for _, field := range fields {
			out, src, err := runSource(t, stream, thinktag.MustNew(cfg), field)
			if err == nil || rawOut(out) != stream {
				t.Fatalf("%+v, %s: changed (%v):\n got %q\nwant %q", cfg, field, err, rawOut(out), stream)
			}
			if st := src.State(); st.Blocks != 0 || st.Unclosed {
				t.Fatalf("%+v: state %+v of a stream with no block", cfg, st)
			}
		}
	}
}

// TestNoTagsPassUnchanged: an answer with no tag, with "<" and "</" in
// the middle of its deltas (HTML, code, comparisons) and escapes, passes
// as it came, byte for byte, whether tags are looked for anywhere or
// only at the start.
func TestNoTagsPassUnchanged(t *testing.T) {
	stream := streamOf(pieces("Use", " `<div>`", " and", " a < b", " </p>", " \"quoted\"", "\n\n", "日本", " 🙂", " <thinkpad>", "."))
	checkSame(t, stream, thinktag.Config{}, thinktag.Config{AtStart: true}, thinktag.Config{KeepNewlines: true})
	// In other shapes: SGLang's, CRLF line endings, a comment.
	var b strings.Builder
	for _, p := range []string{"Hello", " <b>", "world", "</b>"} {
		b.WriteString(sseData(sglangDelta(p)))
	}
	b.WriteString(": keep-alive\n\n")
	b.WriteString("data: " + deltaWith(`"content":"!"`) + "\r\n\r\n")
	b.WriteString(sseData("[DONE]"))
	checkSame(t, b.String(), thinktag.Config{}, thinktag.Config{AtStart: true})
}

// TestAutoPassesOnceAnswerCame: with AtStart, once the text began with
// answer, nothing after is looked at, not even a delta that ends in "<"
// or a later <think>.
func TestAutoPassesOnceAnswerCame(t *testing.T) {
	stream := streamOf(pieces("\n", "Sure", ", a <", "think> tag", " is <", "b", "</think>"))
	checkSame(t, stream, thinktag.Config{AtStart: true})
}

// TestReasoningFieldPassesUnchanged: an upstream with a reasoning parser
// sends its reasoning in a field, and its answer (no tag) in content:
// the stream passes as it came, even configured as if it had none
// (StartsInReasoning would otherwise take the answer for reasoning).
func TestReasoningFieldPassesUnchanged(t *testing.T) {
	for _, f := range fields {
		var b strings.Builder
		b.WriteString(sseData(deltaWith(`"role":"assistant","content":""`)))
		for _, p := range []string{"Okay", ", 2+2", " is 4", ".\n"} {
			b.WriteString(sseData(deltaWith(`"` + f + `":"` + p + `"`)))
		}
		for _, p := range []string{"2 + 2", " = ", "**4**", " <", "b>"} {
			b.WriteString(sseData(vllmDelta([]byte(p))))
		}
		b.WriteString(sseData(finishChunk("stop")) + sseData(usageChunk()) + sseData("[DONE]"))
		checkSame(t, b.String(), configs...)
	}
	// SGLang's shape, its reasoning parser on.
	var b strings.Builder
	for _, p := range []string{"2", "=", "4"} {
		b.WriteString(sseData(`{"id":"fea4","object":"chat.completion.chunk","created":1756216933,"model":"m","choices":[{"index":0,"delta":{"role":null,"content":null,"reasoning_content":"` + p + `","tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}`))
	}
	b.WriteString(sseData(sglangDelta("Four")) + sseData("[DONE]"))
	checkSame(t, b.String(), configs...)
	_ = chat.FieldReasoning
}
