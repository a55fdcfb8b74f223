package pace

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// Events of an OpenAI Responses stream (a reasoning model with a
// reasoning summary, a message, then a function call), shortened.
const (
	rxCreated     = `{"type":"response.created","sequence_number":0,"response":{"id":"resp_68af","object":"response","status":"in_progress","output":[],"usage":null}}`
	rxProgress    = `{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_68af","object":"response","status":"in_progress","output":[],"usage":null}}`
	rxRsItem      = `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}`
	rxSumPart     = `{"type":"response.reasoning_summary_part.added","sequence_number":3,"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}`
	rxSummary     = `{"type":"response.reasoning_summary_text.delta","sequence_number":4,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"**Multiplying** 27 by 453, step by step.","obfuscation":"xY"}`
	rxSumDone     = `{"type":"response.reasoning_summary_text.done","sequence_number":5,"item_id":"rs_1","output_index":0,"summary_index":0,"text":"**Multiplying** 27 by 453, step by step."}`
	rxReasonDelta = `{"type":"response.reasoning_text.delta","sequence_number":6,"item_id":"rs_1","output_index":0,"content_index":0,"delta":"27*453 = 27*400 + 27*53"}`
	rxMsgItem     = `{"type":"response.output_item.added","sequence_number":7,"output_index":1,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}`
	rxText        = `{"type":"response.output_text.delta","sequence_number":8,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"27 \u00d7 453 = 12,231 \u2014 \"checked\" 🎉","logprobs":[],"obfuscation":"Qa"}`
	rxTextDone    = `{"type":"response.output_text.done","sequence_number":9,"item_id":"msg_1","output_index":1,"content_index":0,"text":"27 × 453 = 12,231 — \"checked\" 🎉","logprobs":[]}`
	rxArgs        = `{"type":"response.function_call_arguments.delta","sequence_number":10,"item_id":"fc_1","output_index":2,"delta":"{\"city\": \"Par"}`
	rxCompleted   = `{"type":"response.completed","sequence_number":11,"response":{"id":"resp_68af","object":"response","status":"completed","usage":{"input_tokens":36,"input_tokens_details":{"cached_tokens":12},"output_tokens":87,"output_tokens_details":{"reasoning_tokens":64},"total_tokens":123}}}`
	rxIncomplet   = `{"type":"response.incomplete","sequence_number":11,"response":{"id":"resp_68af","status":"incomplete","usage":{"input_tokens":36,"output_tokens":16}}}`
	rxFailed      = `{"type":"response.failed","sequence_number":11,"response":{"id":"resp_68af","status":"failed","error":{"code":"server_error","message":"boom"}}}`
	rxError       = `{"type":"error","sequence_number":4,"code":"rate_limit_exceeded","message":"slow down","param":null}`
)

// or is a Responses event as the API sends it: event line, data line.
func rx(data string) string { return am(data) }

const rxTextWant = "27 × 453 = 12,231 — \"checked\" 🎉"

