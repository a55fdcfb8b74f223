package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fast is a pattern with no waits, for tests that only check content.
var fast = Pattern{Kind: Steady, Rate: 0}

// startServer serves s over real HTTP on 127.0.0.1. At cleanup it
// asserts that every handler has returned (no request outlives its
// client) before closing the listener.
func startServer(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	var active atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		active.Add(1)
		defer active.Add(-1)
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		deadline := time.Now().Add(time.Second)
		for active.Load() != 0 {
			if time.Now().After(deadline) {
				t.Errorf("%d handlers still running 1s after the test", active.Load())
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		ts.CloseClientConnections()
		ts.Close()
	})
	return s, ts
}

// post sends a chat completion request.
func post(t *testing.T, ctx context.Context, ts *httptest.Server, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return ts.Client().Do(req)
}

func mustPost(t *testing.T, ts *httptest.Server, body string) *http.Response {
	t.Helper()
	resp, err := post(t, t.Context(), ts, body)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const streamBody = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello world!"}]}`

// event is one SSE data payload and when it arrived.
type event struct {
	data string
	at   time.Time
}

// readEvents reads data events until the body ends. err is nil on a
// clean end and the read error otherwise.
func readEvents(body io.Reader) (events []event, err error) {
	br := bufio.NewReader(body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" {
				err = nil
			}
			return events, err
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			events = append(events, event{strings.TrimSuffix(data, "\n"), time.Now()})
		} else if line != "\n" {
			return events, &unexpectedLine{line}
		}
	}
}

type unexpectedLine struct{ line string }

func (e *unexpectedLine) Error() string { return "unexpected SSE line " + e.line }

// wireChunk decodes the parts of a chunk the tests check.
type wireChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Role             *string `json:"role"`
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

func decodeChunk(t *testing.T, data string) wireChunk {
	t.Helper()
	var c wireChunk
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		t.Fatalf("bad chunk %s: %v", data, err)
	}
	return c
}
