package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat/chattest"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// msgAnswer is a Messages stream put back together the way a client's
// accumulator does (the Anthropic SDKs' MessageStream), checking the
// protocol on the way: one block open at a time, indexes counting from 0,
// each delta of its block's type, nothing after the end.
type msgAnswer struct {
	blocks []msgBlock
	stop   string
	// end is how the stream ended: "stop" (message_stop), "error" (an
	// error event), "unreadable" (a *chat.UnreadableError from Next), or
	// "" (none: the relay reads that as truncation).
	end string
}

type msgBlock struct {
	typ, id, name string
	text          strings.Builder // text, thinking, or the tool's partial_json
}

func (a *msgAnswer) text(typ string) string {
	var b strings.Builder
	for i := range a.blocks {
		if a.blocks[i].typ == typ {
			b.WriteString(a.blocks[i].text.String())
		}
	}
	return b.String()
}

// tools lists the tool_use blocks: their id, name and input (the joined
// partial_json, or {} when none came, as the SDKs take it).
func (a *msgAnswer) tools() []chattest.Call {
	var out []chattest.Call
	for i := range a.blocks {
		if b := &a.blocks[i]; b.typ == "tool_use" {
			args := b.text.String()
			if args == "" {
				args = "{}"
			}
			out = append(out, chattest.Call{ID: b.id, Name: b.name, Args: args})
		}
	}
	return out
}

