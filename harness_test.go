package llmrelay_test

// The end-to-end harness: a real Caddy (caddytest, in-process) runs the
// relay on 127.0.0.1:9080, in front of fake upstreams that are plain
// httptest servers on 127.0.0.1 whose behaviour each test scripts and whose
// received requests each test inspects. All caddytest tests live in this
// package: Caddy runs once per test binary on fixed ports.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/llmrelay/caddy-llm-relay"
)

const relayBase = "http://127.0.0.1:9080"

// startRelay loads a Caddy config whose single site runs the given
// llm_relay block (and any extra site blocks), logging at DEBUG to a file
// the test can read back. It returns the log file path.
func startRelay(t *testing.T, relayBlock string, extraSites ...string) string {
	t.Helper()
	logFile := filepath.Join(t.TempDir(), "caddy.log")
	cfg := fmt.Sprintf(`{
	admin localhost:2999
	http_port 9080
	https_port 9443
	auto_https off
	skip_install_trust
	log {
		output file %s
		format json
		level DEBUG
	}
}

:9080 {
	%s
}
%s
`, logFile, relayBlock, strings.Join(extraSites, "\n"))
	tester := caddytest.NewTester(t)
	tester.InitServer(cfg, "caddyfile")
	// A reload closes the old servers' idle keep-alive connections (see
	// docs/errors.md on reloads); a POST sent on one gets EOF and Go does not
	// retry it. Start each config on fresh connections.
	httpClient.CloseIdleConnections()
	freshConfig.Store(true)
	return logFile
}

// seenRequest is what a fake upstream received.
type seenRequest struct {
	at     time.Time
	path   string
	query  string
	header http.Header
	body   map[string]any
}

// fakeUpstream is an httptest server on 127.0.0.1 with a scripted handler.
// handle gets the 1-based number of the request.
type fakeUpstream struct {
	*httptest.Server
	mu     sync.Mutex
	seen   []seenRequest
	handle func(n int, w http.ResponseWriter, r *http.Request)
}

func newFakeUpstream(t *testing.T, handle func(n int, w http.ResponseWriter, r *http.Request)) *fakeUpstream {
	t.Helper()
	f := &fakeUpstream{handle: handle}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		f.mu.Lock()
		f.seen = append(f.seen, seenRequest{at: time.Now(), path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone(), body: body})
		n := len(f.seen)
		f.mu.Unlock()
		f.handle(n, w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// requests returns a copy of what the upstream received so far.
func (f *fakeUpstream) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

// v1 is the upstream's base URL as the relay config wants it.
func (f *fakeUpstream) v1() string { return f.URL + "/v1" }

// Scripted upstream behaviours.

func answerJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

const okCompletion = `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`

func chunk(content string) string {
	b, _ := json.Marshal(content)
	return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":` + string(b) + `},"finish_reason":null}]}`
}

// streamEvents writes SSE data events, flushing each, with an optional gap.
func streamEvents(w http.ResponseWriter, gap time.Duration, datas ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, d := range datas {
		_, _ = io.WriteString(w, "data: "+d+"\n\n")
		w.(http.Flusher).Flush()
		if gap > 0 {
			time.Sleep(gap)
		}
	}
}

// Client side.

// post sends a chat request to the relay and returns the response.
func post(t *testing.T, body string, header ...string) *http.Response {
	t.Helper()
	return postPath(t, "/v1/chat/completions", body, header...)
}

// postPath sends a JSON POST to a path of the relay.
func postPath(t *testing.T, path, body string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, relayBase+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil && freshConfig.Swap(false) && errors.Is(err, io.EOF) {
		// The first request on a config just loaded may meet the old
		// servers' shutdown (Caddy's reload race, docs/errors.md: "a few
		// requests per reload get EOF before any response byte"). Once,
		// and only then: a relay that breaks a connection any other time
		// still fails the test.
		req.Body = io.NopCloser(strings.NewReader(body))
		resp, err = httpClient.Do(req)
	}
	freshConfig.Store(false)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	return resp
}

// freshConfig is set by startRelay: the next POST is the first on the
// new config.
var freshConfig atomic.Bool

var httpClient = &http.Client{Timeout: 30 * time.Second}

// readAll reads and closes a response body.
func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return string(b)
}

// sseDatas splits an SSE body into its data payloads, in order.
func sseDatas(body string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// apiErr decodes an OpenAI-shaped error body.
type apiErr struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	} `json:"error"`
}

func decodeErr(t *testing.T, body string) apiErr {
	t.Helper()
	var e apiErr
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code == "" {
		t.Fatalf("not an OpenAI error body: %q", body)
	}
	return e
}

// waitFor polls cond every 10ms until it holds or the bound passes.
func waitFor(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s waiting for %s", bound, what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// readLog returns the Caddy log written so far.
func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading log: %v", err)
	}
	return string(b)
}

// mustContain fails unless s contains every want.
func mustContain(t *testing.T, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("missing %q in:\n%s", w, s)
		}
	}
}

// requirePython returns the path of python3, skipping the test when it is
// not on PATH, or failing it when RELAY_REQUIRE_PYTHON=1 (.ci/run installs
// it and must run the test).
func requirePython(t *testing.T) string {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("RELAY_REQUIRE_PYTHON") == "1" {
			t.Fatal("python3 is not on PATH (RELAY_REQUIRE_PYTHON=1)")
		}
		t.Skip("python3 is not on PATH")
	}
	return python
}
