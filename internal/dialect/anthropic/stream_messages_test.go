package anthropic

import (
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// cc is an upstream Chat chunk with the given delta (inside its braces).
func cc(delta string) string {
	return chatEv(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{` + delta + `},"logprobs":null,"finish_reason":null}]}`)
}

func ccFinish(reason string) string {
	return chatEv(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"` + reason + `"}]}`)
}

var (
	ccRole = cc(`"role":"assistant","content":""`)
	ccDone = "data: [DONE]\n\n"
	mStart = streamOut{"message_start", `{"type":"message_start","message":{"id":"msg_chatcmpl-1","type":"message","role":"assistant","model":"claude-alias","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":0}}}`}
	mStop  = streamOut{"message_stop", `{"type":"message_stop"}`}
)

func mBlockStart(i, block string) streamOut {
	return streamOut{"content_block_start", `{"type":"content_block_start","index":` + i + `,"content_block":` + block + `}`}
}

func mDelta(i, delta string) streamOut {
	return streamOut{"content_block_delta", `{"type":"content_block_delta","index":` + i + `,"delta":` + delta + `}`}
}

func mBlockStop(i string) streamOut {
	return streamOut{"content_block_stop", `{"type":"content_block_stop","index":` + i + `}`}
}

func mMsgDelta(stop, usage string) streamOut {
	return streamOut{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"` + stop + `","stop_sequence":null},"usage":{` + usage + `}}`}
}

func mErr(typ, msg string) streamOut {
	return streamOut{"error", `{"type":"error","error":{"type":"` + typ + `","message":"` + msg + `"}}`}
}

const (
	mTextBlock     = `{"type":"text","text":""}`
	mThinkingBlock = `{"type":"thinking","thinking":"","signature":""}`
)

func TestMessagesStreamEvents(t *testing.T) {
	cases := []struct {
		name    string
		in      string      // after the role chunk
		want    []streamOut // after message_start
		wantErr error       // io.EOF when not set
	}{
		{name: "role chunk only"},
		{name: "content", in: cc(`"content":"Hi \"you\"\n"`) + cc(`"content":"!"`),
			want: []streamOut{mBlockStart("0", mTextBlock), mDelta("0", `{"type":"text_delta","text":"Hi \"you\"\n"}`), mDelta("0", `{"type":"text_delta","text":"!"}`)}},
		{name: "empty and null content", in: cc(`"content":""`) + cc(`"content":null`)},
		{name: "reasoning_content then content", in: cc(`"reasoning_content":"hmm"`) + cc(`"content":"A"`),
			want: []streamOut{mBlockStart("0", mThinkingBlock), mDelta("0", `{"type":"thinking_delta","thinking":"hmm"}`), mBlockStop("0"),
				mBlockStart("1", mTextBlock), mDelta("1", `{"type":"text_delta","text":"A"}`)}},
		{name: "reasoning", in: cc(`"reasoning":"r"`),
			want: []streamOut{mBlockStart("0", mThinkingBlock), mDelta("0", `{"type":"thinking_delta","thinking":"r"}`)}},
		{name: "reasoning twice over", in: cc(`"reasoning_content":"r","reasoning":"r"`),
			want: []streamOut{mBlockStart("0", mThinkingBlock), mDelta("0", `{"type":"thinking_delta","thinking":"r"}`)}},
		{name: "reasoning and content in one chunk", in: cc(`"reasoning_content":"r","content":"c"`),
			want: []streamOut{mBlockStart("0", mThinkingBlock), mDelta("0", `{"type":"thinking_delta","thinking":"r"}`), mBlockStop("0"),
				mBlockStart("1", mTextBlock), mDelta("1", `{"type":"text_delta","text":"c"}`)}},
		{name: "tool call", in: cc(`"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]`) +
			cc(`"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]`) + cc(`"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]`),
			want: []streamOut{mBlockStart("0", `{"type":"tool_use","id":"call_1","name":"get_weather","input":{}}`),
				mDelta("0", `{"type":"input_json_delta","partial_json":"{\"city\":"}`), mDelta("0", `{"type":"input_json_delta","partial_json":"\"Paris\"}"}`)}},
		{name: "a tool call id made a valid tool_use id (Kimi)", in: cc(`"tool_calls":[{"index":0,"id":"functions.w:0","type":"function","function":{"name":"w","arguments":""}}]`),
			want: []streamOut{mBlockStart("0", `{"type":"tool_use","id":"functions_w_0","name":"w","input":{}}`)}},
		{name: "content then two tools, one chunk each", in: cc(`"content":"x"`) +
			cc(`"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]`) +
			cc(`"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"g","arguments":"[1]"}}]`),
			want: []streamOut{mBlockStart("0", mTextBlock), mDelta("0", `{"type":"text_delta","text":"x"}`), mBlockStop("0"),
				mBlockStart("1", `{"type":"tool_use","id":"a","name":"f","input":{}}`), mDelta("1", `{"type":"input_json_delta","partial_json":"{}"}`), mBlockStop("1"),
				mBlockStart("2", `{"type":"tool_use","id":"b","name":"g","input":{}}`), mDelta("2", `{"type":"input_json_delta","partial_json":"[1]"}`)}},
		{name: "a call's fragment after the next call began", in: cc(`"tool_calls":[{"index":0,"id":"a","function":{"name":"f"}}]`) +
			cc(`"tool_calls":[{"index":1,"id":"b","function":{"name":"g","arguments":"[1]"}}]`) + cc(`"tool_calls":[{"index":0,"function":{"arguments":"{\"late\""}}]`) +
			cc(`"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]`),
			// b waits (held) until a's arguments are whole, then streams.
			want: []streamOut{mBlockStart("0", `{"type":"tool_use","id":"a","name":"f","input":{}}`), mDelta("0", `{"type":"input_json_delta","partial_json":"{\"late\""}`),
				mDelta("0", `{"type":"input_json_delta","partial_json":":1}"}`), mBlockStop("0"),
				mBlockStart("1", `{"type":"tool_use","id":"b","name":"g","input":{}}`), mDelta("1", `{"type":"input_json_delta","partial_json":"[1]"}`)}},
		{name: "calls without index, told apart by id", in: cc(`"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]`) +
			cc(`"tool_calls":[{"id":"b","function":{"name":"g","arguments":"[]"}}]`),
			want: []streamOut{mBlockStart("0", `{"type":"tool_use","id":"a","name":"f","input":{}}`), mDelta("0", `{"type":"input_json_delta","partial_json":"{}"}`), mBlockStop("0"),
				mBlockStart("1", `{"type":"tool_use","id":"b","name":"g","input":{}}`), mDelta("1", `{"type":"input_json_delta","partial_json":"[]"}`)}},
		{name: "id repeated in every fragment", in: cc(`"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{"}}]`) +
			cc(`"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"}"}}]`),
			want: []streamOut{mBlockStart("0", `{"type":"tool_use","id":"a","name":"f","input":{}}`), mDelta("0", `{"type":"input_json_delta","partial_json":"{"}`),
				mDelta("0", `{"type":"input_json_delta","partial_json":"}"}`)}},
		{name: "tool call without id", in: cc(`"content":"x"`) + cc(`"tool_calls":[{"index":0,"function":{"name":"f"}}]`),
			want: []streamOut{mBlockStart("0", mTextBlock), mDelta("0", `{"type":"text_delta","text":"x"}`), mBlockStop("0"),
				mBlockStart("1", `{"type":"tool_use","id":"toolu_relay_1","name":"f","input":{}}`)}},
		{name: "finish and [DONE]", in: cc(`"content":"x"`) + ccFinish("length") + ccDone + cc(`"content":"late"`),
			want:    []streamOut{mBlockStart("0", mTextBlock), mDelta("0", `{"type":"text_delta","text":"x"}`), mBlockStop("0"), mMsgDelta("max_tokens", `"output_tokens":0`), mStop},
			wantErr: io.EOF},
		{name: "tool_calls finish", in: ccFinish("tool_calls") + ccDone,
			want: []streamOut{mMsgDelta("tool_use", `"output_tokens":0`), mStop}, wantErr: io.EOF},
		{name: "[DONE] without finish_reason", in: cc(`"content":"x"`) + ccDone,
			want:    []streamOut{mBlockStart("0", mTextBlock), mDelta("0", `{"type":"text_delta","text":"x"}`), mBlockStop("0"), mMsgDelta("end_turn", `"output_tokens":0`), mStop},
			wantErr: io.EOF},
		{name: "usage chunk with cache", in: ccFinish("stop") + chatEv(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150,"prompt_tokens_details":{"cached_tokens":100}}}`) + ccDone,
			want: []streamOut{mMsgDelta("end_turn", `"output_tokens":30,"input_tokens":20,"cache_read_input_tokens":100`), mStop}, wantErr: io.EOF},
		{name: "usage on the finish chunk", in: chatEv(`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3}}`) + ccDone,
			want: []streamOut{mMsgDelta("end_turn", `"output_tokens":3,"input_tokens":9`), mStop}, wantErr: io.EOF},
		{name: "null usage", in: chatEv(`{"id":"chatcmpl-1","choices":[],"usage":null}`) + ccDone,
			want: []streamOut{mMsgDelta("end_turn", `"output_tokens":0`), mStop}, wantErr: io.EOF},
		{name: "error chunk", in: cc(`"content":"x"`) + chatEv(`{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`) + ccDone,
			want: []streamOut{mBlockStart("0", mTextBlock), mDelta("0", `{"type":"text_delta","text":"x"}`), mErr("api_error", "boom")}, wantErr: io.EOF},
		{name: "error code kept from Anthropic", in: chatEv(`{"error":{"message":"Overloaded","type":"server_error","param":null,"code":"overloaded_error"}}`),
			want: []streamOut{mErr("overloaded_error", "Overloaded")}, wantErr: io.EOF},
		{name: "rate limit", in: chatEv(`{"error":{"message":"slow","type":"requests","code":"rate_limit_exceeded"}}`),
			want: []streamOut{mErr("rate_limit_error", "slow")}, wantErr: io.EOF},
		{name: "unknown error type", in: chatEv(`{"error":{"message":"?","type":"weird","code":42}}`),
			want: []streamOut{mErr("api_error", "?")}, wantErr: io.EOF},
		{name: "string error", in: chatEv(`{"error":"it broke"}`),
			want: []streamOut{mErr("api_error", "it broke")}, wantErr: io.EOF},
		{name: "vLLM object error", in: chatEv(`{"object":"error","message":"bad input","type":"BadRequestError","code":400}`),
			want: []streamOut{mErr("api_error", "bad input")}, wantErr: io.EOF},
		{name: "error event with [DONE]", in: "event: error\ndata: [DONE]\n\n",
			want: []streamOut{mErr("api_error", "upstream stream error")}, wantErr: io.EOF},
		{name: "error event with junk", in: "event: error\ndata: oops\n\n",
			want: []streamOut{mErr("api_error", "upstream stream error")}, wantErr: io.EOF},
		{name: "null error is no error", in: chatEv(`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"x"}}],"error":null}`),
			want: []streamOut{mBlockStart("0", mTextBlock), mDelta("0", `{"type":"text_delta","text":"x"}`)}},
		{name: "comments and data-less", in: ": OPENROUTER PROCESSING\n\nid: 3\n\n"},
		{name: "non-JSON", in: chatEv(`{"choices":[`) + cc(`"content":"x"`),
			wantErr: &chat.UnreadableError{Reason: "the chunk is not a JSON object"}},
		{name: "unterminated [DONE]", in: "data: [DONE]",
			want: []streamOut{mMsgDelta("end_turn", `"output_tokens":0`), mStop}, wantErr: io.EOF},
		{name: "unterminated content", in: `data: {"choices":[{"index":0,"delta":{"content":"x"}}]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := newReusingSource(ccRole + c.in)
			got, err := drainStream(t, FromChatStream(src, chat.Options{Model: "claude-alias", InputTokens: 12}))
			sameOuts(t, got, append([]streamOut{mStart}, c.want...))
			if c.wantErr == nil {
				c.wantErr = io.EOF
			}
			if err != c.wantErr && !reflect.DeepEqual(err, c.wantErr) {
				t.Fatalf("err %v, want %v", err, c.wantErr)
			}
		})
	}
}

