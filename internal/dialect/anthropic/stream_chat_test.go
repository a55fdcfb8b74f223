package anthropic

import (
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

const (
	tStart = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-t","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`
	tHead  = `{"id":"msg_1","object":"chat.completion.chunk","created":1700000000,"model":"claude-t","choices":[`
)

// ck is the chunk ToChatStream makes for a delta (the inside of its braces).
func ck(delta string) string {
	return tHead + `{"index":0,"delta":{` + delta + `},"logprobs":null,"finish_reason":null}]}`
}

func ckFinish(reason string) string {
	return tHead + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"` + reason + `"}]}`
}

var ckRole = ck(`"role":"assistant","content":""`)

func msgBlockDelta(index, delta string) string {
	return msgEv("content_block_delta", `{"type":"content_block_delta","index":`+index+`,"delta":`+delta+`}`)
}

func msgBlockStart(index, block string) string {
	return msgEv("content_block_start", `{"type":"content_block_start","index":`+index+`,"content_block":`+block+`}`)
}

func TestChatStreamEvents(t *testing.T) {
	stop := msgEv("message_stop", `{"type":"message_stop"}`)
	cases := []struct {
		name    string
		in      string // after message_start
		opt     chat.Options
		want    []string
		wantErr error
	}{
		{name: "ping", in: msgEv("ping", `{"type": "ping"}`)},
		{name: "empty text block start", in: msgBlockStart("0", `{"type":"text","text":""}`)},
		{name: "text block start with text", in: msgBlockStart("0", `{"type":"text","text":"Hi"}`),
			want: []string{ckRole, ck(`"content":"Hi"`)}},
		{name: "text_delta, escaped", in: msgBlockStart("0", `{"type":"text","text":""}`) + msgBlockDelta("0", `{"type":"text_delta","text":"say \"x\"\n\u00e9<"}`),
			want: []string{ckRole, ck(`"content":"say \"x\"\né<"`)}},
		{name: "empty text_delta", in: msgBlockStart("0", `{"type":"text","text":""}`) + msgBlockDelta("0", `{"type":"text_delta","text":""}`)},
		{name: "thinking", in: msgBlockStart("0", `{"type":"thinking","thinking":"","signature":""}`) +
			msgBlockDelta("0", `{"type":"thinking_delta","thinking":"hmm"}`),
			want: []string{ckRole, ck(`"reasoning_content":"hmm"`)}},
		{name: "signature_delta", in: msgBlockStart("0", `{"type":"thinking","thinking":"","signature":""}`) + msgBlockDelta("0", `{"type":"signature_delta","signature":"EqQBCgIYAh"}`)},
		{name: "redacted_thinking", in: msgBlockStart("0", `{"type":"redacted_thinking","data":"EmwKAhgB"}`)},
		{name: "content_block_stop", in: msgEv("content_block_stop", `{"type":"content_block_stop","index":0}`)},
		{name: "tool_use", in: msgBlockStart("1", `{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}`) +
			msgBlockDelta("1", `{"type":"input_json_delta","partial_json":""}`) +
			msgBlockDelta("1", `{"type":"input_json_delta","partial_json":"{\"city\": "}`) +
			msgBlockDelta("1", `{"type":"input_json_delta","partial_json":"\"Paris\"}"}`),
			want: []string{ckRole,
				ck(`"tool_calls":[{"index":0,"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":""}}]`),
				ck(`"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]`),
				ck(`"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]`)}},
		{name: "second tool gets index 1", in: msgBlockStart("0", `{"type":"tool_use","id":"a","name":"f","input":{}}`) +
			msgBlockStart("2", `{"type":"tool_use","id":"b","name":"g","input":{}}`) +
			msgBlockDelta("0", `{"type":"input_json_delta","partial_json":"{}"}`) +
			msgBlockDelta("2", `{"type":"input_json_delta","partial_json":"[]"}`),
			want: []string{ckRole,
				ck(`"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":""}}]`),
				ck(`"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"g","arguments":""}}]`),
				ck(`"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]`),
				ck(`"tool_calls":[{"index":1,"function":{"arguments":"[]"}}]`)}},
		{name: "message_delta", in: msgEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}`),
			want: []string{ckRole, ckFinish("tool_calls")}},
		{name: "max_tokens", in: msgEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens"}}`) + stop,
			want: []string{ckRole, ckFinish("length"), "[DONE]"}, wantErr: io.EOF},
		{name: "message_stop alone", in: stop,
			want: []string{ckRole, ckFinish("stop"), "[DONE]"}, wantErr: io.EOF},
		{name: "nothing read after message_stop", in: stop + msgBlockDelta("0", `{"type":"text_delta","text":"late"}`),
			want: []string{ckRole, ckFinish("stop"), "[DONE]"}, wantErr: io.EOF},
		{name: "usage chunk", opt: chat.Options{IncludeUsage: true},
			in: msgEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}`) + stop,
			want: []string{ckRole, ckFinish("stop"),
				tHead + `],"usage":{"prompt_tokens":25,"completion_tokens":7,"total_tokens":32,"prompt_tokens_details":{"cached_tokens":0}}}`,
				"[DONE]"}, wantErr: io.EOF},
		{name: "usage overlay with cache", opt: chat.Options{IncludeUsage: true},
			in: msgEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":3,"cache_read_input_tokens":100,"cache_creation_input_tokens":20,"output_tokens":7}}`) + stop,
			want: []string{ckRole, ckFinish("stop"),
				tHead + `],"usage":{"prompt_tokens":123,"completion_tokens":7,"total_tokens":130,"prompt_tokens_details":{"cached_tokens":100},"cache_creation_input_tokens":20}}`,
				"[DONE]"}, wantErr: io.EOF},
		{name: "model and created from options", opt: chat.Options{Model: "alias", Created: 5},
			in:   msgBlockStart("0", `{"type":"text","text":""}`) + msgBlockDelta("0", `{"type":"text_delta","text":"x"}`),
			want: []string{strings.Replace(strings.Replace(ckRole, "claude-t", "alias", 1), "1700000000", "5", 1), strings.Replace(strings.Replace(ck(`"content":"x"`), "claude-t", "alias", 1), "1700000000", "5", 1)}},
		{name: "error event", in: msgEv("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`) + stop,
			want:    []string{`{"error":{"message":"Overloaded","type":"server_error","param":null,"code":"overloaded_error"}}`},
			wantErr: io.EOF},
		{name: "error after content", in: msgBlockStart("0", `{"type":"text","text":""}`) + msgBlockDelta("0", `{"type":"text_delta","text":"a"}`) +
			msgEv("error", `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`),
			want:    []string{ckRole, ck(`"content":"a"`), `{"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":"rate_limit_error"}}`},
			wantErr: io.EOF},
		{name: "error type in data only", in: "data: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"bad\"}}\n\n",
			want:    []string{`{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`},
			wantErr: io.EOF},
		{name: "error event with junk data", in: "event: error\ndata: oops\n\n",
			want:    []string{`{"error":{"message":"upstream stream error: api_error","type":"server_error","param":null,"code":"api_error"}}`},
			wantErr: io.EOF},
		{name: "comment and data-less block", in: ": keep-alive\n\nevent: ping\n\n"},
		{name: "unknown type", in: msgEv("future_event", `{"type":"future_event","x":1}`)},
		{name: "unterminated message_stop", in: "event: message_stop\ndata: {\"type\":\"message_stop\"}",
			want: []string{ckRole, ckFinish("stop"), "[DONE]"}, wantErr: io.EOF},
		{name: "unterminated text", in: "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.opt.Created == 0 {
				c.opt.Created = 1700000000
			}
			got, err := drainStream(t, ToChatStream(newReusingSource(msgEv("message_start", tStart)+c.in), c.opt))
			want := make([]streamOut, len(c.want))
			for i, w := range c.want {
				want[i] = streamOut{"", w}
			}
			sameOuts(t, got, want)
			if c.wantErr == nil {
				c.wantErr = io.EOF // src's own
			}
			if err != c.wantErr {
				t.Fatalf("err %v, want %v", err, c.wantErr)
			}
		})
	}
}

