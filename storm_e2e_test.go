package llmrelay_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHealthSkipNeverFailsAnUntriedRequest: health may reorder a chain, but
// it must never make a request fail that would otherwise have been tried.
// Here a chain a → b runs with `attempts 1`; a is ejected by three
// failures, its cooldown ends, and one request takes its half-open trial,
// which hangs (a connect storm's slow dial). The next request finds the
// trial in flight and skips a: that skip must not use up its one attempt,
// or it fails with 502 all_upstreams_failed without anything being tried,
// where without health it would have been sent to a.
func TestHealthSkipNeverFailsAnUntriedRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a 10s cooldown")
	}
	release := make(chan struct{})
	defer close(release)
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch {
		case n <= 3:
			answerJSON(w, 500, `{"error":{"message":"down"}}`)
		case n == 4: // the half-open trial: hangs until the test ends
			select {
			case <-release:
			case <-r.Context().Done():
			}
			answerJSON(w, 500, `{"error":{"message":"still down"}}`)
		default:
			streamEvents(w, 0, chunk("from a"), "[DONE]")
		}
	})
	b := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamEvents(w, 0, chunk("from b"), "[DONE]")
	})
	startRelay(t, fmt.Sprintf(`llm_relay {
		upstream a %s
		upstream b %s
		model chat {
			to a
			to b
		}
		failover {
			attempts 1
		}
	}`, a.v1(), b.v1()))

	const body = `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	for i := range 3 {
		resp := post(t, body)
		got := readAll(t, resp)
		if resp.StatusCode != 502 {
			t.Fatalf("ejecting a, request %d: status %d, want 502 (a fails, one attempt): %s", i+1, resp.StatusCode, got)
		}
	}
	time.Sleep(10*time.Second + 300*time.Millisecond) // the default cooldown: a is half-open now

	// The trial: a hangs on it.
	trial := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, relayBase+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := httpClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		trial <- resp
	}()
	waitFor(t, 5*time.Second, "a's trial request", func() bool { return len(a.requests()) == 4 })

	nb := len(b.requests())
	resp := post(t, body)
	got := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Errorf("a's trial in flight: status %d (%s), want 200: skipping a must leave the request its attempt, for b",
			resp.StatusCode, got)
	}
	if len(b.requests()) != nb+1 {
		t.Errorf("b got %d requests during a's trial, want 1", len(b.requests())-nb)
	}
}
