package pace

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// Events of a real Anthropic Messages stream (claude-sonnet-4-5 with
// extended thinking), shortened.
const (
	amStart     = `{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":2048,"output_tokens":2}}}`
	amPing      = `{"type": "ping"}`
	amThinkOpen = `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`
	amThink     = `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me solve this step by step:\n\n1. First break down 27 * 453"}}`
	amSig       = `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds8NdhcT"}}`
	amStop0     = `{"type":"content_block_stop","index":0}`
	amTextOpen  = `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`
	amText      = `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"27 * 453 = 12,231 \u2014 \"checked\" 🎉"}}`
	amJSON      = `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"San Fra"}}`
	amMsgDelta  = `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":215}}`
	amMsgStop   = `{"type":"message_stop"}`
	amError     = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
)

// am is an Anthropic event as the API sends it: event line, data line.
func am(data string) string {
	var v struct{ Type string }
	_ = json.Unmarshal([]byte(data), &v)
	return "event: " + v.Type + "\ndata: " + data + "\n\n"
}

var classifyMessagesCases = []struct {
	name    string
	raw     string
	kind    Kind
	ch      Channel
	field   string
	text    string
	answer  int
	reason  int
	typ     msgType
	index   int
	thinkBk bool
}{
	{"comment", ": keep-alive\n\n", KindComment, 0, "", "", 0, 0, 0, -1, false},
	{"error event", am(amError), KindError, 0, "", "", 0, 0, msgError, -1, false},
	{"error event line only", "event: error\n\n", KindError, 0, "", "", 0, 0, 0, -1, false},
	{"error event bad data", "event: error\ndata: oops\n\n", KindError, 0, "", "", 0, 0, 0, -1, false},
	{"error type without event line", "data: " + amError + "\n\n", KindError, 0, "", "", 0, 0, msgError, -1, false},
	{"message_stop", am(amMsgStop), KindDone, 0, "", "", 0, 0, msgMessageStop, -1, false},
	{"message_stop unterminated", "event: message_stop\ndata: " + amMsgStop, KindDone, 0, "", "", 0, 0, msgMessageStop, -1, false},
	{"ping", am(amPing), KindPing, 0, "", "", 0, 0, msgPing, -1, false},
	{"message_start", am(amStart), KindOther, 0, "", "", 0, 0, msgMessageStart, -1, false},
	{"thinking start", am(amThinkOpen), KindOther, 0, "", "", 0, 0, msgBlockStart, 0, true},
	{"redacted thinking start", am(`{"type":"content_block_start","index":3,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"}}`), KindOther, 0, "", "", 0, 0, msgBlockStart, 3, true},
	{"text start", am(amTextOpen), KindOther, 0, "", "", 0, 0, msgBlockStart, 1, false},
	{"thinking delta", am(amThink), KindText, ChanReasoning, FieldThinking, "Let me solve this step by step:\n\n1. First break down 27 * 453", 0, 61, msgBlockDelta, 0, false},
	{"text delta", am(amText), KindText, ChanAnswer, FieldText, "27 * 453 = 12,231 — \"checked\" 🎉", 31, 0, msgBlockDelta, 1, false},
	{"signature delta", am(amSig), KindOther, 0, "", "", 0, 0, msgBlockDelta, 0, false},
	{"input_json delta", am(amJSON), KindOther, 0, "", "", 0, 0, msgBlockDelta, 2, false},
	{"block stop", am(amStop0), KindOther, 0, "", "", 0, 0, msgBlockStop, 0, false},
	{"message_delta", am(amMsgDelta), KindOther, 0, "", "", 0, 0, msgMessageDelta, -1, false},
	{"unknown type", am(`{"type":"citations_delta_new","index":1}`), KindOther, 0, "", "", 0, 0, msgUnknown, 1, false},
	{"crlf", "event: content_block_delta\r\ndata: " + amText + "\r\n\r\n", KindText, ChanAnswer, FieldText, "27 * 453 = 12,231 — \"checked\" 🎉", 31, 0, msgBlockDelta, 1, false},
	{"no space after colons", "event:content_block_delta\ndata:" + amText + "\n\n", KindText, ChanAnswer, FieldText, "27 * 453 = 12,231 — \"checked\" 🎉", 31, 0, msgBlockDelta, 1, false},
	{"index after delta", am(`{"delta":{"text":"Hi","type":"text_delta"},"type":"content_block_delta","index":12}`), KindText, ChanAnswer, FieldText, "Hi", 2, 0, msgBlockDelta, 12, false},
	{"escaped type", am(`{"type":"content_block_\u0064elta","index":1,"delta":{"type":"text_delta","text":"Hi"}}`), KindText, ChanAnswer, FieldText, "Hi", 2, 0, msgBlockDelta, 1, false},

	// Bad shapes: passed whole. The runes are still counted.
	{"no event line", "data: " + amText + "\n\n", KindOther, 0, "", "", 31, 0, msgBlockDelta, 1, false},
	{"other event name", "event: message\ndata: " + amText + "\n\n", KindOther, 0, "", "", 31, 0, msgBlockDelta, 1, false},
	{"data before event", "data: " + amText + "\nevent: content_block_delta\n\n", KindOther, 0, "", "", 31, 0, msgBlockDelta, 1, false},
	{"id line", "event: content_block_delta\nid: 7\ndata: " + amText + "\n\n", KindOther, 0, "", "", 31, 0, msgBlockDelta, 1, false},
	{"retry line", "event: content_block_delta\ndata: " + amText + "\nretry: 10\n\n", KindOther, 0, "", "", 31, 0, msgBlockDelta, 1, false},
	{"comment line", "event: content_block_delta\n: hi\ndata: " + amText + "\n\n", KindOther, 0, "", "", 31, 0, msgBlockDelta, 1, false},
	{"two event lines", "event: x\nevent: content_block_delta\ndata: " + amText + "\n\n", KindOther, 0, "", "", 31, 0, msgBlockDelta, 1, false},
	{"two data lines", "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\ndata: \"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n", KindOther, 0, "", "", 2, 0, msgBlockDelta, 1, false},
	{"unterminated", "event: content_block_delta\ndata: " + amText, KindOther, 0, "", "", 31, 0, msgBlockDelta, 1, false},
	{"empty text", am(`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":""}}`), KindOther, 0, "", "", 0, 0, msgBlockDelta, 1, false},
	{"text not a string", am(`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":7}}`), KindOther, 0, "", "", 0, 0, msgBlockDelta, 1, false},
	{"text field of a thinking delta", am(`{"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","text":"Hi"}}`), KindOther, 0, "", "", 0, 0, msgBlockDelta, 1, false},
	{"both fields", am(`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi","thinking":"no"}}`), KindOther, 0, "", "", 2, 0, msgBlockDelta, 1, false},
	{"other null member", am(`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi","citations":null}}`), KindText, ChanAnswer, FieldText, "Hi", 2, 0, msgBlockDelta, 1, false},
	{"other delta member", am(`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi","citations":[]}}`), KindOther, 0, "", "", 2, 0, msgBlockDelta, 1, false},
	{"duplicate delta type", am(`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","type":"text_delta","text":"Hi"}}`), KindOther, 0, "", "", 0, 0, msgBlockDelta, 1, false},
	{"duplicate text", am(`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi","text":"Ho"}}`), KindOther, 0, "", "", 0, 0, msgBlockDelta, 1, false},
	{"ambiguous delta key", am(`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","Text":"Hi"}}`), KindOther, 0, "", "", 0, 0, msgBlockDelta, 1, false},
	{"duplicate delta", am(`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi"},"delta":{}}`), KindOther, 0, "", "", 0, 0, msgBlockDelta, 1, false},
	{"duplicate index", am(`{"type":"content_block_delta","index":1,"index":2,"delta":{"type":"text_delta","text":"Hi"}}`), KindOther, 0, "", "", 2, 0, msgBlockDelta, -1, false},
	{"string index", am(`{"type":"content_block_delta","index":"1","delta":{"type":"text_delta","text":"Hi"}}`), KindOther, 0, "", "", 2, 0, msgBlockDelta, -1, false},
	{"negative index", am(`{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"Hi"}}`), KindOther, 0, "", "", 2, 0, msgBlockDelta, -1, false},
	{"fractional index", am(`{"type":"content_block_delta","index":1.0,"delta":{"type":"text_delta","text":"Hi"}}`), KindOther, 0, "", "", 2, 0, msgBlockDelta, -1, false},
	{"no index", am(`{"type":"content_block_delta","delta":{"type":"text_delta","text":"Hi"}}`), KindOther, 0, "", "", 2, 0, msgBlockDelta, -1, false},
	{"duplicate type", am(`{"type":"content_block_delta","type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi"}}`), KindOther, 0, "", "", 0, 0, msgUnknown, 1, false},
	{"ambiguous type key", am(`{"Type":"message_stop","type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi"}}`), KindOther, 0, "", "", 0, 0, msgUnknown, 1, false},
	{"lone surrogate", am(`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"a\ud800"}}`), KindOther, 0, "", "", 2, 0, msgBlockDelta, 1, false},
	{"invalid utf-8", "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\xff\"}}\n\n", KindOther, 0, "", "", 2, 0, msgBlockDelta, 1, false},
	{"not json", "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\n\n", KindOther, 0, "", "", 0, 0, 0, -1, false},
	{"not an object", "event: content_block_delta\ndata: [1]\n\n", KindOther, 0, "", "", 0, 0, 0, -1, false},
	{"done marker", "data: [DONE]\n\n", KindOther, 0, "", "", 0, 0, 0, -1, false},
	{"event only", "event: ping\n\n", KindOther, 0, "", "", 0, 0, 0, -1, false},
}