// TestMessagesStreamIDs: message_start's id comes from the first chunk,
// keeps a msg_ prefix it already has, and is made up when there is none.
func TestMessagesStreamIDs(t *testing.T) {
	for in, want := range map[string]string{
		chatEv(`{"id":"abc","choices":[]}`):     `"id":"msg_abc"`,
		chatEv(`{"id":"msg_01X","choices":[]}`): `"id":"msg_01X"`,
		ccDone:                                  `"id":"msg_relay_`,
		chatEv(`{"choices":[]}`) + ccDone:       `"id":"msg_relay_`,
		// Azure's first chunk names nothing (prompt_filter_results, ""
		// for id and model): message_start waits for the next.
		chatEv(`{"choices":[],"id":"","model":"","prompt_filter_results":[]}`) +
			chatEv(`{"id":"chatcmpl-az","model":"gpt-5-nano","choices":[{"index":0,"delta":{"content":"hi"}}]}`) + ccDone: `"id":"msg_chatcmpl-az","type":"message","role":"assistant","model":"gpt-5-nano"`,
	} {
		got, _ := drainStream(t, FromChatStream(newReusingSource(in), chat.Options{}))
		if len(got) == 0 || got[0].typ != "message_start" || !strings.Contains(got[0].data, want) {
			t.Errorf("%q: got %v, want message_start with %s", in, got, want)
		}
	}
	got, _ := drainStream(t, FromChatStream(newReusingSource(chatEv(`{"id":"x","model":"gpt-up","choices":[]}`)), chat.Options{}))
	if len(got) == 0 || !strings.Contains(got[0].data, `"model":"gpt-up"`) {
		t.Errorf("no Model option: got %v, want the chunk's model", got)
	}
	a, _ := drainStream(t, FromChatStream(newReusingSource(ccDone), chat.Options{}))
	b, _ := drainStream(t, FromChatStream(newReusingSource(ccDone), chat.Options{}))
	if a[0] == b[0] {
		t.Errorf("two made-up ids are the same: %s", a[0].data)
	}
}

