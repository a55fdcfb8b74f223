package llmrelay_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// responsesEvent is one Responses API stream event: `event: <type>` and
// data carrying the same type and a sequence number.
func responsesEvent(seq int, typ, members string) string {
	if members != "" {
		members = "," + members
	}
	return fmt.Sprintf("event: %s\ndata: {\"type\":%q,\"sequence_number\":%d%s}\n\n", typ, typ, seq, members)
}

// responsesStream is a complete Responses stream answering text, from
// response id id.
func responsesStream(id, text string) string {
	resp := `"response":{"id":"` + id + `","object":"response","created_at":1,"status":"in_progress","model":"m","output":[]}`
	item := `{"type":"message","id":"msg_` + id + `","status":"completed","role":"assistant","content":[{"type":"output_text","text":"` + text + `","annotations":[]}]}`
	done := `"response":{"id":"` + id + `","object":"response","created_at":1,"status":"completed","model":"m","output":[` + item + `],"usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":7}}`
	return responsesEvent(0, "response.created", resp) +
		responsesEvent(1, "response.in_progress", resp) +
		responsesEvent(2, "response.output_item.added", `"output_index":0,"item":{"type":"message","id":"msg_`+id+`","status":"in_progress","role":"assistant","content":[]}`) +
		responsesEvent(3, "response.content_part.added", `"item_id":"msg_`+id+`","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}`) +
		responsesEvent(4, "response.output_text.delta", `"item_id":"msg_`+id+`","output_index":0,"content_index":0,"delta":"`+text+`","logprobs":[]`) +
		responsesEvent(5, "response.output_text.done", `"item_id":"msg_`+id+`","output_index":0,"content_index":0,"text":"`+text+`","logprobs":[]`) +
		responsesEvent(6, "response.content_part.done", `"item_id":"msg_`+id+`","output_index":0,"content_index":0,"part":{"type":"output_text","text":"`+text+`","annotations":[]}`) +
		responsesEvent(7, "response.output_item.done", `"output_index":0,"item":`+item) +
		responsesEvent(8, "response.completed", done)
}

// streamResponses runs a Responses stream with openai-go and returns the
// ids of the responses its events named, the text, and the stream error.
func streamResponses(t *testing.T, model string) (ids []string, text string, err error) {
	t.Helper()
	client := openai.NewClient(option.WithBaseURL(relayBase+"/v1"), option.WithAPIKey("sk-none"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	defer s.Close()
	var b strings.Builder
	for s.Next() {
		ev := s.Current()
		switch ev.Type {
		case "response.created", "response.completed":
			ids = append(ids, ev.Response.ID)
		case "response.output_text.delta":
			b.WriteString(ev.Delta)
		}
	}
	return ids, b.String(), s.Err()
}

// The commit point of a Responses stream is its first output delta:
// response.created and the item and part announcements are held, so an
// upstream that fails after them is failed over invisibly, and openai-go
// sees one response, the second upstream's.
func TestResponsesCommitPointAfterCreated(t *testing.T) {
	failing := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		full := responsesStream("resp_bad", "never")
		_, _ = w.Write([]byte(full[:strings.Index(full, "event: response.output_text.delta")]))
		_, _ = w.Write([]byte(responsesEvent(4, "error", `"code":"server_error","message":"overloaded","param":null`)))
	})
	good := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(responsesStream("resp_good", "hello")))
	})
	startRelay(t, `llm_relay {
		upstream failing `+failing.v1()+`
		upstream good `+good.v1()+`
		model m {
			to failing
			to good
		}
	}`)
	ids, text, err := streamResponses(t, "m")
	if err != nil || text != "hello" || strings.Join(ids, ",") != "resp_good,resp_good" {
		t.Fatalf("openai-go saw responses %v, text %q, error %v; want only resp_good, hello, no error", ids, text, err)
	}
	if len(failing.requests()) != 1 || failing.requests()[0].path != "/v1/responses" {
		t.Fatalf("the first upstream saw %v", failing.requests())
	}
}

