package llmrelay_test

// Regression tests for the defects found by trying the relay as users and
// attackers would (issue 9): each fails on the code before its fix.

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func reasoningChunk(text string) string {
	b, _ := json.Marshal(text)
	return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":` + string(b) + `},"finish_reason":null}]}`
}

// sleepOrGone waits d unless the request is cancelled first, so a stalling
// fake upstream never outlives its test.
func sleepOrGone(r *http.Request, d time.Duration) {
	select {
	case <-time.After(d):
	case <-r.Context().Done():
	}
}

// Item 1: after a reasoning budget failover, the heartbeat hold that
// covered the pause must stop once the next stream flows. It used to keep
// firing into the next stream and, after the handler returned, into a
// finished response, which crashed the process.
func TestBudgetFailoverStopsItsHeartbeats(t *testing.T) {
	var reasoning []string
	for range 40 {
		reasoning = append(reasoning, reasoningChunk("thinking hard about it "))
	}
	big := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		streamEvents(w, 0, reasoning...)
		sleepOrGone(r, 5*time.Second) // never finishes by itself: the relay gives it up
	})
	var content []string
	for range 30 {
		content = append(content, chunk("word "))
	}
	content = append(content, "[DONE]")
	small := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		sleepOrGone(r, 300*time.Millisecond) // heartbeats cover this pause
		streamEvents(w, 10*time.Millisecond, content...)
	})
	startRelay(t, `llm_relay {
		upstream big `+big.v1()+`
		upstream small `+small.v1()+`
		model m {
			to big
			to small
			reasoning_budget 10 failover
		}
		smoothing off {
			heartbeat 50ms
		}
	}`)
	for round := range 2 {
		body := readAll(t, post(t, streamBody))
		p := parseStream(t, body)
		if !p.done || p.content != strings.Repeat("word ", 30) {
			t.Fatalf("round %d: done %v content %q", round, p.done, p.content)
		}
		pause := strings.Count(body[:strings.Index(body, `"content"`)], ": keep-alive")
		after := strings.Count(body[strings.Index(body, `"content"`):], ": keep-alive")
		if pause < 2 || after != 0 {
			t.Fatalf("round %d: %d heartbeats during the 300ms pause (want some), %d once the next stream flowed every 10ms (want 0)", round, pause, after)
		}
		// A leaked hold fires into the finished response 50ms later and
		// takes the process down; the next round would then never run.
		time.Sleep(200 * time.Millisecond)
	}
}