var classifyResponsesCases = []struct {
	name   string
	raw    string
	kind   Kind
	ch     Channel
	text   string
	answer int
	reason int
	typ    rspType
	seq    int
}{
	{"comment", ": keep-alive\n\n", KindComment, 0, "", 0, 0, 0, -1},
	{"error event", rx(rxError), KindError, 0, "", 0, 0, rspError, 4},
	{"error event line only", "event: error\n\n", KindError, 0, "", 0, 0, 0, -1},
	{"error type without event line", "data: " + rxError + "\n\n", KindError, 0, "", 0, 0, rspError, 4},
	{"failed", rx(rxFailed), KindError, 0, "", 0, 0, rspFailed, 11},
	{"completed", rx(rxCompleted), KindDone, 0, "", 0, 0, rspCompleted, 11},
	{"completed unterminated", "event: response.completed\ndata: " + rxCompleted, KindDone, 0, "", 0, 0, rspCompleted, 11},
	{"incomplete", rx(rxIncomplet), KindDone, 0, "", 0, 0, rspIncomplete, 11},
	{"created", rx(rxCreated), KindOther, 0, "", 0, 0, rspLifecycle, 0},
	{"in progress", rx(rxProgress), KindOther, 0, "", 0, 0, rspLifecycle, 1},
	{"item added", rx(rxRsItem), KindOther, 0, "", 0, 0, rspItem, 2},
	{"summary part added", rx(rxSumPart), KindOther, 0, "", 0, 0, rspReasoningDone, 3},
	{"summary delta", rx(rxSummary), KindText, ChanReasoning, "**Multiplying** 27 by 453, step by step.", 0, 40, rspSummaryDelta, 4},
	{"summary done", rx(rxSumDone), KindOther, 0, "", 0, 0, rspReasoningDone, 5},
	{"reasoning delta", rx(rxReasonDelta), KindText, ChanReasoning, "27*453 = 27*400 + 27*53", 0, 23, rspReasoningDelta, 6},
	{"text delta", rx(rxText), KindText, ChanAnswer, rxTextWant, 31, 0, rspAnswerDelta, 8},
	{"text done", rx(rxTextDone), KindOther, 0, "", 0, 0, rspUnknown, 9},
	{"function call arguments", rx(rxArgs), KindOther, 0, "", 0, 0, rspUnknown, 10},
	{"crlf", "event: response.output_text.delta\r\ndata: " + rxText + "\r\n\r\n", KindText, ChanAnswer, rxTextWant, 31, 0, rspAnswerDelta, 8},
	{"no space after colons", "event:response.output_text.delta\ndata:" + rxText + "\n\n", KindText, ChanAnswer, rxTextWant, 31, 0, rspAnswerDelta, 8},
	{"no sequence number", rx(`{"type":"response.output_text.delta","delta":"Hi"}`), KindText, ChanAnswer, "Hi", 2, 0, rspAnswerDelta, -1},
	{"sequence number last", rx(`{"delta":"Hi","type":"response.output_text.delta","sequence_number":12345}`), KindText, ChanAnswer, "Hi", 2, 0, rspAnswerDelta, 12345},
	{"escaped type", "event: response.output_text.delta\ndata: " + `{"type":"response.output_text.\u0064elta","sequence_number":3,"delta":"Hi"}` + "\n\n", KindText, ChanAnswer, "Hi", 2, 0, rspAnswerDelta, 3},

	// Bad shapes: passed whole. The runes are still counted.
	{"no event line", "data: " + rxText + "\n\n", KindOther, 0, "", 31, 0, rspAnswerDelta, 8},
	{"other event name", "event: response.reasoning_text.delta\ndata: " + rxText + "\n\n", KindOther, 0, "", 31, 0, rspAnswerDelta, 8},
	{"id line", "event: response.output_text.delta\nid: 7\ndata: " + rxText + "\n\n", KindOther, 0, "", 31, 0, rspAnswerDelta, 8},
	{"two data lines", "event: response.output_text.delta\ndata: " + rxText + "\ndata: \n\n", KindOther, 0, "", 31, 0, rspAnswerDelta, 8},
	{"empty delta", rx(`{"type":"response.output_text.delta","sequence_number":3,"delta":""}`), KindOther, 0, "", 0, 0, rspAnswerDelta, 3},
	{"delta not a string", rx(`{"type":"response.output_text.delta","sequence_number":3,"delta":7}`), KindOther, 0, "", 0, 0, rspAnswerDelta, 3},
	{"two deltas", rx(`{"type":"response.output_text.delta","sequence_number":3,"delta":"a","delta":"b"}`), KindOther, 0, "", 0, 0, rspAnswerDelta, 3},
	{"ambiguous delta key", rx(`{"type":"response.output_text.delta","sequence_number":3,"delta":"a","Delta":"b"}`), KindOther, 0, "", 0, 0, rspUnknown, 3},
	{"two types", rx(`{"type":"response.output_text.delta","type":"response.output_text.delta","delta":"a"}`), KindOther, 0, "", 0, 0, rspUnknown, -1},
	{"ambiguous type key", rx(`{"type":"response.output_text.delta","TYPE":"x","delta":"a"}`), KindOther, 0, "", 0, 0, rspUnknown, -1},
	{"negative sequence number", rx(`{"type":"response.output_text.delta","sequence_number":-1,"delta":"a"}`), KindOther, 0, "", 1, 0, rspAnswerDelta, -1},
	{"fractional sequence number", rx(`{"type":"response.output_text.delta","sequence_number":1.5,"delta":"a"}`), KindOther, 0, "", 1, 0, rspAnswerDelta, -1},
	{"two sequence numbers", rx(`{"type":"response.output_text.delta","sequence_number":1,"sequence_number":2,"delta":"a"}`), KindOther, 0, "", 1, 0, rspAnswerDelta, -1},
	{"lone surrogate", rx(`{"type":"response.output_text.delta","sequence_number":1,"delta":"a\ud800"}`), KindOther, 0, "", 2, 0, rspAnswerDelta, 1},
	{"not json", "event: response.output_text.delta\ndata: {\"type\":\n\n", KindOther, 0, "", 0, 0, 0, -1},
	{"done marker", "data: [DONE]\n\n", KindOther, 0, "", 0, 0, 0, -1},
	{"messages text", am(amText), KindOther, 0, "", 0, 0, rspUnknown, -1},
}