// TestMessagesStreamTextIsPaceable: the text and thinking deltas are ones
// the pacer can split (pace.ClassifyMessages' KindText), text intact.
func TestMessagesStreamTextIsPaceable(t *testing.T) {
	texts := []string{"plain", "with \"quotes\" and \\", "lines\n\ttabbed\r", "ünïcödé 😀", "\u2028<script>", "\x01ctl"}
	var in strings.Builder
	in.WriteString(ccRole)
	for i, s := range texts {
		field := "content"
		if i%2 == 1 {
			field = "reasoning_content"
		}
		d := streamJSONStr(s)
		in.WriteString(cc(`"` + field + `":` + d))
	}
	got, _ := drainStream(t, FromChatStream(newReusingSource(in.String()), chat.Options{}))
	n := 0
	for _, o := range got {
		if o.typ != "content_block_delta" {
			continue
		}
		ev := sse.NewEvent(o.typ, []byte(o.data))
		c, _ := pace.ClassifyMessages(&ev, nil)
		wantChan := pace.ChanAnswer
		if n%2 == 1 {
			wantChan = pace.ChanReasoning
		}
		if c.Kind != pace.KindText || c.Channel != wantChan || string(c.Text) != texts[n] {
			t.Errorf("delta %s: kind %d channel %d text %q; want text %q", o.data, c.Kind, c.Channel, c.Text, texts[n])
		}
		n++
	}
	if n != len(texts) {
		t.Fatalf("%d deltas, want %d", n, len(texts))
	}
}