func TestClassifyMessages(t *testing.T) {
	for _, tc := range classifyMessagesCases {
		ev := oneEvent(t, tc.raw)
		c, _ := ClassifyMessages(&ev, nil)
		if c.Kind != tc.kind {
			t.Errorf("%s: kind %s, want %s", tc.name, kindName(c.Kind), kindName(tc.kind))
			continue
		}
		if c.Channel != tc.ch || c.Field != tc.field || string(c.Text) != tc.text {
			t.Errorf("%s: channel %d field %q text %q, want %d %q %q", tc.name, c.Channel, c.Field, c.Text, tc.ch, tc.field, tc.text)
		}
		if c.AnswerRunes != tc.answer || c.ReasoningRunes != tc.reason {
			t.Errorf("%s: runes %d/%d, want %d/%d", tc.name, c.AnswerRunes, c.ReasoningRunes, tc.answer, tc.reason)
		}
		if c.msg.typ != tc.typ || c.msg.index != tc.index || c.msg.thinking != tc.thinkBk {
			t.Errorf("%s: msg %+v, want type %d index %d thinking %v", tc.name, c.msg, tc.typ, tc.index, tc.thinkBk)
		}
		if c.msg.index >= 0 && string(ev.Data[c.msg.is:c.msg.ie]) != itoa(c.msg.index) {
			t.Errorf("%s: index span %q", tc.name, ev.Data[c.msg.is:c.msg.ie])
		}
		checkClassifyMessages(t, &ev, &c)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// ClassifyFormat picks the classifier: the same Chat chunk is text for
// Chat and nothing for Messages, and the reverse.
func TestClassifyFormat(t *testing.T) {
	chat := oneEvent(t, "data: "+openAIText+"\n\n")
	msg := oneEvent(t, am(amText))
	for _, tc := range []struct {
		f    Format
		ev   *sse.Event
		want Kind
	}{
		{FormatChat, &chat, KindText},
		{FormatMessages, &chat, KindOther},
		{FormatChat, &msg, KindOther},
		{FormatMessages, &msg, KindText},
	} {
		if c, _ := ClassifyFormat(tc.f, tc.ev, nil); c.Kind != tc.want {
			t.Errorf("%v on %q: %s, want %s", tc.f, tc.ev.Data, kindName(c.Kind), kindName(tc.want))
		}
	}
}

// ClassifyMessages appends to scratch and allocates nothing when it has room.
func TestClassifyMessagesNoAlloc(t *testing.T) {
	evs := readEvents(t, am(amStart)+am(amThink)+am(amText)+am(amSig)+am(amMsgDelta)+am(amMsgStop))
	scratch := make([]byte, 0, 4096)
	n := testing.AllocsPerRun(100, func() {
		for i := range evs {
			_, scratch = ClassifyMessages(&evs[i], scratch[:0])
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per run", n)
	}
}

// checkClassifyMessages checks a classification against encoding/json.
func checkClassifyMessages(t *testing.T, ev *sse.Event, c *Chunk) {
	t.Helper()
	var v struct {
		Type  string          `json:"type"`
		Index json.RawMessage `json:"index"`
		Delta map[string]any  `json:"delta"`
	}
	jsonOK := ev.HasData && json.Unmarshal(ev.Data, &v) == nil
	switch c.Kind {
	case KindComment:
		if !ev.IsComment() {
			t.Fatalf("comment for %q", ev.Raw)
		}
	case KindError:
		if ev.Type != "error" && (!jsonOK || v.Type != "error") {
			t.Fatalf("error for %q", ev.Raw)
		}
	case KindDone:
		if !jsonOK || v.Type != "message_stop" {
			t.Fatalf("done for %q", ev.Raw)
		}
	case KindPing:
		if !jsonOK || v.Type != "ping" {
			t.Fatalf("ping for %q", ev.Raw)
		}
	case KindText:
		if ev.Type != "content_block_delta" || ev.HasID || ev.Retry != -1 || ev.Unterminated {
			t.Fatalf("text for a block of the wrong shape %q", ev.Raw)
		}
		lit := ev.Data[len(c.Prefix) : len(ev.Data)-len(c.Suffix)]
		if !bytes.HasPrefix(ev.Data, c.Prefix) || !bytes.HasSuffix(ev.Data, c.Suffix) ||
			!bytes.Equal(append(append(append([]byte{}, c.Prefix...), lit...), c.Suffix...), ev.Data) {
			t.Fatalf("prefix %q + literal + suffix %q is not the data %q", c.Prefix, c.Suffix, ev.Data)
		}
		if !utf8.Valid(c.Text) {
			t.Fatalf("text %q is not valid UTF-8", c.Text)
		}
		var s string
		if err := json.Unmarshal(lit, &s); err != nil || s != string(c.Text) {
			t.Fatalf("literal %q decodes to %q (%v), text %q", lit, s, err, c.Text)
		}
		if !jsonOK || v.Type != "content_block_delta" {
			t.Fatalf("text for data %q", ev.Data)
		}
		wantType := map[Channel]string{ChanAnswer: "text_delta", ChanReasoning: "thinking_delta"}[c.Channel]
		if v.Delta["type"] != wantType || v.Delta[c.Field] != string(c.Text) {
			t.Fatalf("%s on channel %d in %q", c.Field, c.Channel, ev.Data)
		}
		runes := utf8.RuneCount(c.Text)
		if c.Channel == ChanAnswer && (c.AnswerRunes != runes || c.ReasoningRunes != 0) ||
			c.Channel == ChanReasoning && (c.ReasoningRunes != runes || c.AnswerRunes != 0) {
			t.Fatalf("runes %d/%d for %q", c.AnswerRunes, c.ReasoningRunes, c.Text)
		}
		// The text rewritten the pacer's way reads back the same.
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
	if c.msg.index >= 0 && (c.msg.is < 0 || c.msg.ie > len(ev.Data) || plainIndex(ev.Data, c.msg.is, c.msg.ie) != c.msg.index) {
		t.Fatalf("index %d at %d:%d of %q", c.msg.index, c.msg.is, c.msg.ie, ev.Data)
	}
}

func FuzzClassifyMessages(f *testing.F) {
	for _, tc := range classifyMessagesCases {
		f.Add([]byte(tc.raw))
	}
	f.Add([]byte(am(amStart) + am(amPing) + am(amThinkOpen) + am(amThink) + am(amSig) + am(amStop0) + am(amTextOpen) + am(amText) + "\r\n" + am(amMsgDelta) + am(amMsgStop)))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r := sse.NewReader(bytes.NewReader(raw), 1<<16)
		var scratch []byte
		for {
			ev, err := r.Next()
			if err != nil {
				return
			}
			var c Chunk
			c, scratch = ClassifyMessages(&ev, scratch[:0])
			checkClassifyMessages(t, &ev, &c)
		}
	})
}
