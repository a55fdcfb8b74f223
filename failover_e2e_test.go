package llmrelay_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const chatBody = `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`
const chatStreamBody = `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`

// twoTargets renders a relay block with upstreams a and b and one model
// `chat` failing over a -> b, plus the given failover settings.
func twoTargets(a, b *fakeUpstream, failover string) string {
	return fmt.Sprintf(`llm_relay {
		upstream a %s
		upstream b %s
		model chat {
			to a model-a
			to b model-b
		}
		failover {
			%s
		}
	}`, a.v1(), b.v1(), failover)
}

func TestFailover503StormMovesToNextTarget(t *testing.T) {
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 503, `{"error":{"message":"overloaded","type":"server_error","code":null}}`)
	})
	b := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) { answerJSON(w, 200, okCompletion) })
	startRelay(t, twoTargets(a, b, "attempts 2"))

	for i := 0; i < 5; i++ {
		resp := post(t, chatBody)
		body := readAll(t, resp)
		if resp.StatusCode != 200 || body != okCompletion {
			t.Fatalf("request %d: status %d body %q", i, resp.StatusCode, body)
		}
		if got := resp.Header.Get("X-Relay-Upstream"); got != "b" {
			t.Errorf("X-Relay-Upstream = %q, want b", got)
		}
		if got := resp.Header.Get("X-Relay-Model"); got != "model-b" {
			t.Errorf("X-Relay-Model = %q, want model-b", got)
		}
		// After 3 consecutive failures a is ejected (passive health):
		// later requests go straight to b.
		want := "2"
		if i >= 3 {
			want = "1"
		}
		if got := resp.Header.Get("X-Relay-Attempts"); got != want {
			t.Errorf("request %d: X-Relay-Attempts = %q, want %s", i, got, want)
		}
	}
	if len(a.requests()) != 3 || len(b.requests()) != 5 {
		t.Errorf("a got %d, b got %d requests; want 3 (then ejected) and 5", len(a.requests()), len(b.requests()))
	}
	if m := b.requests()[0].body["model"]; m != "model-b" {
		t.Errorf("b received model %v, want model-b", m)
	}
}

func TestFailoverAllFailGives502ListingAttempts(t *testing.T) {
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) { answerJSON(w, 500, `{}`) })
	b := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) { answerJSON(w, 503, `{}`) })
	startRelay(t, twoTargets(a, b, "attempts 3\nbackoff 1ms 2ms"))

	resp := post(t, chatBody)
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502; body %s", resp.StatusCode, body)
	}
	e := decodeErr(t, body)
	if e.Error.Code != "all_upstreams_failed" {
		t.Errorf("code %q", e.Error.Code)
	}
	mustContain(t, e.Error.Message, "a (model-a): status 500", "b (model-b): status 503")
	if strings.Count(e.Error.Message, "a (model-a): status 500") != 2 {
		t.Errorf("attempts 3 over a chain of 2 should try a twice: %s", e.Error.Message)
	}
	if got := resp.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type %q", got)
	}
}

func TestFailoverHonoursRetryAfter(t *testing.T) {
	// a always answers 429 with a long Retry-After; b fails once, then works.
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		answerJSON(w, 429, `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`)
	})
	b := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			answerJSON(w, 502, `{}`)
			return
		}
		answerJSON(w, 200, okCompletion)
	})
	startRelay(t, twoTargets(a, b, "attempts 4\nbackoff 1ms 5ms\ntry_duration 10s"))

	resp := post(t, chatBody)
	body := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	// Slots: a(429, out for 30s) b(502) a(skipped: Retry-After beyond try_duration) b(200).
	if n := len(a.requests()); n != 1 {
		t.Errorf("a was tried %d times; its Retry-After should keep it out after the first", n)
	}
	if got := resp.Header.Get("X-Relay-Attempts"); got != "3" {
		t.Errorf("X-Relay-Attempts = %q, want 3", got)
	}
}

func TestFailoverWaitsOutShortRetryAfter(t *testing.T) {
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			answerJSON(w, 429, `{}`)
			return
		}
		answerJSON(w, 200, okCompletion)
	})
	startRelay(t, fmt.Sprintf(`llm_relay {
		upstream a %s
		model chat {
			to a
		}
		failover {
			attempts 2
			backoff 1ms 2ms
		}
	}`, a.v1()))

	resp := post(t, chatBody)
	if body := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	reqs := a.requests()
	if len(reqs) != 2 {
		t.Fatalf("a got %d requests, want 2", len(reqs))
	}
	if gap := reqs[1].at.Sub(reqs[0].at); gap < 950*time.Millisecond {
		t.Errorf("retried after %s, before the 1s Retry-After", gap)
	}
}

func TestFailoverStallHitsFirstByteTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	// a never answers (no headers at all).
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	// c answers headers at once but sends no data event.
	c := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = w.Write([]byte(": keep-alive\n\n"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	b := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamEvents(w, 0, chunk("fine"), "[DONE]")
	})
	startRelay(t, fmt.Sprintf(`llm_relay {
		upstream a %s
		upstream c %s
		upstream b %s
		model chat {
			to a
			to c
			to b
		}
		failover {
			first_byte_timeout 300ms
		}
	}`, a.v1(), c.v1(), b.v1()))

	start := time.Now()
	resp := post(t, chatStreamBody)
	body := readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Relay-Upstream") != "b" {
		t.Fatalf("status %d upstream %q body %q", resp.StatusCode, resp.Header.Get("X-Relay-Upstream"), body)
	}
	if took := time.Since(start); took < 600*time.Millisecond {
		t.Errorf("answered after %s; two 300ms first-byte timeouts should have elapsed", took)
	}
	datas := sseDatas(body)
	if len(datas) != 2 || datas[0] != chunk("fine") || datas[1] != "[DONE]" {
		t.Errorf("client saw %q; want only b's stream", datas)
	}
	if strings.Contains(body, "keep-alive") {
		t.Errorf("the failed attempt's comment leaked to the client: %q", body)
	}
}

