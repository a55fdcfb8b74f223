package llmrelay

// The request loop's failover, driven in process (loop_harness_test.go):
// the commit point, each class of failure before it, try_duration, and
// the insufficient_quota rule.

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// chainAB is a relay with upstreams a and b (api openai) and one model m
// failing over a → b, with more members of the failover block and of the
// relay (JSON).
func chainAB(failover string, relay ...string) string {
	if failover != "" {
		failover = "," + failover
	}
	more := ""
	for _, m := range relay {
		more += "," + m
	}
	return `{
		"upstreams": [{"name": "a"}, {"name": "b"}],
		"models": [{"alias": "loop", "targets": [{"upstream": "a", "model": "model-a"}, {"upstream": "b", "model": "model-b"}]}],
		"failover": {"backoff_base": "1ms", "backoff_max": "1ms"` + failover + `}` + more + `
	}`
}

// fastTimeout is the first_byte_timeout of the cases that wait for it:
// short, but not so short that the next target's answer (in process, at
// once) could miss it on a loaded machine.
const fastTimeout = `"first_byte_timeout": "200ms"`

// A failure before the stream's first data event is invisible: the
// client gets the next target's stream, byte for byte, and nothing of the
// failed one (not even its keep-alive comment).
func TestLoopFailoverBeforeFirstDataIsInvisible(t *testing.T) {
	a := fakeUpstream("a", func(_ int, w http.ResponseWriter, _ *http.Request) {
		sendSSE(w, ": upstream a is warming up\n\n")
		breakOff(w)
	})
	good := chatStream("Hello", " world")
	b := fakeUpstream("b", func(_ int, w http.ResponseWriter, _ *http.Request) { sendSSE(w, good...) })
	lr := startLoop(t, chainAB(""), a, b)

	res := lr.post("/v1/chat/completions", chatStreamReq)
	res.expect(t, http.StatusOK, "b", "2")
	if want := strings.Join(good, ""); res.body != want {
		t.Errorf("body:\n%s\nwant b's stream exactly:\n%s", res.body, want)
	}
	if ct := res.header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	if got := res.header.Get("X-Relay-Model"); got != "model-b" {
		t.Errorf("X-Relay-Model %q", got)
	}
	lr.expectSeen(t, map[string]int{"a": 1, "b": 1})
	if m := lr.fakes["a"].requests()[0].field("model"); m != "model-a" {
		t.Errorf("a was sent model %v", m)
	}
	if m := lr.fakes["b"].requests()[0].field("model"); m != "model-b" {
		t.Errorf("b was sent model %v", m)
	}
	for _, seen := range append(lr.fakes["a"].requests(), lr.fakes["b"].requests()...) {
		if seen.method != http.MethodPost || seen.path != "/v1/chat/completions" || seen.header.Get("Authorization") != "" {
			t.Errorf("an upstream was sent %s %s with Authorization %q (the client's key must never reach it)",
				seen.method, seen.path, seen.header.Get("Authorization"))
		}
	}
}

// After the first data event the stream is the client's: with
// `after_commit error` a break ends it with the relay's in-band error and
// no [DONE], and no other target is tried (the default, continue, is
// TestLoopBreakAfterFirstDataContinues).
func TestLoopBreakAfterFirstDataEndsInBand(t *testing.T) {
	for _, c := range []struct {
		name   string
		script func(w http.ResponseWriter)
		code   string
	}{
		{"broken", func(w http.ResponseWriter) { sendSSE(w, data(chatChunk("Hello"))); breakOff(w) }, "upstream_stream_interrupted"},
		{"eof before [DONE]", func(w http.ResponseWriter) { sendSSE(w, data(chatChunk("Hello"))) }, "upstream_stream_truncated"},
		{"eof mid-event", func(w http.ResponseWriter) { sendSSE(w, data(chatChunk("Hello")), `data: {"id":"c1","choi`) }, "upstream_stream_truncated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := fakeUpstream("a", func(_ int, w http.ResponseWriter, _ *http.Request) { c.script(w) })
			b := fakeUpstream("b", func(_ int, w http.ResponseWriter, _ *http.Request) { sendSSE(w, chatStream("other")...) })
			lr := startLoop(t, chainAB(`"after_commit": "error"`), a, b)

			res := lr.post("/v1/chat/completions", chatStreamReq)
			res.expect(t, http.StatusOK, "a", "1")
			d := res.datas()
			if len(d) != 2 || d[0] != chatChunk("Hello") || errorCode(d[1]) != c.code {
				t.Errorf("events %q; want Hello, then the in-band error %s", d, c.code)
			}
			if strings.Contains(res.body, "[DONE]") || strings.Contains(res.body, "other") {
				t.Errorf("[DONE] or another target's answer after the break:\n%s", res.body)
			}
			lr.expectSeen(t, map[string]int{"a": 1, "b": 0})
		})
	}
}