func TestClassifyResponses(t *testing.T) {
	for _, tc := range classifyResponsesCases {
		ev := oneEvent(t, tc.raw)
		c, _ := ClassifyResponses(&ev, nil)
		if c.Kind != tc.kind {
			t.Errorf("%s: kind %s, want %s", tc.name, kindName(c.Kind), kindName(tc.kind))
			continue
		}
		if c.Channel != tc.ch || string(c.Text) != tc.text {
			t.Errorf("%s: channel %d text %q, want %d %q", tc.name, c.Channel, c.Text, tc.ch, tc.text)
		}
		if c.Kind == KindText && c.Field != FieldDelta {
			t.Errorf("%s: field %q", tc.name, c.Field)
		}
		if c.AnswerRunes != tc.answer || c.ReasoningRunes != tc.reason {
			t.Errorf("%s: runes %d/%d, want %d/%d", tc.name, c.AnswerRunes, c.ReasoningRunes, tc.answer, tc.reason)
		}
		if c.rsp.typ != tc.typ || c.rsp.seq != tc.seq {
			t.Errorf("%s: rsp %+v, want type %d seq %d", tc.name, c.rsp, tc.typ, tc.seq)
		}
		checkClassifyResponses(t, &ev, &c)
	}
	// The Responses classifier is the one ClassifyFormat picks.
	ev := oneEvent(t, rx(rxText))
	if c, _ := ClassifyFormat(FormatResponses, &ev, nil); c.Kind != KindText {
		t.Errorf("ClassifyFormat(FormatResponses): %s", kindName(c.Kind))
	}
	if c, _ := ClassifyFormat(FormatChat, &ev, nil); c.Kind != KindOther {
		t.Errorf("ClassifyFormat(FormatChat) on a Responses delta: %s", kindName(c.Kind))
	}
}

