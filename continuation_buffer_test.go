package llmrelay

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestContinuationFailedKeepsTheBreak: a stream that breaks with an error
// event after the commit point, when no target continues it, ends with
// that error intact. The continuation's attempt reads its own stream
// (here a long comment, then an error event) into the SSE read buffer
// the broken attempt gave back to the pool: the event the continuer hands
// the pacer must not point into it. Found by relaychaos cont-fail-chat
// (the client got a piece of a reused buffer glued to the error event).
func TestContinuationFailedKeepsTheBreak(t *testing.T) {
	const overloaded = `{"error":{"message":"overloaded","type":"server_error","code":null}}`
	a := fakeUpstream("a", func(_ int, w http.ResponseWriter, _ *http.Request) {
		sendSSE(w, data(chatChunk("Hello")), data(chatChunk(" there")), data(overloaded))
	})
	b := fakeUpstream("b", func(_ int, w http.ResponseWriter, _ *http.Request) {
		sendSSE(w, ": "+strings.Repeat("x", 6000)+"\n\n", data(`{"error":{"message":"busy","type":"server_error","code":null}}`))
	})
	lr := startLoop(t, `{
		"upstreams": [{"name": "a"}, {"name": "b"}],
		"models": [{"alias": "loop", "targets": [{"upstream": "a"}, {"upstream": "b"}]}],
		"failover": {"after_commit": "continue", "backoff_base": "1ms", "backoff_max": "1ms"}
	}`, a, b)
	// A few requests: under -race, sync.Pool drops a quarter of what it
	// is given, so one request might not reuse the buffer.
	for i := range 8 {
		res := lr.post("/v1/chat/completions", chatStreamReq)
		if res.status != http.StatusOK {
			t.Fatalf("request %d: status %d\n%s", i, res.status, res.body)
		}
		if strings.Contains(res.body, "xxxx") {
			t.Fatalf("request %d: bytes of the continuation's stream reached the client:\n%.600s", i, res.body)
		}
		errs := 0
		for _, line := range strings.Split(res.body, "\n") {
			d, ok := strings.CutPrefix(line, "data: ")
			if !ok || d == "[DONE]" {
				continue
			}
			if !json.Valid([]byte(d)) {
				t.Fatalf("request %d: a data line that is not JSON: %.200q\n%.600s", i, d, res.body)
			}
			if strings.Contains(d, `"error"`) {
				errs++
			}
		}
		if errs == 0 || !strings.Contains(res.body, `"Hello"`) {
			t.Fatalf("request %d: want the answer so far, then an in-band error:\n%.600s", i, res.body)
		}
	}
}
