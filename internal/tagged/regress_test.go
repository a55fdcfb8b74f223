package tagged

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
)

// Bugs found by the property test and by reading; each test failed
// before its fix.

var (
	synDefault = thinktag.MustNew(thinktag.Config{})
	synKimi    = thinktag.MustNew(thinktag.Config{Tags: []thinktag.Tag{thinktag.Kimi, thinktag.Think}})
)

// pieces makes byte slices of strings.
func pieces(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// TestHeldReleasedInPieceOfSameLength: "◁" held back (it may begin
// ◁think▷), then a piece "<th" rules it out and is held itself. The one
// segment, the released "◁", is as long as the piece: the event must not
// be taken as all answer as it came.
func TestHeldReleasedInPieceOfSameLength(t *testing.T) {
	text := "&amp;◁<think>日本"
	stream := streamOf(pieces("&amp;◁", "<th", "ink>日本"))
	checkSplit(t, checkStream(t, stream, synKimi, chat.FieldReasoningContent), synKimi, []byte(text))
}

// sglangDelta is a content delta as SGLang writes it: every member of its
// delta, null when unset, and "usage":null.
func sglangDelta(content string) string {
	lit, _ := json.Marshal(content)
	return `{"id":"3b6e0f5c2a8d4e7f9a1b","object":"chat.completion.chunk","created":1718000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"role":null,"content":` +
		string(lit) + `,"reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}`
}

// TestSGLangNullReasoningField: SGLang's deltas carry
// "reasoning_content":null next to the content. Renaming the content key
// alone would make two reasoning_content members, and a JSON reader keeps
// the last, the null: the reasoning would be lost.
func TestSGLangNullReasoningField(t *testing.T) {
	var b strings.Builder
	for _, p := range []string{"<think>", "\n", "Hmm", ".", "\n</think>", "\n\n", "Hi", "."} {
		b.WriteString(sseData(sglangDelta(p)))
	}
	b.WriteString(sseData("[DONE]"))
	for _, field := range fields {
		g := checkStream(t, b.String(), synDefault, field)
		checkSplit(t, g, synDefault, []byte("<think>\nHmm.\n</think>\n\nHi."))
		// And as a client reads it: encoding/json keeps the last of
		// duplicate members.
		out, _, _ := runSource(t, b.String(), synDefault, field)
		var a chat.Assembler
		for _, ev := range out {
			a.Add(ev.data, 0, false)
		}
		msg := a.Completion(0, false).Choices[0].Message
		if r := reasoningOf(msg, field); r != "Hmm.\n" || msg.Content == nil || *msg.Content != "Hi." {
			t.Fatalf("%s: assembled reasoning %q, content %v", field, r, msg.Content)
		}
	}
}

// TestEscapedContentKey: a content key written with an escape, and a
// member elsewhere whose value is the string "content": the key renamed
// must be the delta's, not the model's.
func TestEscapedContentKey(t *testing.T) {
	delta := func(s string) string {
		return `{"id":"x","model":"content","choices":[{"index":0,"delta":{"conten\u0074":"` + s + `"}}]}`
	}
	var b strings.Builder
	for _, p := range []string{"<think>a", "</think>b"} {
		b.WriteString(sseData(delta(p)))
	}
	g := checkStream(t, b.String(), synDefault, chat.FieldReasoningContent)
	checkSplit(t, g, synDefault, []byte("<think>a</think>b"))
}

// TestMarkInAMember: a chunk decoded whole (content with its
// finish_reason) whose other member holds the string the envelope was
// once marked with.
func TestMarkInAMember(t *testing.T) {
	data := `{"a":"\u0000tagged\u0000","choices":[{"index":0,"delta":{"content":"<think>x</think>y"},"finish_reason":"stop"}]}`
	g := checkStream(t, sseData(data), synDefault, chat.FieldReasoningContent)
	checkSplit(t, g, synDefault, []byte("<think>x</think>y"))
}

// TestCutInsideCharacter: an upstream that cuts its deltas inside a
// UTF-8 sequence sends strings that are not valid UTF-8 each; the bytes
// must come out as they came, the tags found across the cut.
func TestCutInsideCharacter(t *testing.T) {
	text := "◁think▷é◁/think▷日本"
	stream := streamOf(pieces(text[:1], text[1:5], text[5:12], text[12:14], text[14:]))
	checkSplit(t, checkStream(t, stream, synKimi, chat.FieldReasoningContent), synKimi, []byte(text))
}

// TestNoExtraEvents: a "<" held at the end of a delta goes out with the
// next delta's text, in one event, not in an event of its own: an answer
// with no tag has no more events than it came in.
func TestNoExtraEvents(t *testing.T) {
	stream := streamOf(pieces("a <", "b", " c </", "div>", "<", "<b>"))
	in := readAll(t, stream)
	out, _, _ := runSource(t, stream, synDefault, chat.FieldReasoningContent)
	if len(out) > len(in) {
		t.Fatalf("%d events in, %d out:\n%s", len(in), len(out), rawOut(out))
	}
	checkSplit(t, checkStream(t, stream, synDefault, chat.FieldReasoningContent), synDefault, []byte("a <b c </div><<b>"))
}

// TestFinishChunkMembersKept: vLLM sends the last token with the
// finish_reason; the text events made of that chunk keep its members,
// byte for byte and in order (checkStream's envelope check).
func TestFinishChunkMembersKept(t *testing.T) {
	last := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1718000000,"model":"m","choices":[{"index":0,"delta":{"content":"x</think>\n\nHi <b>&"},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}`
	stream := sseData(deltaWith(`"content":"<think>"`)) + sseData(last) + sseData("[DONE]")
	g := checkStream(t, stream, synDefault, chat.FieldReasoningContent)
	checkSplit(t, g, synDefault, []byte("<think>x</think>\n\nHi <b>&"))
}

// reasoningOf is an assembled message's reasoning in field.
func reasoningOf(m chat.Message, field string) string {
	var p *string
	if field == chat.FieldReasoning {
		p = m.Reasoning
	} else {
		p = m.ReasoningContent
	}
	if p == nil {
		return ""
	}
	return *p
}

// TestHeldBeforeUnterminatedEnd: a stream cut inside its last event (no
// blank line after it) while "<" is held: the held text must go out
// before that block, not run into it.
func TestHeldBeforeUnterminatedEnd(t *testing.T) {
	stream := sseData(vllmDelta([]byte("a <"))) + `data: {"id":"chatcmpl-1","choi`
	g := checkStream(t, stream, synDefault, chat.FieldReasoningContent)
	checkSplit(t, g, synDefault, []byte("a <"))
}
