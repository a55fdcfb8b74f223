package anthropic

import (
	"io"
	"testing"
)

// A whole Messages stream as Anthropic sends it: thinking with a
// signature, text, a tool call, usage with cache counts.
var wholeMessages = msgEv("message_start", `{"type":"message_start","message":{"id":"msg_01XFD","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":10,"cache_read_input_tokens":2048,"output_tokens":2}}}`) +
	msgEv("ping", `{"type": "ping"}`) +
	blockStart("0", `{"type":"thinking","thinking":"","signature":""}`) +
	blockDelta("0", `{"type":"thinking_delta","thinking":"The user wants "}`) +
	blockDelta("0", `{"type":"thinking_delta","thinking":"the weather."}`) +
	blockDelta("0", `{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA"}`) +
	msgEv("content_block_stop", `{"type":"content_block_stop","index":0}`) +
	blockStart("1", `{"type":"text","text":""}`) +
	blockDelta("1", `{"type":"text_delta","text":"Let me check"}`) +
	blockDelta("1", `{"type":"text_delta","text":" Paris."}`) +
	msgEv("content_block_stop", `{"type":"content_block_stop","index":1}`) +
	blockStart("2", `{"type":"tool_use","id":"toolu_01T1x","name":"get_weather","input":{}}`) +
	blockDelta("2", `{"type":"input_json_delta","partial_json":""}`) +
	blockDelta("2", `{"type":"input_json_delta","partial_json":"{\"location\":"}`) +
	blockDelta("2", `{"type":"input_json_delta","partial_json":" \"Paris\"}"}`) +
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
	got, err := drain(t, ChatStream(newReusingSource(wholeMessages), ChatStreamOptions{Model: "sonnet", Created: 1767225600, IncludeUsage: true}))
	if err != io.EOF {
		t.Fatalf("err %v, want io.EOF", err)
	}
	w := make([]out, len(want))
	for i, s := range want {
		w[i] = out{"", s}
	}
	sameOuts(t, got, w)
}