// A relay error on a committed Responses stream is an `event: error` that
// openai-go raises, never a clean-looking shorter answer.
func TestResponsesRelayErrorAfterCommitRaised(t *testing.T) {
	early := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		time.Sleep(400 * time.Millisecond) // past early_commit: headers are out
		answerJSON(w, http.StatusServiceUnavailable, `{"error":{"message":"down","type":"server_error","code":"unavailable"}}`)
	})
	startRelay(t, `llm_relay {
		upstream early `+early.v1()+`
		model m {
			to early
		}
		smoothing off {
			early_commit 100ms
		}
	}`)
	_, text, err := streamResponses(t, "m")
	if err == nil || text != "" {
		t.Fatalf("openai-go got text %q and no error; want the stream to raise", text)
	}
	if !strings.Contains(err.Error(), "all_upstreams_failed") {
		t.Errorf("the error does not say what failed: %v", err)
	}
	// On the wire it is the Responses API's own error event (typed, as
	// Responses clients such as Codex CLI read events by type), with the
	// "error" member the SDKs raise on.
	raw := readAll(t, postPath(t, "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`))
	if !strings.Contains(raw, "event: error\ndata: {\"type\":\"error\",\"code\":\"all_upstreams_failed\"") || !strings.Contains(raw, `"error":{"message":`) {
		t.Errorf("the stream's error event:\n%s", raw)
	}
}

// Stored responses are asked of the OpenAI upstreams in order, the first
// answer that is not a 404 wins (the relay remembers nothing); a relay with
// no OpenAI upstream answers a clear 400.
func TestStoredResponsesAskTheOpenAIUpstreams(t *testing.T) {
	const stored = `{"id":"resp_42","object":"response","created_at":1,"status":"completed","model":"m","output":[],"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}`
	other := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, http.StatusNotFound, `{"error":{"message":"No response found","type":"invalid_request_error","code":null}}`)
	})
	maker := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/responses/resp_42") {
			answerJSON(w, http.StatusNotFound, `{"error":{"message":"no","type":"invalid_request_error"}}`)
			return
		}
		answerJSON(w, http.StatusOK, stored)
	})
	claude := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		t.Error("a stored-response call reached an Anthropic upstream")
	})
	startRelay(t, `llm_relay {
		upstream other `+other.v1()+` {
			api_key sk-other
		}
		upstream claude `+claude.v1()+` {
			api anthropic
		}
		upstream maker `+maker.v1()+` {
			api_key sk-maker
		}
		model m {
			to other
		}
	}`)
	client := openai.NewClient(option.WithBaseURL(relayBase+"/v1"), option.WithAPIKey("sk-none"), option.WithMaxRetries(0))
	got, err := client.Responses.Get(context.Background(), "resp_42", responses.ResponseGetParams{})
	if err != nil || got.ID != "resp_42" || got.Status != "completed" {
		t.Fatalf("Get: %v, %+v", err, got)
	}
	if seen := maker.requests(); len(seen) != 1 || seen[0].header.Get("Authorization") != "Bearer sk-maker" {
		t.Fatalf("the maker saw %+v", seen)
	}
	resp := postPath(t, "/v1/responses/resp_42/cancel", ``)
	if readAll(t, resp); resp.StatusCode != http.StatusOK || maker.requests()[1].path != "/v1/responses/resp_42/cancel" {
		t.Fatalf("cancel: status %d, maker saw %v", resp.StatusCode, maker.requests()[1].path)
	}
	// Not found anywhere: the last upstream's 404.
	if _, err := client.Responses.Get(context.Background(), "resp_nowhere", responses.ResponseGetParams{}); err == nil {
		t.Fatal("a response no upstream has was found")
	} else if apiErr, ok := err.(*openai.Error); !ok || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("want the upstreams' 404, got %v", err)
	}

	// No OpenAI upstream: nothing to ask.
	startRelay(t, `llm_relay {
		upstream claude `+claude.v1()+` {
			api anthropic
		}
		model m {
			to claude
		}
	}`)
	resp, err = httpClient.Get(relayBase + "/v1/responses/resp_42")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "stored_response_unavailable") {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
}
