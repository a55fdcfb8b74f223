package llmrelay

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// hookSource is a Source that takes the pacer's per-read hook.
type hookSource struct {
	eventList
	hooked bool
}

func (h *hookSource) BeforeRead(func()) { h.hooked = true }

// TestTraceTapKeepsThePacersHooks: the tap a traced stream reads through
// passes on the pacer's per-read hook (without it the pacer flushes every
// event: pace.Run) and a usage meter's count (pace.RuneCounted).
func TestTraceTapKeepsThePacersHooks(t *testing.T) {
	src := &hookSource{}
	tap := &traceTap{src: src, tr: &requestTrace{}}
	if !sse.ForwardBeforeRead(tap, func() {}) || !src.hooked {
		t.Error("the per-read hook did not reach the source under the tap")
	}
	m := newUsageMeter(&eventList{}, func() int { return 0 })
	var rc pace.RuneCounted = &traceTap{src: m, tr: &requestTrace{}}
	rc.CountedBy(func() int { return 9 })
	if m.counted == nil || m.counted() != 9 {
		t.Error("the pacer's count did not reach the meter under the tap")
	}
}

// TestShadowSpanAfterTheRequest: a shadow copy's goroutine may start after
// the client's request is over and its span ended, when that span no
// longer says it records; the copy gets its span all the same, under the
// request's, because whether to trace it was decided on the request's
// goroutine (shadowParent). The copy's span used to be left out then:
// seen as a missing span under load.
func TestShadowSpanAfterTheRequest(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, server := tp.Tracer("caddy").Start(context.Background(), "relay")
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil).WithContext(ctx)
	parent := shadowParent(r)
	server.End() // the request is over before the copy's goroutine runs

	up := &upstreamRuntime{name: "shadow-up", api: "chat", provider: "openai"}
	_, span := startShadowSpan(context.Background(), parent, &target{up: up, model: "m-shadow"}, &requestBody{}, endpoint{rest: "chat/completions"})
	if span == nil {
		t.Fatal("no span for a copy that started after its request's span ended")
	}
	span.End()
	var copySpan sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "chat m-shadow" {
			copySpan = s
		}
	}
	if copySpan == nil || copySpan.Parent().SpanID() != server.SpanContext().SpanID() || copySpan.SpanKind() != trace.SpanKindClient {
		t.Fatalf("the copy's span %v: want a CLIENT span under the request's", copySpan)
	}

	// A request whose span does not record has no shadow spans.
	_, dropped := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())).Tracer("caddy").Start(context.Background(), "relay")
	if shadowParent(httptest.NewRequest(http.MethodPost, "/", nil).WithContext(trace.ContextWithSpan(context.Background(), dropped))) != nil {
		t.Error("a dropped request's span is a shadow copy's parent")
	}
}
