package llmrelay_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// Heartbeats reach Anthropic clients as SSE comments (": keep-alive"),
// both before the commit point (early_commit) and between content events;
// the official Go SDK skips them and assembles the message whole.
func TestAnthropicSDKAcceptsHeartbeats(t *testing.T) {
	slow := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		flush := func(s string) {
			_, _ = w.Write([]byte(s))
			w.(http.Flusher).Flush()
		}
		flush("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-up\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n" +
			"event: ping\ndata: {\"type\":\"ping\"}\n\n")
		time.Sleep(600 * time.Millisecond) // before the first content: early commit, heartbeats
		flush("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n")
		time.Sleep(500 * time.Millisecond) // between content events: heartbeats
		flush("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"lo\"}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	})
	startRelay(t, `llm_relay {
		key `+sdkKey+`
		upstream slow `+slow.v1()+` {
			api anthropic
		}
		model claude-slow {
			to slow claude-up
		}
		smoothing off {
			early_commit 150ms
			heartbeat 100ms
		}
	}`)

	// The raw stream carries heartbeats in both places.
	resp := postMessages(t, `{"model":"claude-slow","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", sdkKey)
	raw := readAll(t, resp)
	start, second := strings.Index(raw, "text_delta"), strings.LastIndex(raw, "text_delta")
	if start < 0 || !strings.Contains(raw[:start], ": keep-alive\n\n") || !strings.Contains(raw[start:second], ": keep-alive\n\n") {
		t.Fatalf("want heartbeats before the first content and between the deltas:\n%s", raw)
	}

	got := send(t, "NewStreaming", anthropicClient(relayBase, sdkKey), true, userParams("claude-slow"))
	if got.text != "Hello" || got.stop != "end_turn" {
		t.Fatalf("the SDK assembled text %q stop %q, want Hello end_turn", got.text, got.stop)
	}
}
