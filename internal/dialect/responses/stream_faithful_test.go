package responses

import (
	"bytes"
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

// rspAnswer is a Responses stream put back together the way the SDKs'
// accumulators do (openai-node's ResponseStream), checking the protocol
// on the way: output items one after another, parts of the open item
// only, each delta of its part's type, every .done event saying what the
// deltas made, the final response's output the items as they were done.
type rspAnswer struct {
	items []*rspItem
	// end: "completed", "incomplete", "failed" (error and
	// response.failed), "unreadable" (a *chat.UnreadableError from Next),
	// or "" (none: the relay reads that as truncation).
	end string
}

type rspItem struct {
	typ, id      string
	parts        []*rspPart // message
	summary      strings.Builder
	callID, name string
	args         strings.Builder
	doneArgs     *string
	done         bool
}

type rspPart struct {
	typ  string
	text strings.Builder
	done bool
}

func (a *rspAnswer) text(typ string) string {
	var b strings.Builder
	for _, it := range a.items {
		for _, p := range it.parts {
			if p.typ == typ {
				b.WriteString(p.text.String())
			}
		}
		if typ == "reasoning" && it.typ == "reasoning" {
			b.WriteString(it.summary.String())
		}
	}
	return b.String()
}

func (a *rspAnswer) calls() []chattest.Call {
	var out []chattest.Call
	for _, it := range a.items {
		if it.typ == "function_call" {
			out = append(out, chattest.Call{ID: it.callID, Name: it.name, Args: *it.doneArgs})
		}
	}
	return out
}

type rspEvent struct {
	Type         string          `json:"type"`
	Seq          *int            `json:"sequence_number"`
	OutputIndex  *int            `json:"output_index"`
	ContentIndex *int            `json:"content_index"`
	SummaryIndex *int            `json:"summary_index"`
	ItemID       string          `json:"item_id"`
	Item         json.RawMessage `json:"item"`
	Part         *struct {
		Type    string  `json:"type"`
		Text    *string `json:"text"`
		Refusal *string `json:"refusal"`
	} `json:"part"`
	Delta     *string         `json:"delta"`
	Text      *string         `json:"text"`
	Refusal   *string         `json:"refusal"`
	Arguments *string         `json:"arguments"`
	Response  json.RawMessage `json:"response"`
}

type rspItemWire struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Content   []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	} `json:"content"`
	Summary []struct{ Text string } `json:"summary"`
}

