package responses

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

var (
	textItem   = []string{evItemAdded, evContentPartAdded}
	textClose  = []string{evTextDone, evContentPartDone, evItemDone}
	rsItem     = []string{evItemAdded, evSummaryPartAdded}
	rsClose    = []string{evSummaryDone, evSummaryPartDone, evItemDone}
	callClose  = []string{evArgsDone, evItemDone}
	streamHead = []string{evCreated, evInProgress}
)

func cat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestResponsesStreamOrder(t *testing.T) {
	role := delta(`{"role":"assistant","content":""}`, "")
	cases := []struct {
		name, in string
		want     []string
	}{
		{"text", role + delta(`{"content":"Hel"}`, "") + delta(`{"content":"lo"}`, "") + delta(`{}`, "stop") + usageChunk + doneChunk,
			cat(streamHead, textItem, []string{evTextDelta, evTextDelta}, textClose, []string{evCompleted})},
		{"reasoning then text", role + delta(`{"reasoning_content":"hm"}`, "") + delta(`{"reasoning":"m"}`, "") +
			delta(`{"content":"Hi"}`, "") + delta(`{}`, "stop") + doneChunk,
			cat(streamHead, rsItem, []string{evSummaryDelta, evSummaryDelta}, rsClose, textItem, []string{evTextDelta}, textClose, []string{evCompleted})},
		{"tool calls", role + delta(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}`, "") +
			delta(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}}]}`, "") +
			delta(`{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}`, "") +
			delta(`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}]}`, "") +
			delta(`{}`, "tool_calls") + doneChunk,
			cat(streamHead, []string{evItemAdded, evArgsDelta, evArgsDelta}, callClose, []string{evItemAdded, evArgsDelta}, callClose, []string{evCompleted})},
		{"length", role + delta(`{"content":"Hi"}`, "length") + doneChunk,
			cat(streamHead, textItem, []string{evTextDelta}, textClose, []string{evIncomplete})},
		{"nothing before content", role + ": keep-alive\n\n" + usageChunk, nil},
		// The finish_reason closes the items; only [DONE] ends the response.
		{"no [DONE]: no terminator", role + delta(`{"content":"Hi"}`, "stop"),
			cat(streamHead, textItem, []string{evTextDelta}, textClose)},
		{"cut [DONE] is the end", role + delta(`{"content":"Hi"}`, "stop") + "data: [DONE]",
			cat(streamHead, textItem, []string{evTextDelta}, textClose, []string{evCompleted})},
		{"cut chunk dropped", role + delta(`{"content":"Hi"}`, "") + `data: {"id":"x","choi`,
			cat(streamHead, textItem, []string{evTextDelta})},
		{"error after text", role + delta(`{"content":"Hi"}`, "") + chunk(`{"error":{"message":"overloaded","type":"server_error","code":"overloaded"}}`) + doneChunk,
			cat(streamHead, textItem, []string{evTextDelta, evError, evFailed})},
		{"error event first", "event: error\ndata: {\"error\":{\"message\":\"boom\"}}\n\n" + role,
			cat(streamHead, []string{evError, evFailed})},
		{"empty answer", role + delta(`{}`, "stop") + doneChunk, cat(streamHead, []string{evCompleted})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			evs, err := runStream(t, c.in, chat.Options{})
			wantEOF(t, err)
			checkEvents(t, evs)
			if got := types(evs); len(got)+len(c.want) > 0 && !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestResponsesStreamEventData(t *testing.T) {
	in := delta(`{"role":"assistant","content":""}`, "") + delta(`{"reasoning_content":"hm"}`, "") +
		delta(`{"content":"say \"x\"\n"}`, "") +
		delta(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}`, "") +
		delta(`{}`, "tool_calls") + usageChunk + doneChunk
	evs, err := runStream(t, in, chat.Options{})
	wantEOF(t, err)
	checkEvents(t, evs)
	want := []string{
		`{"type":"response.created","sequence_number":0,"response":` + inProgress + `}`,
		`{"type":"response.in_progress","sequence_number":1,"response":` + inProgress + `}`,
		`{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"type":"reasoning","id":"rs_abc","summary":[]}}`,
		`{"type":"response.reasoning_summary_part.added","sequence_number":3,"item_id":"rs_abc","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}`,
		`{"type":"response.reasoning_summary_text.delta","sequence_number":4,"item_id":"rs_abc","output_index":0,"summary_index":0,"delta":"hm"}`,
		`{"type":"response.reasoning_summary_text.done","sequence_number":5,"item_id":"rs_abc","output_index":0,"summary_index":0,"text":"hm"}`,
		`{"type":"response.reasoning_summary_part.done","sequence_number":6,"item_id":"rs_abc","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":"hm"}}`,
		`{"type":"response.output_item.done","sequence_number":7,"output_index":0,"item":{"type":"reasoning","id":"rs_abc","summary":[{"type":"summary_text","text":"hm"}]}}`,
		`{"type":"response.output_item.added","sequence_number":8,"output_index":1,"item":{"type":"message","id":"msg_abc","status":"in_progress","role":"assistant","content":[]}}`,
		`{"type":"response.content_part.added","sequence_number":9,"item_id":"msg_abc","output_index":1,"content_index":0,"part":{"type":"output_text","text":"","annotations":[],"logprobs":[]}}`,
		`{"type":"response.output_text.delta","sequence_number":10,"item_id":"msg_abc","output_index":1,"content_index":0,"delta":"say \"x\"\n","logprobs":[]}`,
		`{"type":"response.output_text.done","sequence_number":11,"item_id":"msg_abc","output_index":1,"content_index":0,"text":"say \"x\"\n","logprobs":[]}`,
		`{"type":"response.content_part.done","sequence_number":12,"item_id":"msg_abc","output_index":1,"content_index":0,"part":{"type":"output_text","text":"say \"x\"\n","annotations":[],"logprobs":[]}}`,
		`{"type":"response.output_item.done","sequence_number":13,"output_index":1,"item":{"type":"message","id":"msg_abc","status":"completed","role":"assistant","content":[{"type":"output_text","text":"say \"x\"\n","annotations":[],"logprobs":[]}]}}`,
		`{"type":"response.output_item.added","sequence_number":14,"output_index":2,"item":{"type":"function_call","id":"fc_abc_0","call_id":"call_1","name":"f","arguments":"","status":"in_progress"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":15,"item_id":"fc_abc_0","output_index":2,"delta":"{}"}`,
		`{"type":"response.function_call_arguments.done","sequence_number":16,"item_id":"fc_abc_0","output_index":2,"name":"f","arguments":"{}"}`,
		`{"type":"response.output_item.done","sequence_number":17,"output_index":2,"item":{"type":"function_call","id":"fc_abc_0","call_id":"call_1","name":"f","arguments":"{}","status":"completed"}}`,
		`{"type":"response.completed","sequence_number":18,"response":` + response("completed", "null",
			rsHmm[:len(rsHmm)-len(`hmm"}]}`)]+`hm"}]},`+
				`{"type":"message","id":"msg_abc","status":"completed","role":"assistant","content":[{"type":"output_text","text":"say \"x\"\n","annotations":[],"logprobs":[]}]},`+
				`{"type":"function_call","id":"fc_abc_0","call_id":"call_1","name":"f","arguments":"{}","status":"completed"}`, usageResp) + `}`,
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d: %q", len(evs), len(want), types(evs))
	}
	for i := range want {
		jsonEq(t, evs[i].Data, want[i])
	}
}

var inProgress = strings.Replace(response("in_progress", "null", "", ""), `"status":"in_progress"`, `"status":"in_progress"`, 1)

// The stream's final response is FromChatResponse's for the same answer.
func TestResponsesStreamEqualsWhole(t *testing.T) {
	in := delta(`{"role":"assistant","content":""}`, "") + delta(`{"reasoning_content":"h"}`, "") + delta(`{"reasoning_content":"mm"}`, "") +
		delta(`{"content":"Hel"}`, "") + delta(`{"content":"lo"}`, "") +
		delta(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\""}}]}`, "") +
		delta(`{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}`, "") +
		delta(`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}]}`, "") +
		delta(`{}`, "length") + usageChunk + doneChunk
	whole := completion(`{"role":"assistant","content":"Hello","reasoning_content":"hmm","tool_calls":[
		{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},
		{"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}]}`, "length", usageChat)
	req := []byte(`{"model":"m1","input":"x","instructions":"i","tools":[{"type":"function","name":"f"}]}`)
	evs, err := runStream(t, in, chat.Options{Created: 5, Request: req})
	wantEOF(t, err)
	checkEvents(t, evs)
	last := evs[len(evs)-1]
	if last.Type != evIncomplete {
		t.Fatalf("last event %s", last.Type)
	}
	var d struct{ Response json.RawMessage }
	if err := json.Unmarshal(last.Data, &d); err != nil {
		t.Fatal(err)
	}
	want, err := FromChatResponse([]byte(whole), chat.Options{Created: 5, Request: req})
	if err != nil {
		t.Fatal(err)
	}
	jsonEq(t, d.Response, string(want))
}

func TestResponsesStreamCallWithoutID(t *testing.T) {
	in := delta(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"f","arguments":"{}"}}]}`, "tool_calls") + doneChunk
	evs, err := runStream(t, in, chat.Options{})
	wantEOF(t, err)
	checkEvents(t, evs)
	var d struct {
		Item struct {
			CallID string `json:"call_id"`
		}
	}
	if err := json.Unmarshal(findEvent(evs, evItemAdded), &d); err != nil || d.Item.CallID != "call_abc_0" {
		t.Errorf("call_id %q (%v), want call_abc_0", d.Item.CallID, err)
	}
}

func TestResponsesStreamFailed(t *testing.T) {
	in := delta(`{"content":"Hi"}`, "") + chunk(`{"error":{"message":"overloaded","type":"server_error","code":"overloaded"}}`)
	evs, err := runStream(t, in, chat.Options{})
	wantEOF(t, err)
	checkEvents(t, evs)
	jsonEq(t, findEvent(evs, evError), `{"type":"error","sequence_number":5,"code":"overloaded","message":"overloaded","param":null,
		"error":{"message":"overloaded","type":"server_error","param":null,"code":"overloaded"}}`)
	var d struct {
		Response struct {
			Status string
			Error  struct{ Code, Message string }
		}
	}
	if err := json.Unmarshal(findEvent(evs, evFailed), &d); err != nil {
		t.Fatal(err)
	}
	if d.Response.Status != "failed" || d.Response.Error.Code != "overloaded" || d.Response.Error.Message != "overloaded" {
		t.Errorf("response.failed: %+v", d.Response)
	}
}

type hookSource struct {
	sse.Source
	hook func()
}

func (h *hookSource) BeforeRead(f func()) { h.hook = f }

func TestResponsesStreamForwardsBeforeRead(t *testing.T) {
	src := &hookSource{}
	br, ok := FromChatStream(src, chat.Options{}).(interface{ BeforeRead(func()) })
	if !ok {
		t.Fatal("no BeforeRead")
	}
	called := false
	br.BeforeRead(func() { called = true })
	if src.hook == nil {
		t.Fatal("hook not forwarded")
	}
	src.hook()
	if !called {
		t.Error("the forwarded hook is not the one given")
	}
}

// TestResponsesStreamAzureFirstChunk: Azure's first chunk names nothing
// (prompt_filter_results, "" for id and model); the response takes its id
// and model from the next, not resp_0 and "".
func TestResponsesStreamAzureFirstChunk(t *testing.T) {
	in := chunk(`{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0}]}`) +
		delta(`{"content":"Hi"}`, "stop") + doneChunk
	evs, err := runStream(t, in, chat.Options{})
	wantEOF(t, err)
	checkEvents(t, evs)
	var d struct {
		Response struct {
			ID    string `json:"id"`
			Model string `json:"model"`
		}
	}
	if err := json.Unmarshal(findEvent(evs, evCreated), &d); err != nil || d.Response.ID != "resp_abc" || d.Response.Model != "m1" {
		t.Errorf("response.created id %q model %q (%v), want the second chunk's", d.Response.ID, d.Response.Model, err)
	}
}
