package anthropic

import (
	"errors"
	"io"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// Issue 25: ToChatStream carries every tool call with its arguments, maps
// pause_turn to an unfinished answer, and ends with *chat.UnreadableError
// at an event it cannot translate faithfully, never silently skipping it.

const (
	tStop     = `{"type":"message_stop"}`
	tToolUse  = `{"type":"tool_use","id":"toolu_1","name":"list_files","input":{}}`
	tToolHead = `"tool_calls":[{"index":0,"id":"toolu_1","type":"function","function":{"name":"list_files","arguments":""}}]`
)

func msgStop() string { return msgEv("message_stop", tStop) }

func msgDelta(stopReason string) string {
	return msgEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stopReason+`","stop_sequence":null},"usage":{"output_tokens":3}}`)
}

func blockStop(index string) string {
	return msgEv("content_block_stop", `{"type":"content_block_stop","index":`+index+`}`)
}

func argsChunk(call, args string) string {
	return ck(`"tool_calls":[{"index":` + call + `,"function":{"arguments":` + args + `}}]`)
}

// runChatStream translates message_start + in and returns the outputs and
// the error the stream ended with.
func runChatStream(t *testing.T, in string, opt chat.Options) ([]streamOut, error) {
	t.Helper()
	if opt.Created == 0 {
		opt.Created = 1700000000
	}
	return drainStream(t, ToChatStream(newReusingSource(msgEv("message_start", tStart)+in), opt))
}

func outs(data ...string) []streamOut {
	o := make([]streamOut, len(data))
	for i, d := range data {
		o[i] = streamOut{"", d}
	}
	return o
}

// TestChatStreamToolWithoutArguments: a tool_use block whose
// input_json_delta never comes (or comes empty) is a call with arguments
// "{}", as the non-stream path says, not "": clients that parse the
// arguments refuse "". Failed before the fix: the call ended with "".
func TestChatStreamToolWithoutArguments(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string
	}{
		{"no delta, block stop", msgBlockStart("0", tToolUse) + blockStop("0") + msgDelta("tool_use") + msgStop(),
			[]string{ckRole, ck(tToolHead), argsChunk("0", `"{}"`), ckFinish("tool_calls"), "[DONE]"}},
		{"only an empty delta", msgBlockStart("0", tToolUse) +
			msgBlockDelta("0", `{"type":"input_json_delta","partial_json":""}`) + blockStop("0") + msgDelta("tool_use") + msgStop(),
			[]string{ckRole, ck(tToolHead), argsChunk("0", `"{}"`), ckFinish("tool_calls"), "[DONE]"}},
		{"no block stop: closed by message_delta", msgBlockStart("0", tToolUse) + msgDelta("tool_use") + msgStop(),
			[]string{ckRole, ck(tToolHead), argsChunk("0", `"{}"`), ckFinish("tool_calls"), "[DONE]"}},
		{"no block stop, no message_delta", msgBlockStart("0", tToolUse) + msgStop(),
			[]string{ckRole, ck(tToolHead), argsChunk("0", `"{}"`), ckFinish("stop"), "[DONE]"}},
		{"input given whole in the start block", msgBlockStart("0", `{"type":"tool_use","id":"toolu_1","name":"list_files","input":{"dir": "/tmp"}}`) +
			blockStop("0") + msgDelta("tool_use") + msgStop(),
			[]string{ckRole, ck(tToolHead), argsChunk("0", `"{\"dir\":\"/tmp\"}"`), ckFinish("tool_calls"), "[DONE]"}},
		{"second of two calls without arguments", msgBlockStart("0", tToolUse) +
			msgBlockDelta("0", `{"type":"input_json_delta","partial_json":"{\"a\":1}"}`) + blockStop("0") +
			msgBlockStart("1", `{"type":"tool_use","id":"toolu_2","name":"now","input":{}}`) + blockStop("1") + msgDelta("tool_use") + msgStop(),
			[]string{ckRole, ck(tToolHead), argsChunk("0", `"{\"a\":1}"`),
				ck(`"tool_calls":[{"index":1,"id":"toolu_2","type":"function","function":{"name":"now","arguments":""}}]`),
				argsChunk("1", `"{}"`), ckFinish("tool_calls"), "[DONE]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := runChatStream(t, c.in, chat.Options{})
			sameOuts(t, got, outs(c.want...))
			if err != io.EOF {
				t.Fatalf("err %v, want io.EOF", err)
			}
		})
	}
}

