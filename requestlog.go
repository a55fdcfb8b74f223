package llmrelay

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// requestState is one request being served: its endpoint, its key's
// limits, the writers between the relay and the client, what its
// accounting carries from one attempt to the next, and the record that is
// logged when it ends (embedded: its fields are the request's too). It
// lives as long as the request; only the record is logged.
type requestState struct {
	*requestLog
	ep endpoint // the client endpoint: dialect, path, kind

	out     *countingWriter // counts the body bytes written to the client
	capture *captureWriter  // keeps the client's answer (shadows, a non-stream answer's usage); nil: not kept

	budget int // the request's reasoning budget (0: none)
	// budgetAction is what the budget does past it; budgetCut says the
	// reasoning passed it (left out, ended, failed over).
	budgetAction pace.BudgetAction
	budgetCut    bool
	earlier      usage.Usage // usage of streams given up for a reasoning budget failover
	// usageEstimated: the upstream reported no usage, and the answer's
	// was the relay's estimate (usagemeter.go); outEstimate is the
	// estimated output, for a stream cut short before it was given.
	usageEstimated bool
	outEstimate    int
	// reasoningRunes is the reasoning the relay read of the answer it
	// accounts (a stream, an answer assembled from one, a whole answer);
	// upstreamReasoning the reasoning tokens a Chat upstream reported in
	// an answer translated into a dialect with no place for them
	// (Messages). account() falls back on them when the usage it reads
	// counts no reasoning (spend.go).
	reasoningRunes    int
	upstreamReasoning int

	// raw is the client's request body, for its prompt's estimate (an
	// answer's cost header: cost.go).
	raw []byte

	limits        *keyLimits // the key's tpm, when it has one
	tokenEstimate int        // the prompt tokens taken from it when the request came (0: none)

	effortKey string // the request's reasoning effort, for its target's reasoning baseline

	canary *canaryRuntime // the route's canary, whose guard may compare reasoning (canaryreasoning.go)

	// gemini: a Gemini client's request, served as the Chat request it
	// stands for; its answer is translated after the relay (gemini.go).
	gemini bool

	// trace is the request's OpenTelemetry spans (tracing.go); nil: its
	// span does not record.
	trace *requestTrace

	// run is the chain whose answer is being committed: a broken stream
	// walks the rest of it (continuation.go). nil: none.
	run *chainRun
}

func newRequestState(ep endpoint) *requestState {
	return &requestState{requestLog: &requestLog{start: time.Now(), api: ep.String()}, ep: ep}
}

// requestLog is the record of what one request did, for its single log
// line, the placeholders, metrics, the status page's recent failovers and
// the 502 message. It holds names and figures only: never bodies, never
// keys.
type requestLog struct {
	start       time.Time
	api         string // the client's API: openai, anthropic, responses
	key         string
	alias       string // the route's alias ("*" for the wildcard route)
	requested   string // the model name the client asked for
	stream      bool
	upstream    string
	model       string
	attempts    int
	status      int
	errCode     string
	streamError string
	ttfb        time.Duration
	outcomes    []string        // one per attempt or skip: "upstream (model): outcome"
	outcomeAt   []time.Duration // when each outcome was noted, since start
	bytes       int64           // body bytes written to the client (set when the request ends)
	mode        string          // the stream's smoothing mode
	smooth      *pace.Stats     // a stream's smoothness figures
	effort      string          // reasoning_effort set by adaptive_effort
	usage       *usage.Usage
	cost        float64
	priced      bool
	// answerRead is a whole answer's usage member and output runes, read
	// once by setAnswerCost for its header, so accountRequest does not
	// read the same bytes again.
	answerRead  *answerRead
	budgetHits  int  // reasoning budget failovers
	idleTimeout bool // stream_idle_timeout cut the upstream's answer off
	modelList   bool // answered GET /v1/models[/<alias>] itself: relays nothing
	// What capacity did to the request (capacity.go): it went past a
	// target at spill_at, was degraded, waited for room.
	spilled, degraded, queued bool
	// handoff is a hand-off alias's legs (handoff.go); nil: not one.
	handoff *handoffRecord
	// region is the answering upstream's region; regionPin the region the
	// request was kept in (regions.go). "": none.
	region, regionPin string
	// target is the one whose answer went to the client, for its
	// reasoning health (reasoninghealth.go); nil: none.
	target *target
	// splitRatio is the split ratio a split-reasoning stream was paced
	// with (the request's, else the operator's); nil: none.
	splitRatio *float64
	// continued lists the continuations of a stream that broke after
	// its commit point (continuation.go); nil: none.
	continued []continuation
	// resumeStream is the id of the stream's journal (resume.go); "":
	// not journaled. resumed says how the request was answered from a
	// journal instead of a generation: "reattached" (a retry),
	// "resumed" (a cursor), "background".
	resumeStream, resumed string
	resumeDetached        bool // its client went away before its end
}

