package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// The faithfulness fuzz (issue 25): a Messages stream is generated from
// the fuzz input (text, thinking with signatures, redacted thinking, tool
// calls whose input comes in deltas cut anywhere, whole in the start
// block, or not at all, server blocks, pings and unknown events, garbage,
// an error event, a cut end), ToChatStream translates it, and the Chat
// chunks are reassembled here as a client would. Whatever the input,
// either the stream does not end cleanly ([DONE] then io.EOF, with no
// in-band error), or it carries every tool call with its full arguments
// ("{}" when none came), all the text and all the thinking the input
// carried, and the finish reason. What it carried before an unclean end
// is a prefix of that, never something else. A stream without garbage
// and not cut must end cleanly.

// genBytes hands out the fuzz input a byte at a time; 0 once it is spent.
type genBytes struct {
	b []byte
	i int
}

func (g *genBytes) next() byte {
	if g.i >= len(g.b) {
		return 0
	}
	g.i++
	return g.b[g.i-1]
}

func (g *genBytes) spent() bool { return g.i >= len(g.b) }

// genTexts are the pieces texts are made of: escapes, line breaks, bytes
// JSON must escape, multi-byte runes, what HTML escaping would change.
var genTexts = []string{"a", "Hello", " world", `"q"`, `\`, "\n", "\r\n", "\t", "é", "中文", "😀", "\u2028", "<&>", "\x01", "{", "}", ":", ",", "[1]", " "}

func (g *genBytes) text() string {
	var b strings.Builder
	for n := 1 + int(g.next()%4); n > 0; n-- {
		b.WriteString(genTexts[int(g.next())%len(genTexts)])
	}
	return b.String()
}

// wantAnswer is what a stream carries, as a Chat client assembles it.
type wantAnswer struct {
	text, thinking string
	tools          []wantTool
	finish         string
}

type wantTool struct{ id, name, args string }

func (a wantAnswer) String() string {
	return fmt.Sprintf("{text %q thinking %q tools %q finish %q}", a.text, a.thinking, a.tools, a.finish)
}

// genStream makes a Messages stream from the fuzz input: the stream's
// bytes, what it carries, and whether it has garbage or was cut (then it
// need not end cleanly).
func genStream(in []byte) (stream string, want wantAnswer, garbage, cut bool) {
	g := &genBytes{b: in}
	var b strings.Builder
	ev := func(typ, data string) { b.WriteString("event: " + typ + "\ndata: " + data + "\n\n") }
	q := streamJSONStr
	ev("message_start", `{"type":"message_start","message":{"id":"msg_f","type":"message","role":"assistant","model":"claude-f","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}`)
	extra := func() {
		// Between events: what must be read and ignored, or garbage.
		switch g.next() % 16 {
		case 1:
			ev("ping", `{"type": "ping"}`)
		case 2:
			b.WriteString(": keep-alive\n\n")
		case 3:
			b.WriteString("event: ping\n\n")
		case 4:
			ev("future_event", `{"type":"future_event","x":{"y":[1]}}`)
		case 5:
			garbage = true
			ev("content_block_delta", `{"type":"content_block_delta","index":`)
		case 6:
			garbage = true
			ev("content_block_delta", `{"type":"content_block_delta","index":99,"delta":{"type":"text_delta","text":"JUNK"}}`)
		case 7:
			garbage = true
			b.WriteString("data: [DONE]\n\n")
		case 8:
			if g.next()%4 == 0 {
				garbage = true
				ev("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
			}
		}
	}
	index := 0
	for nb := int(g.next() % 7); nb > 0 && !g.spent(); nb-- {
		extra()
		i := strconv.Itoa(index)
		index++
		switch g.next() % 6 {
		case 0, 1: // text, some of it in the start block
			start := ""
			if g.next()%4 == 0 {
				start = g.text()
			}
			want.text += start
			ev("content_block_start", `{"type":"content_block_start","index":`+i+`,"content_block":{"type":"text","text":`+q(start)+`}}`)
			for n := int(g.next() % 5); n > 0; n-- {
				extra()
				t := g.text()
				want.text += t
				ev("content_block_delta", `{"type":"content_block_delta","index":`+i+`,"delta":{"type":"text_delta","text":`+q(t)+`}}`)
			}
			if g.next()%8 == 0 {
				garbage = true // arguments for a text block
				ev("content_block_delta", `{"type":"content_block_delta","index":`+i+`,"delta":{"type":"input_json_delta","partial_json":"{}"}}`)
			}
		case 2: // thinking, signed
			ev("content_block_start", `{"type":"content_block_start","index":`+i+`,"content_block":{"type":"thinking","thinking":"","signature":""}}`)
			for n := int(g.next() % 5); n > 0; n-- {
				extra()
				t := g.text()
				want.thinking += t
				ev("content_block_delta", `{"type":"content_block_delta","index":`+i+`,"delta":{"type":"thinking_delta","thinking":`+q(t)+`}}`)
			}
			ev("content_block_delta", `{"type":"content_block_delta","index":`+i+`,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM=="}}`)
		case 3: // redacted thinking, or a server tool and its result
			if g.next()%2 == 0 {
				ev("content_block_start", `{"type":"content_block_start","index":`+i+`,"content_block":{"type":"redacted_thinking","data":"EmwKAhgB"}}`)
			} else {
				ev("content_block_start", `{"type":"content_block_start","index":`+i+`,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}`)
				ev("content_block_delta", `{"type":"content_block_delta","index":`+i+`,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"x\"}"}}`)
				ev("content_block_stop", `{"type":"content_block_stop","index":`+i+`}`)
				i = strconv.Itoa(index)
				index++
				ev("content_block_start", `{"type":"content_block_start","index":`+i+`,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]}}`)
			}
		case 4, 5: // a tool call
			tl := wantTool{id: "toolu_" + i, name: "fn_" + i}
			args := `{"k":` + q(g.text()) + `,"n":` + strconv.Itoa(int(g.next())) + `}`
			startInput := "{}"
			var frags []string
			switch g.next() % 4 {
			case 0: // no arguments at all
				tl.args = "{}"
			case 1: // whole in the start block, no delta
				startInput, tl.args = args, args
			case 2: // only an empty delta
				tl.args, frags = "{}", []string{""}
			default: // cut anywhere between runes
				tl.args = args
				rs := []rune(args)
				for len(rs) > 0 {
					k := 1 + int(g.next())%len(rs)
					frags = append(frags, string(rs[:k]))
					rs = rs[k:]
				}
			}
			want.tools = append(want.tools, tl)
			ev("content_block_start", `{"type":"content_block_start","index":`+i+`,"content_block":{"type":"tool_use","id":`+q(tl.id)+`,"name":`+q(tl.name)+`,"input":`+startInput+`}}`)
			for _, f := range frags {
				extra()
				ev("content_block_delta", `{"type":"content_block_delta","index":`+i+`,"delta":{"type":"input_json_delta","partial_json":`+q(f)+`}}`)
			}
		}
		if g.next()%8 != 0 { // a block may end at message_delta instead
			ev("content_block_stop", `{"type":"content_block_stop","index":`+i+`}`)
		}
	}
	if g.next()%8 == 0 {
		garbage = true
		ev("content_block_start", `{"type":"content_block_start","index":`+strconv.Itoa(index)+`,"content_block":{"type":"hologram"}}`)
	}
	extra()
	want.finish = "stop"
	stops := []struct{ stop, finish string }{{"end_turn", "stop"}, {"tool_use", "tool_calls"}, {"max_tokens", "length"},
		{"stop_sequence", "stop"}, {"refusal", "content_filter"}, {"pause_turn", "length"}}
	if s := int(g.next()); s%8 != 0 {
		st := stops[s%len(stops)]
		want.finish = st.finish
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+st.stop+`","stop_sequence":null},"usage":{"output_tokens":9}}`)
	}
	ev("message_stop", `{"type":"message_stop"}`)
	stream = b.String()
	if g.next()%4 == 0 {
		at := (int(g.next())<<8 | int(g.next())) % (len(stream) + 1)
		cut = at < len(stream)
		stream = stream[:at]
	}
	return stream, want, garbage, cut
}

// gotAnswer reassembles a Chat stream as a client does: text members
// concatenated, tool calls by index (id and name when given, arguments
// concatenated), the last finish_reason. clean is [DONE] then io.EOF,
// with no in-band error; endErr is what the stream ended with.
func gotAnswer(src sse.Source) (a wantAnswer, clean bool, endErr error) {
	done, inBand := false, false
	for range 1 << 16 {
		ev, err := src.Next()
		if err != nil {
			return a, done && !inBand && err == io.EOF, err
		}
		if done || inBand {
			return a, false, errors.New("an event after the end: " + string(ev.Data))
		}
		if ev.IsDone() {
			done = true
			continue
		}
		var c struct {
			Error   json.RawMessage `json:"error"`
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Content          *string `json:"content"`
					ReasoningContent *string `json:"reasoning_content"`
					ToolCalls        []struct {
						Index    int     `json:"index"`
						ID       *string `json:"id"`
						Function struct {
							Name      *string `json:"name"`
							Arguments *string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			return a, false, fmt.Errorf("a chunk that is not JSON: %q", ev.Data)
		}
		if c.Error != nil {
			inBand = true
			continue
		}
		for _, ch := range c.Choices {
			if ch.Index != 0 {
				return a, false, fmt.Errorf("choice %d", ch.Index)
			}
			if d := ch.Delta.Content; d != nil {
				a.text += *d
			}
			if d := ch.Delta.ReasoningContent; d != nil {
				a.thinking += *d
			}
			for _, tc := range ch.Delta.ToolCalls {
				switch {
				case tc.Index == len(a.tools):
					a.tools = append(a.tools, wantTool{})
				case tc.Index > len(a.tools) || tc.Index < 0:
					return a, false, fmt.Errorf("tool index %d skips ahead", tc.Index)
				}
				tl := &a.tools[tc.Index]
				if tc.ID != nil {
					tl.id = *tc.ID
				}
				if tc.Function.Name != nil && *tc.Function.Name != "" {
					tl.name = *tc.Function.Name
				}
				if tc.Function.Arguments != nil {
					tl.args += *tc.Function.Arguments
				}
			}
			if ch.FinishReason != nil {
				a.finish = *ch.FinishReason
			}
		}
	}
	return a, false, errors.New("the stream does not end")
}

// isPrefix reports whether got is want so far: nothing made up, nothing
// out of order.
func isPrefix(got, want wantAnswer) bool {
	if !strings.HasPrefix(want.text, got.text) || !strings.HasPrefix(want.thinking, got.thinking) || len(got.tools) > len(want.tools) {
		return false
	}
	for i, tl := range got.tools {
		w := want.tools[i]
		if tl.id != w.id || tl.name != w.name || !strings.HasPrefix(w.args, tl.args) {
			return false
		}
	}
	return got.finish == "" || got.finish == want.finish
}

// checkFaithful runs one generated stream through ToChatStream.
func checkFaithful(t *testing.T, in []byte) {
	stream, want, garbage, cut := genStream(in)
	got, clean, endErr := gotAnswer(ToChatStream(sse.NewReader(strings.NewReader(stream), 1<<16), chat.Options{IncludeUsage: true}))
	if endErr != nil && endErr != io.EOF {
		if _, ok := errors.AsType[*chat.UnreadableError](endErr); !ok {
			t.Fatalf("the stream ended with %v\n%s", endErr, stream)
		}
	}
	switch {
	case clean && got.String() != want.String():
		t.Fatalf("a clean end with something missing or changed:\ngot  %v\nwant %v\n%s", got, want, stream)
	case !clean && !garbage && !cut:
		t.Fatalf("a whole, valid stream did not end cleanly (%v):\ngot  %v\nwant %v\n%s", endErr, got, want, stream)
	case !isPrefix(got, want):
		t.Fatalf("the answer so far is not a prefix of the stream's (%v):\ngot  %v\nwant %v\n%s", endErr, got, want, stream)
	}
}

func FuzzChatStreamFaithful(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{5, 4, 0, 3, 1, 2, 3, 9, 0, 0})
	f.Add([]byte{7, 0, 1, 2, 2, 3, 4, 5, 6, 3, 0, 1, 4, 5, 3, 9, 8, 7, 6, 5, 4, 3, 2, 1, 2, 2, 2, 1})
	f.Add([]byte("\x06\x04\x01\x07\x03\x00\x05\x02\x01\x03\x02\x04\x04\x11\x22\x33\x00\x00\x01"))
	f.Fuzz(checkFaithful)
}

// TestChatStreamFaithfulRandom runs the fuzz check on random inputs, so
// that a plain `go test` covers more than the seeds.
func TestChatStreamFaithfulRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 1))
	for range 3000 {
		in := make([]byte, r.IntN(200))
		for i := range in {
			in[i] = byte(r.Uint32())
		}
		checkFaithful(t, in)
	}
}

// TestFaithfulCheckCatches: the oracle does fail, on a stream that ends
// cleanly with a tool call's arguments missing (what ToChatStream did
// before issue 25) and on one that invents text.
func TestFaithfulCheckCatches(t *testing.T) {
	want := wantAnswer{text: "a", tools: []wantTool{{"toolu_1", "f", "{}"}}, finish: "tool_calls"}
	lost := cc(`"content":"a"`) + cc(`"tool_calls":[{"index":0,"id":"toolu_1","type":"function","function":{"name":"f","arguments":""}}]`) + ccFinish("tool_calls") + ccDone
	got, clean, _ := gotAnswer(sse.NewReader(strings.NewReader(lost), 0))
	if !clean || got.String() == want.String() {
		t.Errorf("a clean end without the arguments not caught: %v", got)
	}
	made := cc(`"content":"ab"`) + ccDone
	if got, _, _ := gotAnswer(sse.NewReader(strings.NewReader(made), 0)); isPrefix(got, want) {
		t.Errorf("invented text not caught: %v", got)
	}
}
