package llmrelay_test

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"
)

// early_commit: while the first upstream stalls, the client already has
// 200 and SSE headers and heartbeats; failover to the second upstream
// stays invisible, and the stream ends normally.
func TestEarlyCommitKeepsFailoverInvisible(t *testing.T) {
	stall := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	good := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		streamEvents(w, 0, chunk("Hello"), chunk(" world"), "[DONE]")
	})
	startRelay(t, `llm_relay {
		upstream stall `+stall.v1()+`
		upstream good `+good.v1()+`
		model m {
			to stall
			to good
		}
		failover {
			first_byte_timeout 1200ms
		}
		smoothing off {
			early_commit 300ms
			heartbeat 200ms
		}
	}`)
	start := time.Now()
	resp := post(t, `{"model":"m","stream":true,"messages":[]}`)
	headersAfter := time.Since(start)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if headersAfter > time.Second {
		t.Fatalf("headers came after %v: not committed early (first_byte_timeout is 1.2s)", headersAfter)
	}
	body := readAll(t, resp)
	if n := strings.Count(body, ": keep-alive\n\n"); n < 3 {
		t.Errorf("%d heartbeats during a ~1.2 s wait with heartbeat 200ms:\n%s", n, body)
	}
	if got := strings.Join(sseDatas(body), "|"); got != chunk("Hello")+"|"+chunk(" world")+"|[DONE]" {
		t.Fatalf("events: %s", got)
	}
	if len(good.requests()) != 1 {
		t.Fatalf("the second upstream got %d requests", len(good.requests()))
	}
}

// When every attempt fails after an early commit, the stream ends with
// the relay's error as an in-band event, and no [DONE].
func TestEarlyCommitAllFail(t *testing.T) {
	down := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		time.Sleep(400 * time.Millisecond)
		answerJSON(w, 503, `{"error":{"message":"overloaded","type":"server_error","code":"overloaded"}}`)
	})
	startRelay(t, `llm_relay {
		upstream down `+down.v1()+`
		model m {
			to down
		}
		failover {
			attempts 2
			backoff 10ms 20ms
		}
		smoothing {
			early_commit 100ms
		}
	}`)
	resp := post(t, `{"model":"m","stream":true,"messages":[]}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	body := readAll(t, resp)
	datas := sseDatas(body)
	if len(datas) != 1 || !strings.Contains(datas[0], `"code":"all_upstreams_failed"`) {
		t.Fatalf("want one in-band all_upstreams_failed event, got:\n%s", body)
	}
	if strings.Contains(body, "[DONE]") {
		t.Fatal("[DONE] after a failure")
	}
}

// A non-retryable upstream error after an early commit is forwarded as the
// in-band error event, with the upstream's own error object.
func TestEarlyCommitPassThroughError(t *testing.T) {
	bad := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		answerJSON(w, 400, `{"error":{"message":"bad messages","type":"invalid_request_error","code":"invalid_messages"}}`)
	})
	startRelay(t, `llm_relay {
		upstream bad `+bad.v1()+`
		model m {
			to bad
		}
		smoothing {
			early_commit 50ms
		}
	}`)
	resp := post(t, `{"model":"m","stream":true,"messages":[]}`)
	body := readAll(t, resp)
	datas := sseDatas(body)
	if resp.StatusCode != 200 || len(datas) != 1 || !strings.Contains(datas[0], `"code":"invalid_messages"`) {
		t.Fatalf("status %d, body:\n%s", resp.StatusCode, body)
	}
}

// Without early_commit nothing is sent before the first upstream data: a
// 502 after failures stays a real 502.
func TestNoEarlyCommitByDefault(t *testing.T) {
	down := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
		answerJSON(w, 503, `{}`)
	})
	startRelay(t, `llm_relay {
		upstream down `+down.v1()+`
		model m {
			to down
		}
		smoothing {
			heartbeat 50ms
		}
	}`)
	resp := post(t, `{"model":"m","stream":true,"messages":[]}`)
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, "keep-alive") {
		t.Fatalf("status %d, body %s", resp.StatusCode, body)
	}
}

// Heartbeats fill an upstream silence in a committed stream, as comments.
func TestHeartbeatDuringUpstreamSilence(t *testing.T) {
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		bw := bufio.NewWriter(w)
		write := func(s string) {
			bw.WriteString(s)
			bw.Flush()
			w.(http.Flusher).Flush()
		}
		write("data: " + chunk("thinking…") + "\n\n")
		time.Sleep(1100 * time.Millisecond)
		write("data: " + chunk(" done") + "\n\ndata: [DONE]\n\n")
	})
	logFile := startRelay(t, `llm_relay {
		upstream up `+up.v1()+`
		model m {
			to up
		}
		smoothing pace {
			heartbeat 300ms
		}
	}`)
	body := readAll(t, post(t, `{"model":"m","stream":true,"messages":[]}`))
	if n := strings.Count(body, ": keep-alive\n\n"); n < 2 || n > 4 {
		t.Fatalf("%d heartbeats in a 1.1 s silence with heartbeat 300ms:\n%s", n, body)
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "event:") || strings.HasPrefix(line, "id:") || strings.HasPrefix(line, "retry:") {
			t.Fatalf("the relay sent a %q line", line)
		}
	}
	// The request's log line carries the stream's smoothness figures.
	waitFor(t, 2*time.Second, "the relayed log line", func() bool {
		return strings.Contains(readLog(t, logFile), `"smoothness"`)
	})
	mustContain(t, readLog(t, logFile), `"smoothing":"pace"`, `"events_in":3`, `"out_gap_max"`, `"out_rate_cv"`, `"out_steady"`,
		`"stalls":`, `"lag_p99"`, `"tail_flush"`)
}