// note records the outcome of an attempt or skip.
func (rl *requestLog) note(t *target, outcome string) {
	rl.outcomes = append(rl.outcomes, t.up.name+" ("+rl.modelFor(t)+"): "+outcome)
	rl.outcomeAt = append(rl.outcomeAt, time.Since(rl.start))
}

// noteText records an outcome that belongs to no one target.
func (rl *requestLog) noteText(outcome string) {
	rl.outcomes = append(rl.outcomes, outcome)
	rl.outcomeAt = append(rl.outcomeAt, time.Since(rl.start))
}

// modelFor is the model name a target is sent.
func (rl *requestLog) modelFor(t *target) string {
	if t.model != "" {
		return t.model
	}
	return rl.requested
}

// commit records the attempt whose answer goes to the client.
func (rl *requestLog) commit(t *target, status int) {
	rl.upstream = t.up.name
	rl.region = t.up.region
	rl.model = rl.modelFor(t)
	rl.target = t
	rl.status = status
	rl.ttfb = time.Since(rl.start)
}

// summary lists every attempt's outcome for the 502/504 message.
func (rl *requestLog) summary() string {
	if len(rl.outcomes) == 0 {
		return "no attempt was made"
	}
	return strings.Join(rl.outcomes, "; ")
}

// logAttempt writes the debug line of one attempt.
func (h *Relay) logAttempt(rl *requestLog, t *target, res *attemptResult) {
	c := h.logger.Check(zapcore.DebugLevel, "upstream attempt")
	if c == nil {
		return
	}
	outcome := "committed"
	if res.resp == nil && res.err != nil {
		outcome = logDetail(res.err)
	}
	c.Write(
		zap.String("alias", rl.alias),
		zap.String("upstream", t.up.name),
		zap.String("model", rl.modelFor(t)),
		zap.Int("attempt", rl.attempts),
		zap.String("outcome", outcome),
		zap.Duration("ttfb", res.ttfb),
		zap.Duration("retry_after", res.retryAfter),
	)
}