// Item 2: an upstream that goes silent after the commit point is cut off
// by stream_idle_timeout, though the relay's heartbeats keep the client's
// connection busy.
func TestStreamIdleTimeout(t *testing.T) {
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("X-Test"), "plain") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(200)
			_, _ = io.WriteString(w, okCompletion[:40])
			w.(http.Flusher).Flush()
		} else {
			streamEvents(w, 0, chunk("a"), chunk("b"))
		}
		sleepOrGone(r, 10*time.Second)
	})
	logFile := relayTo(t, up, `failover {
			stream_idle_timeout 400ms
		}
		smoothing off {
			heartbeat 100ms
		}`)
	start := time.Now()
	body := readAll(t, post(t, streamBody))
	p := parseStream(t, body)
	if p.content != "ab" || p.done || p.errCode != "upstream_timeout" {
		t.Fatalf("stream: content %q done %v error %q; body:\n%s", p.content, p.done, p.errCode, body)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("stream took %s", el)
	}
	if n := strings.Count(body, ": keep-alive"); n < 2 {
		t.Errorf("%d heartbeats while the upstream was silent; they must not count as activity", n)
	}

	// Non-stream: 200 and half a body, then silence: the client's
	// connection is aborted, never left waiting.
	start = time.Now()
	req, _ := http.NewRequest(http.MethodPost, relayBase+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[]}`))
	req.Header.Set("X-Test", "plain")
	resp, err := httpClient.Do(req)
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	// The response may fail before its headers (they were still in
	// Caddy's buffer) or in its body; either way it fails, and soon.
	if err == nil || time.Since(start) > 3*time.Second {
		t.Fatalf("non-stream: error %v after %s; want an aborted response within a second", err, time.Since(start))
	}
	waitFor(t, 5*time.Second, "the logged idle timeout", func() bool {
		return strings.Count(readLog(t, logFile), "stream_idle_timeout") >= 2
	})
	mustContain(t, scrapeMetrics(t), `llm_relay_requests_total{alias="m",outcome="idle_timeout",upstream="u"} 2`)
}

// Item 3: the upstream path is built from the path as the client escaped
// it; dot segments and encoded separators are refused.
func TestPathTraversalRefused(t *testing.T) {
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 200, okCompletion)
	})
	relayTo(t, up, "")
	for _, path := range []string{
		"/v1/../admin",
		"/v1/%2e%2e/%2e%2e/admin",
		"/v1/chat/%2E%2E/%2e%2e/admin",
		"/v1/./chat/completions",
		"/v1/x%3Fq=1",
		"/v1/a%2Fb",
		"/v1/a%5cb",
		"/v1/a%23b",
	} {
		conn, err := net.Dial("tcp", "127.0.0.1:9080")
		if err != nil {
			t.Fatal(err)
		}
		// A raw request line: Go's client would leave these alone too,
		// but this way nothing on the client side can clean them.
		body := `{"model":"m","messages":[]}`
		_, _ = io.WriteString(conn, "POST "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: "+
			strconv.Itoa(len(body))+"\r\n\r\n"+body)
		raw, _ := io.ReadAll(conn)
		conn.Close()
		if !strings.HasPrefix(string(raw), "HTTP/1.1 400") || !strings.Contains(string(raw), `"invalid_path"`) {
			t.Errorf("%s: got %q", path, firstLine(string(raw)))
		}
	}
	if n := len(up.requests()); n != 0 {
		t.Fatalf("the upstream received %d requests: %v", n, up.requests()[0].path)
	}
	// Ordinary escapes still go through as the client wrote them.
	resp := postPath(t, "/v1/chat/completions", `{"model":"m","messages":[]}`)
	if readAll(t, resp); resp.StatusCode != 200 || up.requests()[0].path != "/v1/chat/completions" {
		t.Fatalf("plain path: %d, upstream path %q", resp.StatusCode, up.requests()[0].path)
	}
}

// relayTo starts the relay with one model, m, whose only target is up;
// extra is more of the llm_relay block (failover, smoothing, ...).
func relayTo(t *testing.T, up *fakeUpstream, extra string) string {
	t.Helper()
	return startRelay(t, `llm_relay {
		upstream u `+up.v1()+`
		model m {
			to u
		}
		`+extra+`
	}`)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Items 4 and 7: a 2xx that is not a stream, to a stream request, and any
// 3xx are failures before the commit point: the next target answers, and
// as a last resort the client gets a 502 that quotes nothing of theirs.
func TestNonStreamAnswerAndRedirectFailOver(t *testing.T) {
	jsonUp := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 200, okCompletion)
	})
	redirect := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://10.1.2.3/internal?token=s3cret-redirect-token")
		w.WriteHeader(http.StatusFound)
	})
	good := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		streamEvents(w, 0, chunk("ok"), "[DONE]")
	})
	startRelay(t, `llm_relay {
		upstream json `+jsonUp.v1()+`
		upstream redirect `+redirect.v1()+`
		upstream good `+good.v1()+`
		model chain {
			to json
			to redirect
			to good
		}
		model json-only {
			to json
		}
		model redirect-only {
			to redirect
		}
	}`)
	resp := post(t, `{"model":"chain","stream":true,"messages":[]}`)
	if p := parseStream(t, readAll(t, resp)); resp.StatusCode != 200 || p.content != "ok" || !p.done ||
		resp.Header.Get("X-Relay-Upstream") != "good" || resp.Header.Get("X-Relay-Attempts") != "3" {
		t.Fatalf("chain: %d, upstream %q, attempts %q, content %q", resp.StatusCode, resp.Header.Get("X-Relay-Upstream"), resp.Header.Get("X-Relay-Attempts"), p.content)
	}
	resp = post(t, `{"model":"json-only","stream":true,"messages":[]}`)
	body := readAll(t, resp)
	if e := decodeErr(t, body); resp.StatusCode != 502 || e.Error.Code != "upstream_not_streaming" {
		t.Fatalf("json-only: %d %s", resp.StatusCode, body)
	}
	// The same upstream still serves non-stream requests.
	if resp := post(t, `{"model":"json-only","messages":[]}`); resp.StatusCode != 200 {
		t.Fatalf("non-stream: %d", resp.StatusCode)
	} else {
		readAll(t, resp)
	}
	resp = post(t, `{"model":"redirect-only","messages":[]}`)
	body = readAll(t, resp)
	if e := decodeErr(t, body); resp.StatusCode != 502 || e.Error.Code != "all_upstreams_failed" ||
		resp.Header.Get("Location") != "" || strings.Contains(body, "s3cret") || strings.Contains(body, "10.1.2.3") {
		t.Fatalf("redirect-only: %d, Location %q, %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
}

// Item 8: only Chat Completions (and legacy completions) get the relay's
// stream rules; a Responses or Messages stream passes byte for byte, with
// no usage option injected and nothing appended at its EOF.
func TestOtherEndpointsPassByteExact(t *testing.T) {
	const responsesStream = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\"}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r1\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"
	const messagesStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":5}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if strings.HasSuffix(r.URL.Path, "/messages") {
			_, _ = io.WriteString(w, messagesStream)
		} else {
			_, _ = io.WriteString(w, responsesStream)
		}
	})
	for _, mode := range []string{"off", "pace"} {
		t.Run(mode, func(t *testing.T) {
			startRelay(t, `llm_relay {
				upstream u `+up.v1()+`
				upstream c `+up.v1()+` {
					api anthropic
				}
				model m {
					to u
				}
				model claude {
					to c
				}
				smoothing `+mode+`
			}`)
			// /v1/responses passes to OpenAI; /v1/messages to an Anthropic
			// upstream (to any other it is translated).
			for path, want := range map[string]string{"/v1/responses": responsesStream, "/v1/messages": messagesStream} {
				model := "m"
				if path == "/v1/messages" {
					model = "claude"
				}
				resp := postPath(t, path, `{"model":"`+model+`","stream":true,"input":"hi"}`)
				if got := readAll(t, resp); got != want {
					t.Errorf("%s: the client got\n%q\nwant\n%q", path, got, want)
				}
			}
			for _, seen := range up.requests() {
				if _, ok := seen.body["stream_options"]; ok {
					t.Fatalf("%s: stream_options injected: %v", seen.path, seen.body)
				}
			}
		})
	}
}

// Item 11: every target answering 429 gives the client 429, with the
// soonest upstream Retry-After, so SDK retry logic waits the right time.
func TestAllRateLimitedGives429(t *testing.T) {
	limited := func(after string) *fakeUpstream {
		return newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", after)
			answerJSON(w, 429, `{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limit_exceeded"}}`)
		})
	}
	a, b := limited("7"), limited("3")
	startRelay(t, `llm_relay {
		upstream a `+a.v1()+`
		upstream b `+b.v1()+`
		model m {
			to a
			to b
		}
	}`)
	resp := post(t, `{"model":"m","messages":[]}`)
	body := readAll(t, resp)
	if e := decodeErr(t, body); resp.StatusCode != 429 || e.Error.Code != "rate_limit_exceeded" || resp.Header.Get("Retry-After") != "3" {
		t.Fatalf("%d Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}

// Item 14: a CORS preflight carries no credentials; the relay hands it to
// Caddy's own handlers, as in the CORS snippet of docs/configuration.md.
func TestCORSPreflightReachesCaddy(t *testing.T) {
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 200, okCompletion)
	})
	// In a route block handlers run in the order written: the relay sees
	// the preflight first and must hand it on.
	startRelay(t, `@preflight method OPTIONS
	route {
		header Access-Control-Allow-Origin "https://app.example.com"
		header @preflight Access-Control-Allow-Headers "Authorization, Content-Type"
		header @preflight Access-Control-Allow-Methods "GET, POST"
		llm_relay {
			key sk-cors-client
			upstream u `+up.v1()+`
			model m {
				to u
			}
		}
		respond @preflight 204
	}`)
	req, _ := http.NewRequest(http.MethodOptions, relayBase+"/v1/chat/completions", nil)
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Methods") != "GET, POST" {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	resp = post(t, `{"model":"m","messages":[]}`, "Authorization", "Bearer sk-cors-client")
	readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
		t.Fatalf("request: %d %v", resp.StatusCode, resp.Header)
	}
}

// Item 18: the provider's Server header does not reach the client.
func TestUpstreamServerHeaderHidden(t *testing.T) {
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Server", "internal-gpu-node-17")
		answerJSON(w, 200, okCompletion)
	})
	relayTo(t, up, "")
	resp := post(t, `{"model":"m","messages":[]}`)
	readAll(t, resp)
	if got := resp.Header.Get("Server"); got != "Caddy" {
		t.Fatalf("Server %q", got)
	}
}
