package anthropic

import (
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// TestToChatResponsePauseTurn: a paused turn is not a finished answer
// (issue 25): "length" for a Chat client, chat.FinishPauseTurn on the way to a
// Responses client. Failed before the fix: "stop".
func TestToChatResponsePauseTurn(t *testing.T) {
	msg := []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"Searching"}],"stop_reason":"pause_turn","usage":{"input_tokens":1,"output_tokens":2}}`)
	out, err := ToChatResponse(msg, chat.Options{Created: 1})
	if err != nil || !strings.Contains(string(out), `"finish_reason":"length"`) {
		t.Errorf("Chat: %v: %s", err, out)
	}
	out, err = ToChatResponse(msg, chat.Options{Created: 1, KeepPauseTurn: true})
	if err != nil || !strings.Contains(string(out), `"finish_reason":"pause_turn"`) {
		t.Errorf("on to Responses: %v: %s", err, out)
	}
}
