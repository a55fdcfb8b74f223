package sim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// anthropicError is Anthropic's error body, as the tests decode it.
type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// decodeAnthropicError checks that resp is an Anthropic error with the
// given status and error type.
func decodeAnthropicError(t *testing.T, resp *http.Response, status int, typ string) anthropicError {
	t.Helper()
	var e anthropicError
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("status %d: bad error body: %v", resp.StatusCode, err)
	}
	if resp.StatusCode != status || e.Type != "error" || e.Error.Type != typ || e.Error.Message == "" {
		t.Errorf("got %d %+v, want %d with error type %q", resp.StatusCode, e, status, typ)
	}
	return e
}

func TestMessagesStatusFaultsInAnthropicShape(t *testing.T) {
	for _, tc := range []struct {
		status int
		typ    string
	}{
		{400, "invalid_request_error"}, {401, "authentication_error"}, {403, "permission_error"},
		{404, "not_found_error"}, {413, "request_too_large"}, {429, "rate_limit_error"},
		{500, "api_error"}, {529, "overloaded_error"},
		{422, "invalid_request_error"}, {503, "overloaded_error"}, // the relay's table (anthropic.ErrorType)
	} {
		_, ts := startServer(t, Config{Faults: []Fault{{Kind: FaultStatus, Status: tc.status, RetryAfter: "3"}}})
		for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
			resp := postTo(t, ts, path, msgBody(`"stream":true,`))
			decodeAnthropicError(t, resp, tc.status, tc.typ)
			if resp.Header.Get("Retry-After") != "3" {
				t.Errorf("%d %s: Retry-After %q", tc.status, path, resp.Header.Get("Retry-After"))
			}
		}
	}
}

func TestOverloadedFault(t *testing.T) {
	s, ts := startServer(t, Config{Faults: []Fault{{Kind: FaultOverloaded, RetryAfter: "1"}}})
	for _, body := range []string{msgBody(`"stream":true,`), msgBody(``)} {
		resp := postTo(t, ts, "/v1/messages", body)
		e := decodeAnthropicError(t, resp, 529, "overloaded_error")
		if e.Error.Message != "Overloaded" || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("messages: %+v, Retry-After %q", e, resp.Header.Get("Retry-After"))
		}
	}
	resp := mustPost(t, ts, streamBody)
	var e apiError
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 || e.Error.Type != "server_error" || e.Error.Code != "overloaded" || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("chat: %d %+v", resp.StatusCode, e)
	}
	if s.Requests() != 3 {
		t.Errorf("Requests() = %d", s.Requests())
	}
}

func TestMessagesErrorFault(t *testing.T) {
	wantR, _ := Texts(msgCfg)
	for _, after := range []int{0, 1, 3, 1000} {
		cfg := msgCfg
		cfg.Faults = []Fault{{Kind: FaultError, After: after}}
		_, ts := startServer(t, cfg)
		resp := postTo(t, ts, "/v1/messages", msgBody(`"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},`))
		events, err := readMsgEvents(t, resp.Body)
		if err != nil || len(events) == 0 {
			t.Fatalf("after %d: %d events, %v", after, len(events), err)
		}
		last := events[len(events)-1]
		if last.typ != "error" || last.raw != `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` {
			t.Errorf("after %d: last event %s %s", after, last.typ, last.raw)
		}
		counted := 0
		for _, ev := range events[:len(events)-1] {
			switch ev.typ {
			case "message_stop", "message_delta", "error":
				t.Errorf("after %d: %s before the error", after, ev.typ)
			case "message_start":
				counted++
			case "content_block_delta":
				if ev.data["delta"].(map[string]any)["type"] != "signature_delta" {
					counted++
				}
			}
		}
		want := min(after, 1+len(wantR)+6) // message_start, thinking and text deltas
		if counted != want {
			t.Errorf("after %d: %d counted events before the error, want %d", after, counted, want)
		}
	}

	// Not streaming: a 500 in Anthropic's shape.
	cfg := msgCfg
	cfg.Faults = []Fault{{Kind: FaultError}}
	_, ts := startServer(t, cfg)
	decodeAnthropicError(t, postTo(t, ts, "/v1/messages", msgBody(``)), 500, "api_error")
}

func TestMessagesDropFault(t *testing.T) {
	cfg := msgCfg
	cfg.Faults = []Fault{{Kind: FaultDrop, After: 3}}
	_, ts := startServer(t, cfg)
	resp := postTo(t, ts, "/v1/messages", msgBody(`"stream":true,`))
	events, err := readMsgEvents(t, resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("read error %v, want unexpected EOF", err)
	}
	// message_start, ping, text block start, 2 text deltas.
	want := "message_start ping content_block_start content_block_delta content_block_delta"
	if r := reassemble(t, events); strings.Join(r.types, " ") != want {
		t.Errorf("events before the drop: %v, want %s", r.types, want)
	}

	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+path, strings.NewReader(msgBody(``)))
		if resp, err := ts.Client().Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("%s: not streaming, the drop answered %d", path, resp.StatusCode)
		}
	}
}

func TestMessagesStallEndsWhenClientCancels(t *testing.T) {
	_, ts := startServer(t, Config{Faults: []Fault{{Kind: FaultStall}}})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/messages", strings.NewReader(msgBody(`"stream":true,`)))
	resp, err := ts.Client().Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("stall answered %d", resp.StatusCode)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v", err)
	}
}

func TestMessagesBadRequests(t *testing.T) {
	s, ts := startServer(t, msgCfg)
	decodeAnthropicError(t, postTo(t, ts, "/v1/messages", `{"model":`), 400, "invalid_request_error")
	decodeAnthropicError(t, postTo(t, ts, "/v1/messages/count_tokens", `[1]`), 400, "invalid_request_error")
	resp, err := ts.Client().Get(ts.URL + "/v1/messages")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	decodeAnthropicError(t, resp, 405, "invalid_request_error")
	if resp.Header.Get("Allow") != "POST" {
		t.Errorf("Allow %q", resp.Header.Get("Allow"))
	}
	if s.Requests() != 2 { // the GET never reached the endpoint
		t.Errorf("Requests() = %d", s.Requests())
	}
}

// TestFaultDrawsShareOneCounter checks that the n-th request draws the
// same fault whatever the endpoints of the requests before it.
func TestFaultDrawsShareOneCounter(t *testing.T) {
	cfg := Config{Seed: 42, ReasoningPattern: fast, ContentPattern: fast,
		Faults: []Fault{{Kind: FaultStatus, Status: 503, Rate: 0.5}}}
	const n = 30
	failed := func(mixed bool) []bool {
		s, ts := startServer(t, cfg)
		var out []bool
		for i := range n {
			var resp *http.Response
			switch {
			case !mixed || i%3 == 0:
				resp = mustPost(t, ts, `{"model":"m"}`)
			case i%3 == 1:
				resp = postTo(t, ts, "/v1/messages", msgBody(``))
			default:
				resp = postTo(t, ts, "/v1/messages/count_tokens", msgBody(``))
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			out = append(out, resp.StatusCode == 503)
		}
		if s.Requests() != n {
			t.Errorf("Requests() = %d after %d requests", s.Requests(), n)
		}
		return out
	}
	chat, mixed := failed(false), failed(true)
	hits := 0
	for i := range n {
		if chat[i] != mixed[i] {
			t.Errorf("request %d: failed %v on chat only, %v mixed", i+1, chat[i], mixed[i])
		}
		if chat[i] {
			hits++
		}
	}
	if hits == 0 || hits == n {
		t.Errorf("rate 0.5 hit %d of %d: the test proves nothing", hits, n)
	}
}