// finishRequest writes the request's log line and sets its placeholders.
func (h *Relay) finishRequest(r *http.Request, req *requestState) {
	rl := req.requestLog
	rl.bytes = req.out.n
	req.trace.finish(req)
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		// One provider instead of five Sets: the values are formatted only
		// if something (an access log, a later handler) asks for them.
		repl.Map(rl.placeholder)
	}
	if srv, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv.Logs != nil {
		// Only a server with access logs reads the extra fields.
		if extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
			extra.Add(zap.String("llm_upstream", rl.upstream))
			extra.Add(zap.Int("llm_attempts", rl.attempts))
		}
	}
	h.judgeReasoning(req)
	judgeCanaryReasoning(req)
	observeRequest(rl)
	recordFailover(rl)
	if req.tokenEstimate > 0 {
		// No usage settled the estimate (nothing was generated): give it back.
		req.limits.settleTokens(req.tokenEstimate, 0, time.Now())
	}
	c := h.logger.Check(zapcore.InfoLevel, "relayed")
	if c == nil {
		return
	}
	fp := logFields.Get().(*[]zap.Field)
	fields := append((*fp)[:0],
		zap.String("key", rl.key),
		zap.String("alias", rl.alias),
		zap.String("api", rl.api),
		zap.String("upstream", rl.upstream),
		zap.String("model", rl.model),
		zap.Int("attempts", rl.attempts),
		zap.Int("status", rl.status),
		zap.Bool("stream", rl.stream),
		zap.Duration("ttfb", rl.ttfb),
		zap.Duration("duration", time.Since(rl.start)),
		zap.Int64("bytes", rl.bytes),
	)
	if rl.region != "" {
		fields = append(fields, zap.String("region", rl.region))
	}
	if rl.regionPin != "" {
		fields = append(fields, zap.String("region_pin", rl.regionPin))
	}
	if rl.errCode != "" {
		fields = append(fields, zap.String("error", rl.errCode))
	}
	if rl.streamError != "" {
		fields = append(fields, zap.String("stream_error", rl.streamError))
	}
	if len(rl.outcomes) > 0 {
		fields = append(fields, zap.Strings("failures", rl.outcomes))
	}
	if len(rl.continued) > 0 {
		fields = append(fields, zap.Array("continued", continuations(rl.continued)))
	}
	if rl.resumeStream != "" {
		fields = append(fields, zap.String("resume_stream", rl.resumeStream))
		if rl.resumed != "" {
			fields = append(fields, zap.String("resume", rl.resumed))
		}
		if rl.resumeDetached {
			fields = append(fields, zap.Bool("detached", true))
		}
	}
	if rl.smooth != nil {
		fields = append(fields, zap.String("smoothing", rl.mode), zap.Object("smoothness", smoothFields{rl.smooth}))
		if rl.splitRatio != nil {
			fields = append(fields, zap.Float64("split_ratio", *rl.splitRatio))
		}
	}
	if rl.effort != "" {
		fields = append(fields, zap.String("reasoning_effort", rl.effort))
	}
	if rl.spilled || rl.degraded || rl.queued {
		fields = append(fields, zap.String("capacity", rl.capacityWords()))
	}
	if rl.handoff != nil {
		fields = append(fields, zap.Object("handoff", rl.handoff))
	}
	if rl.budgetHits > 0 {
		fields = append(fields, zap.Int("reasoning_budget_failovers", rl.budgetHits))
	}
	if u := rl.usage; u != nil {
		fields = append(fields, zap.String("tokens", usage.FormatTokens(u.Prompt)+" in, "+usage.FormatTokens(u.Completion)+" out ("+
			usage.FormatTokens(u.Reasoning)+" reasoning, "+usage.FormatTokens(u.Cached)+" cached)"),
			zap.Int("prompt_tokens", u.Prompt), zap.Int("completion_tokens", u.Completion),
			zap.Int("reasoning_tokens", u.Reasoning), zap.Int("cached_tokens", u.Cached), zap.Int("cache_write_tokens", u.CacheWrite), zap.Bool("usage_estimated", u.Estimated))
		if rl.priced {
			fields = append(fields, zap.String("cost", usage.FormatUSD(rl.cost)), zap.String("cost_usd", formatCost(rl.cost)))
		}
	}
	c.Write(fields...) // zap's cores encode (or copy) the fields before they return
	clear(fields)      // no strings or objects kept alive by the pool
	*fp = fields[:0]
	logFields.Put(fp)
}

// capacityWords is the log line's capacity field, e.g. "spilled,degraded".
func (rl *requestLog) capacityWords() string {
	var w []string
	for _, s := range []struct {
		on   bool
		word string
	}{{rl.spilled, "spilled"}, {rl.degraded, "degraded"}, {rl.queued, "queued"}} {
		if s.on {
			w = append(w, s.word)
		}
	}
	return strings.Join(w, ",")
}

// logFields are the field slices of request lines, reused: 32 fields of 64
// bytes per request otherwise.
var logFields = sync.Pool{New: func() any { f := make([]zap.Field, 0, 32); return &f }}

// placeholder resolves the request's placeholders, {http.llm_relay.*}.
func (rl *requestLog) placeholder(key string) (any, bool) {
	name, ok := strings.CutPrefix(key, "http.llm_relay.")
	if !ok {
		return nil, false
	}
	switch name {
	case "upstream":
		return rl.upstream, true
	case "model":
		return rl.model, true
	case "attempts":
		return rl.attempts, true
	case "key":
		return rl.key, true
	case "error":
		return rl.errCode, true
	}
	return nil, false
}

// countingWriter counts the body bytes written to the client.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (cw *countingWriter) Write(b []byte) (int, error) {
	n, err := cw.ResponseWriter.Write(b)
	cw.n += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer's Flush.
func (cw *countingWriter) Unwrap() http.ResponseWriter { return cw.ResponseWriter }
