package llmrelay

// Capacity, driven in process (loop_harness_test.go): a target at its
// max_concurrent is passed, the request spills over to the next with
// room, and a chain with none sheds the request.

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// heldStreams answers every request with a stream that stays open until
// release is closed (or the relay gives it up).
func heldStreams(name string, release <-chan struct{}) *loopUpstream {
	return fakeUpstream(name, func(_ int, w http.ResponseWriter, r *http.Request) {
		sendSSE(w, data(chatChunk("held by "+name)))
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		sendSSE(w, data(chatStop), data("[DONE]"))
	})
}

// holdOne starts a stream request and returns once the client has its
// first event (the stream is in flight, counted against its target's
// cap); wait returns its answer when it is over.
func (lr *loopRelay) holdOne(t *testing.T, from string) (wait func() *loopResult) {
	t.Helper()
	rec := newStreamRecorder()
	var wg sync.WaitGroup
	wg.Go(func() { lr.serve(context.Background(), rec, "/v1/chat/completions", chatStreamReq) })
	rec.await(t, "a held stream from "+from, func(body string) bool { return strings.Contains(body, "held by "+from) })
	return func() *loopResult { wg.Wait(); return rec.result() }
}

// A target at max_concurrent is passed: the request spills over to the
// next target with room, without an attempt on the full one, and the full
// one takes requests again once its stream ends.
func TestLoopCapacitySpillOver(t *testing.T) {
	release := make(chan struct{})
	a := heldStreams("a", release)
	b := fakeUpstream("b", func(_ int, w http.ResponseWriter, _ *http.Request) { sendSSE(w, chatStream("spare")...) })
	lr := startLoop(t, `{
		"upstreams": [{"name": "a", "max_concurrent": 1}, {"name": "b"}],
		"models": [{"alias": "loop", "targets": [{"upstream": "a"}, {"upstream": "b"}]}]
	}`, a, b)

	held := lr.holdOne(t, "a")
	res := lr.post("/v1/chat/completions", chatStreamReq)
	res.expect(t, http.StatusOK, "b", "1")
	if res.body != strings.Join(chatStream("spare"), "") {
		t.Errorf("body %s", res.body)
	}
	lr.expectSeen(t, map[string]int{"a": 1, "b": 1})

	close(release)
	if first := held(); first.header.Get("X-Relay-Upstream") != "a" || !strings.HasSuffix(first.body, data("[DONE]")) {
		t.Errorf("the held stream: %v\n%s", first.header, first.body)
	}
	res = lr.post("/v1/chat/completions", chatStreamReq)
	res.expect(t, http.StatusOK, "a", "1")
	lr.expectSeen(t, map[string]int{"a": 2, "b": 1})
}

// A full target is passed even when it is the only one left to try: the
// request fails over from the target it spilled to, skips the full one
// (no request to it, and its slot goes back: with attempts at the
// chain's length, 2, the other target is tried twice) and ends with the
// relay's 502 naming both.
func TestLoopCapacityFullTargetPassed(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	a := heldStreams("a", release)
	b := fakeUpstream("b", func(_ int, w http.ResponseWriter, _ *http.Request) { sendJSON(w, 503, `{}`) })
	lr := startLoop(t, `{
		"upstreams": [{"name": "a", "max_concurrent": 1}, {"name": "b"}],
		"models": [{"alias": "loop", "targets": [{"upstream": "a"}, {"upstream": "b"}]}],
		"failover": {"backoff_base": "1ms", "backoff_max": "1ms"}
	}`, a, b)

	lr.holdOne(t, "a")
	res := lr.post("/v1/chat/completions", chatStreamReq)
	res.expect(t, http.StatusBadGateway, "", "")
	if errorCode(res.body) != "all_upstreams_failed" || !strings.Contains(res.body, "b (loop): status 503") ||
		!strings.Contains(res.body, "a (loop): skipped: at capacity (1 of max_concurrent 1 in flight)") {
		t.Errorf("body %s", res.body)
	}
	lr.expectSeen(t, map[string]int{"a": 1, "b": 2})
}

// When every target of the chain is full, the request is shed at once
// (queue_timeout 0): 503 overloaded with Retry-After, and no upstream is
// asked.
func TestLoopCapacityShed(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	lr := startLoop(t, `{
		"upstreams": [{"name": "a", "max_concurrent": 1}, {"name": "b", "max_concurrent": 1}],
		"models": [{"alias": "loop", "targets": [{"upstream": "a"}, {"upstream": "b"}]}]
	}`, heldStreams("a", release), heldStreams("b", release))

	lr.holdOne(t, "a")
	lr.holdOne(t, "b") // spilled over: a is full
	res := lr.post("/v1/chat/completions", chatStreamReq)
	res.expect(t, http.StatusServiceUnavailable, "", "")
	if errorCode(res.body) != "overloaded" || res.header.Get("Retry-After") == "" {
		t.Errorf("headers %v body %s", res.header, res.body)
	}
	lr.expectSeen(t, map[string]int{"a": 1, "b": 1})
}
