package llmrelay_test

// `off` is byte-identical to the end of the upstream's body (issue 34):
// what an upstream sends after its stream's end event reaches the client
// too, in every dialect, within a bound when the upstream holds its
// connection open after it.

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// Streams ending in something after their end event: the recorded OpenAI
// Responses stream with OpenRouter's `data: [DONE]` after
// response.completed; a Messages stream and a Chat stream with more after
// message_stop and [DONE].
func tailStreams(t *testing.T) map[string]string {
	return map[string]string{
		"/v1/responses": usageRecording(t, "openai-responses-done.sse"),
		"/v1/messages": "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"OK\"}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n" +
			": after message_stop\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n",
		"/v1/chat/completions": "data: " + chunk("OK") + "\n\n" +
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}` + "\n\n" +
			"data: [DONE]\n\n: after [DONE]\n\n",
	}
}

func TestModeOffIsByteIdenticalToTheEnd(t *testing.T) {
	streams := tailStreams(t)
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, streams[r.URL.Path])
	})
	startRelay(t, `llm_relay {
		upstream openai `+up.v1()+`
		upstream anth `+up.v1()+` {
			api anthropic
		}
		model m {
			to openai
		}
		model claude {
			to anth
		}
		smoothing pace
	}`)
	for path, want := range streams {
		model, body := "m", `{"model":"m","stream":true,"input":"hi"}`
		switch path {
		case "/v1/messages":
			model, body = "claude", `{"model":"claude","stream":true,"max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`
		case "/v1/chat/completions":
			body = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
		}
		resp := postPath(t, path, body, "X-Relay-Mode", "off")
		if got := readAll(t, resp); resp.StatusCode != http.StatusOK || got != want {
			t.Errorf("%s (%s), X-Relay-Mode off: status %d, the client got\n%q\nwant, byte for byte,\n%q", path, model, resp.StatusCode, got, want)
		}
	}
	// The official SDK reads the whole stream, [DONE] included, as one
	// complete response.
	ids, text, err := streamResponses(t, "m")
	if err != nil || text != "OK" || strings.Join(ids, ",") != "resp_sanitized_streaming,resp_sanitized_streaming" {
		t.Fatalf("openai-go: responses %v, text %q, error %v", ids, text, err)
	}
}

// An upstream that keeps its connection open after its end event and the
// [DONE] that follows holds the client for the tail's bound at most (2s),
// not until the upstream lets go.
func TestModeOffTailIsBounded(t *testing.T) {
	stream := usageRecording(t, "openai-responses-done.sse")
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, stream)
		w.(http.Flusher).Flush()
		select { // held open far longer than the test waits
		case <-release:
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	})
	startRelay(t, `llm_relay {
		upstream openai `+up.v1()+`
		model m {
			to openai
		}
	}`)
	client := openai.NewClient(option.WithBaseURL(relayBase+"/v1"), option.WithAPIKey("sk-none"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	s := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "m",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	completed := false
	for s.Next() {
		completed = completed || s.Current().Type == "response.completed"
	}
	if err := s.Err(); err != nil || !completed {
		t.Fatalf("openai-go: completed %v, error %v", completed, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the stream ended after %v: the relay waited on the upstream's open connection", took)
	}
	raw := readAll(t, postPath(t, "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`, "X-Relay-Mode", "off"))
	if raw != stream {
		t.Fatalf("the client got\n%q\nwant\n%q", raw, stream)
	}
}