// TestChatStreamPauseTurn: pause_turn (a long turn Anthropic paused, to be
// continued by sending it back) is not a finished answer: "length" for a
// Chat client, which reads it as cut short; chat.FinishPauseTurn when the
// stream goes on to a Responses client. Failed before the fix: "stop".
func TestChatStreamPauseTurn(t *testing.T) {
	in := msgBlockStart("0", `{"type":"text","text":""}`) + msgBlockDelta("0", `{"type":"text_delta","text":"Searching"}`) +
		blockStop("0") + msgDelta("pause_turn") + msgStop()
	for _, c := range []struct {
		opt  chat.Options
		want string
	}{{chat.Options{}, "length"}, {chat.Options{KeepPauseTurn: true}, chat.FinishPauseTurn}} {
		got, err := runChatStream(t, in, c.opt)
		sameOuts(t, got, outs(ckRole, ck(`"content":"Searching"`), ckFinish(c.want), "[DONE]"))
		if err != io.EOF {
			t.Fatalf("err %v", err)
		}
	}
}

// TestChatStreamUnreadable: an event ToChatStream cannot translate without
// losing or inventing something ends the stream with *chat.UnreadableError
// after the events made before it. Failed before the fix: each was
// skipped, and the stream ended with [DONE] as if complete.
func TestChatStreamUnreadable(t *testing.T) {
	text0 := msgBlockStart("0", `{"type":"text","text":""}`) + msgBlockDelta("0", `{"type":"text_delta","text":"a"}`)
	textOut := []string{ckRole, ck(`"content":"a"`)}
	end := blockStop("0") + msgDelta("end_turn") + msgStop()
	cases := []struct {
		name, in string
		want     []string
		event    string
	}{
		{"not JSON", text0 + msgEv("content_block_delta", `{"type":"content_block_delta",`) + end, textOut, "content_block_delta"},
		{"data-only garbage", text0 + "data: [DONE]\n\n" + end, textOut, ""},
		{"JSON but not an object", text0 + msgEv("content_block_delta", `["x"]`) + end, textOut, "content_block_delta"},
		{"no type", text0 + "data: {\"index\":0}\n\n" + end, textOut, ""},
		{"event and data disagree", text0 + msgEv("content_block_delta", `{"type":"ping"}`) + end, textOut, "content_block_delta"},
		{"text delta for a block never started", text0 + msgBlockDelta("1", `{"type":"text_delta","text":"b"}`) + end, textOut, "content_block_delta"},
		{"text delta before any start", msgBlockDelta("0", `{"type":"text_delta","text":"b"}`) + end, nil, "content_block_delta"},
		{"text delta after its block stopped", text0 + blockStop("0") + msgBlockDelta("0", `{"type":"text_delta","text":"b"}`) + end, textOut, "content_block_delta"},
		{"arguments for a block never started", msgBlockStart("0", tToolUse) + msgBlockDelta("1", `{"type":"input_json_delta","partial_json":"{}"}`) + end,
			[]string{ckRole, ck(tToolHead)}, "content_block_delta"},
		{"arguments for a text block", text0 + msgBlockDelta("0", `{"type":"input_json_delta","partial_json":"{}"}`) + end, textOut, "content_block_delta"},
		{"text for a tool block", msgBlockStart("0", tToolUse) + msgBlockDelta("0", `{"type":"text_delta","text":"b"}`) + end,
			[]string{ckRole, ck(tToolHead)}, "content_block_delta"},
		{"thinking for a text block", text0 + msgBlockDelta("0", `{"type":"thinking_delta","thinking":"b"}`) + end, textOut, "content_block_delta"},
		{"unknown delta type", text0 + msgBlockDelta("0", `{"type":"hologram_delta","hologram":"b"}`) + end, textOut, "content_block_delta"},
		{"unknown block type", text0 + blockStop("0") + msgBlockStart("1", `{"type":"hologram","hologram":"b"}`) + end, textOut, "content_block_start"},
		{"block started twice", text0 + msgBlockStart("0", `{"type":"text","text":""}`) + end, textOut, "content_block_start"},
		{"index not a number", text0 + msgEv("content_block_delta", `{"type":"content_block_delta","index":"0","delta":{"type":"text_delta","text":"b"}}`) + end, textOut, "content_block_delta"},
		{"index missing", text0 + msgEv("content_block_delta", `{"type":"content_block_delta","delta":{"type":"text_delta","text":"b"}}`) + end, textOut, "content_block_delta"},
		{"arguments not JSON at block stop", msgBlockStart("0", tToolUse) + msgBlockDelta("0", `{"type":"input_json_delta","partial_json":"{\"a\":"}`) + end,
			[]string{ckRole, ck(tToolHead), argsChunk("0", `"{\"a\":"`)}, "content_block_stop"},
		{"arguments cut at message_stop", msgBlockStart("0", tToolUse) + msgBlockDelta("0", `{"type":"input_json_delta","partial_json":"{\"a\":"}`) + msgStop(),
			[]string{ckRole, ck(tToolHead), argsChunk("0", `"{\"a\":"`)}, "message_stop"},
		{"arguments not an object", msgBlockStart("0", tToolUse) + msgBlockDelta("0", `{"type":"input_json_delta","partial_json":"[1]"}`) + end,
			[]string{ckRole, ck(tToolHead), argsChunk("0", `"[1]"`)}, "content_block_stop"},
		{"content after message_delta", text0 + blockStop("0") + msgDelta("end_turn") + msgBlockStart("1", `{"type":"text","text":"late"}`) + msgStop(),
			append(textOut, ckFinish("stop")), "content_block_start"},
		{"second message_start", text0 + msgEv("message_start", tStart) + end, textOut, "message_start"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := runChatStream(t, c.in, chat.Options{})
			sameOuts(t, got, outs(c.want...))
			ue, ok := errors.AsType[*chat.UnreadableError](err)
			if !ok {
				t.Fatalf("err %v, want a *chat.UnreadableError", err)
			}
			if ue.Event != c.event || ue.Reason == "" {
				t.Fatalf("UnreadableError %+v, want event %q and a reason", ue, c.event)
			}
		})
	}
}

