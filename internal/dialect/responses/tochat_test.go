package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat/chattest"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// rspObject is a response object with these members after the usual
// head.
func rspObject(status, rest string) string {
	return `{"id":"resp_9","object":"response","created_at":1700000001,"status":"` + status + `","model":"gpt-x"` + rest + `}`
}

const rspUsage = `"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":7},"total_tokens":30}`

func TestToChatResponse(t *testing.T) {
	cases := []struct {
		name, in string
		opt      chat.Options
		want     string
	}{
		{"everything", rspObject("completed", `,"output":[
			{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"**Plan**"},{"type":"summary_text","text":""},{"type":"summary_text","text":"look it up"}]},
			{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"q"}},
			{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[
				{"type":"output_text","text":"It is ","annotations":[]},{"type":"output_text","text":"sunny.","annotations":[]}]},
			{"type":"function_call","id":"fc_1","call_id":"call_a","name":"f","arguments":"{\"x\":1}","status":"completed"},
			{"type":"function_call","id":"fc_2","call_id":"call_b","name":"g","arguments":"","status":"completed"}],`+rspUsage),
			chat.Options{},
			`{"id":"chatcmpl-9","object":"chat.completion","created":1700000001,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant",
				"content":"It is sunny.","refusal":null,"reasoning_content":"**Plan**\n\nlook it up","tool_calls":[
				{"id":"call_a","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}},
				{"id":"call_b","type":"function","function":{"name":"g","arguments":""}}]},"logprobs":null,"finish_reason":"tool_calls"}],
				"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":7}}}`},
		{"refusal, created given", rspObject("completed", `,"output":[{"type":"message","id":"m","role":"assistant","content":[{"type":"refusal","refusal":"No."}]}]`),
			chat.Options{Created: 5},
			`{"id":"chatcmpl-9","object":"chat.completion","created":5,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant",
				"content":null,"refusal":"No."},"logprobs":null,"finish_reason":"stop"}]}`},
		{"nothing said", rspObject("incomplete", `,"incomplete_details":{"reason":"max_output_tokens"},"output":[]`), chat.Options{},
			`{"id":"chatcmpl-9","object":"chat.completion","created":1700000001,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant",
				"content":"","refusal":null},"logprobs":null,"finish_reason":"length"}]}`},
		{"content filter", rspObject("incomplete", `,"incomplete_details":{"reason":"content_filter"},"output":[{"type":"reasoning","id":"r","summary":[],"content":[{"type":"reasoning_text","text":"raw"}]}]`), chat.Options{},
			`{"id":"chatcmpl-9","object":"chat.completion","created":1700000001,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant",
				"content":"","refusal":null,"reasoning_content":"raw"},"logprobs":null,"finish_reason":"content_filter"}]}`},
		{"pause_turn kept", rspObject("incomplete", `,"incomplete_details":{"reason":"pause_turn"},"output":[]`), chat.Options{KeepPauseTurn: true},
			`{"id":"chatcmpl-9","object":"chat.completion","created":1700000001,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant",
				"content":"","refusal":null},"logprobs":null,"finish_reason":"pause_turn"}]}`},
	}
	for _, c := range cases {
		out, err := ToChatResponse([]byte(c.in), c.opt)
		var got, want any
		_ = json.Unmarshal(out, &got)
		_ = json.Unmarshal([]byte(c.want), &want)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v\n got  %s\n want %s", c.name, err, out, c.want)
		}
	}
}

// TestToChatResponseRefuses: what is no answer is an error; an item a
// Chat client cannot be given is a *chat.UnreadableError.
func TestToChatResponseRefuses(t *testing.T) {
	for _, in := range []string{`<html>`, `{"object":"chat.completion"}`, rspObject("failed", `,"output":[]`),
		rspObject("in_progress", `,"output":[]`), rspObject("queued", `,"output":[]`)} {
		if _, err := ToChatResponse([]byte(in), chat.Options{}); err == nil {
			t.Errorf("no error for %s", in)
		}
	}
	for _, item := range []string{
		`{"type":"computer_call","id":"c","call_id":"x","action":{}}`,
		`{"type":"custom_tool_call","id":"c","call_id":"x","name":"f","input":"raw"}`,
		`{"type":"message","id":"m","content":[{"type":"summary_text","text":"x"}]}`,
		`{"type":"message","id":"m","content":[{"type":"output_audio","data":"x"}]}`,
		`{"type":"reasoning","id":"r","summary":[{"type":"output_text","text":"x"}]}`,
		`{"type":"message","id":"m","content":"text"}`,
	} {
		_, err := ToChatResponse([]byte(rspObject("completed", `,"output":[`+item+`]`)), chat.Options{})
		if _, ok := errors.AsType[*chat.UnreadableError](err); !ok {
			t.Errorf("item %s: %v, want a *chat.UnreadableError", item, err)
		}
	}
}

