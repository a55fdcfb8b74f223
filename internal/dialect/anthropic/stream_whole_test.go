package anthropic

import (
	"io"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// A whole Messages stream as Anthropic sends it: thinking with a
// signature, text, a tool call, usage with cache counts.
var wholeMessages = msgEv("message_start", `{"type":"message_start","message":{"id":"msg_01XFD","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":10,"cache_read_input_tokens":2048,"output_tokens":2}}}`) +
	msgEv("ping", `{"type": "ping"}`) +
	msgBlockStart("0", `{"type":"thinking","thinking":"","signature":""}`) +
	msgBlockDelta("0", `{"type":"thinking_delta","thinking":"The user wants "}`) +
	msgBlockDelta("0", `{"type":"thinking_delta","thinking":"the weather."}`) +
	msgBlockDelta("0", `{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA"}`) +
	msgEv("content_block_stop", `{"type":"content_block_stop","index":0}`) +
	msgBlockStart("1", `{"type":"text","text":""}`) +
	msgBlockDelta("1", `{"type":"text_delta","text":"Let me check"}`) +
	msgBlockDelta("1", `{"type":"text_delta","text":" Paris."}`) +
	msgEv("content_block_stop", `{"type":"content_block_stop","index":1}`) +
	msgBlockStart("2", `{"type":"tool_use","id":"toolu_01T1x","name":"get_weather","input":{}}`) +
	msgBlockDelta("2", `{"type":"input_json_delta","partial_json":""}`) +
	msgBlockDelta("2", `{"type":"input_json_delta","partial_json":"{\"location\":"}`) +
	msgBlockDelta("2", `{"type":"input_json_delta","partial_json":" \"Paris\"}"}`) +
	msgEv("content_block_stop", `{"type":"content_block_stop","index":2}`) +
	msgEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}`) +
	msgEv("message_stop", `{"type":"message_stop"}`)

func TestChatStreamWhole(t *testing.T) {
	const head = `{"id":"msg_01XFD","object":"chat.completion.chunk","created":1767225600,"model":"sonnet","choices":[`
	const tail = `},"logprobs":null,"finish_reason":null}]}`
	want := []string{
		head + `{"index":0,"delta":{"role":"assistant","content":""` + tail,
		head + `{"index":0,"delta":{"reasoning_content":"The user wants "` + tail,
		head + `{"index":0,"delta":{"reasoning_content":"the weather."` + tail,
		head + `{"index":0,"delta":{"content":"Let me check"` + tail,
		head + `{"index":0,"delta":{"content":" Paris."` + tail,
		head + `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"toolu_01T1x","type":"function","function":{"name":"get_weather","arguments":""}}]` + tail,
		head + `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"location\":"}}]` + tail,
		head + `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":" \"Paris\"}"}}]` + tail,
		head + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}`,
		head + `],"usage":{"prompt_tokens":2530,"completion_tokens":89,"total_tokens":2619,"prompt_tokens_details":{"cached_tokens":2048},"cache_creation_input_tokens":10}}`,
		`[DONE]`,
	}
	got, err := drainStream(t, ToChatStream(newReusingSource(wholeMessages), chat.Options{Model: "sonnet", Created: 1767225600, IncludeUsage: true}))
	if err != io.EOF {
		t.Fatalf("err %v, want io.EOF", err)
	}
	w := make([]streamOut, len(want))
	for i, s := range want {
		w[i] = streamOut{"", s}
	}
	sameOuts(t, got, w)
}

// A whole Chat stream as DeepSeek-like providers send it: role chunk,
// reasoning, content, a tool call in fragments, finish, usage, [DONE].
var wholeChat = cc(`"role":"assistant","content":null,"reasoning_content":""`) +
	cc(`"reasoning_content":"Weather "`) + cc(`"reasoning_content":"needed."`) +
	cc(`"content":"Checking"`) + cc(`"content":" Paris."`) +
	cc(`"tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"get_weather","arguments":""}}]`) +
	cc(`"tool_calls":[{"index":0,"function":{"arguments":"{\"location\":"}}]`) +
	cc(`"tool_calls":[{"index":0,"function":{"arguments":" \"Paris\"}"}}]`) +
	ccFinish("tool_calls") +
	chatEv(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[],"usage":{"prompt_tokens":2520,"completion_tokens":89,"total_tokens":2609,"prompt_tokens_details":{"cached_tokens":2048}}}`) +
	": keep-alive\n\n" + ccDone

func TestMessagesStreamWhole(t *testing.T) {
	want := []streamOut{
		mStart,
		mBlockStart("0", mThinkingBlock),
		mDelta("0", `{"type":"thinking_delta","thinking":"Weather "}`),
		mDelta("0", `{"type":"thinking_delta","thinking":"needed."}`),
		mBlockStop("0"),
		mBlockStart("1", mTextBlock),
		mDelta("1", `{"type":"text_delta","text":"Checking"}`),
		mDelta("1", `{"type":"text_delta","text":" Paris."}`),
		mBlockStop("1"),
		mBlockStart("2", `{"type":"tool_use","id":"call_9","name":"get_weather","input":{}}`),
		mDelta("2", `{"type":"input_json_delta","partial_json":"{\"location\":"}`),
		mDelta("2", `{"type":"input_json_delta","partial_json":" \"Paris\"}"}`),
		mBlockStop("2"),
		mMsgDelta("tool_use", `"output_tokens":89,"input_tokens":472,"cache_read_input_tokens":2048`),
		mStop,
	}
	got, err := drainStream(t, FromChatStream(newReusingSource(wholeChat), chat.Options{Model: "claude-alias", InputTokens: 12}))
	if err != io.EOF {
		t.Fatalf("err %v, want io.EOF", err)
	}
	sameOuts(t, got, want)
}

// TestTruncatedGetsNoTerminator: every prefix of a whole stream, cut at a
// block boundary before its terminator, translates to a stream without
// the other side's terminator.
func TestTruncatedGetsNoTerminator(t *testing.T) {
	blocks := strings.SplitAfter(wholeMessages, "\n\n")
	for i := range blocks[:len(blocks)-1] {
		got, err := drainStream(t, ToChatStream(newReusingSource(strings.Join(blocks[:i], "")), chat.Options{IncludeUsage: true}))
		if err != io.EOF || len(got) > 0 && got[len(got)-1].data == "[DONE]" {
			t.Fatalf("ToChatStream of %d of %d blocks ended with %v, %v", i, len(blocks), got, err)
		}
	}
	blocks = strings.SplitAfter(wholeChat, "\n\n")
	for i := range blocks[:len(blocks)-1] {
		got, err := drainStream(t, FromChatStream(newReusingSource(strings.Join(blocks[:i], "")), chat.Options{}))
		for _, o := range got {
			if o.typ == "message_stop" || o.typ == "message_delta" {
				t.Fatalf("FromChatStream of %d of %d blocks has %s", i, len(blocks), o.typ)
			}
		}
		if err != io.EOF {
			t.Fatalf("FromChatStream of %d blocks: err %v", i, err)
		}
	}
}
