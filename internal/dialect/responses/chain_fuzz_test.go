package responses

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/anthropic"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat/chattest"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// An Anthropic upstream translated for a Responses client goes
// anthropic.ToChatStream → FromChatStream: the same property holds for the
// chain, from Messages streams made of fuzz input (messagesStream).
func FuzzChainMessagesToResponses(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, want := messagesStream(data)
		cc := anthropic.ToChatStream(sse.NewReader(strings.NewReader(in), 0), chat.Options{Model: "m", Created: 1, IncludeUsage: true})
		a, err := readResponses(FromChatStream(cc, chat.Options{Created: 1}))
		if err != nil {
			t.Fatalf("%v\ninput:\n%s", err, in)
		}
		if err := checkResponsesAnswer(a, want, true); err != nil {
			t.Fatalf("%v\ninput:\n%s", err, in)
		}
	})
}

func msgEvent(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

// messagesStream builds a Messages stream from fuzz input, and what it
// carries: thinking, text and tool_use blocks (arguments in fragments, or
// none), one after another or, as a hostile upstream might, tool blocks
// started before the one before them stopped, their deltas interleaved.
func messagesStream(data []byte) (string, chattest.Want) {
	r := &fuzzBytes{b: data}
	var out strings.Builder
	var w chattest.Want
	out.WriteString(msgEvent("message_start", `{"type":"message_start","message":{"id":"msg_fz","type":"message","role":"assistant","model":"claude","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}`))
	if r.n(2) == 0 {
		out.WriteString(msgEvent("ping", `{"type": "ping"}`))
	}
	block := 0
	calls := 0
	for k := r.n(6); k > 0; k-- {
		switch r.n(4) {
		case 0, 1:
			typ, field, delta := "text", "text", "text_delta"
			if r.n(2) == 0 {
				typ, field, delta = "thinking", "thinking", "thinking_delta"
			}
			start := `{"type":"text","text":""}`
			if typ == "thinking" {
				start = `{"type":"thinking","thinking":"","signature":""}`
			}
			out.WriteString(msgEvent("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":%s}`, block, start)))
			for n := 1 + r.n(4); n > 0; n-- {
				s := fuzzText(r)
				if typ == "text" {
					w.Text += s
				} else {
					w.Reasoning += s
				}
				out.WriteString(msgEvent("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":%q,%q:%s}}`, block, delta, field, jsonString(s))))
			}
			if typ == "thinking" {
				out.WriteString(msgEvent("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"signature_delta","signature":"EqQB"}}`, block)))
			}
			out.WriteString(msgEvent("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, block)))
			block++
		default:
			// One to three tool_use blocks, their deltas interleaved when
			// the upstream does not wait for a block's stop.
			n := 1 + r.n(3)
			interleave := r.n(2) == 0
			frags := make([][]string, n)
			first := block
			for i := range n {
				id, name := fmt.Sprintf("toolu_%d", calls+i), fmt.Sprintf("fn_%d", calls+i)
				args := ""
				if r.n(4) != 0 {
					args = fuzzArgs(r)
				}
				w.Calls = append(w.Calls, chattest.Call{ID: id, Name: name, Args: args})
				for rest := args; rest != ""; {
					m := chattest.Cut(rest, 1+r.n(10))
					frags[i] = append(frags[i], rest[:m])
					rest = rest[m:]
				}
			}
			emitStart := func(i int) {
				out.WriteString(msgEvent("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":%q,"input":{}}}`,
					first+i, fmt.Sprintf("toolu_%d", calls+i), fmt.Sprintf("fn_%d", calls+i))))
			}
			emitDelta := func(i int, s string) {
				out.WriteString(msgEvent("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, first+i, jsonString(s))))
			}
			emitStop := func(i int) {
				out.WriteString(msgEvent("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, first+i)))
			}
			if interleave {
				for i := range n {
					emitStart(i)
				}
				for left := true; left; {
					left = false
					for i := range n {
						if len(frags[i]) > 0 && r.n(2) == 0 {
							emitDelta(i, frags[i][0])
							frags[i] = frags[i][1:]
						}
						left = left || len(frags[i]) > 0
					}
				}
				for i := range n {
					emitStop(i)
				}
			} else {
				for i := range n {
					emitStart(i)
					if r.n(3) == 0 {
						emitDelta(i, "") // Anthropic's first input_json_delta is often empty
					}
					for _, s := range frags[i] {
						emitDelta(i, s)
					}
					emitStop(i)
				}
			}
			block += n
			calls += n
		}
		if r.n(8) == 0 {
			// Events a translator cannot read (not JSON, a delta for a
			// block that never started): ToChatStream ends the chain with
			// chat.UnreadableError.
			w.Unreadable = true
			out.WriteString("event: content_block_delta\ndata: {oops\n\n")
		}
	}
	stop := []string{"end_turn", "tool_use", "max_tokens", "refusal", "stop_sequence"}[r.n(5)]
	w.Finish = anthropic.FinishReason(stop)
	out.WriteString(msgEvent("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":7}}`, stop)))
	switch r.n(5) {
	case 0: // cut before message_stop
	case 1:
		out.WriteString("event: message_stop\ndata: {\"type\":\"mess") // cut in the event
	default:
		out.WriteString(msgEvent("message_stop", `{"type":"message_stop"}`))
		w.Complete = true
	}
	return out.String(), w
}

// fuzzBytes hands out the fuzz input as small numbers; zeros past its end.
type fuzzBytes struct {
	b []byte
	i int
}

func (r *fuzzBytes) n(k int) int {
	if r.i >= len(r.b) || k <= 1 {
		return 0
	}
	v := int(r.b[r.i])
	r.i++
	return v % k
}

var fuzzAlphabet = []string{"a", " ", "é", "😀", "\"", "\\", "\n", "{", "}", "\u2028", "<&>"}

func fuzzText(r *fuzzBytes) string {
	var b strings.Builder
	for k := 1 + r.n(5); k > 0; k-- {
		b.WriteString(fuzzAlphabet[r.n(len(fuzzAlphabet))])
	}
	return b.String()
}

func fuzzArgs(r *fuzzBytes) string {
	obj := map[string]any{}
	for k := r.n(4); k > 0; k-- {
		obj[fmt.Sprintf("k%d", r.n(9))] = []any{fuzzText(r), r.n(100), map[string]any{"x": "}]"}}
	}
	b, _ := json.Marshal(obj)
	return string(b)
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestChainMessagesToResponses: the chain keeps interleaved tool_use
// blocks whole, and gives a tool_use that had no input_json_delta "{}".
func TestChainMessagesToResponses(t *testing.T) {
	in := msgEvent("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}`) +
		msgEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_a","name":"now","input":{}}}`) +
		msgEvent("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		msgEvent("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_b","name":"f","input":{}}}`) +
		msgEvent("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_c","name":"g","input":{}}}`) +
		msgEvent("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"y\":"}}`) +
		msgEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"x\":"}}`) +
		msgEvent("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"2}"}}`) +
		msgEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"1}"}}`) +
		msgEvent("content_block_stop", `{"type":"content_block_stop","index":1}`) +
		msgEvent("content_block_stop", `{"type":"content_block_stop","index":2}`) +
		msgEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}`) +
		msgEvent("message_stop", `{"type":"message_stop"}`)
	cc := anthropic.ToChatStream(sse.NewReader(strings.NewReader(in), 0), chat.Options{Created: 1, IncludeUsage: true})
	a, err := readResponses(FromChatStream(cc, chat.Options{Created: 1}))
	if err != nil {
		t.Fatal(err)
	}
	want := []chattest.Call{{ID: "toolu_a", Name: "now", Args: "{}"}, {ID: "toolu_b", Name: "f", Args: `{"x":1}`}, {ID: "toolu_c", Name: "g", Args: `{"y":2}`}}
	if got := a.calls(); a.end != "completed" || !sameCalls(got, want) {
		t.Errorf("end %q, calls\n got  %+v\n want %+v", a.end, got, want)
	}
}
