package llmrelay

// The request loop's in-package harness, as reverse_proxy's
// retries_test.go drives its ServeHTTP with a test transport: a Relay
// built from its JSON config, provisioned on a bare caddy.Context (no
// Caddy server, no listener, no port), whose upstreams answer through
// loopTransport, a reverse_proxy transport module that runs a scripted
// handler in process; ServeHTTP is called with a recorder that a test may
// watch while the response is being written.
//
// The tests use no unexported name of the relay: the config is the JSON
// form, the transport is plugged in through the upstreams' `transport`
// member as any operator's would be, and every assertion is on what the
// client got and what each upstream was sent. They guard the request
// loop's behaviour while its insides move.
//
// Top-level tests are not parallel (their subtests are): so they run
// before the binary's end-to-end tests, whose Caddy attaches the durable
// store, and one test's Cleanup (a save) never meets another's Provision;
// see durable_lock_test.go for the deadlock that otherwise hangs the
// binary now and then.
//
// The fake transport behaves as net/http's does where the relay can tell:
// RoundTrip returns when the handler has written its headers (or failed
// to connect), the body is a pipe the handler writes piece by piece, a
// cancelled request context fails RoundTrip and the body's reads, and a
// handler that breaks its stream off makes the relay's next read fail.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(loopTransport{})
}

// loopTransport is the fake upstream transport, configured as
// `"transport": {"protocol": "looptest", "id": "<fake>"}`; the id names a
// loopUpstream registered by startLoop.
type loopTransport struct {
	ID string `json:"id"`
	up *loopUpstream
}

// CaddyModule returns the Caddy module information.
func (loopTransport) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.transport.looptest",
		New: func() caddy.Module { return new(loopTransport) },
	}
}

// Provision finds the fake upstream the transport answers for.
func (lt *loopTransport) Provision(caddy.Context) error {
	v, ok := loopFakes.Load(lt.ID)
	if !ok {
		return fmt.Errorf("no fake upstream %q is registered", lt.ID)
	}
	lt.up = v.(*loopUpstream)
	return nil
}

// RoundTrip answers with the fake upstream's handler.
func (lt *loopTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return lt.up.roundTrip(req)
}

// loopFakes holds the fake upstreams by transport id.
var loopFakes sync.Map

// loopSeq makes every relay's base URLs its own: the relay keeps a
// target's health and in-flight count process-wide, by upstream name and
// base URL, and subtests run in parallel.
var loopSeq atomic.Int64

// loopSeen is one request an upstream received.
type loopSeen struct {
	method string
	path   string
	header http.Header
	body   []byte
}

// field is a top-level member of the JSON body, decoded (nil: absent).
func (s loopSeen) field(name string) any {
	var m map[string]any
	_ = json.Unmarshal(s.body, &m)
	return m[name]
}

// loopUpstream is one fake upstream: a handler, as an HTTP server's, that
// gets the 1-based number of the request, and the requests it received.
type loopUpstream struct {
	name    string
	handle  func(n int, w http.ResponseWriter, r *http.Request)
	mu      sync.Mutex
	seen    []loopSeen
	running sync.WaitGroup // handlers not yet returned
}

// fakeUpstream makes a fake upstream for the config's upstream of that name.
func fakeUpstream(name string, handle func(n int, w http.ResponseWriter, r *http.Request)) *loopUpstream {
	return &loopUpstream{name: name, handle: handle}
}

// requests returns what the upstream received so far.
func (u *loopUpstream) requests() []loopSeen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]loopSeen(nil), u.seen...)
}