// readResponses drains a Responses stream and reassembles it; an error
// says how the stream broke the protocol.
func readResponses(src sse.Source) (*rspAnswer, error) {
	a := &rspAnswer{}
	var open *rspItem
	var doneItems []json.RawMessage
	for n := 0; ; n++ {
		if n > 1<<20 {
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
			return a, nil
		}
		if a.end != "" {
			return a, fmt.Errorf("%s after the end (%s)", ev.Type, a.end)
		}
		var e rspEvent
		if err := json.Unmarshal(ev.Data, &e); err != nil || e.Type != ev.Type || e.Seq == nil || *e.Seq != n {
			return a, fmt.Errorf("event %d %s: %v: %s", n, ev.Type, err, ev.Data)
		}
		if n == 0 && ev.Type != evCreated || n == 1 && ev.Type != evInProgress {
			return a, fmt.Errorf("event %d is %s", n, ev.Type)
		}
		// Every event of an item names the open one.
		if e.OutputIndex != nil && ev.Type != evItemAdded {
			if open == nil || *e.OutputIndex != len(a.items)-1 || e.Item == nil && e.ItemID != open.id {
				return a, fmt.Errorf("%s for item %d %q, open: %v", ev.Type, *e.OutputIndex, e.ItemID, open != nil)
			}
		}
		part := func(typ string) (*rspPart, error) {
			if open.typ != "message" || e.ContentIndex == nil || *e.ContentIndex != len(open.parts)-1 || open.parts[*e.ContentIndex].done {
				return nil, fmt.Errorf("%s: no open part at content_index %v", ev.Type, e.ContentIndex)
			}
			p := open.parts[*e.ContentIndex]
			if typ != "" && p.typ != typ {
				return nil, fmt.Errorf("%s in a %s part", ev.Type, p.typ)
			}
			return p, nil
		}
		var perr error
		switch ev.Type {
		case evCreated, evInProgress:
		case evItemAdded:
			var it rspItemWire
			if open != nil || e.OutputIndex == nil || *e.OutputIndex != len(a.items) || json.Unmarshal(e.Item, &it) != nil {
				return a, fmt.Errorf("item added at %v while one is open (%v), after %d", e.OutputIndex, open != nil, len(a.items))
			}
			open = &rspItem{typ: it.Type, id: it.ID, callID: it.CallID, name: it.Name}
			if it.Arguments != "" || len(it.Content) > 0 || len(it.Summary) > 0 {
				return a, errors.New("an item added with content")
			}
			a.items = append(a.items, open)
		case evContentPartAdded:
			if open.typ != "message" || e.ContentIndex == nil || *e.ContentIndex != len(open.parts) || e.Part == nil ||
				len(open.parts) > 0 && !open.parts[len(open.parts)-1].done {
				return a, fmt.Errorf("part added at %v after %d", e.ContentIndex, len(open.parts))
			}
			open.parts = append(open.parts, &rspPart{typ: e.Part.Type})
		case evTextDelta, evRefusalDelta:
			typ := map[string]string{evTextDelta: "output_text", evRefusalDelta: "refusal"}[ev.Type]
			p, err := part(typ)
			if err != nil {
				return a, err
			}
			p.text.WriteString(*e.Delta)
		case evTextDone, evRefusalDone:
			typ, got := "output_text", e.Text
			if ev.Type == evRefusalDone {
				typ, got = "refusal", e.Refusal
			}
			p, err := part(typ)
			if err != nil {
				return a, err
			}
			if got == nil || *got != p.text.String() {
				return a, fmt.Errorf("%s says %v, the deltas %q", ev.Type, got, p.text.String())
			}
		case evContentPartDone:
			p, err := part("")
			if err != nil {
				return a, err
			}
			got := e.Part.Text
			if p.typ == "refusal" {
				got = e.Part.Refusal
			}
			if e.Part.Type != p.typ || got == nil || *got != p.text.String() {
				return a, fmt.Errorf("part done %+v, the deltas %q", e.Part, p.text.String())
			}
			p.done = true
		case evSummaryPartAdded, evSummaryPartDone, evSummaryDelta, evSummaryDone:
			if open.typ != "reasoning" || e.SummaryIndex == nil || *e.SummaryIndex != 0 {
				return a, fmt.Errorf("%s in a %s item", ev.Type, open.typ)
			}
			switch ev.Type {
			case evSummaryDelta:
				open.summary.WriteString(*e.Delta)
			case evSummaryDone:
				if e.Text == nil || *e.Text != open.summary.String() {
					perr = fmt.Errorf("summary done %v, deltas %q", e.Text, open.summary.String())
				}
			}
		case evArgsDelta:
			if open.typ != "function_call" || e.Delta == nil {
				return a, fmt.Errorf("arguments delta in a %s item", open.typ)
			}
			open.args.WriteString(*e.Delta)
		case evArgsDone:
			if open.typ != "function_call" || e.Arguments == nil {
				return a, fmt.Errorf("arguments done in a %s item", open.typ)
			}
			// The deltas, or {} for a call that had none.
			if got := *e.Arguments; got != open.args.String() && (open.args.Len() > 0 || got != "{}") {
				return a, fmt.Errorf("arguments done %q, the deltas %q", got, open.args.String())
			}
			open.doneArgs = e.Arguments
		case evItemDone:
			var it rspItemWire
			if err := json.Unmarshal(e.Item, &it); err != nil || it.ID != open.id || it.Type != open.typ {
				return a, fmt.Errorf("item done %s, open %s %s", e.Item, open.typ, open.id)
			}
			switch it.Type {
			case "message":
				if len(it.Content) != len(open.parts) || it.Status != "completed" {
					return a, fmt.Errorf("message done %s, %d parts", e.Item, len(open.parts))
				}
				for i, p := range open.parts {
					c := it.Content[i]
					if !p.done || c.Type != p.typ || c.Text+c.Refusal != p.text.String() {
						return a, fmt.Errorf("message done %s, part %d %q", e.Item, i, p.text.String())
					}
				}
			case "reasoning":
				if len(it.Summary) != 1 || it.Summary[0].Text != open.summary.String() {
					return a, fmt.Errorf("reasoning done %s", e.Item)
				}
			case "function_call":
				if open.doneArgs == nil || it.Arguments != *open.doneArgs || it.CallID != open.callID || it.Name != open.name || it.Status != "completed" {
					return a, fmt.Errorf("call done %s", e.Item)
				}
			}
			open.done = true
			open = nil
			doneItems = append(doneItems, e.Item)
		case evCompleted, evIncomplete, evFailed:
			if open != nil && ev.Type != evFailed {
				return a, fmt.Errorf("%s with an item open", ev.Type)
			}
			var r struct {
				Status string            `json:"status"`
				Output []json.RawMessage `json:"output"`
			}
			if err := json.Unmarshal(e.Response, &r); err != nil {
				return a, err
			}
			want := map[string]string{evCompleted: "completed", evIncomplete: "incomplete", evFailed: "failed"}[ev.Type]
			if r.Status != want || len(r.Output) != len(doneItems) {
				return a, fmt.Errorf("%s: status %q, %d items, %d done", ev.Type, r.Status, len(r.Output), len(doneItems))
			}
			for i := range doneItems {
				if !jsonSame(r.Output[i], doneItems[i]) {
					return a, fmt.Errorf("%s: output %d %s, done %s", ev.Type, i, r.Output[i], doneItems[i])
				}
			}
			a.end = want
		case evError:
			// response.failed follows.
		default:
			return a, fmt.Errorf("event type %q", ev.Type)
		}
		if perr != nil {
			return a, perr
		}
	}
}