// TestToChatResponseRoundTrip: Chat → Responses → Chat gives the message
// back.
func TestToChatResponseRoundTrip(t *testing.T) {
	for _, c := range []struct{ message, finish string }{
		{`{"role":"assistant","content":"Hello","refusal":null,"reasoning_content":"hmm","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}`, "tool_calls"},
		{`{"role":"assistant","content":"cut","refusal":null}`, "length"},
		{`{"role":"assistant","content":null,"refusal":"no"}`, "content_filter"},
	} {
		in := completion(c.message, c.finish, usageChat)
		rsp, err := FromChatResponse([]byte(in), chat.Options{})
		out, err2 := ToChatResponse(rsp, chat.Options{})
		if err != nil || err2 != nil {
			t.Fatal(err, err2)
		}
		var got, want struct {
			Choices []struct {
				Message      json.RawMessage
				FinishReason string `json:"finish_reason"`
			}
			Usage struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
			}
		}
		_ = json.Unmarshal(out, &got)
		_ = json.Unmarshal([]byte(in), &want)
		if len(got.Choices) != 1 || !jsonSame(got.Choices[0].Message, want.Choices[0].Message) ||
			got.Choices[0].FinishReason != want.Choices[0].FinishReason || got.Usage != want.Usage {
			t.Errorf("round trip of %s:\n%s", in, out)
		}
	}
}

// chatOut is what a Chat stream carried, assembled.
type chatOut struct {
	c         chat.Completion
	done      bool   // it ended with [DONE]
	errorData string // the data of an in-band error chunk, "" when none
	err       error  // the source's error at the end (io.EOF: clean)
	data      []string
}

// readChat reads a Chat stream to its end, checking each event is one
// sse.NewEvent makes, JSON (or [DONE], last), and assembles it.
func readChat(t testing.TB, src sse.Source) chatOut {
	t.Helper()
	var a chat.Assembler
	var o chatOut
	for range 100000 {
		ev, err := src.Next()
		if err != nil {
			o.err = err
			o.c = a.Completion(0, false)
			return o
		}
		o.data = append(o.data, string(ev.Data))
		if want := sse.NewEvent(ev.Type, ev.Data); !reflect.DeepEqual(ev, want) {
			t.Fatalf("event %d is not the block sse.NewEvent makes:\n%q\n%q", len(o.data), ev.Raw, want.Raw)
		}
		if o.done || o.errorData != "" {
			t.Fatalf("event after the end: %s", ev.Data)
		}
		if ev.IsDone() {
			o.done = true
			continue
		}
		var probe struct {
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(ev.Data, &probe); err != nil {
			t.Fatalf("event %d is not JSON: %s", len(o.data), ev.Data)
		}
		if probe.Error != nil {
			o.errorData = string(ev.Data)
			continue
		}
		a.Add(ev.Data, 0, false)
	}
	t.Fatal("the stream did not end")
	return o
}

// rspEv is a Responses stream event.
func rspEv(typ, data string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(`{"type":"`+typ+`",`+data+`}`)); err != nil {
		panic(err)
	}
	return "event: " + typ + "\ndata: " + b.String() + "\n\n"
}

// openAIStream is a Responses stream as OpenAI sends one: a reasoning
// summary of two parts, a message, a function call, every done event.
var openAIStream = rspEv("response.created", `"sequence_number":0,"response":`+rspObject("in_progress", `,"output":[]`)) +
	rspEv("response.in_progress", `"sequence_number":1,"response":`+rspObject("in_progress", `,"output":[]`)) +
	rspEv("response.output_item.added", `"output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[]}`) +
	rspEv("response.reasoning_summary_part.added", `"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}`) +
	rspEv("response.reasoning_summary_text.delta", `"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"**Plan**"`) +
	rspEv("response.reasoning_summary_text.done", `"item_id":"rs_1","output_index":0,"summary_index":0,"text":"**Plan**"`) +
	rspEv("response.reasoning_summary_part.done", `"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":"**Plan**"}`) +
	rspEv("response.reasoning_summary_part.added", `"item_id":"rs_1","output_index":0,"summary_index":1,"part":{"type":"summary_text","text":""}`) +
	rspEv("response.reasoning_summary_text.delta", `"item_id":"rs_1","output_index":0,"summary_index":1,"delta":"Check."`) +
	rspEv("response.reasoning_summary_text.done", `"item_id":"rs_1","output_index":0,"summary_index":1,"text":"Check."`) +
	rspEv("response.reasoning_summary_part.done", `"item_id":"rs_1","output_index":0,"summary_index":1,"part":{"type":"summary_text","text":"Check."}`) +
	rspEv("response.output_item.done", `"output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"**Plan**"},{"type":"summary_text","text":"Check."}]}`) +
	rspEv("response.output_item.added", `"output_index":1,"item":{"type":"message","id":"msg_1","status":"in_progress","role":"assistant","content":[]}`) +
	rspEv("response.content_part.added", `"item_id":"msg_1","output_index":1,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}`) +
	rspEv("response.output_text.delta", `"item_id":"msg_1","output_index":1,"content_index":0,"delta":"Hi ","logprobs":[]`) +
	rspEv("response.output_text.delta", `"item_id":"msg_1","output_index":1,"content_index":0,"delta":"\"there\"","logprobs":[]`) +
	rspEv("response.output_text.done", `"item_id":"msg_1","output_index":1,"content_index":0,"text":"Hi \"there\"","logprobs":[]`) +
	rspEv("response.content_part.done", `"item_id":"msg_1","output_index":1,"content_index":0,"part":{"type":"output_text","text":"Hi \"there\"","annotations":[]}`) +
	rspEv("response.output_item.done", `"output_index":1,"item":{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi \"there\"","annotations":[]}]}`) +
	rspEv("response.output_item.added", `"output_index":2,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get","arguments":"","status":"in_progress"}`) +
	rspEv("response.function_call_arguments.delta", `"item_id":"fc_1","output_index":2,"delta":"{\"q\":"`) +
	rspEv("response.function_call_arguments.delta", `"item_id":"fc_1","output_index":2,"delta":"1}"`) +
	rspEv("response.function_call_arguments.done", `"item_id":"fc_1","output_index":2,"arguments":"{\"q\":1}"`) +
	rspEv("response.output_item.done", `"output_index":2,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get","arguments":"{\"q\":1}","status":"completed"}`) +
	rspEv("response.completed", `"response":`+rspObject("completed", `,"output":[
		{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"**Plan**"},{"type":"summary_text","text":"Check."}]},
		{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi \"there\"","annotations":[]}]},
		{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get","arguments":"{\"q\":1}","status":"completed"}],`+rspUsage))

