package llmrelay_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// OpenTelemetry (issue 33; docs/tracing.md): Caddy's own `tracing`
// exporting OTLP/HTTP to a receiver the test runs on 127.0.0.1:9190 (the
// OpenTelemetry Go SDK's exporter, as an operator's collector would get
// it). Caddy's tracer provider is one per process and reads the
// OTEL_* environment when it is made, so every test here uses the same
// receiver address.

const otlpAddr = "127.0.0.1:9190"

// otlpReceiver collects the spans an OTLP/HTTP exporter sends.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	srv   *http.Server
}

func startOTLP(t *testing.T) *otlpReceiver {
	t.Helper()
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+otlpAddr)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	t.Setenv("OTEL_SERVICE_NAME", "llm-relay-test")
	rc := &otlpReceiver{}
	var ln net.Listener
	var err error
	for range 50 { // the port of the test before may still be closing
		if ln, err = net.Listen("tcp", otlpAddr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the OTLP receiver: %v", err)
	}
	rc.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
			http.Error(w, "not OTLP traces", http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				rc.spans = append(rc.spans, ss.Spans...)
			}
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})}
	go func() { _ = rc.srv.Serve(ln) }()
	t.Cleanup(func() { _ = rc.srv.Close() })
	return rc
}

// wait returns the spans once there are at least n of trace traceID (""
// any), within 10 s.
func (rc *otlpReceiver) wait(t *testing.T, n int, traceID string) []*tracepb.Span {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got []*tracepb.Span
		rc.mu.Lock()
		for _, s := range rc.spans {
			if traceID == "" || hex.EncodeToString(s.TraceId) == traceID {
				got = append(got, s)
			}
		}
		rc.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s: %d spans exported within 10s, want %d:\n%s", traceID, len(got), n, allAttrs(got))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// spanAttr is a span's attribute as a string ("" when absent).
func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return anyValue(kv.Value)
		}
	}
	return ""
}