func jsonSame(a, b []byte) bool {
	var x, y bytes.Buffer
	return json.Compact(&x, a) == nil && json.Compact(&y, b) == nil && x.String() == y.String()
}

func translateResponses(t *testing.T, in string) *rspAnswer {
	t.Helper()
	a, err := readResponses(FromChatStream(sse.NewReader(strings.NewReader(in), 0), chat.Options{Created: 1}))
	if err != nil {
		t.Fatalf("%v\ninput:\n%s", err, in)
	}
	return a
}

func tcd(fields string) string { return delta(`{"tool_calls":[`+fields+`]}`, "") }

var roleChunk = delta(`{"role":"assistant","content":""}`, "")

// The tool call interleavings Chat providers send: each call must reach
// the Responses client whole, in an item of its own, with "{}" for a
// call that had no arguments.
func TestResponsesStreamToolInterleavings(t *testing.T) {
	abc := []chattest.Call{{ID: "a", Name: "f", Args: `{"x":1}`}, {ID: "b", Name: "g", Args: `{"y":[2]}`}, {ID: "c", Name: "h", Args: `{}`}}
	cases := []struct {
		name string
		in   string
		want []chattest.Call
		text string
	}{
		{"one after another", tcd(`{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\":"}}`) + tcd(`{"index":0,"function":{"arguments":"1}"}}`) +
			tcd(`{"index":1,"id":"b","function":{"name":"g","arguments":""}}`) + tcd(`{"index":1,"function":{"arguments":"{\"y\":[2]}"}}`) +
			tcd(`{"index":2,"id":"c","function":{"name":"h","arguments":"{}"}}`), abc, ""},
		{"announced, then arguments by index", tcd(`{"index":0,"id":"a","function":{"name":"f","arguments":""}}`) +
			tcd(`{"index":1,"id":"b","function":{"name":"g","arguments":""}}`) + tcd(`{"index":2,"id":"c","function":{"name":"h","arguments":""}}`) +
			tcd(`{"index":1,"function":{"arguments":"{\"y\":"}}`) + tcd(`{"index":0,"function":{"arguments":"{\"x\""}}`) +
			tcd(`{"index":2,"function":{"arguments":"{}"}}`) + tcd(`{"index":0,"function":{"arguments":":1}"}}`) + tcd(`{"index":1,"function":{"arguments":"[2]}"}}`), abc, ""},
		{"no index, told apart by id", tcd(`{"id":"a","function":{"name":"f","arguments":"{\"x\":"}}`) + tcd(`{"function":{"arguments":"1}"}}`) +
			tcd(`{"id":"b","function":{"name":"g","arguments":"{\"y\":[2]}"}}`) + tcd(`{"id":"c","function":{"name":"h","arguments":"{}"}}`), abc, ""},
		{"no index, the id in every fragment, interleaved", tcd(`{"id":"a","function":{"name":"f","arguments":"{\"x\":"}}`) +
			tcd(`{"id":"b","function":{"name":"g","arguments":"{\"y\":"}}`) + tcd(`{"id":"a","function":{"arguments":"1}"}}`) +
			tcd(`{"id":"c","function":{"name":"h","arguments":"{}"}}`) + tcd(`{"id":"b","function":{"name":"g","arguments":"[2]}"}}`), abc, ""},
		{"text between two fragments of one call", tcd(`{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\":"}}`) +
			delta(`{"content":"Let me "}`, "") + delta(`{"content":"see."}`, "") + tcd(`{"index":0,"function":{"arguments":"1}"}}`), abc[:1], "Let me see."},
		{"a call with no arguments", tcd(`{"index":0,"id":"a","function":{"name":"f","arguments":""}}`) + tcd(`{"index":1,"id":"b","function":{"name":"g","arguments":"{\"y\":[2]}"}}`),
			[]chattest.Call{{ID: "a", Name: "f", Args: "{}"}, abc[1]}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := translateResponses(t, roleChunk+c.in+delta(`{}`, "tool_calls")+doneChunk)
			if a.end != "completed" {
				t.Fatalf("end %q", a.end)
			}
			if got := a.calls(); !sameCalls(got, c.want) {
				t.Errorf("tool calls\n got  %+v\n want %+v", got, c.want)
			}
			if got := a.text("output_text"); got != c.text {
				t.Errorf("text %q, want %q", got, c.text)
			}
		})
	}
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

