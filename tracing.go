package llmrelay

import (
	"cmp"
	"context"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/genai"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/shadow"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// OpenTelemetry spans (issue 33; docs/tracing.md). The relay has no
// tracer of its own: when Caddy's `tracing` directive wraps the site,
// each request arrives with a server span in its context, and the relay
// adds to it and creates under it one CLIENT span per upstream attempt,
// named and described by the GenAI semantic conventions (internal/genai,
// v1.41.0), with the relay's own attributes under llm_relay.*. Without
// `tracing`, or with a sampler that drops the request, the server span
// does not record: newRequestTrace says so once per request and nothing
// else here runs (one context lookup is the whole cost).
//
// Each attempt's span is the parent of what the upstream does: its W3C
// traceparent and tracestate go in the upstream request (unless the
// upstream says `trace_propagation off`, and then none goes, not even the
// client's). A failed attempt's span ends with error.type; the attempt
// whose answer goes to the client ends when the answer is over, with the
// answer's id, model, finish reasons and usage. Message content is never
// recorded unless the relay says `trace_content on`.

// tracerName is the instrumentation scope of the relay's spans.
const tracerName = "github.com/llmrelay/caddy-llm-relay"

// The relay's attributes, one namespace.
const (
	attrAlias           = "llm_relay.alias"
	attrKey             = "llm_relay.key" // the key's name, never the token
	attrAttempt         = "llm_relay.attempt"
	attrAttempts        = "llm_relay.attempts"
	attrUpstream        = "llm_relay.upstream"
	attrPreviousFailure = "llm_relay.previous_failure"
	attrCommitted       = "llm_relay.committed"
	attrCanary          = "llm_relay.canary"
	attrLeg             = "llm_relay.leg" // reason, answer (a hand-off), continuation
	attrSmoothing       = "llm_relay.smoothing.mode"
	attrMaxDelay        = "llm_relay.smoothing.max_delay_ms"
	attrEffort          = "llm_relay.reasoning_effort"
	attrBudget          = "llm_relay.reasoning_budget.tokens"
	attrBudgetHits      = "llm_relay.reasoning_budget.failovers"
	attrBudgetAction    = "llm_relay.reasoning_budget.action" // truncate, failover, error
	attrBudgetCut       = "llm_relay.reasoning_budget.exceeded"
	attrCapacity        = "llm_relay.capacity"
	attrCost            = "llm_relay.cost_usd"
	attrCostEstimated   = "llm_relay.usage_estimated"
	attrStreamError     = "llm_relay.stream_error"
	attrResume          = "llm_relay.resume"
	attrResumeStream    = "llm_relay.resume.stream"
	attrContinuations   = "llm_relay.continuations"
	attrRegion          = "llm_relay.region"
	attrShadow          = "llm_relay.shadow"
)

// maxTraceContent bounds each content attribute (trace_content on).
const maxTraceContent = 16 << 10

// requestTrace is one request's tracing; nil when its span does not
// record.
type requestTrace struct {
	server trace.Span
	tracer trace.Tracer

	// open are the spans of attempts that committed, ended when the
	// request is over (finish); the last is the answer's.
	open []trace.Span
	// previous is the failure class of the attempt before, for the next
	// one's llm_relay.previous_failure.
	previous string
	// facts is what the answer's events said of it; out its content,
	// with trace_content on (nil: off).
	facts  genai.Facts
	out    *genai.Collector
	client dialect
}

// newRequestTrace is the request's tracing, nil unless its span records.
func (h *Relay) newRequestTrace(ctx context.Context, ep endpoint) *requestTrace {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return nil
	}
	tr := &requestTrace{
		server: span,
		tracer: span.TracerProvider().Tracer(tracerName, trace.WithSchemaURL(genai.SchemaURL)),
		client: ep.dialect,
	}
	if h.TraceContent {
		tr.out = genai.NewCollector(maxTraceContent)
	}
	return tr
}

// factsDialect is the genai name of a client dialect (a Gemini client's
// answer is read as the Chat pivot it is translated from).
func factsDialect(d dialect) string {
	switch d {
	case dialectMessages:
		return genai.DialectMessages
	case dialectResponses:
		return genai.DialectResponses
	}
	return genai.DialectChat
}