// TestChatStreamReadableOddities: what Anthropic documents as ignorable,
// or what carries nothing a Chat client could get, is not unreadable.
func TestChatStreamReadableOddities(t *testing.T) {
	text0 := msgBlockStart("0", `{"type":"text","text":""}`) + msgBlockDelta("0", `{"type":"text_delta","text":"a"}`)
	cases := []struct {
		name, in string
		want     []string
	}{
		{"ping, comment, data-less block, unknown event type", msgEv("ping", `{"type":"ping"}`) + ": hi\n\nevent: ping\n\n" +
			msgEv("future_event", `{"type":"future_event","x":[1]}`) + text0 + blockStop("0"),
			[]string{ckRole, ck(`"content":"a"`)}},
		{"citations and signature deltas", text0 + msgBlockDelta("0", `{"type":"citations_delta","citation":{"type":"char_location","cited_text":"x"}}`) + blockStop("0") +
			msgBlockStart("1", `{"type":"thinking","thinking":"","signature":""}`) + msgBlockDelta("1", `{"type":"thinking_delta","thinking":"t"}`) +
			msgBlockDelta("1", `{"type":"signature_delta","signature":"Eq=="}`) + blockStop("1"),
			[]string{ckRole, ck(`"content":"a"`), ck(`"reasoning_content":"t"`)}},
		{"redacted thinking", msgBlockStart("0", `{"type":"redacted_thinking","data":"EmwK"}`) + blockStop("0") + msgBlockStart("1", `{"type":"text","text":"a"}`),
			[]string{ckRole, ck(`"content":"a"`)}},
		{"server tool use and its result", msgBlockStart("0", `{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}`) +
			msgBlockDelta("0", `{"type":"input_json_delta","partial_json":"{\"query\":\"x\"}"}`) + blockStop("0") +
			msgBlockStart("1", `{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]}`) + blockStop("1") + text0,
			[]string{ckRole, ck(`"content":"a"`)}},
		{"a stop for a block never started", text0 + blockStop("5"), []string{ckRole, ck(`"content":"a"`)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := runChatStream(t, c.in+msgDelta("end_turn")+msgStop(), chat.Options{})
			sameOuts(t, got, outs(append(c.want, ckFinish("stop"), "[DONE]")...))
			if err != io.EOF {
				t.Fatalf("err %v, want io.EOF", err)
			}
		})
	}
}