// Content as parts (Mistral's reasoning models) reaches the client as
// reasoning and text; a refusal is a refusal part, streamed with
// response.refusal.delta and .done as OpenAI streams it.
func TestResponsesStreamPartsAndRefusal(t *testing.T) {
	a := translateResponses(t, roleChunk+
		delta(`{"content":[{"type":"thinking","thinking":[{"type":"text","text":"The user is asking"}]}]}`, "")+
		delta(`{"content":[{"type":"thinking","thinking":[{"type":"text","text":" for 2+2."}]}]}`, "")+
		delta(`{"content":[{"type":"text","text":"2 + 2 = 4"}]}`, "")+delta(`{"content":""}`, "stop")+doneChunk)
	if a.end != "completed" || a.text("reasoning") != "The user is asking for 2+2." || a.text("output_text") != "2 + 2 = 4" {
		t.Errorf("parts: end %q reasoning %q text %q", a.end, a.text("reasoning"), a.text("output_text"))
	}
	in := roleChunk + delta(`{"content":"Sure. "}`, "") + delta(`{"refusal":"I can't "}`, "") + delta(`{"refusal":"help."}`, "") + delta(`{}`, "stop") + doneChunk
	a = translateResponses(t, in)
	if a.end != "completed" || a.text("refusal") != "I can't help." || a.text("output_text") != "Sure. " {
		t.Fatalf("refusal: end %q refusal %q text %q", a.end, a.text("refusal"), a.text("output_text"))
	}
	if len(a.items) != 1 || len(a.items[0].parts) != 2 {
		t.Errorf("want one message with a text and a refusal part, got %d items", len(a.items))
	}
	evs, _ := runStream(t, in, chat.Options{})
	if findEvent(evs, evRefusalDelta) == nil || findEvent(evs, evRefusalDone) == nil {
		t.Errorf("no refusal events: %q", types(evs))
	}
}

// An upstream event FromChatStream cannot read ends the stream with a
// *chat.UnreadableError after what came before it; chunks without
// choices (Azure's prompt filter results, usage) are fine.
func TestResponsesStreamUnreadable(t *testing.T) {
	for name, bad := range map[string]string{
		"not JSON":                    "data: {oops\n\n",
		"a JSON array":                "data: [1]\n\n",
		"a second choice, plain text": chunk(chunkHead + `{"index":1,"delta":{"content":"B"},"logprobs":null,"finish_reason":null}]}`),
		"a second choice, tool call":  chunk(`{"choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"id":"z","function":{"name":"f","arguments":"{}"}}]}}]}`),
		"content of the wrong type":   delta(`{"content":5}`, ""),
		"a part it cannot carry":      delta(`{"content":[{"type":"image_url","image_url":{"url":"https://x"}}]}`, ""),
		"a null tool call":            delta(`{"tool_calls":[null]}`, ""),
		"arguments after the call ended": tcd(`{"index":0,"id":"z","function":{"name":"f","arguments":"{}"}}`) + delta(`{"content":"x"}`, "") +
			tcd(`{"index":0,"function":{"arguments":"{}"}}`),
	} {
		t.Run(name, func(t *testing.T) {
			a := translateResponses(t, roleChunk+delta(`{"content":"A"}`, "")+bad+delta(`{"content":"C"}`, "")+delta(`{}`, "stop")+doneChunk)
			if a.end != "unreadable" || !strings.HasPrefix(a.text("output_text"), "A") || strings.Contains(a.text("output_text"), "C") {
				t.Errorf("end %q, text %q: want the text before it, then the error", a.end, a.text("output_text"))
			}
		})
	}
	a := translateResponses(t, chunk(`{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}]}`)+
		roleChunk+delta(`{"content":"A"}`, "")+"data: \n\n"+usageChunk+delta(`{}`, "stop")+doneChunk)
	if a.end != "completed" || a.text("output_text") != "A" {
		t.Errorf("chunks without choices: end %q text %q", a.end, a.text("output_text"))
	}
}

