package llmrelay

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// BenchmarkTracing is tracing.go's own cost for one streamed request of
// two attempts (one failed, one answering with 24 events) under three
// server spans: none (Caddy's tracing off), one a sampler dropped (not
// recording), and one recorded (an SDK provider with no exporter, so the
// figure is the relay's attribute building, not the export). The first
// two are the "no cost" cases: one context lookup each.
func BenchmarkTracing(b *testing.B) {
	up := &upstreamRuntime{name: "sim", api: "chat", base: "http://127.0.0.1:9000/v1", provider: "openai", serverHost: "127.0.0.1", serverPort: 9000, propagate: true}
	t := &target{up: up, model: "m"}
	body := &requestBody{stream: true, fields: map[string]json.RawMessage{"max_tokens": json.RawMessage("64")}}
	x := exchange{rest: "chat/completions", client: dialectChat, upstream: dialectChat}
	events := make([]sse.Event, 24)
	for i := range events {
		events[i] = sse.Event{HasData: true, Data: []byte(`{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"word "},"finish_reason":null}]}`)}
	}
	sampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	dropped := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, trace.Span)
	}{
		{"off", func() (context.Context, trace.Span) { return context.Background(), noop.Span{} }},
		{"dropped", func() (context.Context, trace.Span) { return dropped.Tracer("b").Start(context.Background(), "server") }},
		{"sampled", func() (context.Context, trace.Span) { return sampled.Tracer("b").Start(context.Background(), "server") }},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := &Relay{}
			hdr := http.Header{}
			ctx, server := c.ctx() // Caddy's, made before the relay runs: not counted
			defer server.End()
			// What the relay does anyway (the request's state, the
			// attempts' results, the events read) is made outside the
			// loop: the figure is tracing.go's calls alone.
			req := newRequestState(endpoint{dialect: dialectChat})
			req.alias, req.stream = "chat", true
			ch := &chainRun{req: req}
			failed := &attemptResult{class: classStatus, status: 503}
			answer := &attemptResult{resp: &http.Response{StatusCode: 200}}
			src := &eventList{evs: events}
			b.ReportAllocs()
			for b.Loop() {
				req.trace = h.newRequestTrace(ctx, req.ep)
				for i, res := range []*attemptResult{failed, answer} {
					actx, span := req.trace.startAttempt(ctx, ch, t, body, x, i+1, false)
					propagateTrace(actx, up, hdr)
					req.trace.endAttempt(span, ch, res)
				}
				src.i = 0
				answer.events = src
				req.trace.tap(answer, 0, &pace.Config{})
				for {
					if _, err := answer.events.Next(); err != nil {
						break
					}
				}
				req.trace.finish(req)
			}
		})
	}
}