// readMessages drains a Messages stream and reassembles it; an error
// says how the stream broke the protocol.
func readMessages(src sse.Source) (*msgAnswer, error) {
	a := &msgAnswer{}
	open := -1
	started := false
	for i := 0; ; i++ {
		if i > 1<<20 {
			return a, errors.New("the stream does not end")
		}
		ev, err := src.Next()
		if err == io.EOF {
			return a, nil
		}
		if err != nil {
			if _, ok := errors.AsType[*chat.UnreadableError](err); !ok {
				return a, fmt.Errorf("Next: %v, want io.EOF or a *chat.UnreadableError", err)
			}
			a.end = "unreadable"
			if _, err2 := src.Next(); err2 != err {
				return a, fmt.Errorf("the error is not sticky: %v then %v", err, err2)
			}
			return a, nil
		}
		if a.end != "" {
			return a, fmt.Errorf("event %s after the end (%s)", ev.Type, a.end)
		}
		var d struct {
			Type         string `json:"type"`
			Index        int    `json:"index"`
			ContentBlock struct {
				Type, ID, Name string
				Text, Thinking *string
			} `json:"content_block"`
			Delta struct {
				Type, Text, Thinking string
				PartialJSON          *string `json:"partial_json"`
				StopReason           string  `json:"stop_reason"`
			} `json:"delta"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return a, fmt.Errorf("event %s: %v: %s", ev.Type, err, ev.Data)
		}
		if d.Type != ev.Type {
			return a, fmt.Errorf("event %s has type %q", ev.Type, d.Type)
		}
		if !started && ev.Type != "message_start" && ev.Type != "error" {
			return a, fmt.Errorf("%s before message_start", ev.Type)
		}
		switch ev.Type {
		case "message_start":
			if started {
				return a, errors.New("a second message_start")
			}
			started = true
		case "content_block_start":
			if open >= 0 || d.Index != len(a.blocks) {
				return a, fmt.Errorf("block %d starts while %d is open, after %d blocks", d.Index, open, len(a.blocks))
			}
			open = d.Index
			a.blocks = append(a.blocks, msgBlock{typ: d.ContentBlock.Type, id: d.ContentBlock.ID, name: d.ContentBlock.Name})
		case "content_block_delta":
			if open < 0 || d.Index != open {
				return a, fmt.Errorf("a delta for block %d while %d is open", d.Index, open)
			}
			b := &a.blocks[open]
			want := map[string]string{"text": "text_delta", "thinking": "thinking_delta", "tool_use": "input_json_delta"}[b.typ]
			if d.Delta.Type != want {
				return a, fmt.Errorf("a %s in a %s block", d.Delta.Type, b.typ)
			}
			switch b.typ {
			case "text":
				b.text.WriteString(d.Delta.Text)
			case "thinking":
				b.text.WriteString(d.Delta.Thinking)
			default:
				if d.Delta.PartialJSON == nil {
					return a, errors.New("input_json_delta without partial_json")
				}
				b.text.WriteString(*d.Delta.PartialJSON)
			}
		case "content_block_stop":
			if open < 0 || d.Index != open {
				return a, fmt.Errorf("block %d stops while %d is open", d.Index, open)
			}
			open = -1
		case "message_delta":
			if open >= 0 {
				return a, fmt.Errorf("message_delta while block %d is open", open)
			}
			a.stop = d.Delta.StopReason
		case "message_stop":
			if a.stop == "" {
				return a, errors.New("message_stop without a stop reason")
			}
			a.end = "stop"
		case "error":
			a.end = "error"
		default:
			return a, fmt.Errorf("event type %q", ev.Type)
		}
	}
}

func translateMessages(t *testing.T, in string) *msgAnswer {
	t.Helper()
	a, err := readMessages(FromChatStream(newReusingSource(in), chat.Options{Model: "m"}))
	if err != nil {
		t.Fatalf("%v\ninput:\n%s", err, in)
	}
	return a
}

func sameCalls(got, want []chattest.Call) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func tc(fields string) string { return cc(`"tool_calls":[` + fields + `]`) }

// The tool call interleavings Chat providers send: each call must reach
// the Messages client whole, in a block of its own.
func TestMessagesStreamToolInterleavings(t *testing.T) {
	abc := []chattest.Call{{ID: "a", Name: "f", Args: `{"x":1}`}, {ID: "b", Name: "g", Args: `{"y":[2]}`}, {ID: "c", Name: "h", Args: `{}`}}
	cases := []struct {
		name string
		in   string
		want []chattest.Call
		text string
	}{
		{"one after another", tc(`{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\":"}}`) + tc(`{"index":0,"function":{"arguments":"1}"}}`) +
			tc(`{"index":1,"id":"b","function":{"name":"g","arguments":""}}`) + tc(`{"index":1,"function":{"arguments":"{\"y\":[2]}"}}`) +
			tc(`{"index":2,"id":"c","function":{"name":"h","arguments":"{}"}}`), abc, ""},
		{"announced, then arguments by index", tc(`{"index":0,"id":"a","function":{"name":"f","arguments":""}}`) +
			tc(`{"index":1,"id":"b","function":{"name":"g","arguments":""}}`) + tc(`{"index":2,"id":"c","function":{"name":"h","arguments":""}}`) +
			tc(`{"index":1,"function":{"arguments":"{\"y\":"}}`) + tc(`{"index":0,"function":{"arguments":"{\"x\""}}`) +
			tc(`{"index":2,"function":{"arguments":"{}"}}`) + tc(`{"index":0,"function":{"arguments":":1}"}}`) + tc(`{"index":1,"function":{"arguments":"[2]}"}}`), abc, ""},
		{"several fragments in one chunk", tc(`{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\""}},{"index":1,"id":"b","function":{"name":"g","arguments":"{\"y\""}}`) +
			tc(`{"index":1,"function":{"arguments":":[2]}"}},{"index":0,"function":{"arguments":":1}"}},{"index":2,"id":"c","function":{"name":"h","arguments":"{}"}}`), abc, ""},
		{"no index, told apart by id", tc(`{"id":"a","function":{"name":"f","arguments":"{\"x\":"}}`) + tc(`{"function":{"arguments":"1}"}}`) +
			tc(`{"id":"b","function":{"name":"g","arguments":"{\"y\":[2]}"}}`) + tc(`{"id":"c","function":{"name":"h","arguments":"{}"}}`), abc, ""},
		{"no index, the id in every fragment, interleaved", tc(`{"id":"a","function":{"name":"f","arguments":"{\"x\":"}}`) +
			tc(`{"id":"b","function":{"name":"g","arguments":"{\"y\":"}}`) + tc(`{"id":"a","function":{"arguments":"1}"}}`) +
			tc(`{"id":"c","function":{"name":"h","arguments":"{}"}}`) + tc(`{"id":"b","function":{"name":"g","arguments":"[2]}"}}`), abc, ""},
		{"text between two fragments of one call", tc(`{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\":"}}`) +
			cc(`"content":"Let me "`) + cc(`"content":"see."`) + tc(`{"index":0,"function":{"arguments":"1}"}}`), abc[:1], "Let me see."},
		{"a call with no arguments", tc(`{"index":0,"id":"a","function":{"name":"f","arguments":""}}`) + tc(`{"index":1,"id":"b","function":{"name":"g","arguments":"{\"y\":[2]}"}}`),
			[]chattest.Call{{ID: "a", Name: "f", Args: "{}"}, abc[1]}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := translateMessages(t, ccRole+c.in+ccFinish("tool_calls")+ccDone)
			if a.end != "stop" || a.stop != "tool_use" {
				t.Fatalf("end %q stop %q", a.end, a.stop)
			}
			if got := a.tools(); !sameCalls(got, c.want) {
				t.Errorf("tool calls\n got  %+v\n want %+v", got, c.want)
			}
			if got := a.text("text"); got != c.text {
				t.Errorf("text %q, want %q", got, c.text)
			}
		})
	}
}

// TestMessagesStreamSequentialCallsStream: one call after another (the
// common case) streams as it comes: each fragment is out before the next
// upstream chunk is read.
func TestMessagesStreamSequentialCallsStream(t *testing.T) {
	in := []string{ccRole,
		tc(`{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\":"}}`), tc(`{"index":0,"function":{"arguments":"1}"}}`),
		tc(`{"index":1,"id":"b","function":{"name":"g","arguments":"{\"y\""}}`), tc(`{"index":1,"function":{"arguments":":2}"}}`),
		cc(`"content":"done"`)}
	src := &countingSource{rd: newReusingSource(strings.Join(in, ""))}
	ms := FromChatStream(src, chat.Options{})
	var seen strings.Builder
	for range 100 {
		ev, err := ms.Next()
		if err != nil {
			break
		}
		seen.WriteString(string(ev.Data))
		// Each fragment's text is out by the time its chunk was read.
		for k, frag := range []string{`{\"x\":`, `1}`, `{\"y\"`, `:2}`, `done`} {
			if src.n == k+3 && !strings.Contains(seen.String(), frag) {
				t.Fatalf("fragment %q not out after %d chunks: %s", frag, src.n, seen.String())
			}
		}
	}
}