func TestToChatStream(t *testing.T) {
	o := readChat(t, ToChatStream(sse.NewReader(strings.NewReader(openAIStream), 0), chat.Options{Model: "alias", IncludeUsage: true}))
	got := o.data
	if o.err != io.EOF {
		t.Fatal(o.err)
	}
	head := `{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1700000001,"model":"alias","choices":[`
	ck := func(delta, finish string) string {
		return head + `{"index":0,"delta":{` + delta + `},"logprobs":null,"finish_reason":` + finish + `}]}`
	}
	want := []string{
		ck(`"role":"assistant","content":""`, "null"),
		ck(`"reasoning_content":"**Plan**"`, "null"),
		ck(`"reasoning_content":"\n\n"`, "null"),
		ck(`"reasoning_content":"Check."`, "null"),
		ck(`"content":"Hi "`, "null"),
		ck(`"content":"\"there\""`, "null"),
		ck(`"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":""}}]`, "null"),
		ck(`"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":"}}]`, "null"),
		ck(`"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]`, "null"),
		ck(``, `"tool_calls"`),
		head + `],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":7}}}`,
		"[DONE]",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("chunks:\n got  %s\n want %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
	// The same answer whole: the same message.
	whole, err := ToChatResponse([]byte(finalResponse(openAIStream)), chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var a chat.Assembler
	a.AddCompletion(whole)
	if o := readChat(t, ToChatStream(sse.NewReader(strings.NewReader(openAIStream), 0), chat.Options{IncludeUsage: true})); !reflect.DeepEqual(o.c, a.Completion(0, false)) {
		t.Errorf("stream assembled %+v\nwhole %+v", o.c, a.Completion(0, false))
	}
}

// finalResponse is the response of a stream's response.completed.
func finalResponse(stream string) string {
	i := strings.LastIndex(stream, `"response":`)
	return strings.TrimSuffix(strings.TrimSpace(stream[i+len(`"response":`):]), "}")
}

// TestToChatStreamLosesNothing: an upstream that repeats the text whole
// rather than in deltas (only .done events, only the items' done events,
// only the final response) gives the same answer.
func TestToChatStreamLosesNothing(t *testing.T) {
	want := readChat(t, ToChatStream(sse.NewReader(strings.NewReader(openAIStream), 0), chat.Options{})).c
	var noDeltas, noDones, finalOnly strings.Builder
	for block := range strings.SplitAfterSeq(openAIStream, "\n\n") {
		switch typ := strings.TrimPrefix(strings.SplitN(block, "\n", 2)[0], "event: "); {
		case strings.HasSuffix(typ, ".delta"):
			noDones.WriteString(block)
		case strings.HasSuffix(typ, ".done"):
			noDeltas.WriteString(block)
		case typ == "response.completed":
			noDeltas.WriteString(block)
			noDones.WriteString(block)
			finalOnly.WriteString(block)
		default:
			noDeltas.WriteString(block)
			noDones.WriteString(block)
		}
	}
	for name, in := range map[string]string{"no deltas": noDeltas.String(), "no done events": noDones.String(), "final only": finalOnly.String()} {
		o := readChat(t, ToChatStream(sse.NewReader(strings.NewReader(in), 0), chat.Options{}))
		if o.err != io.EOF || !o.done || !reflect.DeepEqual(o.c, want) {
			t.Errorf("%s: end %v, done %v\n got  %+v\n want %+v", name, o.err, o.done, o.c, want)
		}
	}
}

// TestToChatStreamUnreadable: an event that cannot be said faithfully
// ends the stream with a *chat.UnreadableError, after what came before.
func TestToChatStreamUnreadable(t *testing.T) {
	start := rspEv("response.created", `"response":`+rspObject("in_progress", `,"output":[]`)) +
		rspEv("response.output_item.added", `"output_index":0,"item":{"type":"message","id":"m","content":[]}`) +
		rspEv("response.output_text.delta", `"item_id":"m","output_index":0,"content_index":0,"delta":"ab"`)
	for name, bad := range map[string]string{
		"not JSON":           "data: {not json\n\n",
		"no type":            "data: {\"delta\":\"x\"}\n\n",
		"event line":         "event: response.output_text.delta\ndata: {\"type\":\"response.refusal.delta\",\"output_index\":0,\"delta\":\"x\"}\n\n",
		"member type":        rspEv("response.output_text.delta", `"output_index":0,"content_index":0,"delta":5`),
		"item never added":   rspEv("response.output_text.delta", `"output_index":3,"content_index":0,"delta":"x"`),
		"other item id":      rspEv("response.output_text.delta", `"item_id":"z","output_index":0,"content_index":0,"delta":"x"`),
		"wrong kind":         rspEv("response.function_call_arguments.delta", `"output_index":0,"delta":"{}"`),
		"unknown item":       rspEv("response.output_item.added", `"output_index":1,"item":{"type":"computer_call","id":"c"}`),
		"added twice":        rspEv("response.output_item.added", `"output_index":0,"item":{"type":"message","id":"m","content":[]}`),
		"contradicting done": rspEv("response.output_text.done", `"item_id":"m","output_index":0,"content_index":0,"text":"xy"`),
		"part changes type":  rspEv("response.refusal.delta", `"item_id":"m","output_index":0,"content_index":0,"delta":"x"`),
		"text out of order": rspEv("response.output_item.added", `"output_index":1,"item":{"type":"message","id":"m2","content":[]}`) +
			rspEv("response.output_text.delta", `"output_index":1,"content_index":0,"delta":"later"`) +
			rspEv("response.output_text.done", `"output_index":0,"content_index":0,"text":"ab and more"`),
		"final contradicts": rspEv("response.completed", `"response":`+rspObject("completed", `,"output":[{"type":"message","id":"m","content":[{"type":"output_text","text":"b"}]}]`)),
		"final unfinished":  rspEv("response.completed", `"response":`+rspObject("in_progress", `,"output":[]`)),
	} {
		o := readChat(t, ToChatStream(sse.NewReader(strings.NewReader(start+bad+rspEv("response.completed", `"response":`+rspObject("completed", `,"output":[]`))), 0), chat.Options{}))
		if _, ok := errors.AsType[*chat.UnreadableError](o.err); !ok || o.done {
			t.Errorf("%s: ended %v (done %v), want a *chat.UnreadableError", name, o.err, o.done)
			continue
		}
		if c := o.c.Choices; len(c) != 1 || c[0].Message.Content == nil || !strings.HasPrefix(*c[0].Message.Content, "ab") {
			t.Errorf("%s: what came before was not said: %+v", name, o.c)
		}
	}
}

// TestToChatStreamEnds: errors become a Chat error chunk; a stream cut
// short ends without [DONE]; events of the provider's own tools and of
// unknown types pass unsaid.
func TestToChatStreamEnds(t *testing.T) {
	added := rspEv("response.output_item.added", `"output_index":0,"item":{"type":"message","id":"m","content":[]}`) +
		rspEv("response.output_text.delta", `"output_index":0,"content_index":0,"delta":"ab"`)
	for name, c := range map[string]struct {
		in, errData string
		done        bool
	}{
		"failed": {added + rspEv("response.failed", `"response":`+rspObject("failed", `,"error":{"code":"rate_limit_exceeded","message":"slow down"},"output":[]`)),
			`{"error":{"message":"slow down","type":"server_error","param":null,"code":"rate_limit_exceeded"}}`, false},
		"error event": {added + rspEv("error", `"code":"server_error","message":"boom","param":null`),
			`{"error":{"message":"boom","type":"server_error","param":null,"code":"server_error"}}`, false},
		"relay's error event": {added + "event: error\ndata: {\"type\":\"error\",\"message\":\"cut\",\"param\":null,\"error\":{\"message\":\"cut\",\"type\":\"server_error\",\"code\":\"upstream_stream_broken\"}}\n\n",
			`{"error":{"message":"cut","type":"server_error","param":null,"code":"upstream_stream_broken"}}`, false},
		"error without data": {added + "event: error\ndata: oops\n\n",
			`{"error":{"message":"upstream stream error: server_error","type":"server_error","param":null,"code":"server_error"}}`, false},
		"cut":              {added, "", false},
		"cut mid":          {added + "event: response.completed\ndata: {\"type\":\"response.comp", "", false},
		"unterminated end": {added + strings.TrimSuffix(rspEv("response.completed", `"response":`+rspObject("completed", `,"output":[]`)), "\n"), "", true},
		"tools and unknown events": {rspEv("response.output_item.added", `"output_index":0,"item":{"type":"web_search_call","id":"ws","status":"in_progress"}`) +
			rspEv("response.web_search_call.searching", `"output_index":0,"item_id":"ws"`) +
			rspEv("response.output_item.done", `"output_index":0,"item":{"type":"web_search_call","id":"ws","status":"completed"}`) +
			rspEv("response.something_new", `"output_index":5,"delta":{}`) +
			": keep-alive\n\n" +
			rspEv("response.output_item.added", `"output_index":1,"item":{"type":"message","id":"m","content":[]}`) +
			rspEv("response.output_text.annotation.added", `"output_index":1,"content_index":0,"annotation":{"type":"url_citation"}`) +
			rspEv("response.output_text.delta", `"output_index":1,"content_index":0,"delta":"ab"`) +
			rspEv("response.completed", `"response":`+rspObject("completed", `,"output":[]`)), "", true},
	} {
		o := readChat(t, ToChatStream(sse.NewReader(strings.NewReader(c.in), 0), chat.Options{}))
		content := ""
		if ch := o.c.Choices; len(ch) == 1 && ch[0].Message.Content != nil {
			content = *ch[0].Message.Content
		}
		if o.err != io.EOF || o.errorData != c.errData || o.done != c.done || content != "ab" {
			t.Errorf("%s: end %v, error chunk %s, done %v, content %q", name, o.err, o.errorData, o.done, content)
		}
	}
}

// TestToChatStreamForwardsBeforeRead: the relay's per-read hook reaches
// the sse.Reader under the translator.
func TestToChatStreamForwardsBeforeRead(t *testing.T) {
	r := sse.NewReader(strings.NewReader(openAIStream), 0)
	calls := 0
	if !sse.ForwardBeforeRead(ToChatStream(r, chat.Options{}), func() { calls++ }) {
		t.Fatal("ToChatStream has no BeforeRead")
	}
	_ = readChat(t, ToChatStream(r, chat.Options{}))
	if calls == 0 {
		t.Error("the hook was not called")
	}
}

// TestFromChatRequestNotSupported: the missing direction says so.
func TestFromChatRequestNotSupported(t *testing.T) {
	if _, err := Codec.FromChatRequest([]byte(`{"messages":[]}`), chat.Options{}); !errors.Is(err, chat.ErrNotSupported) {
		t.Errorf("err %v, want chat.ErrNotSupported", err)
	}
}

// FuzzToChatStreamRoundTrip: a Chat stream made Responses by
// FromChatStream and Chat again by ToChatStream carries everything the
// first did (every text, refusal, reasoning and call, whole and in
// order), or ends in an error where the first would: the two directions
// lose nothing between them.
func FuzzToChatStreamRoundTrip(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, want := chattest.Stream(data)
		rsp := FromChatStream(sse.NewReader(strings.NewReader(in), 0), chat.Options{Created: 1})
		o := readChat(t, ToChatStream(rsp, chat.Options{IncludeUsage: true}))
		if !o.done {
			if want.Complete && !want.Unreadable {
				t.Fatalf("a whole, readable stream ended %v (error chunk %s)\ninput:\n%s", o.err, o.errorData, in)
			}
			return
		}
		if !want.Complete || want.Unreadable {
			t.Fatalf("[DONE], yet the input was cut (%v) or unreadable (%v)\ninput:\n%s", !want.Complete, want.Unreadable, in)
		}
		m := o.c.Choices[0].Message
		if got := [3]string{deref(m.Content), deref(m.Refusal), deref(m.ReasoningContent)}; got != [3]string{want.Text, want.Refusal, want.Reasoning} {
			t.Fatalf("content, refusal, reasoning %q, want %q\ninput:\n%s", got, [3]string{want.Text, want.Refusal, want.Reasoning}, in)
		}
		if len(m.ToolCalls) != len(want.Calls) {
			t.Fatalf("%d calls, want %d\ninput:\n%s", len(m.ToolCalls), len(want.Calls), in)
		}
		for i, c := range want.Calls {
			g := m.ToolCalls[i].Function
			if c.Args == "" {
				c.Args = "{}" // as FromChatStream gives it to a Responses client
			}
			if g.Name != c.Name || g.Arguments != c.Args || c.ID != "" && m.ToolCalls[i].ID != c.ID {
				t.Fatalf("call %d: %+v, want %+v\ninput:\n%s", i, m.ToolCalls[i], c, in)
			}
		}
	})
}

// genStream is a Responses stream made from fuzz input, and what it
// carries (see rspGen).
type genStream struct {
	in    string
	final string // the response of its response.completed, "" when it has none
	// Text, refusal and reasoning the stream says, and its calls.
	text, refusal, reasoning string
	calls                    []chattest.Call
	finish                   string
	// end is how it ends: "done" (response.completed or .incomplete),
	// "error" (response.failed or an error event), "cut"; unreadable says
	// an event before the end cannot be read faithfully.
	end        string
	unreadable bool
}

var genWords = []string{"", "a", " b", `"q"`, "\n", "é", "😀", `\`, "</p>"}

// genText is a few words.
func genText(g *chattest.Input) string {
	var b strings.Builder
	for range g.N(4) {
		b.WriteString(genWords[g.N(len(genWords))])
	}
	return b.String()
}

// genPieces cuts s in up to three pieces at byte offsets that keep
// UTF-8 whole.
func genPieces(g *chattest.Input, s string) []string {
	var out []string
	for k := g.N(3); k > 0 && len(s) > 0; k-- {
		i := g.N(len(s) + 1)
		for i < len(s) && !isRuneStart(s[i]) {
			i++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return append(out, s)
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// How an item's text reaches the stream.
const (
	sendAll      = iota // deltas, .done events, part events, the item's done event
	sendDeltas          // deltas only: no done event at all
	sendDones           // .done events and part events, no deltas
	sendItemDone        // the item's done event only
	sendFinal           // the final response only (the last items)
	sendModes
)

type genPart struct {
	summary bool   // a reasoning item's summary part, else content
	typ     string // output_text, refusal, summary_text, reasoning_text
	text    string
}

type genItem struct {
	typ                string
	id                 string
	parts              []genPart
	callID, name, args string
	mode               int
}

// json is the item whole, as a done event or the final response has it.
func (it *genItem) json() string {
	switch it.typ {
	case "function_call":
		return `{"type":"function_call","id":"` + it.id + `","call_id":"` + it.callID + `","name":"` + it.name + `","arguments":` + jsonStr(it.args) + `,"status":"completed"}`
	case "web_search_call":
		return `{"type":"web_search_call","id":"` + it.id + `","status":"completed"}`
	}
	var content, summary []string
	for _, p := range it.parts {
		s := `{"type":"` + p.typ + `","text":` + jsonStr(p.text) + `}`
		if p.typ == "refusal" {
			s = `{"type":"refusal","refusal":` + jsonStr(p.text) + `}`
		}
		if p.summary {
			summary = append(summary, s)
		} else {
			content = append(content, s)
		}
	}
	s := `{"type":"` + it.typ + `","id":"` + it.id + `","content":[` + strings.Join(content, ",") + `]`
	if it.typ == "reasoning" {
		s += `,"summary":[` + strings.Join(summary, ",") + `]`
	}
	return s + "}"
}

// genResponses builds a Responses stream from fuzz input: reasoning items
// (summary parts and reasoning_text parts), messages (text and refusal
// parts), function calls and a provider's tool calls, each item's text
// sent in one of the ways upstreams send it (sendAll...sendFinal), then
// one of the ends, and sometimes one event no reader can read
// faithfully.
func genResponses(data []byte) genStream {
	g := chattest.NewInput(data)
	var gs genStream
	var items []*genItem
	finalFrom := 6 - g.N(7) // items from this index on are sent in the final response only
	for i := range g.N(6) {
		it := &genItem{id: "it" + strconv.Itoa(i), mode: g.N(sendModes - 1)}
		if i >= finalFrom {
			it.mode = sendFinal
		}
		switch g.N(4) {
		case 0:
			it.typ = "reasoning"
			for range g.N(3) {
				it.parts = append(it.parts, genPart{summary: true, typ: "summary_text", text: genText(g)})
			}
			if g.N(3) == 0 {
				it.parts = append(it.parts, genPart{typ: "reasoning_text", text: genText(g)})
			}
		case 1:
			it.typ = "message"
			for range 1 + g.N(2) {
				typ := "output_text"
				if g.N(4) == 0 {
					typ = "refusal"
				}
				it.parts = append(it.parts, genPart{typ: typ, text: genText(g)})
			}
		case 2:
			it.typ, it.callID, it.name = "function_call", "call_"+strconv.Itoa(i), "f"+strconv.Itoa(i)
			if g.N(3) > 0 {
				it.args = `{"n":` + strconv.Itoa(i) + `,"s":` + jsonStr(genText(g)) + `}`
			}
			gs.calls = append(gs.calls, chattest.Call{ID: it.callID, Name: it.name, Args: it.args})
		default:
			it.typ = "web_search_call"
		}
		items = append(items, it)
	}
	// What the items say, in order.
	var text, refusal, reasoning strings.Builder
	for _, it := range items {
		said := false
		for _, p := range it.parts {
			switch {
			case p.typ == "output_text":
				text.WriteString(p.text)
			case p.typ == "refusal":
				refusal.WriteString(p.text)
			case p.text != "":
				if said {
					reasoning.WriteString("\n\n")
				}
				reasoning.WriteString(p.text)
				said = true
			}
		}
	}
	gs.text, gs.refusal, gs.reasoning = text.String(), refusal.String(), reasoning.String()

	var ev []string
	seq := 0
	emit := func(typ, data string) {
		ev = append(ev, "event: "+typ+"\ndata: {\"type\":\""+typ+"\",\"sequence_number\":"+strconv.Itoa(seq)+","+data+"}\n\n")
		seq++
	}
	emit("response.created", `"response":{"id":"resp_g","object":"response","created_at":7,"status":"in_progress","model":"gm","output":[]}`)
	for i, it := range items {
		if it.mode == sendFinal {
			continue
		}
		at := `"output_index":` + strconv.Itoa(i) + `,"item_id":"` + it.id + `"`
		added := `{"type":"` + it.typ + `","id":"` + it.id + `","content":[],"summary":[]}`
		if it.typ == "function_call" {
			added = `{"type":"function_call","id":"` + it.id + `","call_id":"` + it.callID + `","name":"` + it.name + `","arguments":"","status":"in_progress"}`
		}
		emit("response.output_item.added", `"output_index":`+strconv.Itoa(i)+`,"item":`+added)
		if it.typ == "function_call" && (it.mode == sendAll || it.mode == sendDeltas) {
			for _, p := range genPieces(g, it.args) {
				emit("response.function_call_arguments.delta", at+`,"delta":`+jsonStr(p))
			}
		}
		if it.typ == "function_call" && (it.mode == sendAll || it.mode == sendDones) {
			emit("response.function_call_arguments.done", at+`,"name":"`+it.name+`","arguments":`+jsonStr(it.args))
		}
		if it.typ == "web_search_call" {
			emit("response.web_search_call.searching", at)
		}
		idx := map[bool]int{}
		for _, p := range it.parts {
			pat := at + `,"content_index":` + strconv.Itoa(idx[p.summary])
			partEv, deltaEv, doneEv, textKey := "response.content_part", "response.output_text", "text", "text"
			switch p.typ {
			case "summary_text":
				pat = at + `,"summary_index":` + strconv.Itoa(idx[p.summary])
				partEv, deltaEv = "response.reasoning_summary_part", "response.reasoning_summary_text"
			case "reasoning_text":
				deltaEv = "response.reasoning_text"
			case "refusal":
				deltaEv, doneEv, textKey = "response.refusal", "refusal", "refusal"
			}
			idx[p.summary]++
			empty, whole := `{"type":"`+p.typ+`","`+textKey+`":""}`, `{"type":"`+p.typ+`","`+textKey+`":`+jsonStr(p.text)+`}`
			if it.mode == sendAll || it.mode == sendDones {
				emit(partEv+".added", pat+`,"part":`+empty)
			}
			if it.mode == sendAll || it.mode == sendDeltas {
				for _, s := range genPieces(g, p.text) {
					emit(deltaEv+".delta", pat+`,"delta":`+jsonStr(s))
				}
			}
			if it.mode == sendAll || it.mode == sendDones {
				emit(deltaEv+".done", pat+`,"`+doneEv+`":`+jsonStr(p.text))
				emit(partEv+".done", pat+`,"part":`+whole)
			}
		}
		if it.mode != sendDeltas {
			emit("response.output_item.done", `"output_index":`+strconv.Itoa(i)+`,"item":`+it.json())
		}
	}
	var out []string
	for _, it := range items {
		out = append(out, it.json())
	}
	status, details := "completed", ""
	gs.finish = "stop"
	if len(gs.calls) > 0 {
		gs.finish = "tool_calls"
	}
	switch g.N(6) {
	case 4:
		status, details, gs.finish = "incomplete", `,"incomplete_details":{"reason":"max_output_tokens"}`, "length"
	case 5:
		status, details, gs.finish = "incomplete", `,"incomplete_details":{"reason":"content_filter"}`, "content_filter"
	}
	output := strings.Join(out, ",")
	if finalFrom >= len(items) && g.N(4) == 3 {
		output = "" // some servers repeat nothing: what the stream said stands
	}
	gs.final = `{"id":"resp_g","object":"response","created_at":7,"status":"` + status + `","model":"gm"` + details +
		`,"output":[` + output + `],"usage":{"input_tokens":3,"output_tokens":5,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":8}}`
	gs.end = "done"
	switch g.N(8) {
	case 5:
		gs.end = "error"
		emit("response.failed", `"response":{"id":"resp_g","object":"response","status":"failed","error":{"code":"server_error","message":"x"},"output":[]}`)
	case 6:
		gs.end = "error"
		emit("error", `"code":"server_error","message":"x","param":null`)
	case 7:
		gs.end = "cut"
		ev = ev[:g.N(len(ev)+1)]
	default:
		emit(map[string]string{"completed": "response.completed", "incomplete": "response.incomplete"}[status], `"response":`+gs.final)
	}
	// An event nobody can read faithfully, somewhere before the end.
	if gs.end != "cut" && g.N(6) == 5 {
		bad := []string{
			"data: {not json\n\n",
			"event: response.output_text.delta\ndata: {\"type\":\"response.refusal.delta\",\"output_index\":0,\"delta\":\"x\"}\n\n",
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":99,\"content_index\":0,\"delta\":\"x\"}\n\n",
			"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":98,\"item\":{\"type\":\"computer_call\",\"id\":\"c\"}}\n\n",
		}[g.N(4)]
		at := g.N(len(ev)) // before the last event, the end
		ev = append(ev[:at], append([]string{bad}, ev[at:]...)...)
		gs.unreadable = true
	}
	if gs.end != "done" {
		gs.final = ""
	}
	gs.in = strings.Join(ev, "")
	return gs
}

// FuzzToChatStreamFaithful: whichever way a Responses stream sends its
// text (deltas, done events, items' done events, the final response),
// ToChatStream says all of it, in order: a readable stream that ends
// gives the whole answer, the same as ToChatResponse gives of its final
// response; an error or a cut gives a part of it, never anything else;
// an unreadable event ends in a *chat.UnreadableError.
func FuzzToChatStreamFaithful(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add(seed)
	}
	f.Add([]byte("\x05\x00\x01\x02\x00\x01\x03\x02\x01\x00\x01\x02\x03\x04\x05\x06\x07\x08"))
	f.Add([]byte("\x02\x01\x01\x03\x03\x03\x01\x02\x04\x04\x00\x02\x00\x01\x00\x05\x05"))
	f.Fuzz(func(t *testing.T, data []byte) {
		gs := genResponses(data)
		if err := checkToChat(t, gs); err != nil {
			t.Fatalf("%v\ninput:\n%s", err, gs.in)
		}
	})
}

// checkToChat is FuzzToChatStreamFaithful's property.
func checkToChat(t *testing.T, gs genStream) error {
	o := readChat(t, ToChatStream(sse.NewReader(strings.NewReader(gs.in), 0), chat.Options{IncludeUsage: true}))
	var m chat.Message
	if len(o.c.Choices) > 0 {
		m = o.c.Choices[0].Message
	}
	got := [3]string{deref(m.Content), deref(m.Refusal), deref(m.ReasoningContent)}
	want := [3]string{gs.text, gs.refusal, gs.reasoning}
	if gs.unreadable {
		if _, ok := errors.AsType[*chat.UnreadableError](o.err); !ok || o.done {
			return fmt.Errorf("an unreadable stream ended %v (done %v)", o.err, o.done)
		}
	} else if o.err != io.EOF {
		return fmt.Errorf("a readable stream ended %v", o.err)
	}
	if gs.unreadable || gs.end != "done" {
		if o.done || gs.end == "error" != (o.errorData != "") && !gs.unreadable {
			return fmt.Errorf("end %s: done %v, error chunk %q", gs.end, o.done, o.errorData)
		}
		for i := range got {
			if !strings.HasPrefix(want[i], got[i]) {
				return fmt.Errorf("said %q, which does not begin %q", got[i], want[i])
			}
		}
		return nil
	}
	if !o.done || got != want {
		return fmt.Errorf("done %v; content, refusal, reasoning %q, want %q", o.done, got, want)
	}
	if len(m.ToolCalls) != len(gs.calls) {
		return fmt.Errorf("%d calls, want %d", len(m.ToolCalls), len(gs.calls))
	}
	for i, c := range gs.calls {
		if g := m.ToolCalls[i]; g.ID != c.ID || g.Function.Name != c.Name || g.Function.Arguments != c.Args {
			return fmt.Errorf("call %d: %+v, want %+v", i, g, c)
		}
	}
	if f := o.c.Choices[0].FinishReason; f == nil || *f != gs.finish {
		return fmt.Errorf("finish_reason %v, want %s", f, gs.finish)
	}
	var u struct {
		Completion int `json:"completion_tokens"`
		Details    struct {
			Reasoning int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	}
	if json.Unmarshal(o.c.Usage, &u) != nil || u.Completion != 5 || u.Details.Reasoning != 2 {
		return fmt.Errorf("usage %s", o.c.Usage)
	}
	if !strings.Contains(gs.final, `"output":[]`) {
		whole, err := ToChatResponse([]byte(gs.final), chat.Options{})
		if err != nil {
			return fmt.Errorf("the final response: %v", err)
		}
		var a chat.Assembler
		a.AddCompletion(whole)
		if w := a.Completion(0, false); !reflect.DeepEqual(w, o.c) {
			return fmt.Errorf("the final response whole\n%+v\nis not the stream assembled\n%+v", w, o.c)
		}
	}
	return nil
}

// TestCheckToChatCatches: the property fails on a loss.
func TestCheckToChatCatches(t *testing.T) {
	checked := 0
	for i := range 64 {
		gs := genResponses([]byte{byte(i), byte(i * 7), byte(i * 13), byte(i * 29), 1, 2, 3, 4, 5, 6, 7, 8, 9})
		if err := checkToChat(t, gs); err != nil {
			t.Fatalf("%v\ninput:\n%s", err, gs.in)
		}
		if gs.end != "done" || gs.unreadable {
			continue
		}
		checked++
		lost := gs
		lost.reasoning += "lost"
		if err := checkToChat(t, lost); err == nil {
			t.Errorf("reasoning that never came passed:\n%s", gs.in)
		}
		lost = gs
		lost.calls = append(lost.calls, chattest.Call{ID: "x", Name: "x"})
		if err := checkToChat(t, lost); err == nil {
			t.Errorf("a call that never came passed:\n%s", gs.in)
		}
	}
	if checked == 0 {
		t.Fatal("no stream ended")
	}
}

// FuzzToChat: any bytes, as a stream or a whole answer, never panic,
// and what comes out is Chat.
func FuzzToChat(f *testing.F) {
	f.Add([]byte(openAIStream))
	f.Add([]byte(finalResponse(openAIStream)))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = readChat(t, ToChatStream(sse.NewReader(strings.NewReader(string(b)), 1<<16), chat.Options{IncludeUsage: true}))
		if out, err := ToChatResponse(b, chat.Options{}); err == nil && !json.Valid(out) {
			t.Fatalf("not JSON: %s", out)
		}
	})
}
