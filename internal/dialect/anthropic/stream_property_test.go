package anthropic

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// streamAnswer is what a Chat client makes of a stream.
type streamAnswer struct {
	content, reasoning string
	tools              []streamTool
	finish             string
}

type streamTool struct{ id, name, args string }

var propRunes = []rune("aZ09 .,\"\\/\n\r\t\x01\x7féü€😀\u2028{}[]:")

func propText(r *rand.Rand) string {
	n := 1 + r.IntN(8)
	b := make([]rune, n)
	for i := range b {
		b[i] = propRunes[r.IntN(len(propRunes))]
	}
	return string(b)
}

func streamJSONStr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// splitRunes cuts s into at most n non-empty pieces at random rune
// boundaries.
func splitRunes(r *rand.Rand, s string, n int) []string {
	rs := []rune(s)
	var out []string
	for n > 1 && len(rs) > 1 {
		k := 1 + r.IntN(len(rs)-1)
		out = append(out, string(rs[:k]))
		rs = rs[k:]
		n--
	}
	return append(out, string(rs))
}

// genChat makes a random Chat stream and the answer it carries.
func genChat(r *rand.Rand) (string, streamAnswer) {
	var b strings.Builder
	var want streamAnswer
	chunk := func(delta string) {
		fmt.Fprintf(&b, "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{%s},\"finish_reason\":null}]}\n\n", delta)
	}
	chunk(`"role":"assistant","content":""`)
	for seg := r.IntN(7); seg > 0; seg-- {
		switch r.IntN(3) {
		case 0:
			field := "reasoning_content"
			if r.IntN(2) == 0 {
				field = "reasoning"
			}
			for k := 1 + r.IntN(4); k > 0; k-- {
				t := propText(r)
				want.reasoning += t
				chunk(`"` + field + `":` + streamJSONStr(t))
			}
		case 1:
			for k := 1 + r.IntN(4); k > 0; k-- {
				t := propText(r)
				want.content += t
				chunk(`"content":` + streamJSONStr(t))
			}
		default:
			i := len(want.tools)
			tl := streamTool{id: fmt.Sprintf("call_%d", r.IntN(1000)), name: fmt.Sprintf("fn_%d", i)}
			// Arguments are a JSON object, in fragments cut anywhere
			// between runes, the first in the call's first chunk or not;
			// or none at all, which a Chat client reads as "{}".
			var frags []string
			tl.args = "{}"
			if r.IntN(4) > 0 {
				tl.args = `{"k":` + streamJSONStr(propText(r)) + `}`
				frags = splitRunes(r, tl.args, 1+r.IntN(4))
			}
			first := ""
			if len(frags) > 0 && r.IntN(2) == 0 {
				first, frags = frags[0], frags[1:]
			}
			chunk(fmt.Sprintf(`"tool_calls":[{"index":%d,"id":%s,"type":"function","function":{"name":%s,"arguments":%s}}]`, i, streamJSONStr(tl.id), streamJSONStr(tl.name), streamJSONStr(first)))
			for _, f := range frags {
				chunk(fmt.Sprintf(`"tool_calls":[{"index":%d,"function":{"arguments":%s}}]`, i, streamJSONStr(f)))
			}
			want.tools = append(want.tools, tl)
		}
	}
	want.finish = []string{"stop", "length", "tool_calls", "content_filter"}[r.IntN(4)]
	fmt.Fprintf(&b, "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":%q}]}\n\n", want.finish)
	if r.IntN(2) == 0 {
		b.WriteString("data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":7,\"prompt_tokens_details\":{\"cached_tokens\":20}}}\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return b.String(), want
}

// readAnswer reads a Chat stream as a client does; it must end in [DONE].
func readAnswer(t *testing.T, src sse.Source) streamAnswer {
	t.Helper()
	var a streamAnswer
	sawDone := false
	for i := 0; i < 100000; i++ {
		ev, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if sawDone {
			t.Fatalf("event after [DONE]: %s", ev.Data)
		}
		if ev.IsDone() {
			sawDone = true
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
					ToolCalls        []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			t.Fatalf("chunk %s: %v", ev.Data, err)
		}
		for _, ch := range c.Choices {
			a.content += ch.Delta.Content
			a.reasoning += ch.Delta.ReasoningContent
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Index == len(a.tools) {
					a.tools = append(a.tools, streamTool{})
				}
				if tc.Index >= len(a.tools) {
					t.Fatalf("tool index %d skips ahead", tc.Index)
				}
				tl := &a.tools[tc.Index]
				tl.id += tc.ID
				tl.name += tc.Function.Name
				tl.args += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				a.finish = *ch.FinishReason
			}
		}
	}
	if !sawDone {
		t.Fatal("no [DONE]")
	}
	return a
}

// TestRoundTripKeepsAnswer: Chat → FromChatStream → ToChatStream keeps the
// content, the reasoning, the tool calls and the finish reason.
func TestRoundTripKeepsAnswer(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 20))
	for i := range 500 {
		in, want := genChat(r)
		ms := FromChatStream(sse.NewReader(strings.NewReader(in), 0), chat.Options{Model: "m"})
		got := readAnswer(t, ToChatStream(ms, chat.Options{IncludeUsage: true}))
		if fmtAnswer(got) != fmtAnswer(want) {
			t.Fatalf("stream %d:\n%s\ngot  %+v\nwant %+v", i, in, got, want)
		}
	}
}

func fmtAnswer(a streamAnswer) string { return fmt.Sprintf("%+v", a) }