func TestFailoverErrorEventBeforeDataIsInvisible(t *testing.T) {
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamEvents(w, 0, `{"error":{"message":"model overloaded","type":"server_error","code":"overloaded"}}`)
	})
	emptyDone := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamEvents(w, 0, "[DONE]")
	})
	b := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamEvents(w, 0, chunk("Hel"), chunk("lo"), "[DONE]")
	})
	startRelay(t, fmt.Sprintf(`llm_relay {
		upstream a %s
		upstream e %s
		upstream b %s
		model chat {
			to a
			to e
			to b
		}
	}`, a.v1(), emptyDone.v1(), b.v1()))

	resp := post(t, chatStreamBody)
	body := readAll(t, resp)
	want := "data: " + chunk("Hel") + "\n\ndata: " + chunk("lo") + "\n\ndata: [DONE]\n\n"
	if body != want {
		t.Fatalf("body\n%q\nwant\n%q", body, want)
	}
	if resp.Header.Get("X-Relay-Attempts") != "3" {
		t.Errorf("X-Relay-Attempts %q", resp.Header.Get("X-Relay-Attempts"))
	}
	for _, h := range []string{"Cache-Control: no-cache", "X-Accel-Buffering: no", "Content-Type: text/event-stream"} {
		k, v, _ := strings.Cut(h, ": ")
		if resp.Header.Get(k) != v {
			t.Errorf("header %s = %q, want %q", k, resp.Header.Get(k), v)
		}
	}
}

func TestDropAfterDataEndsWithInBandError(t *testing.T) {
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamEvents(w, 0, chunk("one"), chunk("two"))
		// Abort the connection mid-stream: no [DONE], no clean end.
		panic(http.ErrAbortHandler)
	})
	b := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamEvents(w, 0, chunk("never"), "[DONE]")
	})
	startRelay(t, twoTargets(a, b, "attempts 2\n after_commit error"))

	resp := post(t, chatStreamBody)
	body := readAll(t, resp)
	datas := sseDatas(body)
	if len(datas) != 3 || datas[0] != chunk("one") || datas[1] != chunk("two") {
		t.Fatalf("client saw %q", datas)
	}
	e := decodeErr(t, datas[2])
	if !strings.HasPrefix(e.Error.Code, "upstream_stream_") {
		t.Errorf("in-band error code %q", e.Error.Code)
	}
	if strings.Contains(body, "[DONE]") || strings.Contains(body, "never") {
		t.Errorf("a broken stream must not end cleanly nor switch upstream after commit: %q", body)
	}
	if len(b.requests()) != 0 {
		t.Errorf("b was tried after the commit point")
	}
}

func TestCleanEOFWithoutDoneIsReportedAsTruncated(t *testing.T) {
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamEvents(w, 0, chunk("partial"))
	})
	startRelay(t, fmt.Sprintf("llm_relay {\n upstream a %s\n model chat {\n to a\n }\n }", a.v1()))
	body := readAll(t, post(t, chatStreamBody))
	datas := sseDatas(body)
	if len(datas) != 2 || decodeErr(t, datas[1]).Error.Code != "upstream_stream_truncated" {
		t.Fatalf("client saw %q", datas)
	}
}

func TestTryDurationGives504(t *testing.T) {
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	startRelay(t, fmt.Sprintf(`llm_relay {
		upstream a %s
		model chat {
			to a
		}
		failover {
			attempts 5
			first_byte_timeout 10s
			try_duration 400ms
		}
	}`, a.v1()))
	start := time.Now()
	resp := post(t, chatBody)
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusGatewayTimeout || decodeErr(t, body).Error.Code != "upstream_timeout" {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s; try_duration is 400ms", took)
	}
}

func TestNonRetryableStatusPassesThrough(t *testing.T) {
	const upstreamErr = `{"error":{"message":"bad temperature","type":"invalid_request_error","param":"temperature","code":null}}`
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Upstream-Id", "req-42")
		answerJSON(w, 400, upstreamErr)
	})
	b := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) { answerJSON(w, 200, okCompletion) })
	startRelay(t, twoTargets(a, b, "attempts 2"))
	resp := post(t, chatBody)
	body := readAll(t, resp)
	if resp.StatusCode != 400 || body != upstreamErr || resp.Header.Get("X-Upstream-Id") != "req-42" {
		t.Fatalf("status %d body %q headers %v", resp.StatusCode, body, resp.Header)
	}
	if len(b.requests()) != 0 {
		t.Errorf("a 400 must not fail over")
	}
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	var upstreamDone atomic.Bool
	doneAt := make(chan time.Time, 1)
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for i := 0; i < 500; i++ { // bounded: at most 10s
			if _, err := w.Write([]byte("data: " + chunk("x") + "\n\n")); err != nil {
				break
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				upstreamDone.Store(true)
				doneAt <- time.Now()
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	startRelay(t, fmt.Sprintf("llm_relay {\n upstream a %s\n model chat {\n to a\n }\n }", a.v1()))

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, relayBase+"/v1/chat/completions", strings.NewReader(chatStreamBody))
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatalf("reading first bytes: %v", err)
	}
	cancelled := time.Now()
	cancel()
	resp.Body.Close()
	waitFor(t, 3*time.Second, "the upstream request to be cancelled", upstreamDone.Load)
	if lag := (<-doneAt).Sub(cancelled); lag > time.Second {
		t.Errorf("upstream noticed the client leaving after %s", lag)
	}
}
