package anthropic

import (
	"errors"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// FromChatResponse reads every part of the answer (Mistral's thinking and
// text parts), carries a refusal with the stop reason refusal even beside
// content, and refuses an answer it cannot translate whole: no choices, a
// choice other than the one asked for, a member of the wrong type.
func TestFromChatResponseFaithful(t *testing.T) {
	mistral := `{"id":"a4e2","created":1769088912,"model":"magistral-medium-2507","usage":{"prompt_tokens":10,"total_tokens":56,"completion_tokens":46},"object":"chat.completion",
		"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":[{"type":"thinking","thinking":[{"type":"text","text":"The user is asking for 2+2. This is basic arithmetic. 2+2=4."}]},{"type":"text","text":"2 + 2 = 4"}]}}]}`
	out, err := FromChatResponse([]byte(mistral), chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"id":"a4e2","type":"message","role":"assistant","model":"magistral-medium-2507","content":[{"type":"thinking","thinking":"The user is asking for 2+2. This is basic arithmetic. 2+2=4.","signature":""},{"type":"text","text":"2 + 2 = 4"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":46}}`)

	out, err = FromChatResponse([]byte(`{"id":"r","model":"m","choices":[{"index":0,"message":{"content":"Sure. ","refusal":"Actually, I can't."},"finish_reason":"stop"}]}`), chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"id":"r","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Sure. Actually, I can't."}],"stop_reason":"refusal","stop_sequence":null,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}`)

	out, err = FromChatResponse([]byte(`{"id":"n","model":"m","choices":[{"index":0,"message":{"content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"now","arguments":""}}]},"finish_reason":"tool_calls"}]}`), chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"id":"n","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"call_1","name":"now","input":{}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}`)

	for name, bad := range map[string]string{
		"no choices":         `{"id":"x","choices":[]}`,
		"null choices":       `{"id":"x","choices":null}`,
		"only choice 1":      `{"choices":[{"index":1,"message":{"content":"b"},"finish_reason":"stop"}]}`,
		"two choices":        `{"choices":[{"index":0,"message":{"content":"a"},"finish_reason":"stop"},{"index":1,"message":{"content":"b"},"finish_reason":"stop"}]}`,
		"content a number":   `{"choices":[{"index":0,"message":{"content":5},"finish_reason":"stop"}]}`,
		"an image part":      `{"choices":[{"index":0,"message":{"content":[{"type":"image_url","image_url":{"url":"u"}}]},"finish_reason":"stop"}]}`,
		"arguments a number": `{"choices":[{"index":0,"message":{"tool_calls":[{"id":"c","function":{"name":"f","arguments":7}}]},"finish_reason":"tool_calls"}]}`,
	} {
		_, err := FromChatResponse([]byte(bad), chat.Options{})
		if _, ok := errors.AsType[*chat.UnreadableError](err); !ok {
			t.Errorf("%s: err %v, want a *chat.UnreadableError", name, err)
		}
	}
}