// startAttempt starts an attempt's span under the request's: ctx carries
// it to the upstream request (for its traceparent). nil-safe: without a
// trace, ctx and a nil span.
func (tr *requestTrace) startAttempt(ctx context.Context, c *chainRun, t *target, body *requestBody, x exchange, n int, canary bool) (context.Context, trace.Span) {
	if tr == nil {
		return ctx, nil
	}
	model := c.req.modelFor(t)
	op := genai.Operation(t.up.api, x.rest)
	attrs := make([]attribute.KeyValue, 0, 16)
	attrs = append(attrs,
		attribute.String(genai.OperationName, op),
		attribute.String(genai.ProviderNameKey, t.up.provider),
		attribute.String(genai.RequestModel, model),
		attribute.Bool(genai.RequestStream, body.stream),
		attribute.String(attrAlias, c.req.alias),
		attribute.String(attrUpstream, t.up.name),
		attribute.Int(attrAttempt, n),
	)
	attrs = serverAttrs(attrs, t.up)
	for _, k := range maxTokensFields {
		if v, ok := jsonNumber(body.fields[k]); ok {
			attrs = append(attrs, attribute.Int64(genai.RequestMaxTokens, int64(v)))
			break
		}
	}
	if v, ok := jsonNumber(body.fields["temperature"]); ok {
		attrs = append(attrs, attribute.Float64(genai.RequestTemperature, v))
	}
	if v, ok := jsonNumber(body.fields["top_p"]); ok {
		attrs = append(attrs, attribute.Float64(genai.RequestTopP, v))
	}
	if tr.previous != "" {
		attrs = append(attrs, attribute.String(attrPreviousFailure, tr.previous))
	}
	if canary {
		attrs = append(attrs, attribute.Bool(attrCanary, true))
	}
	if c.leg != nil {
		attrs = append(attrs, attribute.String(attrLeg, c.leg.role()))
	}
	if t.up.region != "" {
		attrs = append(attrs, attribute.String(attrRegion, t.up.region))
	}
	if tr.out != nil {
		if in := traceInput(body, x); in != "" {
			attrs = append(attrs, attribute.String(genai.InputMessages, in))
		}
	}
	return tr.tracer.Start(ctx, op+" "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// maxTokensFields are the output limit's names, in the order read (Chat's
// current one, its former one, Responses').
var maxTokensFields = []string{"max_completion_tokens", "max_tokens", "max_output_tokens"}

// serverAttrs appends server.address and .port of the upstream's base URL
// (read once, at provisioning), when it has them.
func serverAttrs(attrs []attribute.KeyValue, up *upstreamRuntime) []attribute.KeyValue {
	if up.serverHost == "" {
		return attrs
	}
	return append(attrs, attribute.String(genai.ServerAddress, up.serverHost), attribute.Int(genai.ServerPort, up.serverPort))
}

// traceInput is the request's messages in the conventions' form: read
// through the Chat pivot, which every client dialect translates to.
func traceInput(body *requestBody, x exchange) string {
	raw := body.raw
	if x.client != dialectChat {
		b, err := x.client.codec().ToChatRequest(raw, chat.Options{})
		if err != nil {
			return ""
		}
		raw = b
	}
	return genai.InputFromChat(raw, maxTraceContent)
}

// endAttempt ends a failed attempt's span, or keeps a committed one open
// until the request's end. nil-safe.
func (tr *requestTrace) endAttempt(span trace.Span, c *chainRun, res *attemptResult) {
	if tr == nil || span == nil {
		return
	}
	if res.resp != nil && !res.clientGone {
		span.SetAttributes(attribute.Bool(attrCommitted, true))
		if res.ttft > 0 {
			span.SetAttributes(attribute.Float64(genai.ResponseTimeToFirst, res.ttft.Seconds()))
		}
		if res.resp.StatusCode >= 400 {
			// Passed through as it came (not a failover trigger): the
			// client's answer, and an error all the same.
			span.SetAttributes(attribute.String(genai.ErrorType, genai.ErrorTypeOf(string(classStatus), res.resp.StatusCode)))
			span.SetStatus(codes.Error, res.resp.Status)
		}
		if c.leg != nil && c.leg.native && len(tr.open) > 0 {
			// A continuation: the stream before it broke after its
			// commit point.
			prev := tr.open[len(tr.open)-1]
			prev.SetAttributes(attribute.String(genai.ErrorType, "stream_broken"))
			prev.SetStatus(codes.Error, "the stream broke after the commit point and was continued on another attempt")
		}
		tr.open = append(tr.open, span)
		return
	}
	errType := genai.ErrorTypeOf(string(res.class), res.status)
	switch {
	case res.clientGone:
		errType = "client_gone"
	case res.invalid != nil:
		errType = "invalid_request" // never sent
	case res.untranslated != "":
		errType = "untranslatable" // never sent
	}
	span.SetAttributes(attribute.Bool(attrCommitted, false), attribute.String(genai.ErrorType, errType))
	if res.err != nil {
		span.SetStatus(codes.Error, res.err.Error()) // what the client may read: no secret
	}
	span.End()
	tr.previous = errType
}

// tap reads the committed answer's events on their way to the client,
// for the answer's facts (and with trace_content, its content): those
// already read up to the commit point (res.first), then the rest as the
// client is sent them. The content is what the client gets: reasoning
// the pacer hides, or leaves out past a reasoning budget (counted here as
// the pacer counts it), is not recorded. nil-safe.
func (tr *requestTrace) tap(res *attemptResult, f pace.Format, cfg *pace.Config) {
	if tr == nil || res.events == nil {
		return
	}
	t := &traceTap{src: res.events, tr: tr, dialect: factsDialect(tr.client), format: f, hide: cfg.HideReasoning,
		budget: pace.BudgetCount{Limit: cfg.ReasoningBudget, Action: cfg.BudgetAction}}
	for i := range res.first {
		t.read(&res.first[i])
	}
	res.events = t
}

// traceTap is tap's Source.
type traceTap struct {
	src     pace.Source
	tr      *requestTrace
	dialect string // the client's, in genai's names
	format  pace.Format
	scratch []byte
	// hide, budget and answered decide, as the pacer does, which
	// reasoning the client is not sent.
	hide     bool
	budget   pace.BudgetCount
	answered bool
}

// BeforeRead forwards the pacer's per-read hook (one flush per upstream
// read, see pace.Run), which a wrapper that hid it would turn into a
// flush per event.
func (t *traceTap) BeforeRead(f func()) { sse.ForwardBeforeRead(t.src, f) }

// CountedBy passes the pacer's count on to a usage meter under the tap
// (pace.RuneCounted).
func (t *traceTap) CountedBy(f func() int) {
	if rc, ok := t.src.(pace.RuneCounted); ok {
		rc.CountedBy(f)
	}
}

func (t *traceTap) Next() (sse.Event, error) {
	ev, err := t.src.Next()
	if err == nil {
		t.read(&ev)
	}
	return ev, err
}

func (t *traceTap) read(ev *sse.Event) {
	if !ev.HasData {
		return
	}
	t.tr.facts.ScanEvent(t.dialect, ev.Data)
	if t.tr.out == nil {
		return
	}
	var c pace.Chunk
	c, t.scratch = pace.ClassifyFormat(t.format, ev, t.scratch[:0])
	leftOut := t.hide
	if v := t.budget.Count(&c, t.answered); v != pace.BudgetWithin {
		leftOut = true
	}
	if c.AnswerRunes > 0 {
		t.answered = true
	}
	if c.Kind == pace.KindText && (c.Channel != pace.ChanReasoning || !leftOut) {
		t.tr.out.AddText(c.Channel == pace.ChanReasoning, c.Text)
	}
	t.tr.out.ScanEvent(t.dialect, ev.Data)
}

// finish ends the request's spans when it is over: the server span gets
// the relay's account of the request, the answer's attempt span the
// answer's. nil-safe.
func (tr *requestTrace) finish(req *requestState) {
	if tr == nil {
		return
	}
	rl := req.requestLog
	if req.capture != nil && !rl.stream && tr.facts.ID == "" {
		tr.facts.ScanAnswer(factsDialect(tr.client), req.capture.buf.Bytes())
	}
	attrs := make([]attribute.KeyValue, 0, 16)
	attrs = append(attrs, attribute.Int(attrAttempts, rl.attempts))
	if rl.alias != "" {
		attrs = append(attrs, attribute.String(attrAlias, rl.alias))
	}
	if rl.key != "" {
		attrs = append(attrs, attribute.String(attrKey, rl.key))
	}
	if rl.upstream != "" {
		attrs = append(attrs, attribute.String(attrUpstream, rl.upstream))
	}
	attrs = append(attrs, attribute.Bool(attrCommitted, rl.upstream != "" && len(tr.open) > 0))
	if rl.errCode != "" {
		attrs = append(attrs, attribute.String(genai.ErrorType, rl.errCode))
	}
	smoothing := smoothingAttrs(rl)
	attrs = append(attrs, smoothing...)
	if rl.effort != "" {
		attrs = append(attrs, attribute.String(attrEffort, rl.effort))
	}
	if req.budget > 0 {
		attrs = append(attrs, attribute.Int(attrBudget, req.budget), attribute.String(attrBudgetAction, req.budgetAction.String()))
		if req.budgetCut {
			attrs = append(attrs, attribute.Bool(attrBudgetCut, true))
		}
	}
	if rl.budgetHits > 0 {
		attrs = append(attrs, attribute.Int(attrBudgetHits, rl.budgetHits))
	}
	if rl.spilled || rl.degraded || rl.queued {
		attrs = append(attrs, attribute.String(attrCapacity, rl.capacityWords()))
	}
	if rl.priced {
		attrs = append(attrs, attribute.Float64(attrCost, rl.cost))
	}
	if rl.resumeStream != "" {
		attrs = append(attrs, attribute.String(attrResumeStream, rl.resumeStream))
		if rl.resumed != "" {
			attrs = append(attrs, attribute.String(attrResume, rl.resumed))
			tr.server.AddEvent("llm_relay.resume", trace.WithAttributes(attribute.String(attrResume, rl.resumed), attribute.String(attrResumeStream, rl.resumeStream)))
		}
	}
	if n := len(rl.continued); n > 0 {
		attrs = append(attrs, attribute.Int(attrContinuations, n))
	}
	tr.server.SetAttributes(attrs...)
	if len(tr.open) == 0 {
		return
	}
	// Every committed attempt but the last was given up after its commit
	// point (a stream that broke and was continued, a budget's failover)
	// or was a hand-off's first leg; the last is the answer.
	last := tr.open[len(tr.open)-1]
	for _, s := range tr.open[:len(tr.open)-1] {
		s.End()
	}
	a := make([]attribute.KeyValue, 0, 12)
	if tr.facts.ID != "" {
		a = append(a, attribute.String(genai.ResponseID, tr.facts.ID))
	}
	if m := cmp.Or(tr.facts.Model, rl.model); m != "" {
		a = append(a, attribute.String(genai.ResponseModel, m))
	}
	if len(tr.facts.FinishReasons) > 0 {
		a = append(a, attribute.StringSlice(genai.ResponseFinishReasons, tr.facts.FinishReasons))
	}
	if u := rl.usage; u != nil {
		a = append(a,
			attribute.Int(genai.UsageInputTokens, u.Prompt),
			attribute.Int(genai.UsageOutputTokens, u.Completion),
			attribute.Int(genai.UsageCacheRead, u.Cached),
			attribute.Int(genai.UsageCacheCreation, u.CacheWrite),
			attribute.Int(genai.UsageReasoning, u.Reasoning),
		)
		if u.Estimated {
			a = append(a, attribute.Bool(attrCostEstimated, true))
		}
	}
	if rl.priced {
		a = append(a, attribute.Float64(attrCost, rl.cost))
	}
	a = append(a, smoothing...)
	if rl.streamError != "" {
		a = append(a, attribute.String(attrStreamError, rl.streamError), attribute.String(genai.ErrorType, "stream_"+rl.streamError))
		last.SetStatus(codes.Error, "the stream ended with an error after the commit point: "+rl.streamError)
	}
	if out := tr.output(req); out != "" {
		a = append(a, attribute.String(genai.OutputMessages, out))
	}
	last.SetAttributes(a...)
	last.End()
}

// output is the answer's gen_ai.output.messages (trace_content on): a
// stream's as the tap gathered it, a whole answer's read through the Chat
// pivot from what the client was sent (the capture, up to its bound: a
// longer answer is not recorded).
func (tr *requestTrace) output(req *requestState) string {
	if tr.out == nil {
		return ""
	}
	if req.requestLog.stream || req.capture == nil {
		finish := ""
		if len(tr.facts.FinishReasons) > 0 {
			finish = tr.facts.FinishReasons[0]
		}
		return tr.out.Output(factsDialect(tr.client), finish)
	}
	body := req.capture.buf.Bytes()
	if tr.client == dialectMessages || tr.client == dialectResponses {
		b, err := tr.client.codec().ToChatResponse(body, chat.Options{})
		if err != nil {
			return ""
		}
		body = b
	}
	return genai.OutputFromChat(body, maxTraceContent)
}

// smoothingAttrs are a stream's smoothing mode and the largest delay the
// re-pacer added to a character (none for an answer not paced).
func smoothingAttrs(rl *requestLog) []attribute.KeyValue {
	if rl.smooth == nil {
		return nil
	}
	a := []attribute.KeyValue{attribute.String(attrSmoothing, rl.mode)}
	if d := rl.smooth.Lag.Max; d > 0 {
		a = append(a, attribute.Float64(attrMaxDelay, float64(d)/float64(time.Millisecond)))
	}
	return a
}

// jsonNumber reads a request member that is a JSON number.
func jsonNumber(raw []byte) (float64, bool) {
	if len(raw) == 0 || raw[0] == 'n' || raw[0] == '"' {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	return v, err == nil
}

// propagateTrace writes the attempt's trace context into the upstream
// request (W3C traceparent and tracestate), or for an upstream with
// trace_propagation off takes every trace header out (the client's too).
// Without Caddy's tracing, a client's own trace headers pass as any
// header does.
func propagateTrace(ctx context.Context, up *upstreamRuntime, h http.Header) {
	if !up.propagate {
		h.Del("Traceparent")
		h.Del("Tracestate")
		h.Del("Baggage")
		return
	}
	if trace.SpanFromContext(ctx).IsRecording() {
		// The attempt's span. A request whose span does not record has
		// no attempt spans: its upstream gets what Caddy's tracing put
		// in the request's headers (the server span's context, not
		// sampled), as reverse_proxy's would, at no cost.
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// shadowParent is the span a shadow copy's goes under: the client
// request's, when it records; nil when not. Asked on the request's
// goroutine: the copy's runs later, maybe after the request's span ended,
// when it no longer says it records.
func shadowParent(r *http.Request) trace.Span {
	if s := trace.SpanFromContext(r.Context()); s.IsRecording() {
		return s
	}
	return nil
}

// startShadowSpan starts a shadow copy's span under parent (shadowParent;
// nil: none): a CLIENT span like an attempt's, marked llm_relay.shadow,
// which may start and end after its parent (the copy outlives the
// request). ctx is the copy's own (the config's lifetime).
func startShadowSpan(ctx context.Context, parent trace.Span, t *target, body *requestBody, ep endpoint) (context.Context, trace.Span) {
	if parent == nil {
		return ctx, nil
	}
	model := cmp.Or(t.model, body.model)
	op := genai.Operation(t.up.api, ep.rest) // a conversation is chat whatever the upstream's path
	tracer := parent.TracerProvider().Tracer(tracerName, trace.WithSchemaURL(genai.SchemaURL))
	attrs := []attribute.KeyValue{
		attribute.String(genai.OperationName, op),
		attribute.String(genai.ProviderNameKey, t.up.provider),
		attribute.String(genai.RequestModel, model),
		attribute.Bool(genai.RequestStream, body.stream),
		attribute.String(attrUpstream, t.up.name),
		attribute.Bool(attrShadow, true),
	}
	attrs = serverAttrs(attrs, t.up)
	return tracer.Start(trace.ContextWithSpan(ctx, parent), op+" "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endShadowSpan ends a shadow copy's span with what it got.
func endShadowSpan(span trace.Span, res shadow.Result) {
	if span == nil {
		return
	}
	if res.TTFT > 0 {
		span.SetAttributes(attribute.Float64(genai.ResponseTimeToFirst, res.TTFT.Seconds()))
	}
	span.SetAttributes(attribute.Int(genai.UsageOutputTokens, res.CompletionTokens), attribute.Int(genai.UsageReasoning, res.ReasoningTokens))
	if !res.OK {
		span.SetAttributes(attribute.String(genai.ErrorType, genai.ErrorTypeOf("shadow", res.Status)))
		span.SetStatus(codes.Error, cmp.Or(res.Err, "the shadow copy failed"))
	}
	span.End()
}
