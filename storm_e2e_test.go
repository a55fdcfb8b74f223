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

// TestStreamsReuseUpstreamConnections: the root cause of the connect
// storms. A real upstream sends the end of a stream's body (the last
// chunk) a moment after its [DONE] event; the relay stopped reading at
// [DONE] and closed the body, so net/http closed the connection, and every
// stream dialled a new one: 10 sequential streams, 10 connections, where
// reverse_proxy used 1. Under a burst those dials overflowed the
// upstream's listen queue. Streams must reuse connections as
// reverse_proxy's do.
func TestStreamsReuseUpstreamConnections(t *testing.T) {
	up := newConnCounter(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		// The gap puts [DONE] and the body's end in separate reads.
		streamEvents(w, 20*time.Millisecond, chunk("a"), chunk("b"), "[DONE]")
	})
	startRelay(t, fmt.Sprintf(`llm_relay {
		upstream u %s
		model m {
			to u
		}
	}`, up.URL+"/v1"), fmt.Sprintf(`:9081 {
	reverse_proxy %s
}`, strings.TrimPrefix(up.URL, "http://")))
	const n = 10
	for range n {
		resp := post(t, `{"model":"m","stream":true,"messages":[]}`)
		if got := readAll(t, resp); !strings.Contains(got, "[DONE]") {
			t.Fatalf("relay: %d %q", resp.StatusCode, got)
		}
	}
	relay, _ := up.counts()
	for range n {
		resp, err := httpClient.Post("http://127.0.0.1:9081/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
	}
	all, _ := up.counts()
	if proxy := all - relay; relay > proxy {
		t.Errorf("%d sequential streams: the relay opened %d upstream connections, reverse_proxy %d; want no more than reverse_proxy",
			n, relay, proxy)
	}
}