// TestChatStreamNothingBeforeContent: the preamble alone yields nothing,
// and a stream cut there (or after content) gets no [DONE].
func TestChatStreamNothingBeforeContent(t *testing.T) {
	cut := errors.New("cut")
	pre := msgEv("message_start", tStart) + msgEv("ping", `{"type":"ping"}`) +
		msgBlockStart("0", `{"type":"thinking","thinking":"","signature":""}`)
	src := newReusingSource(pre)
	src.err = cut
	got, err := drainStream(t, ToChatStream(src, chat.Options{}))
	if len(got) != 0 || err != cut {
		t.Fatalf("preamble gave %v, %v; want nothing, cut", got, err)
	}
	got, err = drainStream(t, ToChatStream(newReusingSource(pre+msgBlockDelta("0", `{"type":"thinking_delta","thinking":"a"}`)+
		msgEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"}}`)), chat.Options{}))
	if err != io.EOF || len(got) != 3 || got[2].data == "[DONE]" {
		t.Fatalf("truncated stream gave %v, %v; want role, thinking, finish, no [DONE]", got, err)
	}
}

// TestChatStreamTextIsPaceable: every text and reasoning chunk is one the
// pacer can split (pace.Classify's KindText), with the text intact.
func TestChatStreamTextIsPaceable(t *testing.T) {
	texts := []string{"plain", "with \"quotes\" and \\", "lines\n\ttabbed\r", "ünïcödé 😀", "\u2028<script>", "\x01ctl"}
	var in strings.Builder
	in.WriteString(msgEv("message_start", tStart))
	for i, s := range texts {
		typ, field, block := "text_delta", "text", `{"type":"text","text":""}`
		if i%2 == 1 {
			typ, field, block = "thinking_delta", "thinking", `{"type":"thinking","thinking":""}`
		}
		d := `{"type":"` + typ + `","` + field + `":` + streamJSONStr(s) + `}`
		index := strconv.Itoa(i)
		in.WriteString(msgBlockStart(index, block) + msgBlockDelta(index, d) + blockStop(index))
	}
	got, _ := drainStream(t, ToChatStream(newReusingSource(in.String()), chat.Options{}))
	if len(got) != len(texts)+1 {
		t.Fatalf("%d events, want %d", len(got), len(texts)+1)
	}
	for i, s := range texts {
		ev := sse.NewEvent("", []byte(got[i+1].data))
		c, _ := pace.Classify(&ev, nil)
		wantChan := pace.ChanAnswer
		if i%2 == 1 {
			wantChan = pace.ChanReasoning
		}
		if c.Kind != pace.KindText || c.Channel != wantChan || string(c.Text) != s {
			t.Errorf("chunk %s: kind %d channel %d text %q; want text %q", got[i+1].data, c.Kind, c.Channel, c.Text, s)
		}
	}
}