type countingSource struct {
	rd *reusingSource
	n  int
}

func (c *countingSource) Next() (sse.Event, error) { c.n++; return c.rd.Next() }

// Content as an array of parts (Mistral's reasoning models) and refusals
// reach the Messages client: thinking, text, and a refusal as text with
// the stop reason refusal.
func TestMessagesStreamPartsAndRefusal(t *testing.T) {
	a := translateMessages(t, ccRole+
		cc(`"content":[{"type":"thinking","thinking":[{"type":"text","text":"The user is asking"}]}]`)+
		cc(`"content":[{"type":"thinking","thinking":[{"type":"text","text":" for 2+2."}]}]`)+
		cc(`"content":[{"type":"text","text":"2 + 2 = 4"}]`)+cc(`"content":""`)+ccFinish("stop")+ccDone)
	if a.end != "stop" || a.stop != "end_turn" || a.text("thinking") != "The user is asking for 2+2." || a.text("text") != "2 + 2 = 4" {
		t.Errorf("parts: end %q stop %q thinking %q text %q", a.end, a.stop, a.text("thinking"), a.text("text"))
	}
	a = translateMessages(t, ccRole+cc(`"refusal":"I can't "`)+cc(`"refusal":"help with that."`)+ccFinish("stop")+ccDone)
	if a.end != "stop" || a.stop != "refusal" || a.text("text") != "I can't help with that." {
		t.Errorf("refusal: end %q stop %q text %q", a.end, a.stop, a.text("text"))
	}
}

// An upstream event FromChatStream cannot read ends the stream with a
// *chat.UnreadableError after what came before it; chunks without
// choices (Azure's prompt filter results, usage) are fine.
func TestMessagesStreamUnreadable(t *testing.T) {
	for name, bad := range map[string]string{
		"not JSON":                    "data: {oops\n\n",
		"a JSON array":                "data: [1]\n\n",
		"a second choice, plain text": chatEv(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":1,"delta":{"content":"B"},"logprobs":null,"finish_reason":null}]}`),
		"a second choice, tool call":  chatEv(`{"choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"id":"z","function":{"name":"f","arguments":"{}"}}]}}]}`),
		"content of the wrong type":   cc(`"content":5`),
		"a part it cannot carry":      cc(`"content":[{"type":"image_url","image_url":{"url":"https://x"}}]`),
		"a null tool call":            cc(`"tool_calls":[null]`),
		"arguments after the call ended": tc(`{"index":0,"id":"z","function":{"name":"f","arguments":"{}"}}`) + cc(`"content":"x"`) +
			tc(`{"index":0,"function":{"arguments":"{}"}}`),
	} {
		t.Run(name, func(t *testing.T) {
			a := translateMessages(t, ccRole+cc(`"content":"A"`)+bad+cc(`"content":"C"`)+ccFinish("stop")+ccDone)
			if a.end != "unreadable" || !strings.HasPrefix(a.text("text"), "A") || strings.Contains(a.text("text"), "C") {
				t.Errorf("end %q, text %q: want the text before it, then the error", a.end, a.text("text"))
			}
		})
	}
	a := translateMessages(t, chatEv(`{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}]}`)+
		ccRole+cc(`"content":"A"`)+"data: \n\n"+chatEv(`{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}`)+ccFinish("stop")+ccDone)
	if a.end != "stop" || a.text("text") != "A" {
		t.Errorf("chunks without choices: end %q text %q", a.end, a.text("text"))
	}
}

// FuzzMessagesStreamFaithful: whatever the Chat stream (chattest.Stream),
// its Messages translation follows the protocol, and either ends in an
// error (in-band, a *chat.UnreadableError, or no message_stop, which the
// relay ends with its own error), or carries everything the input did:
// every call whole, in order, all the text, refusal and reasoning.
func FuzzMessagesStreamFaithful(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, want := chattest.Stream(data)
		a, err := readMessages(FromChatStream(sse.NewReader(strings.NewReader(in), 0), chat.Options{Model: "m"}))
		if err != nil {
			t.Fatalf("%v\ninput:\n%s", err, in)
		}
		if err := checkMessagesAnswer(a, want); err != nil {
			t.Fatalf("%v\ninput:\n%s", err, in)
		}
	})
}