// Each failure before the commit point moves on to the next target when
// it is a class the failover block lists (or a stream class, which always
// moves on, or a status never passed through): the client gets b's
// stream, and never sees a's failure.
func TestLoopFailoverClasses(t *testing.T) {
	const rateLimited = `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`
	for _, c := range []struct {
		name   string
		on     string // more of the failover block (JSON): `on` ("": the default), first_byte_timeout
		script func(w http.ResponseWriter, r *http.Request)
	}{
		{"connect", "", func(w http.ResponseWriter, _ *http.Request) { refuse(w) }},
		{"first_byte_timeout without headers", fastTimeout, func(_ http.ResponseWriter, r *http.Request) { hang(r) }},
		{"first_byte_timeout after headers and a comment", fastTimeout, func(w http.ResponseWriter, r *http.Request) {
			sendSSE(w, ": working\n\n")
			hang(r)
		}},
		{"429", "", func(w http.ResponseWriter, _ *http.Request) { sendJSON(w, 429, rateLimited) }},
		{"500", "", func(w http.ResponseWriter, _ *http.Request) { sendJSON(w, 500, `{}`) }},
		{"503", "", func(w http.ResponseWriter, _ *http.Request) { sendJSON(w, 503, `{}`) }},
		{"an exact status listed", `"on": ["418"]`, func(w http.ResponseWriter, _ *http.Request) { sendJSON(w, 418, `{}`) }},
		{"200 stream that ends before data", `"on": ["429"]`, func(w http.ResponseWriter, _ *http.Request) { sendSSE(w) }},
		{"200 stream that breaks before data", `"on": ["429"]`, func(w http.ResponseWriter, _ *http.Request) { sendSSE(w); breakOff(w) }},
		{"200 stream that ends with [DONE] before data", `"on": ["429"]`, func(w http.ResponseWriter, _ *http.Request) {
			sendSSE(w, data("[DONE]"))
		}},
		{"200 stream with an error event before data", `"on": ["429"]`, func(w http.ResponseWriter, _ *http.Request) {
			sendSSE(w, data(`{"error":{"message":"overloaded","type":"server_error","code":"overloaded"}}`))
		}},
		{"200 answer that is not SSE", `"on": ["429"]`, func(w http.ResponseWriter, _ *http.Request) { sendJSON(w, 200, okChatAnswer) }},
		{"3xx, not listed", `"on": ["5xx"]`, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Location", "http://10.0.0.7/internal?token=secret")
			w.WriteHeader(http.StatusTemporaryRedirect)
		}},
		{"401, not listed", `"on": ["5xx"]`, func(w http.ResponseWriter, _ *http.Request) {
			sendJSON(w, 401, `{"error":{"message":"Incorrect API key provided: sk-abc***xyz","type":"invalid_request_error","code":"invalid_api_key"}}`)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := fakeUpstream("a", func(_ int, w http.ResponseWriter, r *http.Request) { c.script(w, r) })
			good := chatStream("fine")
			b := fakeUpstream("b", func(_ int, w http.ResponseWriter, _ *http.Request) { sendSSE(w, good...) })
			lr := startLoop(t, chainAB(c.on), a, b)

			res := lr.post("/v1/chat/completions", chatStreamReq)
			res.expect(t, http.StatusOK, "b", "2")
			if want := strings.Join(good, ""); res.body != want {
				t.Errorf("body:\n%s\nwant b's stream exactly:\n%s", res.body, want)
			}
			if res.header.Get("Location") != "" || res.header.Get("Retry-After") != "" {
				t.Errorf("a's headers reached the client: %v", res.header)
			}
			lr.expectSeen(t, map[string]int{"a": 1, "b": 1})
		})
	}
}