// FuzzResponsesStreamFaithful: whatever the Chat stream
// (chattest.Stream), its Responses translation follows the protocol, and
// either ends in an error (an error event and response.failed, a
// *chat.UnreadableError, or no terminator, which the relay ends with its
// own error), or carries everything the input did: every call whole, in
// order, all the text, refusal and reasoning.
func FuzzResponsesStreamFaithful(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, want := chattest.Stream(data)
		a, err := readResponses(FromChatStream(sse.NewReader(strings.NewReader(in), 0), chat.Options{Created: 1}))
		if err != nil {
			t.Fatalf("%v\ninput:\n%s", err, in)
		}
		if err := checkResponsesAnswer(a, want, true); err != nil {
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

// checkResponsesAnswer is the fuzz targets' property. ids says the
// stream's call ids must be the input's (false for the chain through
// Messages, which has ids of its own).
func checkResponsesAnswer(a *rspAnswer, want chattest.Want, ids bool) error {
	if a.end != "completed" && a.end != "incomplete" {
		if want.Complete && !want.Unreadable {
			return fmt.Errorf("a whole, readable stream ended %q", a.end)
		}
		return nil // the client sees an error
	}
	if !want.Complete || want.Unreadable {
		return fmt.Errorf("a clean end (%s), yet the input was cut (%v) or unreadable (%v)", a.end, !want.Complete, want.Unreadable)
	}
	for typ, w := range map[string]string{"reasoning": want.Reasoning, "output_text": want.Text, "refusal": want.Refusal} {
		if got := a.text(typ); got != w {
			return fmt.Errorf("%s %q, want %q", typ, got, w)
		}
	}
	got := a.calls()
	if len(got) != len(want.Calls) {
		return fmt.Errorf("%d tool calls, want %d: %+v", len(got), len(want.Calls), got)
	}
	seen := map[string]bool{}
	for i, c := range want.Calls {
		g := got[i]
		if c.Args == "" {
			c.Args = "{}"
		}
		if g.Name != c.Name || g.Args != c.Args {
			return fmt.Errorf("call %d: %+v, want %+v", i, g, c)
		}
		if ids && c.ID != "" && g.ID != c.ID || g.ID == "" || seen[g.ID] {
			return fmt.Errorf("call %d: call_id %q (want %q), or not unique", i, g.ID, c.ID)
		}
		seen[g.ID] = true
	}
	end := "completed"
	if want.Finish == "length" || want.Finish == "content_filter" {
		end = "incomplete"
	}
	if a.end != end {
		return fmt.Errorf("ended %s, want %s", a.end, end)
	}
	return nil
}

// TestCheckResponsesAnswerCatches: the fuzz check fails on a loss.
func TestCheckResponsesAnswerCatches(t *testing.T) {
	want := chattest.Want{Text: "hi", Calls: []chattest.Call{{ID: "a", Name: "f", Args: `{"x":1}`}}, Finish: "tool_calls", Complete: true}
	empty := ""
	a := &rspAnswer{end: "completed", items: []*rspItem{{typ: "message", parts: []*rspPart{{typ: "output_text"}}}, {typ: "function_call", callID: "a", name: "f", doneArgs: &empty}}}
	a.items[0].parts[0].text.WriteString("hi")
	if err := checkResponsesAnswer(a, want, true); err == nil {
		t.Error("a call without its arguments passed")
	}
	args := `{"x":1}`
	a.items[1].doneArgs = &args
	if err := checkResponsesAnswer(a, want, true); err != nil {
		t.Errorf("the whole answer failed: %v", err)
	}
	want.Complete = false
	if err := checkResponsesAnswer(a, want, true); err == nil {
		t.Error("a clean end of a cut stream passed")
	}
}
