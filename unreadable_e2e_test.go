package llmrelay_test

// An upstream event the translators cannot read faithfully (here a Chat
// chunk that is not JSON, for Messages and Responses clients) ends the
// client's stream with the relay's in-band error upstream_event_unreadable
// after the commit point, never a clean end with something missing, and
// is a stream failure that fails over before it.

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

const (
	unreadableMessages  = `{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	unreadableResponses = `{"model":"m","stream":true,"input":"hi"}`
)

func TestUnreadableUpstreamEventEndsTheStream(t *testing.T) {
	bad := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		streamEvents(w, 0, chunk("Hello"), `{"choices":[{"index":0,"delta":{"content":"secret`, chunk(" world"), `{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, "[DONE]")
	})
	logFile := startRelay(t, `llm_relay {
		upstream bad `+bad.v1()+` {
			api chat
		}
		model m {
			to bad
		}
	}`)
	for _, c := range []struct{ path, body, wantErr string }{
		{"/v1/messages", unreadableMessages, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"The upstream sent an event the relay cannot read"},
		{"/v1/responses", unreadableResponses, "event: error\ndata: {\"type\":\"error\",\"code\":\"upstream_event_unreadable\""},
	} {
		raw := readAll(t, postPath(t, c.path, c.body, "anthropic-version", "2023-06-01"))
		if !strings.Contains(raw, "Hello") || !strings.Contains(raw, c.wantErr) {
			t.Errorf("%s: want the text, then the relay's error %q:\n%s", c.path, c.wantErr, raw)
		}
		for _, lost := range []string{"world", "message_stop", "response.completed", "secret"} {
			if strings.Contains(raw, lost) {
				t.Errorf("%s: %q in the stream after the unreadable event:\n%s", c.path, lost, raw)
			}
		}
	}
	waitFor(t, 5*time.Second, "two relayed log lines", func() bool {
		return strings.Count(readLog(t, logFile), `"msg":"relayed"`) >= 2
	})
	for _, line := range strings.Split(readLog(t, logFile), "\n") {
		if strings.Contains(line, `"msg":"relayed"`) && (!strings.Contains(line, `"stream_error":"upstream_event_unreadable"`) || !strings.Contains(line, "not a JSON object")) {
			t.Errorf("relayed line without the unreadable event and its reason: %s", line)
		}
	}
}

func TestUnreadableUpstreamEventFailsOverBeforeCommit(t *testing.T) {
	bad := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		// A second choice: the request asked for one.
		streamEvents(w, 0, `{"id":"c1","choices":[{"index":1,"delta":{"content":"other"}}]}`, chunk("x"), "[DONE]")
	})
	good := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		streamEvents(w, 0, chunk("Hello"), `{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, "[DONE]")
	})
	logFile := startRelay(t, `llm_relay {
		upstream bad `+bad.v1()+` {
			api chat
		}
		upstream good `+good.v1()+` {
			api chat
		}
		model m {
			to bad
			to good
		}
		failover {
			backoff 1ms 1ms
		}
	}`)
	for _, c := range []struct{ path, body, end string }{
		{"/v1/messages", unreadableMessages, "message_stop"},
		{"/v1/responses", unreadableResponses, "response.completed"},
	} {
		resp := postPath(t, c.path, c.body, "anthropic-version", "2023-06-01")
		raw := readAll(t, resp)
		if resp.Header.Get("X-Relay-Upstream") != "good" || !strings.Contains(raw, "Hello") || !strings.Contains(raw, c.end) || strings.Contains(raw, "other") {
			t.Errorf("%s: upstream %q, want good's whole answer:\n%s", c.path, resp.Header.Get("X-Relay-Upstream"), raw)
		}
	}
	waitFor(t, 5*time.Second, "two relayed log lines", func() bool {
		return strings.Count(readLog(t, logFile), `"msg":"relayed"`) >= 2
	})
	if log := readLog(t, logFile); !strings.Contains(log, "a choice with index 1, which the relay never asks for") {
		t.Errorf("the failed attempt's reason is not logged:\n%s", log)
	}
}