// A failure the failover block does not list ends the request at once:
// an upstream status is passed through as the upstream sent it (body and
// headers, less the provider account's), anything else is the relay's own
// error; the next target is never tried.
func TestLoopFailureNotListed(t *testing.T) {
	const badRequest = `{"error":{"message":"messages: too long","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	for _, c := range []struct {
		name     string
		on       string
		script   func(w http.ResponseWriter, r *http.Request)
		status   int
		upstream string // X-Relay-Upstream: the passed-through answer's
		body     string // exact body ("": check code)
		code     string
	}{
		{"400 passed through", "", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-Request-Id", "req_a1")
			w.Header().Set("Set-Cookie", "account=relay; Path=/")
			w.Header().Set("Openai-Organization", "org-relay")
			sendJSON(w, 400, badRequest)
		}, 400, "a", badRequest, ""},
		{"500 passed through when only 429 is listed", `"on": ["429"]`, func(w http.ResponseWriter, _ *http.Request) {
			sendJSON(w, 500, `{"error":{"message":"boom","type":"server_error","code":null}}`)
		}, 500, "a", `{"error":{"message":"boom","type":"server_error","code":null}}`, ""},
		{"connect not listed", `"on": ["5xx"]`, func(w http.ResponseWriter, _ *http.Request) { refuse(w) },
			502, "", "", "all_upstreams_failed"},
		{"timeout not listed", `"on": ["connect", "5xx"], ` + fastTimeout, func(_ http.ResponseWriter, r *http.Request) { hang(r) },
			504, "", "", "upstream_timeout"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := fakeUpstream("a", func(_ int, w http.ResponseWriter, r *http.Request) { c.script(w, r) })
			b := fakeUpstream("b", func(_ int, w http.ResponseWriter, _ *http.Request) { sendSSE(w, chatStream("other")...) })
			lr := startLoop(t, chainAB(c.on), a, b)

			res := lr.post("/v1/chat/completions", chatStreamReq)
			attempts := "1"
			if c.upstream == "" {
				attempts = ""
			}
			res.expect(t, c.status, c.upstream, attempts)
			if c.body != "" && res.body != c.body {
				t.Errorf("body %s, want the upstream's %s", res.body, c.body)
			}
			if c.code != "" && errorCode(res.body) != c.code {
				t.Errorf("body %s, want the relay's %s", res.body, c.code)
			}
			if c.upstream == "a" {
				if res.header.Get("X-Request-Id") != "req_a1" && c.name == "400 passed through" {
					t.Errorf("the upstream's own headers were not passed: %v", res.header)
				}
				if res.header.Get("Set-Cookie") != "" || res.header.Get("Openai-Organization") != "" {
					t.Errorf("the provider account's headers reached the client: %v", res.header)
				}
			}
			lr.expectSeen(t, map[string]int{"a": 1, "b": 0})
		})
	}
}

// What never reaches a client, whatever the failover block lists: a
// redirect (its Location may name an internal address or carry a token)
// and the upstream's refusal of the relay's own key. As the last target,
// the client gets the relay's 502, naming neither.
func TestLoopNeverPassedThrough(t *testing.T) {
	a := fakeUpstream("a", func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Location", "http://10.0.0.7/internal?token=secret")
			w.WriteHeader(http.StatusFound)
			return
		}
		sendJSON(w, 403, `{"error":{"message":"key sk-abc***xyz is not allowed","type":"permission_error","code":null}}`)
	})
	lr := startLoop(t, `{
		"upstreams": [{"name": "a"}],
		"models": [{"alias": "loop", "targets": [{"upstream": "a"}]}],
		"failover": {"on": ["5xx"], "attempts": 2, "backoff_base": "1ms", "backoff_max": "1ms"}
	}`, a)
	res := lr.post("/v1/chat/completions", chatReq)
	res.expect(t, http.StatusBadGateway, "", "")
	if errorCode(res.body) != "all_upstreams_failed" || res.header.Get("Location") != "" ||
		strings.Contains(res.body, "secret") || strings.Contains(res.body, "sk-abc") {
		t.Errorf("headers %v body %s", res.header, res.body)
	}
	lr.expectSeen(t, map[string]int{"a": 2})
}

// A stream request every target answers without a stream is the relay's
// 502 upstream_not_streaming.
func TestLoopNoTargetStreams(t *testing.T) {
	json200 := func(_ int, w http.ResponseWriter, _ *http.Request) { sendJSON(w, 200, okChatAnswer) }
	lr := startLoop(t, chainAB(""), fakeUpstream("a", json200), fakeUpstream("b", json200))
	res := lr.post("/v1/chat/completions", chatStreamReq)
	res.expect(t, http.StatusBadGateway, "", "")
	if errorCode(res.body) != "upstream_not_streaming" {
		t.Errorf("body %s", res.body)
	}
	lr.expectSeen(t, map[string]int{"a": 1, "b": 1})
}

// try_duration bounds every attempt of a request together: when it runs
// out the client gets 504 upstream_timeout, and no further target is
// tried, even one that was never asked.
func TestLoopTryDurationRunsOut(t *testing.T) {
	const failover = `"try_duration": "250ms"`
	t.Run("on the first target", func(t *testing.T) {
		t.Parallel()
		a := fakeUpstream("a", func(_ int, _ http.ResponseWriter, r *http.Request) { hang(r) })
		b := fakeUpstream("b", func(_ int, w http.ResponseWriter, _ *http.Request) { sendSSE(w, chatStream("late")...) })
		lr := startLoop(t, chainAB(failover), a, b)
		res := lr.post("/v1/chat/completions", chatStreamReq)
		res.expect(t, http.StatusGatewayTimeout, "", "")
		if errorCode(res.body) != "upstream_timeout" || !strings.Contains(res.body, "a (model-a): timeout: try_duration ran out") {
			t.Errorf("body %s; want the attempt's timeout named as try_duration's", res.body)
		}
		lr.expectSeen(t, map[string]int{"a": 1, "b": 0})
	})
	t.Run("after a failover", func(t *testing.T) {
		t.Parallel()
		a := fakeUpstream("a", func(_ int, w http.ResponseWriter, _ *http.Request) { sendJSON(w, 503, `{}`) })
		b := fakeUpstream("b", func(_ int, _ http.ResponseWriter, r *http.Request) { hang(r) })
		lr := startLoop(t, chainAB(failover), a, b)
		res := lr.post("/v1/chat/completions", chatReq)
		res.expect(t, http.StatusGatewayTimeout, "", "")
		if errorCode(res.body) != "upstream_timeout" || !strings.Contains(res.body, "a (model-a): status 503; b (model-b): timeout: try_duration ran out") {
			t.Errorf("body %s", res.body)
		}
		lr.expectSeen(t, map[string]int{"a": 1, "b": 1})
	})
}

// OpenAI's 429 insufficient_quota is a billing problem: the next target at
// once, this one never again in the request (however many attempts are
// left, whatever its Retry-After); as the last target its error reaches
// the client with X-Should-Retry: false and no Retry-After.
func TestLoopInsufficientQuota(t *testing.T) {
	const quota = `{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	outOfQuota := func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "2")
		sendJSON(w, http.StatusTooManyRequests, quota)
	}
	t.Run("moves on", func(t *testing.T) {
		t.Parallel()
		b := fakeUpstream("b", func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 1 {
				sendJSON(w, http.StatusBadGateway, `{}`)
				return
			}
			sendJSON(w, 200, okChatAnswer)
		})
		lr := startLoop(t, chainAB(`"attempts": 4`), fakeUpstream("a", outOfQuota), b)
		res := lr.post("/v1/chat/completions", chatReq)
		res.expect(t, http.StatusOK, "b", "3")
		if res.body != okChatAnswer {
			t.Errorf("body %s", res.body)
		}
		lr.expectSeen(t, map[string]int{"a": 1, "b": 2})
	})
	t.Run("in a stream's first event", func(t *testing.T) {
		t.Parallel()
		a := fakeUpstream("a", func(_ int, w http.ResponseWriter, _ *http.Request) { sendSSE(w, data(quota)) })
		b := fakeUpstream("b", func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 1 {
				sendJSON(w, http.StatusBadGateway, `{}`)
				return
			}
			sendSSE(w, chatStream("paid")...)
		})
		lr := startLoop(t, chainAB(`"attempts": 4`), a, b)
		res := lr.post("/v1/chat/completions", chatStreamReq)
		res.expect(t, http.StatusOK, "b", "3")
		if res.body != strings.Join(chatStream("paid"), "") {
			t.Errorf("body %s", res.body)
		}
		lr.expectSeen(t, map[string]int{"a": 1, "b": 2})
	})
	t.Run("the last target", func(t *testing.T) {
		t.Parallel()
		lr := startLoop(t, `{
			"upstreams": [{"name": "a"}],
			"models": [{"alias": "loop", "targets": [{"upstream": "a"}]}],
			"failover": {"attempts": 3, "backoff_base": "1ms", "backoff_max": "1ms"}
		}`, fakeUpstream("a", outOfQuota))
		res := lr.post("/v1/chat/completions", chatReq)
		res.expect(t, http.StatusTooManyRequests, "", "")
		if errorCode(res.body) != "insufficient_quota" || !strings.Contains(res.body, "You exceeded your current quota.") {
			t.Errorf("body %s, want the upstream's error", res.body)
		}
		if res.header.Get("X-Should-Retry") != "false" || res.header.Get("Retry-After") != "" || res.header.Get("Retry-After-Ms") != "" {
			t.Errorf("headers %v: want X-Should-Retry false, no Retry-After", res.header)
		}
		lr.expectSeen(t, map[string]int{"a": 1})
	})
}

// A client that leaves ends everything: the attempt in flight is given
// up and no other target is tried.
func TestLoopClientGone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	a := fakeUpstream("a", func(_ int, _ http.ResponseWriter, r *http.Request) {
		cancel() // the client leaves while a is thinking
		hang(r)
	})
	b := fakeUpstream("b", func(_ int, w http.ResponseWriter, _ *http.Request) { sendSSE(w, chatStream("late")...) })
	lr := startLoop(t, chainAB(""), a, b)
	rec := newStreamRecorder()
	lr.serve(ctx, rec, "/v1/chat/completions", chatStreamReq)
	if res := rec.result(); res.status != 0 || res.body != "" {
		t.Errorf("the client that left was answered %d: %s", res.status, res.body)
	}
	lr.expectSeen(t, map[string]int{"a": 1, "b": 0})
}