func (u *loopUpstream) roundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		_ = req.Body.Close() // a RoundTripper closes the request body, even on errors
		if err != nil {
			return nil, fmt.Errorf("reading the request body: %w", err)
		}
	}
	u.mu.Lock()
	u.seen = append(u.seen, loopSeen{method: req.Method, path: req.URL.Path, header: req.Header.Clone(), body: body})
	n := len(u.seen)
	u.mu.Unlock()

	ctx := req.Context()
	sr := req.Clone(ctx) // the handler's request: a RoundTripper must not change the caller's
	sr.Body = io.NopCloser(bytes.NewReader(body))
	pr, pw := io.Pipe()
	w := &loopWriter{header: make(http.Header), pw: pw, ready: make(chan struct{})}
	u.running.Add(1)
	go func() {
		defer u.running.Done()
		defer w.finish(ctx)
		u.handle(n, w, sr)
	}()
	select {
	case <-w.ready:
	case <-ctx.Done():
		_ = pr.CloseWithError(ctx.Err()) // a handler blocked in a Write is let go
		return nil, ctx.Err()
	}
	if w.refused != nil {
		_ = pr.Close()
		return nil, w.refused
	}
	rb := &loopBody{pr: pr, closed: make(chan struct{})}
	go func() {
		// As net/http's: a cancelled request fails the body's reads (and
		// the handler's writes).
		select {
		case <-ctx.Done():
			_ = pr.CloseWithError(ctx.Err())
		case <-rb.closed:
		}
	}()
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          rb,
		ContentLength: -1,
		Request:       req,
	}, nil
}

// loopBody is the response body the relay reads: the handler's writes.
type loopBody struct {
	pr     *io.PipeReader
	once   sync.Once
	closed chan struct{}
}

func (b *loopBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *loopBody) Close() error {
	b.once.Do(func() {
		_ = b.pr.Close()
		close(b.closed)
	})
	return nil
}

// loopWriter is the handler's side: headers go out at WriteHeader (or the
// first Write), each Write reaches the relay as it is read.
type loopWriter struct {
	header  http.Header
	sent    http.Header // the headers as they went out
	status  int
	pw      *io.PipeWriter
	ready   chan struct{} // closed when the headers are out, or the connect failed
	refused error
}

func (w *loopWriter) Header() http.Header { return w.header }

func (w *loopWriter) WriteHeader(code int) {
	if w.status != 0 || w.refused != nil {
		return
	}
	w.status, w.sent = code, w.header.Clone()
	close(w.ready)
}

func (w *loopWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.pw.Write(b)
}

// Flush is a no-op: every Write is delivered as it is read.
func (w *loopWriter) Flush() {}

// finish ends the response when the handler returns, as a server does:
// 200 if nothing was written, then the end of the body. A handler that
// returns because the request was cancelled ends nothing cleanly: as with
// net/http, the relay's reads fail with the context's error, never a
// clean EOF.
func (w *loopWriter) finish(ctx context.Context) {
	if w.refused == nil && w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if err := ctx.Err(); err != nil {
		_ = w.pw.CloseWithError(err)
		return
	}
	_ = w.pw.Close() // after breakOff, the break stands
}

// Scripts: what a fake upstream's handler may do besides writing.

// refuse fails the connection: RoundTrip returns an error, as a dial
// that is refused does. The handler must not write anything else.
func refuse(w http.ResponseWriter) {
	lw := w.(*loopWriter)
	lw.refused = errors.New("dial tcp 192.0.2.1:443: connect: connection refused")
	close(lw.ready)
}

// breakOff breaks the body off: the relay's next read fails with a
// connection error, after every byte written before.
func breakOff(w http.ResponseWriter) {
	w.(*loopWriter).pw.CloseWithError(errors.New("read tcp 192.0.2.1:443: connection reset by peer"))
}

// hang blocks until the relay gives the request up.
func hang(r *http.Request) { <-r.Context().Done() }

// sendJSON answers status with a JSON body.
func sendJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// sendSSE answers 200 with an event stream, one Write per block (each
// block as given: "data: ...\n\n", a comment, a piece of an event).
func sendSSE(w http.ResponseWriter, blocks ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, b := range blocks {
		if _, err := io.WriteString(w, b); err != nil {
			return // the relay gave the stream up
		}
	}
}

// data is one SSE data event.
func data(d string) string { return "data: " + d + "\n\n" }

// event is one SSE event with a type.
func event(typ, d string) string { return "event: " + typ + "\ndata: " + d + "\n\n" }

// chatChunk is a Chat Completions chunk carrying content.
func chatChunk(content string) string {
	b, _ := json.Marshal(content)
	return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":` + string(b) + `},"finish_reason":null}]}`
}

// chatReasoning is a Chat Completions chunk carrying reasoning.
func chatReasoning(text string) string {
	b, _ := json.Marshal(text)
	return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":` + string(b) + `},"finish_reason":null}]}`
}

