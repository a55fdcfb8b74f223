package llmrelay

import (
	"os"

	"context"
	"encoding/json"
	"fmt"
	"github.com/llmrelay/caddy-llm-relay/internal/sim"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// BenchmarkContinuationGap measures issue 30's "the time from the break
// being detected to the continuation request on the wire": a Chat stream
// from an upstream on loopback that breaks right after the commit point
// (a role chunk and one content chunk, then a dropped connection or a
// server error event), continued by a second upstream on loopback. The
// gap is measured from the moment the breaking upstream broke the stream
// (just before the abort, or just before it wrote the error event) to
// the moment the relay's transport wrote the continuation's request
// (httptrace WroteRequest, on the continuation's attempt: the client
// trace rides the incoming request's context into every upstream request
// of the chain). It holds the relay's own time (reading the break,
// Recorder.Seam, handoff.Continue, the continuation's body, walking the
// chain, writing the request) plus the loopback's delivery of the break
// to the relay's read: an upper bound of the relay's own time, with no
// hook in the relay.
//
// Every other request of the breaking upstream answers whole, so that the
// relay's passive health (3 consecutive failures eject) never reorders
// the chain; those requests are not measured. The relay is provisioned
// in process, without a Caddy server (as the loop tests do), so the
// benchmark needs no fixed port: run it with
//
//	go test -run '^$' -bench BenchmarkContinuationGap -benchtime 2000x .
//
// It reports the gap's p50, p90, p99 and max in µs per sub-benchmark (the
// ns/op is the whole request's, both upstreams included). precommit-503
// is today's failover before the commit point, measured the same way (a
// 503 instead of the broken stream, the second target's request
// written): the baseline, in the same run, of what a loaded machine adds
// to any such gap.
func BenchmarkContinuationGap(b *testing.B) {
	for _, how := range []string{"drop", "error-event", "precommit-503"} {
		b.Run(how, func(b *testing.B) { benchContinuationGap(b, how) })
	}
}

func benchContinuationGap(b *testing.B, how string) {
	const role = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
	chunk := func(s string) string {
		return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":` +
			strings.TrimSpace(mustQuote(s)) + `},"finish_reason":null}]}`
	}
	const stop = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
	sse := func(w http.ResponseWriter, blocks ...string) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, bl := range blocks {
			_, _ = io.WriteString(w, "data: "+bl+"\n\n")
		}
		_ = http.NewResponseController(w).Flush()
	}

	var brokeAt atomic.Int64 // UnixNano of the break of the current request; 0: it did not break
	var n atomic.Int64
	brk := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if n.Add(1)%2 == 0 { // every other answer whole: see above
			sse(w, role, chunk("Hello"), chunk(" world."), stop, "[DONE]")
			return
		}
		if how == "precommit-503" {
			brokeAt.Store(time.Now().UnixNano())
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error","code":null}}`)
			return
		}
		sse(w, role, chunk("Hello"))
		if how == "error-event" {
			brokeAt.Store(time.Now().UnixNano())
			_, _ = io.WriteString(w, `data: {"error":{"message":"overloaded","type":"server_error","code":null}}`+"\n\n")
			_ = http.NewResponseController(w).Flush()
			return
		}
		brokeAt.Store(time.Now().UnixNano())
		panic(http.ErrAbortHandler)
	}))
	defer brk.Close()
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if how == "precommit-503" {
			sse(w, role, chunk("Hello"), chunk(" world."), stop, "[DONE]")
			return
		}
		sse(w, role, chunk(" world."), stop, "[DONE]")
	}))
	defer good.Close()

	h := benchRelay(b, fmt.Sprintf(`{
		"upstreams": [{"name": "brk", "base_url": %q, "api": "chat"}, {"name": "good", "base_url": %q, "api": "chat"}],
		"models": [{"alias": "m", "targets": [{"upstream": "brk"}, {"upstream": "good"}]}],
		"failover": {"after_commit": "continue"}
	}`, brk.URL+"/v1", good.URL+"/v1"))

	var gaps []time.Duration
	var mu sync.Mutex
	var wrote []time.Time // this request's upstream requests written, in order
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		now := time.Now()
		mu.Lock()
		wrote = append(wrote, now)
		mu.Unlock()
	}}
	ctx := httptrace.WithClientTrace(context.Background(), trace)
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	const body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`

	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		brokeAt.Store(0)
		mu.Lock()
		wrote = wrote[:0]
		mu.Unlock()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://relay.test/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+loopKey)
		rec := httptest.NewRecorder()
		if err := h.ServeHTTP(rec, req, next); err != nil {
			b.Fatal(err)
		}
		out := rec.Body.String()
		if rec.Code != 200 || !strings.HasSuffix(out, "data: [DONE]\n\n") || strings.Contains(out, `"error"`) {
			b.Fatalf("not a whole stream (status %d):\n%s", rec.Code, out)
		}
		at := brokeAt.Load()
		if at == 0 {
			continue
		}
		if how != "precommit-503" && !strings.Contains(out, ": relay-continued upstream=good") {
			b.Fatalf("the break was not continued:\n%s", out)
		}
		mu.Lock()
		if len(wrote) != 2 {
			mu.Unlock()
			b.Fatalf("%d upstream requests written, want 2 (the first attempt, the continuation)", len(wrote))
		}
		gaps = append(gaps, wrote[1].Sub(time.Unix(0, at)))
		mu.Unlock()
	}
	b.StopTimer()
	if len(gaps) == 0 {
		return
	}
	slices.Sort(gaps)
	q := func(p float64) float64 {
		return float64(gaps[min(len(gaps)-1, int(p*float64(len(gaps))))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(q(0.5), "gap-p50-µs")
	b.ReportMetric(q(0.9), "gap-p90-µs")
	b.ReportMetric(q(0.99), "gap-p99-µs")
	b.ReportMetric(float64(gaps[len(gaps)-1].Nanoseconds())/1e3, "gap-max-µs")
	b.ReportMetric(float64(len(gaps)), "breaks")
}

func mustQuote(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// benchRelay provisions a Relay from its JSON config, in process, with
// its upstreams on real base URLs (unlike startLoop, whose upstreams are
// fakes in process): for benchmarks, which need a testing.TB.
func benchRelay(tb testing.TB, config string) *Relay {
	tb.Helper()
	h := new(Relay)
	dec := json.NewDecoder(strings.NewReader(config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(h); err != nil {
		tb.Fatalf("the benchmark's config: %v", err)
	}
	h.Keys = []ClientKey{{Token: loopKey, Name: "loop"}}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	if err := h.Provision(ctx); err != nil {
		cancel()
		tb.Fatalf("provision: %v", err)
	}
	// The log lines are encoded, as by default, and thrown away.
	h.logger = zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.InfoLevel))
	tb.Cleanup(func() {
		_ = h.Cleanup()
		cancel()
	})
	if err := h.Validate(); err != nil {
		tb.Fatalf("validate: %v", err)
	}
	return h
}

// BenchmarkUnbrokenStream is what after_commit continue costs a stream
// that never breaks: the same 22-event Chat stream from a loopback
// upstream, through a chain of two targets, with after_commit error
// (today's path) and continue. Compare the two (ns/op, B/op, allocs/op).
func BenchmarkUnbrokenStream(b *testing.B) {
	blocks := []string{`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`}
	for i := range 20 {
		blocks = append(blocks, `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" tok`+strconv.Itoa(i)+`"},"finish_reason":null}]}`)
	}
	blocks = append(blocks, `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, "[DONE]")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, bl := range blocks {
			_, _ = io.WriteString(w, "data: "+bl+"\n\n")
		}
	}))
	defer up.Close()
	if os.Getenv("BENCH_SIM") != "" {
		r, c := 4, 16
		srv, err := sim.New(sim.Config{Seed: 1, ReasoningTokens: &r, ContentTokens: &c,
			ReasoningPattern: sim.Pattern{Kind: "steady"}, ContentPattern: sim.Pattern{Kind: "steady"}})
		if err != nil {
			b.Fatal(err)
		}
		up.Config.Handler = srv
	}
	for _, mode := range []string{"error", "continue"} {
		b.Run(mode, func(b *testing.B) {
			h := benchRelay(b, fmt.Sprintf(`{
				"upstreams": [{"name": "a", "base_url": %q, "api": "chat"}, {"name": "b", "base_url": %q, "api": "chat"}],
				"models": [{"alias": "m", "targets": [{"upstream": "a"}, {"upstream": "b"}]}],
				"failover": {"after_commit": %q}
			}`, up.URL+"/v1", up.URL+"/v1", mode))
			next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
			const body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "http://relay.test/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+loopKey)
				rec := httptest.NewRecorder()
				if err := h.ServeHTTP(rec, req, next); err != nil {
					b.Fatal(err)
				}
				if !strings.HasSuffix(rec.Body.String(), "data: [DONE]\n\n") {
					b.Fatalf("not a whole stream:\n%s", rec.Body.String())
				}
			}
		})
	}
}
