package sim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// decodeOpenAIError checks that resp is an OpenAI error with the given
// status and error type.
func decodeOpenAIError(t *testing.T, resp *http.Response, status int, typ string) apiError {
	t.Helper()
	var e apiError
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("status %d: bad error body: %v", resp.StatusCode, err)
	}
	if resp.StatusCode != status || e.Error.Type != typ || e.Error.Message == "" {
		t.Errorf("got %d %+v, want %d with error type %q", resp.StatusCode, e, status, typ)
	}
	return e
}

func TestResponsesStatusFaults(t *testing.T) {
	for _, tc := range []struct {
		fault  Fault
		status int
		typ    string
	}{
		{Fault{Kind: FaultStatus, Status: 429, RetryAfter: "3"}, 429, "rate_limit_error"},
		{Fault{Kind: FaultStatus, Status: 401, RetryAfter: "3"}, 401, "authentication_error"},
		{Fault{Kind: FaultStatus, Status: 400, RetryAfter: "3"}, 400, "invalid_request_error"},
		{Fault{Kind: FaultStatus, Status: 500, RetryAfter: "3"}, 500, "server_error"},
		{Fault{Kind: FaultOverloaded, RetryAfter: "3"}, 503, "server_error"}, // as on Chat: OpenAI has no 529
	} {
		_, ts := startServer(t, Config{Faults: []Fault{tc.fault}})
		for _, body := range []string{respBody(`"stream":true,`), respBody(``)} {
			resp := postTo(t, ts, "/v1/responses", body)
			decodeOpenAIError(t, resp, tc.status, tc.typ)
			if resp.Header.Get("Retry-After") != "3" {
				t.Errorf("%d: Retry-After %q", tc.status, resp.Header.Get("Retry-After"))
			}
		}
	}
}

func TestResponsesErrorFault(t *testing.T) {
	wantR, wantC := Texts(msgCfg)
	for _, after := range []int{0, 1, 3, 1000} {
		cfg := msgCfg
		cfg.Faults = []Fault{{Kind: FaultError, After: after}}
		_, ts := startServer(t, cfg)
		resp := postTo(t, ts, "/v1/responses", respBody(`"stream":true,"reasoning":{"effort":"medium"},`))
		events, err := readRespEvents(t, resp.Body)
		if err != nil || len(events) == 0 {
			t.Fatalf("after %d: %d events, %v", after, len(events), err)
		}
		last := events[len(events)-1]
		// Nested under "error" (what the SDKs raise on, and what the
		// live API sends) and flat (what OpenAI documents).
		want := `{"type":"error","error":{"type":"server_error","code":"server_error","message":"simulated upstream error","param":null},` +
			`"code":"server_error","message":"simulated upstream error","param":null,"sequence_number":` + strconv.Itoa(len(events)-1) + `}`
		if last.typ != "error" || last.raw != want {
			t.Errorf("after %d: last event %s %s", after, last.typ, last.raw)
		}
		counted := 0
		for _, ev := range events[:len(events)-1] {
			switch {
			case ev.typ == "response.completed" || ev.typ == "error":
				t.Errorf("after %d: %s before the error", after, ev.typ)
			case ev.typ == "response.created", strings.HasSuffix(ev.typ, ".delta"):
				counted++
			}
		}
		if want := min(after, 1+len(wantR)+len(wantC)); counted != want {
			t.Errorf("after %d: %d counted events before the error, want %d", after, counted, want)
		}
	}

	// Not streaming: a 500 with OpenAI's error body.
	cfg := msgCfg
	cfg.Faults = []Fault{{Kind: FaultError}}
	_, ts := startServer(t, cfg)
	decodeOpenAIError(t, postTo(t, ts, "/v1/responses", respBody(``)), 500, "server_error")
}

func TestResponsesDropFault(t *testing.T) {
	cfg := msgCfg
	cfg.Faults = []Fault{{Kind: FaultDrop, After: 3}}
	_, ts := startServer(t, cfg)
	resp := postTo(t, ts, "/v1/responses", respBody(`"stream":true,`))
	events, err := readRespEvents(t, resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("read error %v, want unexpected EOF", err)
	}
	// created, in_progress, item added, part added, 2 text deltas.
	want := "response.created response.in_progress response.output_item.added response.content_part.added " +
		"response.output_text.delta response.output_text.delta"
	if r := reassembleResp(t, events); strings.Join(r.types, " ") != want {
		t.Errorf("events before the drop: %v, want %s", r.types, want)
	}

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+"/v1/responses", strings.NewReader(respBody(``)))
	if resp, err := ts.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("not streaming, the drop answered %d", resp.StatusCode)
	}
}

func TestResponsesStallEndsWhenClientCancels(t *testing.T) {
	_, ts := startServer(t, Config{Faults: []Fault{{Kind: FaultStall}}})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/responses", strings.NewReader(respBody(`"stream":true,`)))
	resp, err := ts.Client().Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("stall answered %d", resp.StatusCode)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v", err)
	}
}

func TestResponsesBadRequests(t *testing.T) {
	s, ts := startServer(t, msgCfg)
	decodeOpenAIError(t, postTo(t, ts, "/v1/responses", `{"model":`), 400, "invalid_request_error")
	resp, err := ts.Client().Get(ts.URL + "/v1/responses")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	decodeOpenAIError(t, resp, 405, "invalid_request_error")
	if resp.Header.Get("Allow") != "POST" {
		t.Errorf("Allow %q", resp.Header.Get("Allow"))
	}
	if s.Requests() != 1 { // the GET never reached the endpoint
		t.Errorf("Requests() = %d", s.Requests())
	}
}

// TestResponsesShareTheFaultCounter checks that a Responses request is
// the n-th draw like any other: the same failures with every third
// request sent to /responses as with all sent to Chat.
func TestResponsesShareTheFaultCounter(t *testing.T) {
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
				resp = postTo(t, ts, "/v1/responses", respBody(``))
			default:
				resp = postTo(t, ts, "/v1/messages", msgBody(``))
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