// chatStop is the last Chat chunk of an answer.
const chatStop = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`

// chatStream is a whole Chat stream answering the texts.
func chatStream(texts ...string) []string {
	var out []string
	for _, s := range texts {
		out = append(out, data(chatChunk(s)))
	}
	return append(out, data(chatStop), data("[DONE]"))
}

const okChatAnswer = `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`

// Request bodies. Every model alias of the loop tests is "loop": the
// relay's metrics are process-wide, and the end-to-end tests of the same
// binary read some of their values whole (alias "m", upstream "u").
const (
	chatReq         = `{"model":"loop","messages":[{"role":"user","content":"hi"}]}`
	chatStreamReq   = `{"model":"loop","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	messagesReq     = `{"model":"loop","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	responsesReq    = `{"model":"loop","stream":true,"input":"hi"}`
	completionsReq  = `{"model":"loop","stream":true,"prompt":"hi"}`
	anthropicHeader = "Anthropic-Version"
)

// loopKey is the client key every request of the tests presents.
const loopKey = "sk-loop-test"

// loopRelay is a provisioned Relay, and its fake upstreams by name.
type loopRelay struct {
	t     *testing.T
	h     *Relay
	fakes map[string]*loopUpstream
}

// startLoop builds a Relay from its JSON config, gives each upstream of
// the config the fake of its name as its transport (and a base URL of
// its own, unless the config sets one), and provisions it without a
// Caddy server. Everything is cleaned up when the test ends; an upstream
// request still running by then fails the test (the relay must end every
// request it starts).
func startLoop(t *testing.T, config string, fakes ...*loopUpstream) *loopRelay {
	t.Helper()
	h := new(Relay)
	dec := json.NewDecoder(strings.NewReader(config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(h); err != nil {
		t.Fatalf("the test's config: %v", err)
	}
	if len(h.Keys) == 0 {
		// A key of the tests' own: a relay without one warns at load.
		h.Keys = []ClientKey{{Token: loopKey, Name: "loop"}}
	}
	lr := &loopRelay{t: t, h: h, fakes: make(map[string]*loopUpstream)}
	for _, f := range fakes {
		lr.fakes[f.name] = f
	}
	seq := loopSeq.Add(1)
	host := strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	for _, u := range h.Upstreams {
		f := lr.fakes[u.Name]
		if f == nil {
			t.Fatalf("the config's upstream %q has no fake", u.Name)
		}
		id := fmt.Sprintf("%d/%s", seq, u.Name)
		loopFakes.Store(id, f)
		t.Cleanup(func() { loopFakes.Delete(id) })
		if u.BaseURL == "" {
			u.BaseURL = fmt.Sprintf("http://%s-%d-%s.loop.invalid/v1", host, seq, u.Name)
		}
		u.TransportRaw = json.RawMessage(fmt.Sprintf(`{"protocol":"looptest","id":%q}`, id))
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	if err := h.Provision(ctx); err != nil {
		cancel()
		t.Fatalf("provision: %v", err)
	}
	t.Cleanup(func() {
		_ = h.Cleanup()
		cancel()
		for _, f := range fakes {
			done := make(chan struct{})
			go func() { f.running.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Errorf("upstream %s: a request was still running 5s after the test: the relay did not end it", f.name)
			}
		}
	})
	if err := h.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	return lr
}

// post sends a POST with a JSON body to path (header: name, value pairs)
// and returns the answer once ServeHTTP has returned.
func (lr *loopRelay) post(path, body string, header ...string) *loopResult {
	lr.t.Helper()
	rec := newStreamRecorder()
	lr.serve(context.Background(), rec, path, body, header...)
	return rec.result()
}

// serve runs one request through ServeHTTP into rec, as Caddy's server
// would call the handler.
func (lr *loopRelay) serve(ctx context.Context, rec *streamRecorder, path, body string, header ...string) {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://relay.test"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+loopKey)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	defer rec.close()
	defer func() {
		// A body broken after its commit aborts the response, as
		// reverse_proxy does: Caddy's server recovers this panic and
		// closes the connection.
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			rec.abort()
		}
	}()
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		lr.t.Errorf("the relay handed a POST %s to the next handler", path)
		return nil
	})
	if err := lr.h.ServeHTTP(rec, req, next); err != nil {
		lr.t.Errorf("ServeHTTP: %v", err)
	}
}

