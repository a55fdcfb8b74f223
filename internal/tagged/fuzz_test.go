package tagged

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat/chattest"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
)

// The chunk shapes of the servers that send inline reasoning: the same
// delta in each server's envelope.
const (
	shapeVLLM = iota
	shapeSGLang
	shapeLlamaCpp
	shapeOllama
	nShapes
)

// fuzzChunk is a chunk of choice 0 in shape, with delta members members
// (a JSON fragment, maybe empty) and finish ("null" or a JSON string).
func fuzzChunk(shape int, members, finish string) string {
	sep := func(s string) string {
		if s == "" {
			return ""
		}
		return "," + s
	}
	switch shape {
	case shapeSGLang:
		tools := `,"tool_calls":null`
		if strings.Contains(members, `"tool_calls"`) {
			tools = ""
		}
		return `{"id":"5d1f0c9b","object":"chat.completion.chunk","created":1746023456,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"role":null` +
			sep(members) + `,"reasoning_content":null` + tools + `},"logprobs":null,"finish_reason":` + finish + `,"matched_stop":null}],"usage":null}`
	case shapeLlamaCpp:
		return `{"choices":[{"finish_reason":` + finish + `,"index":0,"delta":{` + members +
			`}}],"created":1745000000,"id":"chatcmpl-Xq3Z","model":"gpt-3.5-turbo","system_fingerprint":"b5410-6a2bc8bf","object":"chat.completion.chunk"}`
	case shapeOllama:
		return `{"id":"chatcmpl-417","object":"chat.completion.chunk","created":1741000000,"model":"qwq:32b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant"` +
			sep(members) + `},"finish_reason":` + finish + `}]}`
	default:
		return `{"id":"chatcmpl-b7d0","object":"chat.completion.chunk","created":1747312345,"model":"deepseek-ai/DeepSeek-R1","choices":[{"index":0,"delta":{` +
			members + `},"logprobs":null,"finish_reason":` + finish + `}]}`
	}
}

// garbage is what a stream may hold besides chunks: none of it carries
// text of choice 0, and all of it must pass as it came.
var garbage = []string{
	"data: not json\n\n",
	"data: {\n\n",
	"data: [1,2]\n\n",
	`data: {"choices":"x"}` + "\n\n",
	`data: {"choices":[]}` + "\n\n",
	`data: {"choices":[null]}` + "\n\n",
	`data: {"choices":[{"index":1,"delta":{"content":"<think>another choice"}}]}` + "\n\n",
	`data: {"error":{"message":"overloaded","type":"server_error"}}` + "\n\n",
	": keep-alive\n\n",
	"event: ping\ndata: {}\n\n",
	"retry: 100\n\n",
	"id: 7\n\n",
	"\n\n",
}

