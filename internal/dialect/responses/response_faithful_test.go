package responses

import (
	"errors"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// FromChatResponse reads every part of the answer (Mistral's thinking and
// text parts), carries a refusal as a refusal part, gives a call with no
// arguments "{}", and refuses an answer it cannot translate whole: no
// choices, a choice other than the one asked for, a member of the wrong
// type (the relay answers 502, as it does for a Messages client).
func TestFromChatResponseFaithful(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"Mistral's parts", completion(`{"role":"assistant","content":[{"type":"thinking","thinking":[{"type":"text","text":"hmm"}]},{"type":"text","text":"Hel"},{"type":"text","text":"lo"}]}`, "stop", ""),
			response("completed", "null", rsHmm+","+msgHello, "")},
		{"a refusal beside content", completion(`{"role":"assistant","content":"Sure. ","refusal":"I can't."}`, "stop", ""),
			response("completed", "null", `{"type":"message","id":"msg_abc","status":"completed","role":"assistant","content":[
				{"type":"output_text","text":"Sure. ","annotations":[],"logprobs":[]},{"type":"refusal","refusal":"I can't."}]}`, "")},
		{"a refusal alone", completion(`{"role":"assistant","content":null,"refusal":"No."}`, "stop", ""),
			response("completed", "null", `{"type":"message","id":"msg_abc","status":"completed","role":"assistant","content":[{"type":"refusal","refusal":"No."}]}`, "")},
		{"a call with no arguments", completion(`{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"now","arguments":""}},{"id":"call_2","type":"function","function":{"name":"f"}}]}`, "tool_calls", ""),
			response("completed", "null", `{"type":"function_call","id":"fc_abc_0","call_id":"call_1","name":"now","arguments":"{}","status":"completed"},
				{"type":"function_call","id":"fc_abc_1","call_id":"call_2","name":"f","arguments":"{}","status":"completed"}`, "")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := FromChatResponse([]byte(c.in), chat.Options{})
			if err != nil {
				t.Fatal(err)
			}
			jsonEq(t, got, c.want)
		})
	}
	for name, bad := range map[string]string{
		"no choices":       `{"id":"x","object":"chat.completion","choices":[]}`,
		"choices absent":   `{"id":"x","object":"chat.completion"}`,
		"only choice 1":    `{"choices":[{"index":1,"message":{"content":"b"},"finish_reason":"stop"}]}`,
		"two choices":      `{"choices":[{"index":0,"message":{"content":"a"},"finish_reason":"stop"},{"index":1,"message":{"content":"b"},"finish_reason":"stop"}]}`,
		"content a number": `{"choices":[{"index":0,"message":{"content":5},"finish_reason":"stop"}]}`,
		"an image part":    `{"choices":[{"index":0,"message":{"content":[{"type":"image_url","image_url":{"url":"u"}}]},"finish_reason":"stop"}]}`,
	} {
		_, err := FromChatResponse([]byte(bad), chat.Options{})
		if _, ok := errors.AsType[*chat.UnreadableError](err); !ok {
			t.Errorf("%s: err %v, want a *chat.UnreadableError", name, err)
		}
	}
}