// streamRecorder is a ResponseWriter a test may read while the relay
// writes it (the relay's heartbeat timer writes from its own goroutine).
type streamRecorder struct {
	mu      sync.Mutex
	header  http.Header // as the handler sets it
	sent    http.Header // as it went out, at WriteHeader
	status  int
	body    bytes.Buffer
	aborted bool
	closed  bool          // ServeHTTP returned
	late    int           // writes after that: a timer that outlived the request
	changed chan struct{} // closed (and replaced) at every write
}

func newStreamRecorder() *streamRecorder {
	return &streamRecorder{header: make(http.Header), changed: make(chan struct{})}
}

func (r *streamRecorder) Header() http.Header { return r.header }

func (r *streamRecorder) WriteHeader(code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writeHeader(code)
}

func (r *streamRecorder) writeHeader(code int) {
	if r.closed {
		r.late++
		return
	}
	if r.status != 0 {
		return
	}
	r.status, r.sent = code, r.header.Clone()
	r.notify()
}

func (r *streamRecorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writeHeader(http.StatusOK)
	if r.closed {
		return 0, http.ErrHandlerTimeout // what a finished response's writer says
	}
	r.body.Write(b)
	r.notify()
	return len(b), nil
}

func (r *streamRecorder) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writeHeader(http.StatusOK)
}

func (r *streamRecorder) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
}

func (r *streamRecorder) abort() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.aborted = true
	r.notify()
}

func (r *streamRecorder) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// await blocks until cond holds of the body written so far, or fails the
// test after 5s (a bound, not a timing: the cases wait for events).
func (r *streamRecorder) await(t *testing.T, what string, cond func(body string) bool) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		r.mu.Lock()
		ok, ch := cond(r.body.String()), r.changed
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Errorf("waited 5s for the client to get %s", what)
			return
		}
	}
}

// loopResult is what the client got.
type loopResult struct {
	status  int
	header  http.Header
	body    string
	aborted bool // the connection was aborted (a broken non-stream body)
	late    int  // writes after ServeHTTP returned
}

func (r *streamRecorder) result() *loopResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &loopResult{status: r.status, header: r.sent, body: r.body.String(), aborted: r.aborted, late: r.late}
}

// sseEvent is one event of the client's stream.
type sseEvent struct{ typ, data string }

// events parses the client's stream: its events (comments left out).
func (res *loopResult) events() []sseEvent {
	var out []sseEvent
	for _, block := range strings.Split(res.body, "\n\n") {
		var ev sseEvent
		has := false
		for _, line := range strings.Split(block, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				ev.typ, has = v, true
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				ev.data, has = v, true
			}
		}
		if has {
			out = append(out, ev)
		}
	}
	return out
}

// datas is the data of each event of the client's stream.
func (res *loopResult) datas() []string {
	var out []string
	for _, ev := range res.events() {
		out = append(out, ev.data)
	}
	return out
}

// heartbeats counts the relay's keep-alive comments.
func (res *loopResult) heartbeats() int { return strings.Count(res.body, ": keep-alive\n\n") }

// errorCode is the code of an OpenAI-shaped error body or data.
func errorCode(d string) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(d), &e)
	return e.Error.Code
}

// expect checks the answer's status and relay headers (attempts "": not
// checked).
func (res *loopResult) expect(t *testing.T, status int, upstream, attempts string) {
	t.Helper()
	if res.status != status {
		t.Errorf("status %d, want %d; body:\n%s", res.status, status, res.body)
	}
	if got := res.header.Get("X-Relay-Upstream"); got != upstream {
		t.Errorf("X-Relay-Upstream %q, want %q", got, upstream)
	}
	if got := res.header.Get("X-Relay-Attempts"); attempts != "" && got != attempts {
		t.Errorf("X-Relay-Attempts %q, want %s", got, attempts)
	}
	if res.late > 0 {
		t.Errorf("%d writes to the response after ServeHTTP returned", res.late)
	}
}

// expectSeen checks how many requests each fake upstream got.
func (lr *loopRelay) expectSeen(t *testing.T, counts map[string]int) {
	t.Helper()
	for name, want := range counts {
		if got := len(lr.fakes[name].requests()); got != want {
			t.Errorf("upstream %s got %d requests, want %d", name, got, want)
		}
	}
}