// appendLiteral writes text as a JSON string: as the servers do, or with
// < > & escaped as encoding/json escapes them (the same text).
func appendLiteral(dst, text []byte, escapeHTML bool) []byte {
	if !escapeHTML {
		return pace.AppendString(dst, text)
	}
	lit := pace.AppendString(nil, text)
	for _, c := range lit {
		switch c {
		case '<', '>', '&':
			dst = fmt.Appendf(dst, `\u%04x`, c)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// fuzzStream builds a stream of text from the control bytes ctl; it
// returns the stream and the configuration to read it with.
func fuzzStream(ctl, text []byte) (string, thinktag.Config, string) {
	in := chattest.NewInput(ctl)
	cfg := configs[in.N(len(configs))]
	field := fields[in.N(2)]
	shape := in.N(nShapes)
	escape := in.N(4) == 0
	var b strings.Builder
	b.WriteString(sseData(fuzzChunk(shape, `"role":"assistant","content":""`, "null")))
	lastWithFinish := in.N(3) == 0
	finished := false
	zeros := 0
	for len(text) > 0 {
		// Empty pieces too, but not forever: past the control bytes'
		// end every number is 0, and the rest goes in one piece.
		n := min(in.N(10), len(text))
		if n == 0 {
			if zeros++; zeros > 2 {
				n = len(text)
			}
		} else {
			zeros = 0
		}
		piece := text[:n]
		text = text[n:]
		if g := in.N(12); g < len(garbage) && in.N(3) == 0 {
			b.WriteString(garbage[g])
		}
		members := string(appendLiteral([]byte(`"content":`), piece, escape))
		switch in.N(8) {
		case 0:
			// Content next to a tool call's fragment.
			members += `,"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":1}"}}]`
		case 1:
			members = `"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}],` + members
		}
		finish := "null"
		if len(text) == 0 && lastWithFinish {
			finish, finished = `"stop"`, true // the last token with the finish, as vLLM sends it
		}
		b.WriteString(sseData(fuzzChunk(shape, members, finish)))
	}
	switch in.N(5) {
	case 0: // cut before the finish
	case 1: // cut inside an event
		ev := sseData(fuzzChunk(shape, `"content":"<think>x"`, "null"))
		b.WriteString(ev[:in.N(len(ev)-3)+1])
	case 2: // cut before [DONE]
		if !finished {
			b.WriteString(sseData(fuzzChunk(shape, "", `"stop"`)))
		}
	default:
		if !finished {
			b.WriteString(sseData(fuzzChunk(shape, "", `"stop"`)))
		}
		b.WriteString(sseData(`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`))
		b.WriteString("data: [DONE]\n\n")
	}
	return b.String(), cfg, field
}

// FuzzSource is the property test on any text (any bytes), cut anywhere,
// in each server's chunk shape, with the last text on the finish chunk,
// text next to tool calls, garbage events between, and streams cut
// before the finish, inside an event or before [DONE]: what comes out
// carries thinktag.Split of the whole text, garbage passes as it came,
// tool calls and the finish are kept, nothing panics.
func FuzzSource(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 3, 0, 0, 4}, []byte("<think>\nOkay.\n</think>\n\nHi"))
	f.Add([]byte{2, 1, 1, 0, 0, 1, 2, 0, 1, 0, 0, 0}, []byte("Okay, so</think>answer"))
	f.Add([]byte{5, 0, 2, 1, 7, 9, 1, 0, 0, 3, 2, 9}, []byte("◁think▷é◁/think▷日本"))
	f.Add([]byte{3, 1, 3, 2, 9, 4, 2, 0, 1}, []byte("  <think>x</think>y <think>z"))
	f.Add([]byte{0, 0, 1, 0, 1, 5, 1}, []byte("a <b> \"c\" \\ \x01 </think> <thinking>"))
	f.Add([]byte{1, 0, 0, 3, 2, 0, 2, 2, 1}, []byte("<think>\xe2\x97\x81 cut\xe2"))
	f.Fuzz(func(t *testing.T, ctl, text []byte) {
		if len(text) > 4096 || len(ctl) > 4096 {
			return // as good as shorter, and slow to minimize
		}
		stream, cfg, field := fuzzStream(ctl, text)
		syn := thinktag.MustNew(cfg)
		in := readAll(t, stream)
		var whole texts
		var inData [][]byte
		for _, ev := range in {
			_ = choiceTexts(ev.data, field, &whole)
			inData = append(inData, ev.data)
		}
		g := checkStream(t, stream, syn, field)
		checkSplit(t, g, syn, whole.content)
		if len(g.other) != 0 {
			t.Fatalf("text in the other field: %q", g.other)
		}
		// checkStream checked that every event with no text of choice 0
		// (the garbage too) came out as it was, in its order.
		out, _, _ := runSource(t, stream, syn, field)
		// Tool calls and the finish, as a client assembles them.
		var outData [][]byte
		for _, ev := range out {
			outData = append(outData, ev.data)
		}
		a, b := assemble(inData), assemble(outData)
		if len(a.Choices) != len(b.Choices) {
			t.Fatalf("%d choices in, %d out", len(a.Choices), len(b.Choices))
		}
		for i := range a.Choices {
			if !reflect.DeepEqual(a.Choices[i].Message.ToolCalls, b.Choices[i].Message.ToolCalls) ||
				!reflect.DeepEqual(a.Choices[i].FinishReason, b.Choices[i].FinishReason) {
				t.Fatalf("choice %d: in %+v\nout %+v", i, a.Choices[i], b.Choices[i])
			}
		}
	})
}