func anyValue(v *commonpb.AnyValue) string {
	switch x := v.Value.(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		if x.BoolValue {
			return "true"
		}
		return "false"
	case *commonpb.AnyValue_DoubleValue:
		if x.DoubleValue > 0 {
			return "positive"
		}
		return "0"
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.Values {
			parts = append(parts, anyValue(e))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return ""
}

// allAttrs is every attribute value of every span, for the no-secret
// checks.
func allAttrs(spans []*tracepb.Span) string {
	var b strings.Builder
	for _, s := range spans {
		b.WriteString(s.Name + "\n")
		for _, kv := range s.Attributes {
			b.WriteString(kv.Key + "=" + anyValue(kv.Value) + "\n")
		}
		for _, ev := range s.Events {
			b.WriteString(ev.Name + "\n")
		}
		if s.Status != nil {
			b.WriteString(s.Status.Message + "\n")
		}
	}
	return b.String()
}

// traceStream is an upstream's Chat stream with usage.
func traceStream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, d := range []string{
		`{"id":"chatcmpl-up7","object":"chat.completion.chunk","created":1,"model":"m-2026","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}`,
		`{"id":"chatcmpl-up7","object":"chat.completion.chunk","created":1,"model":"m-2026","choices":[{"index":0,"delta":{"content":" there"},"finish_reason":null}]}`,
		`{"id":"chatcmpl-up7","object":"chat.completion.chunk","created":1,"model":"m-2026","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`{"id":"chatcmpl-up7","object":"chat.completion.chunk","created":1,"model":"m-2026","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":3}}}`,
	} {
		_, _ = io.WriteString(w, "data: "+d+"\n\n")
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// TestTracingFailoverThenStream: a request that fails over once and then
// streams. The trace holds the server span and under it two attempt
// spans, named and described by the GenAI conventions: the first failed
// with error.type 503, the second the answer, with its id, model, finish
// reasons, usage and time to first chunk, its provider from
// trace_provider. Each upstream got a traceparent naming its own
// attempt's span. No key (the client's token, the upstream's api_key)
// and no message content is in any span.
func TestTracingFailoverThenStream(t *testing.T) {
	rc := startOTLP(t)
	bad := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, http.StatusServiceUnavailable, `{"error":{"message":"overloaded","type":"server_error"}}`)
	})
	good := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) { traceStream(w) })
	startRelay(t, `tracing {
		span relay
	}
	llm_relay {
		key sk-trace-secret-token alice
		upstream bad `+bad.v1()+` {
			api chat
			api_key sk-upstream-secret-1
		}
		upstream good `+good.v1()+` {
			api chat
			api_key sk-upstream-secret-2
			trace_provider deepseek
		}
		model m {
			to bad m-first
			to good m-second
		}
	}`)
	body := `{"model":"m","stream":true,"max_tokens":50,"temperature":0.5,"messages":[{"role":"user","content":"a secret prompt"}]}`
	s := readAll(t, post(t, body, "Authorization", "Bearer sk-trace-secret-token"))
	if !strings.Contains(s, "Hello") || !strings.HasSuffix(s, "data: [DONE]\n\n") {
		t.Fatalf("the stream:\n%s", s)
	}
	badTP := bad.requests()[0].header.Get("Traceparent")
	goodTP := good.requests()[0].header.Get("Traceparent")
	if badTP == "" || goodTP == "" {
		t.Fatalf("no traceparent upstream: %q %q", badTP, goodTP)
	}
	traceID := strings.Split(goodTP, "-")[1]
	spans := rc.wait(t, 3, traceID)

	var server *tracepb.Span
	attempts := map[string]*tracepb.Span{}
	for _, sp := range spans {
		switch {
		case sp.Name == "relay":
			server = sp
		case sp.Kind == tracepb.Span_SPAN_KIND_CLIENT:
			attempts[sp.Name] = sp
		}
	}
	first, second := attempts["chat m-first"], attempts["chat m-second"]
	if server == nil || first == nil || second == nil || len(attempts) != 2 {
		t.Fatalf("want the server span and two attempt spans, got:\n%s", allAttrs(spans))
	}
	for _, sp := range []*tracepb.Span{first, second} {
		if string(sp.ParentSpanId) != string(server.SpanId) {
			t.Errorf("%s: parent %x, the server span is %x", sp.Name, sp.ParentSpanId, server.SpanId)
		}
	}
	if want := "00-" + traceID + "-" + hex.EncodeToString(first.SpanId) + "-01"; badTP != want {
		t.Errorf("the first upstream's traceparent %q, want its attempt's span %q", badTP, want)
	}
	if want := "00-" + traceID + "-" + hex.EncodeToString(second.SpanId) + "-01"; goodTP != want {
		t.Errorf("the second upstream's traceparent %q, want its attempt's span %q", goodTP, want)
	}
	for key, want := range map[string]string{
		"gen_ai.operation.name":      "chat",
		"gen_ai.provider.name":       "openai",
		"gen_ai.request.model":       "m-first",
		"gen_ai.request.stream":      "true",
		"gen_ai.request.max_tokens":  "50",
		"gen_ai.request.temperature": "positive",
		"server.address":             "127.0.0.1",
		"error.type":                 "503",
		"llm_relay.attempt":          "1",
		"llm_relay.committed":        "false",
		"llm_relay.alias":            "m",
		"llm_relay.upstream":         "bad",
		"llm_relay.previous_failure": "",
		"gen_ai.response.id":         "",
		"gen_ai.usage.input_tokens":  "",
		"gen_ai.input.messages":      "",
		"llm_relay.key":              "",
	} {
		if got := spanAttr(first, key); got != want {
			t.Errorf("first attempt: %s = %q, want %q", key, got, want)
		}
	}
	if first.Status == nil || first.Status.Code != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("the failed attempt's status: %v", first.Status)
	}
	for key, want := range map[string]string{
		"gen_ai.provider.name":                     "deepseek",
		"gen_ai.request.model":                     "m-second",
		"gen_ai.response.model":                    "m-2026",
		"gen_ai.response.id":                       "chatcmpl-up7",
		"gen_ai.response.finish_reasons":           "[stop]",
		"gen_ai.response.time_to_first_chunk":      "positive",
		"gen_ai.usage.input_tokens":                "11",
		"gen_ai.usage.output_tokens":               "7",
		"gen_ai.usage.cache_read.input_tokens":     "4",
		"gen_ai.usage.cache_creation.input_tokens": "0",
		"gen_ai.usage.reasoning.output_tokens":     "3",
		"llm_relay.attempt":                        "2",
		"llm_relay.previous_failure":               "503",
		"llm_relay.committed":                      "true",
		"error.type":                               "",
		"gen_ai.output.messages":                   "",
	} {
		if got := spanAttr(second, key); got != want {
			t.Errorf("second attempt: %s = %q, want %q", key, got, want)
		}
	}
	for key, want := range map[string]string{
		"llm_relay.alias":     "m",
		"llm_relay.key":       "alice",
		"llm_relay.attempts":  "2",
		"llm_relay.upstream":  "good",
		"llm_relay.committed": "true",
	} {
		if got := spanAttr(server, key); got != want {
			t.Errorf("server span: %s = %q, want %q", key, got, want)
		}
	}
	all := allAttrs(spans)
	for _, secret := range []string{"sk-trace-secret-token", "sk-upstream-secret", "a secret prompt", "Hello"} {
		if strings.Contains(all, secret) {
			t.Errorf("%q is in a span:\n%s", secret, all)
		}
	}
}

// TestTracingContentAndPropagation: with trace_content on, the answer's
// attempt span holds the request's messages and the answer in the
// conventions' forms (and still no key); an upstream with
// trace_propagation off gets no trace header at all, not even the one
// the client sent.
func TestTracingContentAndPropagation(t *testing.T) {
	rc := startOTLP(t)
	quiet := newTraceUpstream(t)
	startRelay(t, `tracing {
		span relay
	}
	llm_relay {
		key sk-trace-secret-token alice
		trace_content on
		upstream quiet `+quiet.v1()+` {
			api chat
			api_key sk-upstream-secret-3
			trace_propagation off
		}
		model m {
			to quiet m-q
			reasoning_budget 500 truncate
		}
	}`)
	clientTP := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	body := `{"model":"m","stream":true,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"say hello"}]}`
	readAll(t, post(t, body, "Authorization", "Bearer sk-trace-secret-token", "Traceparent", clientTP, "Tracestate", "vendor=x"))
	h := quiet.requests()[0].header
	if h.Get("Traceparent") != "" || h.Get("Tracestate") != "" {
		t.Errorf("trace_propagation off: the upstream got traceparent %q tracestate %q", h.Get("Traceparent"), h.Get("Tracestate"))
	}
	spans := rc.wait(t, 2, "0af7651916cd43dd8448eb211c80319c") // the client's trace, continued by Caddy
	attempt := byName(spans)["chat m-q"]
	if attempt == nil {
		t.Fatalf("no attempt span:\n%s", allAttrs(spans))
	}
	if server := byName(spans)["relay"]; server == nil || spanAttr(server, "llm_relay.reasoning_budget.tokens") != "500" ||
		spanAttr(server, "llm_relay.reasoning_budget.action") != "truncate" || spanAttr(server, "llm_relay.reasoning_budget.exceeded") != "" {
		t.Errorf("the server span has no reasoning budget, or one exceeded:\n%s", allAttrs(spans))
	}
	in, out := spanAttr(attempt, "gen_ai.input.messages"), spanAttr(attempt, "gen_ai.output.messages")
	if in != `[{"role":"system","parts":[{"type":"text","content":"be brief"}]},{"role":"user","parts":[{"type":"text","content":"say hello"}]}]` {
		t.Errorf("input messages: %s", in)
	}
	if out != `[{"role":"assistant","parts":[{"type":"text","content":"Hello there"}],"finish_reason":"stop"}]` {
		t.Errorf("output messages: %s", out)
	}
	if all := allAttrs(spans); strings.Contains(all, "sk-trace-secret-token") || strings.Contains(all, "sk-upstream-secret") {
		t.Errorf("a key is in a span:\n%s", all)
	}
	// A budget the reasoning passes (the client's lower one): the
	// server span says so, and the output has no reasoning past it.
	for _, stream := range []bool{true, false} {
		trace := map[bool]string{true: "0af7651916cd43dd8448eb211c8031a1", false: "0af7651916cd43dd8448eb211c8031a2"}[stream]
		body := fmt.Sprintf(`{"model":"m","stream":%v,"messages":[{"role":"user","content":"think hard"}]}`, stream)
		readAll(t, post(t, body, "Authorization", "Bearer sk-trace-secret-token", "X-Relay-Reasoning-Budget", "2", "Traceparent", "00-"+trace+"-b7ad6b7169203331-01"))
		spans := byName(rc.wait(t, 2, trace))
		if server := spans["relay"]; server == nil || spanAttr(server, "llm_relay.reasoning_budget.tokens") != "2" || spanAttr(server, "llm_relay.reasoning_budget.exceeded") != "true" {
			t.Errorf("stream %v: the server span of a request whose budget was exceeded:\n%s", stream, allAttrs(mapSpans(spans)))
		}
		if out := spanAttr(spans["chat m-q"], "gen_ai.output.messages"); !strings.Contains(out, "The answer") || strings.Contains(out, "carefully") {
			t.Errorf("stream %v: output messages %s", stream, out)
		}
	}
}

// newTraceUpstream is a Chat upstream that answers by what it is asked: a
// whole answer with a tool call to a non-stream request; to a stream,
// a tool call for "weather?", reasoning past a small budget for "think
// hard", else traceStream.
func newTraceUpstream(t *testing.T) *fakeUpstream {
	var up *fakeUpstream
	up = newFakeUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		body := up.requests()[n-1].body
		switch msgs, _ := json.Marshal(body["messages"]); {
		case body["stream"] != true:
			traceAnswer(w)
		case strings.Contains(string(msgs), "weather?"):
			traceToolStream(w)
		case strings.Contains(string(msgs), "think hard"):
			traceReasoningStream(w)
		default:
			traceStream(w)
		}
	})
	return up
}

// traceReasoningStream writes a Chat stream whose reasoning (in
// reasoning_content) passes a budget of a few tokens before its answer.
func traceReasoningStream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, d := range []string{
		`{"id":"chatcmpl-up6","object":"chat.completion.chunk","created":1,"model":"m-2026","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"Let me"},"finish_reason":null}]}`,
		`{"id":"chatcmpl-up6","object":"chat.completion.chunk","created":1,"model":"m-2026","choices":[{"index":0,"delta":{"reasoning_content":" think about this very carefully"},"finish_reason":null}]}`,
		`{"id":"chatcmpl-up6","object":"chat.completion.chunk","created":1,"model":"m-2026","choices":[{"index":0,"delta":{"content":"The answer"},"finish_reason":null}]}`,
		`{"id":"chatcmpl-up6","object":"chat.completion.chunk","created":1,"model":"m-2026","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	} {
		_, _ = io.WriteString(w, "data: "+d+"\n\n")
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// TestTracingOffSendsNothingNew: without Caddy's tracing the relay adds
// no trace header of its own (a client's traceparent passes as any
// header), and the upstream request is as before.
func TestTracingOffSendsNothingNew(t *testing.T) {
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) { traceStream(w) })
	startRelay(t, `llm_relay {
		upstream up `+up.v1()+` {
			api chat
		}
		model m {
			to up m-x
		}
	}`)
	readAll(t, post(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	readAll(t, post(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "Traceparent", tp))
	seen := up.requests()
	if seen[0].header.Get("Traceparent") != "" || seen[1].header.Get("Traceparent") != tp {
		t.Errorf("traceparent upstream without tracing: %q, and with the client's %q", seen[0].header.Get("Traceparent"), seen[1].header.Get("Traceparent"))
	}
}

// tracedPost posts a Chat body with a traceparent of its own trace, so
// each request's spans are found by their trace id.
func tracedPost(t *testing.T, body, traceID string) *http.Response {
	t.Helper()
	return post(t, body, "Authorization", "Bearer sk-trace-secret-token", "Traceparent", "00-"+traceID+"-b7ad6b7169203331-01")
}

// byName indexes spans by name (the last of a name wins).
func byName(spans []*tracepb.Span) map[string]*tracepb.Span {
	m := map[string]*tracepb.Span{}
	for _, s := range spans {
		m[s.Name] = s
	}
	return m
}

// TestTracingLegsAndCopies: a hand-off's two legs, a continuation after a
// broken stream, a shadow copy and a resume, each in the trace of its
// request: the legs and the continuation as attempt spans of their own
// (llm_relay.leg), the broken stream's span with error.type
// stream_broken, the shadow copy as a span under the request's marked
// llm_relay.shadow, the resume as an event and attributes of the resumed
// request's span.
func TestTracingLegsAndCopies(t *testing.T) {
	rc := startOTLP(t)
	startRelay(t, `tracing {
		span relay
	}
	llm_relay {
		key sk-trace-secret-token alice
		upstream reasoner http://127.0.0.1:9087/reason/v1 {
			api chat
		}
		upstream echo http://127.0.0.1:9087/echo/v1 {
			api chat
		}
		upstream drop http://127.0.0.1:9072/drop/v1 {
			api chat
		}
		upstream good http://127.0.0.1:9072/good/v1 {
			api chat
		}
		model baton {
			reason reasoner sim-r1
			to echo sim-chat
		}
		model cont {
			to drop sim-drop
			to good sim-good
		}
		model shadowed {
			to good sim-main
			shadow good sim-shadow 100
		}
		resume {
		}
	}`, handoffSimSite, contSite) // the hand-off tests' and the continuation tests' simulators

	const handoffTrace, contTrace, shadowTrace, resumeTrace = "11111111111111111111111111111111", "22222222222222222222222222222222", "33333333333333333333333333333333", "44444444444444444444444444444444"
	readAll(t, tracedPost(t, `{"model":"baton","stream":true,"messages":[{"role":"user","content":"hi"}]}`, handoffTrace))
	legs := byName(rc.wait(t, 3, handoffTrace))
	if r, a := legs["chat sim-r1"], legs["chat sim-chat"]; r == nil || a == nil || spanAttr(r, "llm_relay.leg") != "reason" || spanAttr(a, "llm_relay.leg") != "answer" ||
		spanAttr(r, "llm_relay.committed") != "true" || spanAttr(a, "llm_relay.committed") != "true" || string(r.ParentSpanId) != string(legs["relay"].SpanId) {
		t.Errorf("the hand-off's legs:\n%s", allAttrs(mapSpans(legs)))
	}
	// The answer leg's span has the answer's facts: the stream the
	// client was sent (the reasoning leg's is given up at the hand-off).
	if a := legs["chat sim-chat"]; a != nil && (spanAttr(a, "gen_ai.response.finish_reasons") != "[stop]" || spanAttr(a, "gen_ai.response.id") == "") {
		t.Errorf("the answer leg's facts:\n%s", allAttrs([]*tracepb.Span{a}))
	}

	s := readAll(t, tracedPost(t, `{"model":"cont","stream":true,"messages":[{"role":"user","content":"hi"}]}`, contTrace))
	if !strings.Contains(s, "relay-continued") {
		t.Fatalf("not continued:\n%s", s)
	}
	cont := byName(rc.wait(t, 3, contTrace))
	if d, g := cont["chat sim-drop"], cont["chat sim-good"]; d == nil || g == nil || spanAttr(d, "error.type") != "stream_broken" ||
		d.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || spanAttr(g, "llm_relay.leg") != "continuation" || spanAttr(g, "error.type") != "" ||
		spanAttr(cont["relay"], "llm_relay.continuations") != "1" {
		t.Errorf("the continuation:\n%s", allAttrs(mapSpans(cont)))
	}

	readAll(t, tracedPost(t, `{"model":"shadowed","stream":true,"messages":[{"role":"user","content":"hi"}]}`, shadowTrace))
	sh := byName(rc.wait(t, 3, shadowTrace))
	if c := sh["chat sim-shadow"]; c == nil || spanAttr(c, "llm_relay.shadow") != "true" || c.Kind != tracepb.Span_SPAN_KIND_CLIENT ||
		string(c.ParentSpanId) != string(sh["relay"].SpanId) || sh["chat sim-main"] == nil {
		t.Errorf("the shadow copy:\n%s", allAttrs(mapSpans(sh)))
	}

	first := tracedPost(t, `{"model":"cont","stream":true,"messages":[{"role":"user","content":"resume"}]}`, "55555555555555555555555555555555")
	url, id := first.Header.Get("X-Relay-Stream"), first.Header.Get("X-Relay-Stream-Id")
	readAll(t, first)
	readAll(t, rsGet(t, url, "Authorization", "Bearer sk-trace-secret-token", "Last-Event-ID", id+".3", "Traceparent", "00-"+resumeTrace+"-b7ad6b7169203331-01"))
	rs := rc.wait(t, 1, resumeTrace)
	resumed := byName(rs)["relay"]
	if resumed == nil || spanAttr(resumed, "llm_relay.resume") != "resumed" || spanAttr(resumed, "llm_relay.resume.stream") != id ||
		len(resumed.Events) != 1 || resumed.Events[0].Name != "llm_relay.resume" {
		t.Errorf("the resume:\n%s", allAttrs(rs))
	}
}

func mapSpans(m map[string]*tracepb.Span) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range m {
		out = append(out, s)
	}
	return out
}

// TestTracingClientDialects: a Messages, a Responses and a Gemini
// client's requests to a Chat upstream: each answer span's finish reasons
// are in the client's words (what the client was sent), its usage is the
// upstream's, and with trace_content the input is read in each dialect.
func TestTracingClientDialects(t *testing.T) {
	rc := startOTLP(t)
	up := newTraceUpstream(t)
	startRelay(t, `tracing {
		span relay
	}
	llm_relay {
		key sk-trace-secret-token alice
		trace_content on
		upstream up `+up.v1()+` {
			api chat
		}
		model m {
			to up m-up
		}
	}`)
	tp := func(id string) []string {
		return []string{"Traceparent", "00-" + id + "-b7ad6b7169203331-01"}
	}
	cases := []struct {
		name, path, body, trace, finish, input string
		hdr                                    []string
	}{
		{"messages", "/v1/messages", `{"model":"m","max_tokens":64,"stream":true,"system":"be brief","messages":[{"role":"user","content":"hello?"}]}`,
			"66666666666666666666666666666666", "[end_turn]", `"content":"hello?"`, []string{"x-api-key", "sk-trace-secret-token", "anthropic-version", "2023-06-01"}},
		{"responses", "/v1/responses", `{"model":"m","stream":true,"input":"hello?"}`,
			"77777777777777777777777777777777", "[completed]", `"content":"hello?"`, []string{"Authorization", "Bearer sk-trace-secret-token"}},
		{"gemini", "/v1beta/models/m:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hello?"}]}]}`,
			"88888888888888888888888888888888", "[stop]", `"content":"hello?"`, []string{"x-goog-api-key", "sk-trace-secret-token"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := geminiPost(t, c.path, c.body, append(c.hdr, tp(c.trace)...)...)
			if b := readAll(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(b, "Hello") {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			sp := byName(rc.wait(t, 2, c.trace))["chat m-up"]
			if sp == nil {
				t.Fatal("no attempt span")
			}
			if got := spanAttr(sp, "gen_ai.response.finish_reasons"); got != c.finish {
				t.Errorf("finish reasons %s, want %s", got, c.finish)
			}
			if spanAttr(sp, "gen_ai.usage.input_tokens") != "11" || spanAttr(sp, "gen_ai.usage.output_tokens") != "7" {
				t.Errorf("usage: %s", allAttrs([]*tracepb.Span{sp}))
			}
			if in := spanAttr(sp, "gen_ai.input.messages"); !strings.Contains(in, c.input) {
				t.Errorf("input messages %s", in)
			}
			if out := spanAttr(sp, "gen_ai.output.messages"); !strings.Contains(out, `"content":"Hello there"`) {
				t.Errorf("output messages %s", out)
			}
		})
	}
	// A tool call, streamed and whole, in each dialect: the output
	// message has the call with its arguments as the client got them.
	tools := []struct {
		name, path, body string
		hdr              []string
	}{
		{"chat", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`,
			[]string{"Authorization", "Bearer sk-trace-secret-token"}},
		{"messages", "/v1/messages", `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"weather?"}],"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]}`,
			[]string{"x-api-key", "sk-trace-secret-token", "anthropic-version", "2023-06-01"}},
		{"responses", "/v1/responses", `{"model":"m","input":"weather?","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]}`,
			[]string{"Authorization", "Bearer sk-trace-secret-token"}},
		{"gemini", "/v1beta/models/m:generateContent", `{"contents":[{"role":"user","parts":[{"text":"weather?"}]}],"tools":[{"functionDeclarations":[{"name":"get_weather","parameters":{"type":"object"}}]}]}`,
			[]string{"x-goog-api-key", "sk-trace-secret-token"}},
	}
	for i, c := range tools {
		for _, stream := range []bool{true, false} {
			name, path, body := c.name+"/whole", c.path, c.body
			if stream {
				name = c.name + "/stream"
				if c.name == "gemini" {
					path = "/v1beta/models/m:streamGenerateContent?alt=sse"
				} else {
					body = strings.Replace(body, `{"model":"m",`, `{"model":"m","stream":true,`, 1)
				}
			}
			t.Run("tool_call/"+name, func(t *testing.T) {
				trace := fmt.Sprintf("%032x", 0xa0+2*i+map[bool]int{true: 1}[stream])
				resp := geminiPost(t, path, body, append(c.hdr, tp(trace)...)...)
				if b := readAll(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(b, "get_weather") {
					t.Fatalf("%d %s", resp.StatusCode, b)
				}
				sp := byName(rc.wait(t, 2, trace))["chat m-up"]
				if sp == nil {
					t.Fatal("no attempt span")
				}
				out := spanAttr(sp, "gen_ai.output.messages")
				text := map[bool]string{true: "Let me check", false: "Hello there"}[stream]
				if !strings.Contains(out, `"name":"get_weather","arguments":{"city":"Paris"}}`) || !strings.Contains(out, `{"type":"text","content":"`+text+`"}`) ||
					!strings.HasSuffix(out, `"finish_reason":"tool_call"}]`) {
					t.Errorf("output messages %s", out)
				}
			})
		}
	}
}

// traceToolStream writes a Chat stream with text and a tool call whose
// arguments come in two pieces.
func traceToolStream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, d := range []string{
		`{"id":"chatcmpl-up8","object":"chat.completion.chunk","created":1,"model":"m-2026","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me check"},"finish_reason":null}]}`,
		`{"id":"chatcmpl-up8","object":"chat.completion.chunk","created":1,"model":"m-2026","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_w1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-up8","object":"chat.completion.chunk","created":1,"model":"m-2026","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-up8","object":"chat.completion.chunk","created":1,"model":"m-2026","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-up8","object":"chat.completion.chunk","created":1,"model":"m-2026","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"id":"chatcmpl-up8","object":"chat.completion.chunk","created":1,"model":"m-2026","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`,
	} {
		_, _ = io.WriteString(w, "data: "+d+"\n\n")
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// traceAnswer writes a whole Chat answer with text and a tool call.
func traceAnswer(w http.ResponseWriter) {
	answerJSON(w, http.StatusOK, `{"id":"chatcmpl-up9","object":"chat.completion","created":1,"model":"m-2026","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there","tool_calls":[{"id":"call_w1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`)
}