// fuzzSeeds are a few inputs for each way the generator goes.
var fuzzSeeds = [][]byte{
	nil,
	[]byte("\x00\x03\x01\x02\x05\x09\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b"),
	[]byte("\x01\x02\x01\x07\x03\x02\x02\x09\x01\x01\x01\x00\x00\x00\x01\x02\x03\x04\x05\x06\x07"),
	[]byte("\x02\x04\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff\x10\x20\x30"),
	[]byte("\x03\x03\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05"),
	[]byte("\x04\x04\x08\x18\x28\x38\x48\x58\x68\x78\x88\x98\xa8\xb8\xc8\xd8\xe8\xf8\x02\x02\x02"),
	[]byte("\x00\x00\x06\x06\x06\x06\x06\x06\x06\x06\x06\x06\x06\x06\x06\x06\x06\x06\x06\x06\x00"),
}

func checkMessagesAnswer(a *msgAnswer, want chattest.Want) error {
	if a.end != "stop" {
		if want.Complete && !want.Unreadable {
			return fmt.Errorf("a whole, readable stream ended %q", a.end)
		}
		return nil // the client sees an error
	}
	if !want.Complete || want.Unreadable {
		return fmt.Errorf("a clean end, yet the input was cut (%v) or unreadable (%v)", !want.Complete, want.Unreadable)
	}
	if got := a.text("thinking"); got != want.Reasoning {
		return fmt.Errorf("thinking %q, want %q", got, want.Reasoning)
	}
	if got := a.text("text"); got != want.Answer {
		return fmt.Errorf("text %q, want %q", got, want.Answer)
	}
	got := a.tools()
	if len(got) != len(want.Calls) {
		return fmt.Errorf("%d tool calls, want %d: %+v", len(got), len(want.Calls), got)
	}
	ids := map[string]bool{}
	for i, c := range want.Calls {
		g := got[i]
		if c.Args == "" {
			c.Args = "{}"
		}
		if g.Name != c.Name || g.Args != c.Args {
			return fmt.Errorf("call %d: %+v, want %+v", i, g, c)
		}
		if c.ID != "" && g.ID != ToolUseID(c.ID) || g.ID == "" || ids[g.ID] {
			return fmt.Errorf("call %d: id %q (want %q), or not unique", i, g.ID, c.ID)
		}
		ids[g.ID] = true
	}
	stop := StopReason(want.Finish)
	if want.Refusal != "" {
		stop = "refusal"
	}
	if a.stop != stop {
		return fmt.Errorf("stop reason %q, want %q", a.stop, stop)
	}
	return nil
}

// TestCheckMessagesAnswerCatches: the fuzz check fails on a loss.
func TestCheckMessagesAnswerCatches(t *testing.T) {
	want := chattest.Want{Answer: "hi", Calls: []chattest.Call{{ID: "a", Name: "f", Args: `{"x":1}`}}, Finish: "tool_calls", Complete: true}
	a := &msgAnswer{end: "stop", stop: "tool_use", blocks: []msgBlock{{typ: "text"}, {typ: "tool_use", id: "a", name: "f"}}}
	a.blocks[0].text.WriteString("hi")
	if err := checkMessagesAnswer(a, want); err == nil {
		t.Error("a call without its arguments passed")
	}
	a.blocks[1].text.WriteString(`{"x":1}`)
	if err := checkMessagesAnswer(a, want); err != nil {
		t.Errorf("the whole answer failed: %v", err)
	}
	want.Unreadable = true
	if err := checkMessagesAnswer(a, want); err == nil {
		t.Error("a clean end of an unreadable stream passed")
	}
}
