package llmrelay

// early_commit, driven in process (loop_harness_test.go): heartbeats
// while the chain is slow, then the answer, or the failure as an in-band
// error in the client's shape.

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// earlyConfig is a relay with upstreams a and b and a model m failing
// over a → b, committing stream answers early with frequent heartbeats.
func earlyConfig(targets string) string {
	return `{
		"upstreams": [{"name": "a"}, {"name": "b"}],
		"models": [{"alias": "loop", "targets": [` + targets + `]}],
		"failover": {"backoff_base": "1ms", "backoff_max": "1ms"},
		"smoothing": {"mode": "off", "early_commit": "50ms", "heartbeat": "50ms"}
	}`
}

const hb = ": keep-alive\n\n"

// awaitHeartbeats makes an upstream wait until the client has n
// heartbeats: the chain is slow for as long as it takes, with no timing.
func awaitHeartbeats(t *testing.T, rec *streamRecorder, n int) {
	rec.await(t, "heartbeats", func(body string) bool { return strings.Count(body, hb) >= n })
}

// While the chain is slow, the client has 200, SSE headers and
// heartbeats; a failover behind them stays invisible, and the next
// target's stream follows as it came.
func TestLoopEarlyCommitThenAnswer(t *testing.T) {
	rec := newStreamRecorder()
	a := fakeUpstream("a", func(_ int, w http.ResponseWriter, _ *http.Request) {
		awaitHeartbeats(t, rec, 2)
		sendJSON(w, 503, `{"error":{"message":"overloaded","type":"server_error","code":"overloaded"}}`)
	})
	answer := chatStream("Hello", " world")
	b := fakeUpstream("b", func(_ int, w http.ResponseWriter, _ *http.Request) { sendSSE(w, answer...) })
	lr := startLoop(t, earlyConfig(`{"upstream": "a"}, {"upstream": "b"}`), a, b)

	lr.serve(context.Background(), rec, "/v1/chat/completions", chatStreamReq)
	res := rec.result()
	// The headers went out before any upstream answered: they name none.
	res.expect(t, http.StatusOK, "", "")
	if ct := res.header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	first := strings.Index(res.body, "data: ")
	if first < 0 || strings.Count(res.body[:first], hb) < 2 || strings.Trim(res.body[:first], hb) != "" {
		t.Errorf("want heartbeats, then the answer:\n%s", res.body)
	}
	if got := res.body[first:]; got != strings.Join(answer, "") {
		t.Errorf("after the heartbeats:\n%s\nwant b's stream exactly:\n%s", got, strings.Join(answer, ""))
	}
	if strings.Contains(res.body, "overloaded") {
		t.Errorf("a's failure reached the client:\n%s", res.body)
	}
	lr.expectSeen(t, map[string]int{"a": 1, "b": 1})
}

// When every attempt fails after an early commit, the stream ends with
// the relay's error as one in-band event in the client's own shape, and
// no end event; an upstream error that would have been passed through is
// that event, with the upstream's own code.
func TestLoopEarlyCommitThenFailure(t *testing.T) {
	for _, c := range []struct {
		name, path, body string
		status           int
		want             string // in the last event's data
		typ              string // the last event's type
	}{
		{"chat, all failed", "/v1/chat/completions", chatStreamReq, 503, `"code":"all_upstreams_failed"`, ""},
		{"messages, all failed", "/v1/messages", messagesReq, 503, `{"type":"error","error":{"type":"api_error","message":"All upstream attempts failed`, "error"},
		{"responses, all failed", "/v1/responses", responsesReq, 503, `"code":"all_upstreams_failed"`, "error"},
		{"chat, passed-through error", "/v1/chat/completions", chatStreamReq, 400, `"code":"invalid_messages"`, ""},
		{"messages, passed-through error", "/v1/messages", messagesReq, 400, `"type":"invalid_request_error","message":"bad messages"`, "error"},
		{"responses, passed-through error", "/v1/responses", responsesReq, 400, `"code":"invalid_messages"`, "error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rec := newStreamRecorder()
			down := func(_ int, w http.ResponseWriter, _ *http.Request) {
				awaitHeartbeats(t, rec, 1)
				sendJSON(w, c.status, `{"error":{"message":"bad messages","type":"invalid_request_error","code":"invalid_messages"}}`)
			}
			lr := startLoop(t, earlyConfig(`{"upstream": "a"}, {"upstream": "b"}`), fakeUpstream("a", down), fakeUpstream("b", down))
			lr.serve(context.Background(), rec, c.path, c.body, anthropicHeader, "2023-06-01")
			res := rec.result()
			res.expect(t, http.StatusOK, "", "")
			evs := res.events()
			if len(evs) != 1 || evs[0].typ != c.typ || !strings.Contains(evs[0].data, c.want) {
				t.Errorf("want one in-band error event (type %q) carrying %s:\n%s", c.typ, c.want, res.body)
			}
			for _, end := range []string{"[DONE]", "message_stop", "response.completed"} {
				if strings.Contains(res.body, end) {
					t.Errorf("%s after a failure:\n%s", end, res.body)
				}
			}
			seenB := 1
			if c.status == 400 {
				seenB = 0 // passed through: the chain ends there
			}
			lr.expectSeen(t, map[string]int{"a": 1, "b": seenB})
		})
	}
}