// ClassifyResponses appends to scratch and allocates nothing when it has room.
func TestClassifyResponsesNoAlloc(t *testing.T) {
	evs := readEvents(t, rx(rxCreated)+rx(rxSummary)+rx(rxReasonDelta)+rx(rxText)+rx(rxArgs)+rx(rxCompleted))
	scratch := make([]byte, 0, 4096)
	n := testing.AllocsPerRun(100, func() {
		for i := range evs {
			_, scratch = ClassifyResponses(&evs[i], scratch[:0])
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per run", n)
	}
}

var rspDeltaTypes = map[string]Channel{
	"response.output_text.delta":            ChanAnswer,
	"response.reasoning_text.delta":         ChanReasoning,
	"response.reasoning_summary_text.delta": ChanReasoning,
}

// checkClassifyResponses checks a classification against encoding/json.
func checkClassifyResponses(t *testing.T, ev *sse.Event, c *Chunk) {
	t.Helper()
	var v struct {
		Type  string `json:"type"`
		Delta any    `json:"delta"`
	}
	jsonOK := ev.HasData && json.Unmarshal(ev.Data, &v) == nil
	switch c.Kind {
	case KindComment:
		if !ev.IsComment() {
			t.Fatalf("comment for %q", ev.Raw)
		}
	case KindError:
		if ev.Type != "error" && (!jsonOK || v.Type != "error" && v.Type != "response.failed") {
			t.Fatalf("error for %q", ev.Raw)
		}
	case KindDone:
		if !jsonOK || v.Type != "response.completed" && v.Type != "response.incomplete" {
			t.Fatalf("done for %q", ev.Raw)
		}
	case KindPing:
		t.Fatalf("ping in a Responses stream: %q", ev.Raw)
	case KindText:
		ch, ok := rspDeltaTypes[v.Type]
		if !jsonOK || !ok || ch != c.Channel || ev.Type != v.Type || ev.HasID || ev.Retry != -1 || ev.Unterminated {
			t.Fatalf("text for %q", ev.Raw)
		}
		lit := ev.Data[len(c.Prefix) : len(ev.Data)-len(c.Suffix)]
		if !bytes.Equal(append(append(append([]byte{}, c.Prefix...), lit...), c.Suffix...), ev.Data) {
			t.Fatalf("prefix %q + literal + suffix %q is not the data %q", c.Prefix, c.Suffix, ev.Data)
		}
		if !utf8.Valid(c.Text) || v.Delta != string(c.Text) {
			t.Fatalf("text %q, delta %q", c.Text, v.Delta)
		}
		runes := utf8.RuneCount(c.Text)
		if c.Channel == ChanAnswer && (c.AnswerRunes != runes || c.ReasoningRunes != 0) ||
			c.Channel == ChanReasoning && (c.ReasoningRunes != runes || c.AnswerRunes != 0) {
			t.Fatalf("runes %d/%d for %q", c.AnswerRunes, c.ReasoningRunes, c.Text)
		}
		re := AppendString(append([]byte{}, c.Prefix...), c.Text)
		re = append(re, c.Suffix...)
		var a, b any
		if json.Unmarshal(re, &a) != nil || json.Unmarshal(ev.Data, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("rebuilt %q differs from %q", re, ev.Data)
		}
	}
	if c.Kind != KindText && (c.Text != nil || c.Prefix != nil || c.Suffix != nil) {
		t.Fatalf("%s carries text fields", kindName(c.Kind))
	}
	if c.rsp.seq >= 0 && (c.rsp.ss < 0 || c.rsp.se > len(ev.Data) || plainIndex(ev.Data, c.rsp.ss, c.rsp.se) != c.rsp.seq) {
		t.Fatalf("sequence number %d at %d:%d of %q", c.rsp.seq, c.rsp.ss, c.rsp.se, ev.Data)
	}
}

func FuzzClassifyResponses(f *testing.F) {
	for _, tc := range classifyResponsesCases {
		f.Add([]byte(tc.raw))
	}
	f.Add([]byte(rx(rxCreated) + rx(rxRsItem) + rx(rxSummary) + rx(rxReasonDelta) + rx(rxText) + "\r\n" + rx(rxArgs) + rx(rxCompleted)))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r := sse.NewReader(bytes.NewReader(raw), 1<<16)
		var scratch []byte
		for {
			ev, err := r.Next()
			if err != nil {
				return
			}
			var c Chunk
			c, scratch = ClassifyResponses(&ev, scratch[:0])
			checkClassifyResponses(t, &ev, &c)
		}
	})
}
