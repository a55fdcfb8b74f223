package llmrelay

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/handoff"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// The baton pass (docs/handoff.md): a hand-off alias reasons on one chain
// (its `reason` lines) and answers on another (its `to` lines), inside
// one client response.
//
// Both legs are sent the client's request in the client's own dialect
// (internal/handoff edits it: a stream, history reasoning removed; the
// answer leg's with the reasoning injected), so each target is reached
// exactly as an ordinary alias reaches it, prompt-cache markers where the
// client put them. Their answers come back as Chat Completions chunks,
// the relay's pivot (exchange.pivot), where handoff.Splicer makes one
// stream of them: the reasoning leg's reasoning up to the hand-off point,
// then the answer leg's answer. That one stream is translated into the
// client's dialect and goes through the pacer like any upstream's, so
// every dialect, the reasoning lane, budgets, usage and the log read it
// as one answer.
//
// Each leg walks its chain with the ordinary failover loop (a chainRun
// with leg set), which hands its committed attempt back instead of
// answering the client.

// handoffRoute is a compiled hand-off alias: its reasoning leg's chain
// and its `handoff` settings. The answer leg is the route's own targets.
type handoffRoute struct {
	reason *route // the reasoning leg's targets (no canary, no shadow)
	// inject is where the reasoning goes; injectSet false: per target,
	// prefill for api anthropic, user otherwise.
	inject       handoff.Inject
	injectSet    bool
	maxReasoning int
	failAnswer   bool // on_reason_failure answer
}

// The values of on_reason_failure.
const (
	onReasonAnswer = "answer"
	onReasonError  = "error"
)

// check checks a handoff block's values (the Caddyfile parser calls it
// line by line, Provision for JSON).
func (ho *Handoff) check() error {
	if ho == nil {
		return nil
	}
	if _, ok := handoff.ParseInject(ho.Inject); ho.Inject != "" && !ok {
		return fmt.Errorf("inject %q is not known; use prefill (a trailing assistant turn the model continues), user (appended to the last user turn) or system (appended to the system prompt)", ho.Inject)
	}
	if ho.MaxReasoning < 0 {
		return fmt.Errorf("max_reasoning %d is negative; give a number of tokens, or leave it out to hand off at the reasoning's own end", ho.MaxReasoning)
	}
	switch ho.OnReasonFailure {
	case "", onReasonAnswer, onReasonError:
	default:
		return fmt.Errorf("on_reason_failure %q is not known; use answer (answer without reasoning, the default) or error", ho.OnReasonFailure)
	}
	return nil
}

// checkHandoff checks a model's hand-off lines together. Its errors
// name the model.
func (m *ModelRoute) checkHandoff() error {
	if m.Handoff != nil && len(m.Reason) == 0 {
		return errHandoffWithoutReason(m.Alias)
	}
	if len(m.Reason) > 0 && len(m.Targets) == 0 {
		return errHandoffNoAnswer(m.Alias)
	}
	if err := m.Handoff.check(); err != nil {
		return fmt.Errorf("model %q: handoff: %w", m.Alias, err)
	}
	return nil
}

func errHandoffWithoutReason(alias string) error {
	return fmt.Errorf("model %q: handoff needs `reason <upstream> [<upstream_model>]` lines, the reasoning leg it hands off from (JSON: reason); add them or remove the handoff block", alias)
}

func errHandoffNoAnswer(alias string) error {
	return fmt.Errorf("model %q has reason lines but no `to` targets: a hand-off alias answers on its `to` chain; add `to <upstream> [<upstream_model>]` (JSON: targets)", alias)
}

// compileHandoff compiles a hand-off alias's reasoning chain (nil: the
// model has no `reason` lines).
func (h *Relay) compileHandoff(m *ModelRoute) (*handoffRoute, error) {
	// checkConfig has checked the lines (ModelRoute.check).
	if len(m.Reason) == 0 {
		return nil, nil
	}
	reason := &route{alias: m.Alias}
	var err error
	if reason.targets, reason.capped, err = h.compileTargets(m, m.Reason, "reason target"); err != nil {
		return nil, err
	}
	ho := &handoffRoute{reason: reason, failAnswer: true}
	if c := m.Handoff; c != nil {
		ho.inject, ho.injectSet = handoff.ParseInject(c.Inject)
		ho.maxReasoning = c.MaxReasoning
		ho.failAnswer = c.OnReasonFailure != onReasonError
	}
	return ho, nil
}

// injectFor is where target t's request carries the reasoning.
func (ho *handoffRoute) injectFor(t *target) handoff.Inject {
	where := handoff.User
	switch {
	case ho.injectSet:
		where = ho.inject
	case t.up.api == apiAnthropic:
		where = handoff.Prefill
	}
	if where == handoff.Prefill && t.noPrefill != nil && t.noPrefill.Load() {
		return handoff.User // it refused a prefill (refusedPrefill)
	}
	return where
}

// refusedPrefill reports an answer leg whose target refused the prefill
// with a 400 (Anthropic's Claude 4.6 and later: "This model does not
// support assistant message prefill"): the target is marked, and from
// then on (until the config is reloaded) gets the reasoning in the user
// turn instead; the caller asks the answer chain again at once. A model
// that refuses a prefill is not a failing target: no health sample is
// lost to it beyond the one answer.
func (s *handoffSource) refusedPrefill(leg *legResult) bool {
	res := leg.res
	if res == nil || res.events != nil || res.resp.StatusCode != http.StatusBadRequest ||
		leg.t.noPrefill == nil || s.ho.injectFor(leg.t) != handoff.Prefill {
		return false
	}
	if !bytes.Contains(bytes.ToLower(res.wholeBody()), []byte("prefill")) {
		return false
	}
	leg.t.noPrefill.Store(true)
	leg.done()
	s.c.req.note(leg.t, "refused the reasoning as a prefill (400): injected into the user turn instead, from now on for this target")
	return true
}

// handoffDialect is the dialect of a client's body, as internal/handoff
// names it.
func handoffDialect(d dialect) handoff.Dialect {
	switch d {
	case dialectMessages:
		return handoff.Messages
	case dialectResponses:
		return handoff.Responses
	}
	return handoff.Chat
}

// legResult is what a leg's chain hands back: the committed attempt and
// its target, or why it failed.
type legResult struct {
	name    string          // "reason" or "answer" for a hand-off's, for its spans (tracing.go)
	ctx     context.Context // the leg's attempts' context (nil: the request's)
	native  bool            // answers in the client's dialect, not the Chat pivot (a continuation: continuation.go)
	res     *attemptResult
	t       *target
	release func() // gives back the target's max_concurrent slot, when the leg is over
	err     *apiError
	once    sync.Once // done's work, on whichever goroutine comes first
}

// role names the leg on its attempts' spans.
func (l *legResult) role() string {
	if l.native {
		return "continuation"
	}
	return cmp.Or(l.name, "handoff")
}

// named names a leg for its spans.
func (c *chainRun) named(name string) *chainRun {
	c.leg.name = name
	return c
}

// done releases what the leg holds: its upstream's answer and its slot.
// It may run on two goroutines at once (stop's, and the stream's end):
// the second waits for the first.
func (l *legResult) done() { l.once.Do(l.free) }

// stop ends the leg at once and releases it in the background: its
// attempt's context is cancelled here, so the transport closes its
// connection (the upstream stops, and so does what it bills); closing
// its body (which reads to the connection's end: a goroutine switch or
// more, when the machine is busy) and giving back its slot are done on
// another goroutine, off the hand-off's path to the answer leg.
func (l *legResult) stop() {
	if l.res != nil {
		l.res.finish()
	}
	go l.done()
}

func (l *legResult) free() {
	if l.res != nil {
		l.res.finish()
		_ = l.res.resp.Body.Close()
		l.res.release()
		// Nothing reads the attempt after: dropping it lets the collector
		// have its response, connection buffers and held events while
		// the stream goes on (the reasoning leg's, for the whole answer).
		l.res = nil
	}
	if l.release != nil {
		l.release()
		l.release = nil
	}
}

// newLeg is a chain run for one leg of c's hand-off: its own plan over
// rt's targets, its own try_duration, the request's state and log.
func (c *chainRun) newLeg(rt *route, body *requestBody, bodyFor func(*target) *requestBody, ctx context.Context) *chainRun {
	l := &chainRun{h: c.h, w: c.w, r: c.r, req: c.req, rt: rt, body: body, pol: c.pol,
		leg: &legResult{ctx: ctx}, bodyFor: bodyFor}
	l.deadline = time.Now().Add(c.h.tryDur)
	l.plan = c.h.orderTargets(rt, c.r, body, time.Now())
	attempts := c.h.attempts
	if l.plan.canaryFirst && attempts > 0 {
		attempts++ // as newChainRun: the canary does not use up one of the chain's attempts
	}
	l.cur = newChainCursor(len(l.plan.targets), attempts)
	return l
}

// runLeg walks a leg's chain until one attempt commits (leg.res) or the
// chain gives up (leg.err). The client's leaving shows as neither, with
// the request's status set.
func (l *chainRun) runLeg() *legResult {
	for {
		st, ok := l.cur.nextStep(time.Now(), l.deadline, l.h.backoff, nil)
		if !ok {
			break
		}
		switch l.step(st) {
		case chainFinished:
			return l.leg
		case chainGiveUp:
			l.leg.err = l.failure()
			return l.leg
		}
	}
	l.leg.err = l.failure()
	return l.leg
}

// legBody is a leg's request body: raw parsed as the client's is, with
// the client's reasoning budget (a target's budget placeholder reads it).
func (c *chainRun) legBody(raw []byte) (*requestBody, error) {
	rb, err := parseRequestBody(raw)
	if err != nil {
		return nil, err
	}
	rb.budget = c.body.budget
	return rb, nil
}

// handoffRecord is what the log line, metrics and status page show of a
// hand-off's legs.
type handoffRecord struct {
	reasonUpstream, reasonModel string // "": no reasoning leg answered
	reasonTTFT                  time.Duration
	reasoningTokens             int // estimated (the leg is stopped before its usage)
	reasonPrompt                int // estimated
	handoffAt                   time.Duration
	why                         string        // what ended the reasoning: answer, tool_call, finish, max_reasoning, unreadable, broke, no_reasoning
	gap                         time.Duration // the hand-off point to the answer leg's request written (the relay's own time)
	answerUpstream, answerModel string
	answerTTFT                  time.Duration
	answerPrompt                int
	answerCompletion            int
	noReasoning                 bool // on_reason_failure answer: answered without reasoning
	reasonFailed                bool // on_reason_failure error: the reasoning chain failed, the request with it
	reasonCost, answerCost      float64
	answerCached                int // of answerPrompt, read from the provider's cache
	priced                      bool
}

// handoffView is a hand-off's legs on the status view and page.
type handoffView struct {
	ReasonUpstream  string  `json:"reason_upstream,omitempty"` // "": the reasoning chain failed
	ReasonModel     string  `json:"reason_model,omitempty"`
	ReasonTTFTMS    float64 `json:"reason_ttft_ms"`
	ReasoningTokens int     `json:"reasoning_tokens"` // estimated
	HandoffAtMS     float64 `json:"handoff_at_ms"`    // since the request
	Why             string  `json:"why"`              // what ended the reasoning (see handoffRecord.why)
	GapMS           float64 `json:"gap_ms"`           // the hand-off point to the answer leg's request written
	AnswerUpstream  string  `json:"answer_upstream,omitempty"`
	AnswerModel     string  `json:"answer_model,omitempty"`
	AnswerTTFTMS    float64 `json:"answer_ttft_ms"`
}

func (h *handoffRecord) view() *handoffView {
	return &handoffView{ReasonUpstream: h.reasonUpstream, ReasonModel: h.reasonModel, ReasonTTFTMS: ms(h.reasonTTFT),
		ReasoningTokens: h.reasoningTokens, HandoffAtMS: ms(h.handoffAt), Why: h.why, GapMS: ms(h.gap),
		AnswerUpstream: h.answerUpstream, AnswerModel: h.answerModel, AnswerTTFTMS: ms(h.answerTTFT)}
}

// MarshalLogObject is the log line's handoff object: each leg's target,
// time to first token, tokens and cost.
func (h *handoffRecord) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	switch {
	case h.noReasoning:
		enc.AddBool("no_reasoning", true)
	case h.reasonFailed:
		enc.AddBool("reason_failed", true) // no leg to show: its failures are the line's
	default:
		enc.AddString("reason_upstream", h.reasonUpstream)
		enc.AddString("reason_model", h.reasonModel)
		enc.AddDuration("reason_ttft", h.reasonTTFT)
		enc.AddInt("reasoning_tokens", h.reasoningTokens)
		enc.AddInt("reason_prompt_tokens", h.reasonPrompt)
		enc.AddDuration("handoff_at", h.handoffAt)
		enc.AddString("why", h.why)
		enc.AddDuration("gap", h.gap)
	}
	if h.answerUpstream != "" {
		enc.AddString("answer_upstream", h.answerUpstream)
		enc.AddString("answer_model", h.answerModel)
		enc.AddDuration("answer_ttft", h.answerTTFT)
		enc.AddInt("answer_prompt_tokens", h.answerPrompt)
		enc.AddInt("answer_completion_tokens", h.answerCompletion)
	}
	if h.priced {
		enc.AddString("reason_cost", usage.FormatUSD(h.reasonCost))
		enc.AddString("answer_cost", usage.FormatUSD(h.answerCost))
	}
	return nil
}

// cost prices each leg at its own model's price (priceOf: Relay.priceOf
// for the request's alias): the reasoning leg's estimated prompt and
// reasoning, the answer leg's usage as it sent it. ok: at least one leg
// is priced.
func (h *handoffRecord) cost(priceOf func(model string) (usage.Price, bool)) (float64, bool) {
	if p, ok := priceOf(h.reasonModel); ok && h.reasonModel != "" {
		h.reasonCost = p.Cost(usage.Usage{Prompt: h.reasonPrompt, Completion: h.reasoningTokens, Reasoning: h.reasoningTokens})
		h.priced = true
	}
	if p, ok := priceOf(h.answerModel); ok && h.answerModel != "" {
		h.answerCost = p.Cost(usage.Usage{Prompt: h.answerPrompt, Completion: h.answerCompletion, Cached: h.answerCached})
		h.priced = true
	}
	return h.reasonCost + h.answerCost, h.priced
}

// handoff serves a hand-off alias: the reasoning leg, then the answer
// leg, as one response.
func (c *chainRun) handoff() {
	ho := c.rt.handoff
	d := handoffDialect(c.req.ep.dialect)
	clientBody, err := json.Marshal(c.body.fields) // with the relay's own edits (effort...)
	if err != nil {
		c.h.reject(c.w, c.req, errInvalidRequest("", "the request body could not be read: "+err.Error()))
		return
	}
	rec := &handoffRecord{}
	c.req.handoff = rec
	if c.pol.cfg.BudgetAction == pace.BudgetFailover {
		// A reasoning budget's failover would start another reasoning
		// leg on a stream that already has one: on a hand-off alias it
		// ends the stream as error does (max_reasoning hands off instead).
		c.pol.cfg.BudgetAction = pace.BudgetError
	}

	src := &handoffSource{c: c, ho: ho, d: d, rec: rec}
	src.sp.Model = c.rt.alias
	src.sp.Created = time.Now().Unix()
	src.sp.MaxReasoning = ho.maxReasoning
	if b := c.pol.cfg.ReasoningBudget; b > 0 && c.pol.cfg.BudgetAction == pace.BudgetTruncate && (b < src.sp.MaxReasoning || src.sp.MaxReasoning == 0) {
		// A truncating budget on a hand-off alias is a hand-off point:
		// the reasoning leg stops there and the answer leg answers with
		// the reasoning so far, as max_reasoning does.
		src.sp.MaxReasoning = b
	}

	reasonRaw, err := handoff.Reason(d, clientBody)
	var reasonBody *requestBody
	if err == nil {
		reasonBody, err = c.legBody(reasonRaw)
	}
	if err != nil {
		param := ""
		if errors.Is(err, handoff.ErrLogprobs) {
			param = "logprobs"
		}
		c.h.reject(c.w, c.req, errInvalidRequest(param, err.Error()))
		return
	}
	src.sp.ReasonPrompt = usage.EstimatePrompt(reasonRaw)
	src.prepare(reasonRaw)
	leg := c.newLeg(ho.reason, reasonBody, nil, nil).named("reason").runLeg()
	switch {
	case leg.res != nil && leg.res.events == nil:
		// The upstream's own answer to pass through (a 400 the client
		// can act on): nothing was sent yet, so it is the answer.
		if leg.release != nil {
			defer leg.release()
		}
		rec.reasonUpstream = leg.t.up.name
		c.commit(leg.t, leg.res)
		return
	case leg.res != nil:
		src.reason = leg
		rec.reasonUpstream, rec.reasonModel = leg.t.up.name, c.req.modelFor(leg.t)
		rec.reasonTTFT = leg.res.ttft
	case c.req.status == statusClientClosed:
		return
	case !ho.failAnswer:
		rec.reasonFailed = true
		c.invalid = leg.err // the chain's own account, as an ordinary alias's
		c.fail()
		countHandoff(c.rt.alias, "reason_failed")
		return
	default:
		rec.noReasoning, rec.why = true, "no_reasoning"
		c.req.noteText("reasoning leg failed before any reasoning: answering without it (on_reason_failure answer)")
	}
	defer src.close()

	xOut := exchange{ep: c.req.ep, client: c.req.ep.dialect, upstream: dialectChat, rest: c.req.ep.rest, request: c.body.raw, idBase: journalIDBase(c.req)}
	if c.req.ep.kind == kindChat {
		xOut.reasoningField = c.rt.fieldFor(c.req)
	}
	// X-Relay-Upstream and -Model name the leg whose stream committed
	// the response (the reasoning leg's, on a stream) or, on a whole
	// answer, the answer leg; this header names the reasoning leg always.
	if rec.noReasoning {
		c.w.Header().Set("X-Relay-Handoff", "no-reasoning")
	} else {
		c.w.Header().Set("X-Relay-Handoff", "reasoned-by "+rec.reasonUpstream+" ("+rec.reasonModel+")")
	}
	if !c.body.clientStream() {
		c.handoffAnswer(src, xOut)
		return
	}
	res := &attemptResult{x: xOut, started: c.req.start, finish: src.close, cause: func() error { return nil }}
	res.resp = &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(nil))}
	res.events = xOut.translateStream(src, c.rt.alias, true, src.sp.ReasonPrompt)
	if err := awaitFirstEvent(res); err != nil {
		// Nothing reached the client: no reasoning, and the answer leg
		// failed too.
		src.close()
		c.failHandoff(src, err)
		return
	}
	t := src.committedTarget()
	res.ttft = time.Since(c.req.start)
	c.req.trace.tap(res, c.req.ep.format(), &c.pol.cfg) // the answer's facts, for the answer leg's span
	c.commit(t, res)
	c.finishHandoff(src)
}

// handoffAnswer answers a non-stream client: both legs ran as streams,
// and the answer is the chat.completion they add up to, in the client's
// dialect, its reasoning in the dialect's reasoning field or block.
func (c *chainRun) handoffAnswer(src *handoffSource, xOut exchange) {
	var a chat.Assembler
	for {
		ev, err := src.Next()
		if err == nil && ev.IsDone() {
			break
		}
		if err == io.EOF {
			// The answer leg's stream ended without [DONE]: an answer cut
			// short, which a whole answer must not pass for complete.
			err = errors.New("the answer leg's stream ended before [DONE]")
		}
		if err != nil || ev.Unterminated {
			if c.r.Context().Err() != nil {
				c.req.status = statusClientClosed
				return
			}
			c.failHandoff(src, err)
			return
		}
		if !ev.HasData {
			continue
		}
		if isErrorEvent(&ev) {
			if src.answerErr == nil {
				src.answerErr = upstreamErrorOf(ev.Data)
			}
			c.failHandoff(src, errors.New("the answer leg sent an error"))
			return
		}
		a.Add(ev.Data, time.Since(c.req.start), false)
	}
	comp := a.Completion(time.Since(c.req.start), false)
	body := comp.JSON()
	status, out := xOut.translateUntagged(http.StatusOK, body)
	t := src.committedTarget()
	if src.answer != nil && src.answer.t != nil {
		t = src.answer.t // known before the headers: they name the answer leg
	}
	c.req.commit(t, status)
	c.takeWriter()
	hdr := c.w.Header()
	setRelayHeaders(hdr, t, c.req)
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Content-Length", strconv.Itoa(len(out)))
	if status/100 == 2 {
		src.recordTokens() // the legs' tokens, for the cost header (finishHandoff records them again)
		if src.reason != nil {
			c.req.usageEstimated = true // as finishHandoff says: the reasoning leg's usage is estimated
		}
		c.h.setAnswerCost(hdr, c.req, out)
	}
	c.w.WriteHeader(status)
	_, _ = c.w.Write(out)
	c.headersOut = true
	c.finishHandoff(src)
}

// failHandoff answers a hand-off that sent the client nothing: the answer
// leg's failure (or the reasoning's, when that one is all there is).
func (c *chainRun) failHandoff(src *handoffSource, err error) {
	countHandoff(c.rt.alias, "answer_failed")
	src.recordTokens() // the reasoning was made (and paid for) all the same
	src.rec.gap = time.Duration(src.gapNs.Load())
	if src.answerErr != nil {
		c.invalid = src.answerErr
	} else if err != nil {
		c.req.noteText("hand-off: " + logDetail(err))
	}
	c.fail()
}

// finishHandoff puts the legs into the request's record: the log line
// names the answer leg as the upstream, and the legs in its handoff
// fields.
func (c *chainRun) finishHandoff(src *handoffSource) {
	rec := src.rec
	if src.answer != nil && src.answer.t != nil {
		c.req.upstream, c.req.model = src.answer.t.up.name, c.req.modelFor(src.answer.t)
	}
	src.recordTokens()
	rec.gap = time.Duration(src.gapNs.Load())
	if src.reason != nil {
		// The reasoning leg is stopped before its usage comes: its share
		// of the usage is the relay's estimate, and the log line says so.
		c.req.usageEstimated = true
	}
	outcome := "handed_off"
	switch {
	case src.answerErr != nil:
		// The answer chain was exhausted after the reasoning was
		// streamed: the stream ended on the in-band error, which the log
		// line says as it does the relay's other in-band errors.
		outcome = "answer_failed"
		c.req.errCode, c.req.streamError = src.answerErr.Code, src.answerErr.Code
	case rec.noReasoning:
		outcome = "no_reasoning"
	}
	countHandoff(c.rt.alias, outcome)
	if rec.gap > 0 {
		metricHandoffGap.Observe(rec.gap.Seconds())
	}
}

// recordTokens puts each leg's tokens into the hand-off's record.
func (s *handoffSource) recordTokens() {
	s.rec.reasoningTokens, s.rec.reasonPrompt = s.sp.ReasoningTokens(), s.sp.ReasonPrompt
	s.rec.answerPrompt, s.rec.answerCompletion = s.sp.AnswerPrompt, s.sp.AnswerCompletion
	s.rec.answerCached = s.sp.AnswerCached
}

// handoffSource is the one Chat Completions stream of a hand-off: the
// reasoning leg's reasoning up to the hand-off point, then the answer
// leg's answer, both through the Splicer. The answer leg's chain is
// walked inside Next, at the hand-off point: the client's stream (already
// committed, or waiting for its first event) gets heartbeats from the
// pacer meanwhile.
type handoffSource struct {
	c   *chainRun
	ho  *handoffRoute
	d   handoff.Dialect
	rec *handoffRecord
	// reasonBody is the reasoning leg's body, which the answer leg's is
	// made from (handoff.Answer gives the same body from it as from the
	// client's), and prepared the answer leg's bodies made from it while
	// the reasoning streams, one per inject position of the answer chain
	// (see prepare). Both are dropped once the answer leg is under way.
	reasonBody []byte
	prepared   chan []*handoff.Prepared
	sp         handoff.Splicer

	reason *legResult // nil: no reasoning leg (failed, on_reason_failure answer)
	first  int        // the reasoning leg's held events read so far
	answer *legResult
	// answerEvents is the answer leg's stream, its held events first,
	// with a usage chunk always (usageMeter: the relay's estimate when
	// the upstream sends none), which the Splicer sums with the
	// reasoning leg's.
	answerEvents pace.Source

	queue     [][]byte // chunks to return before reading on
	phase     handoffPhase
	answerErr *apiError // the answer leg's failure, for the client

	// beforeRead is the pacer's per-read hook (BeforeRead); reasonHooked:
	// the reasoning leg's stream has been handed it; reasonEach and
	// answerEach: that leg's stream could not take it, so Next calls it
	// before each of its reads.
	beforeRead             func()
	reasonHooked           bool
	reasonEach, answerEach bool

	gapNs atomic.Int64 // the hand-off's gap in ns (0: the answer leg wrote no request), set by the transport's goroutine
	evBuf []byte       // the last event Next returned (event)

	mu     sync.Mutex
	closed bool
}

type handoffPhase uint8

const (
	phaseReason handoffPhase = iota
	phaseAnswer
	phaseDone
)

// committedTarget is the target the response's headers name: the
// reasoning leg's, whose stream commits the response, or the answer
// leg's when there was no reasoning.
func (s *handoffSource) committedTarget() *target {
	if s.reason != nil && s.reason.t != nil {
		return s.reason.t
	}
	if s.answer != nil && s.answer.t != nil {
		return s.answer.t
	}
	return s.c.rt.targets[0]
}

func (s *handoffSource) Next() (sse.Event, error) {
	for {
		if len(s.queue) > 0 {
			b := s.queue[0]
			s.queue = s.queue[1:]
			return s.event(b), nil
		}
		switch s.phase {
		case phaseReason:
			if err := s.readReason(); err != nil {
				return sse.Event{}, err
			}
		case phaseAnswer:
			ev, err := s.nextAnswer()
			if err != nil || !ev.HasData || ev.IsDone() || ev.Unterminated {
				if err != nil || ev.IsDone() || ev.Unterminated {
					s.phase = phaseDone
				}
				if err == nil && !ev.HasData && !ev.Unterminated {
					continue // a keep-alive comment: the pacer has its own
				}
				return ev, err
			}
			if isErrorEvent(&ev) {
				s.phase = phaseDone
				return ev, nil // the answer leg's in-band error, translated for the client
			}
			out, err := s.sp.AnswerEvent(&ev)
			if err != nil {
				// Something the client cannot be given: the stream ends on
				// the in-band error, never cleanly without it.
				s.phase = phaseDone
				return sse.Event{}, err
			}
			s.queue = append(s.queue, out...)
		default:
			return sse.Event{}, io.EOF
		}
	}
}

// event is a chunk as the event a Reader would return for it, in a
// buffer of the source's own that the next call reuses, as a Reader's
// events alias its buffer until the next read: a chunk of one line (the
// Splicer's all are) costs no allocation, where sse.NewEvent made a
// reader and its buffer for each, a sixth of a hand-off's garbage.
func (s *handoffSource) event(chunk []byte) sse.Event {
	if bytes.ContainsAny(chunk, "\r\n") {
		return sse.NewEvent("", chunk) // an upstream's error object, as it came
	}
	s.evBuf = append(append(append(s.evBuf[:0], "data: "...), chunk...), "\n\n"...)
	return sse.DataEvent(s.evBuf)
}

// BeforeRead takes the pacer's per-read hook (see pace.Run), which it
// calls before a read that waits for an upstream: each leg's stream is
// handed it when the source starts reading that leg (legHook), and the
// hand-off calls it once the answer leg's request is out. Having the
// method tells the pacer that the hook will be called, so it sends what
// it queued only then (mode off: nothing is flushed before it): a source
// that took the hook and never called it held a hand-off's reasoning
// back until Caddy's buffer filled or the stream ended.
func (s *handoffSource) BeforeRead(f func()) { s.beforeRead = f }

// legHook hands the pacer's hook to a leg's stream, and reports whether
// Next must call it itself before each read of that stream (the stream
// cannot take it).
func (s *handoffSource) legHook(src pace.Source) (callEach bool) {
	if s.beforeRead == nil {
		return false
	}
	return !sse.ForwardBeforeRead(src, s.beforeRead)
}

// hook calls the pacer's hook, if it gave one.
func (s *handoffSource) hook() {
	if s.beforeRead != nil {
		s.beforeRead()
	}
}

// readReason reads the reasoning leg's next event: its reasoning is
// queued for the client; the hand-off point starts the answer leg.
func (s *handoffSource) readReason() error {
	if s.reason == nil {
		return s.startAnswer()
	}
	res := s.reason.res
	var ev sse.Event
	var err error
	if s.first < len(res.first) {
		ev = res.first[s.first]
		s.first++
	} else {
		if !s.reasonHooked && s.beforeRead != nil {
			s.reasonHooked, s.reasonEach = true, s.legHook(res.events)
		}
		if s.reasonEach {
			s.hook()
		}
		ev, err = res.events.Next()
	}
	switch {
	case err != nil || ev.Unterminated:
		s.rec.why = "broke"
		s.c.req.note(s.reason.t, "reasoning leg broke after "+strconv.Itoa(s.sp.ReasoningTokens())+" reasoning tokens: handing off what came")
		return s.startAnswer()
	case !ev.HasData:
		return nil
	case ev.IsDone():
		s.rec.why = "finish"
		return s.startAnswer()
	case isErrorEvent(&ev):
		s.rec.why = "broke"
		s.c.req.note(s.reason.t, "reasoning leg sent an error after "+strconv.Itoa(s.sp.ReasoningTokens())+" reasoning tokens: handing off what came")
		return s.startAnswer()
	}
	out, over := s.sp.ReasonEvent(&ev)
	s.queue = append(s.queue, out...)
	if over {
		s.rec.why = s.sp.End
		return s.startAnswer()
	}
	return nil
}

// startAnswer is the hand-off point: the reasoning leg is stopped (its
// connection closed: none of its answer is read or paid for), and the
// answer leg's chain is walked with the reasoning injected.
func (s *handoffSource) startAnswer() error {
	at := time.Now()
	s.phase = phaseAnswer
	if s.reason != nil {
		s.reason.stop()
		s.rec.handoffAt = at.Sub(s.c.req.start)
	}
	reasoning := s.sp.Reasoning()
	if s.reason != nil && reasoning == "" && !s.rec.noReasoning {
		s.c.req.note(s.reason.t, "reasoning leg gave no reasoning: answering without it")
	}
	var prepared []*handoff.Prepared
	if s.prepared != nil {
		prepared = <-s.prepared // made long before, unless the reasoning was shorter than its making
	}
	bodies := map[handoff.Inject]*requestBody{}
	var bodyErr error
	bodyFor := func(t *target) *requestBody {
		where := s.ho.injectFor(t)
		if b, ok := bodies[where]; ok {
			return b
		}
		var raw []byte
		var err error
		filled := false
		for _, p := range prepared {
			if p.Where() == where {
				raw, filled = p.Fill(reasoning)
			}
		}
		if !filled { // no reasoning, or no prepared body for where
			raw, err = handoff.Answer(s.d, s.reasonBody, reasoning, where)
		}
		var b *requestBody
		if err == nil {
			b, err = s.c.legBody(raw)
		}
		if err != nil {
			bodyErr = err
			return s.c.body
		}
		bodies[where] = b
		return b
	}
	var flushed sync.Once
	ctx := httptrace.WithClientTrace(s.c.r.Context(), &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		// On the transport's goroutine, which a busy machine may run
		// after the answer leg's first byte: the first write's time is
		// kept apart (gapNs) and put in the record at the end.
		s.gapNs.CompareAndSwap(0, int64(time.Since(at)))
		// What the pacer holds of the reasoning goes out now, while the
		// answer leg's first token is awaited (its time to first token
		// can be seconds). The hook is safe on this goroutine: the
		// pacer's hooks take its lock, as they run on its reader
		// goroutine or beside its heartbeat.
		flushed.Do(s.hook)
	}})
	first := bodyFor(s.c.rt.targets[0])
	leg := s.c.newLeg(s.c.rt, first, bodyFor, ctx).named("answer").runLeg()
	for s.refusedPrefill(leg) {
		// Each refusal marks one target, so this ends.
		leg = s.c.newLeg(s.c.rt, bodyFor(s.c.rt.targets[0]), bodyFor, ctx).named("answer").runLeg()
	}
	flushed.Do(s.hook) // no attempt wrote its request: what is held goes out now
	// Every answer body is made: what they were made from, as long as
	// the conversation, is not kept for the rest of the stream.
	s.reasonBody, s.prepared = nil, nil
	if bodyErr != nil {
		return &publicError{msg: "the answer leg's request could not be made", cause: bodyErr}
	}
	s.answer = leg
	if leg.res == nil {
		s.phase = phaseDone
		if s.c.req.status == statusClientClosed {
			return context.Canceled
		}
		s.answerErr = leg.err
		if leg.err == nil {
			s.answerErr = errAllFailed(s.c.req.summary())
		}
		return s.inBandError(s.answerErr)
	}
	s.rec.answerUpstream, s.rec.answerModel = leg.t.up.name, s.c.req.modelFor(leg.t)
	s.rec.answerTTFT = leg.res.ttft
	if leg.res.events == nil {
		// The upstream's own error status (passed through by the chain):
		// after the reasoning, an in-band error with its message.
		b := leg.res.wholeBody()
		e := upstreamErrorOf(b)
		if e == nil {
			e = errAllFailed(s.c.req.summary())
		}
		s.answerErr = e
		s.phase = phaseDone
		return s.inBandError(e)
	}
	raw := bodyFor(leg.t).raw
	s.answerEvents = newUsageMeter(&heldFirst{first: leg.res.first, src: leg.res.events}, func() int { return usage.EstimatePrompt(raw) })
	s.answerEach = s.legHook(leg.res.events)
	if s.sp.ID == "" {
		s.sp.Begin("chatcmpl-" + strconv.FormatInt(time.Now().UnixNano(), 36))
	}
	return nil
}

// prepare starts making the answer leg's bodies from the reasoning leg's
// body, one for each inject position of the answer chain's targets, on a
// goroutine of their own while the reasoning leg runs, so that the
// hand-off only copies the reasoning into one (handoff.Prepared.Fill).
func (s *handoffSource) prepare(reasonBody []byte) {
	s.reasonBody = reasonBody
	var wheres []handoff.Inject
	for _, t := range s.c.rt.targets {
		if w := s.ho.injectFor(t); !slices.Contains(wheres, w) {
			wheres = append(wheres, w)
		}
	}
	d, ch := s.d, make(chan []*handoff.Prepared, 1) // buffered: nobody may take it (the client left)
	s.prepared = ch
	go func() {
		var ps []*handoff.Prepared
		for _, w := range wheres {
			if p, ok := handoff.Prepare(d, reasonBody, w); ok {
				ps = append(ps, p)
			}
		}
		ch <- ps
	}()
}

// inBandError queues the answer leg's failure as a Chat error event,
// which the client's translator turns into its dialect's in-band error.
func (s *handoffSource) inBandError(e *apiError) error {
	s.queue = append(s.queue, e.body())
	return nil
}

// nextAnswer is the answer leg's next event.
func (s *handoffSource) nextAnswer() (sse.Event, error) {
	if s.answerEach {
		s.hook()
	}
	return s.answerEvents.Next()
}

// heldFirst is an attempt's stream with the events held at its commit
// point first.
type heldFirst struct {
	first []sse.Event
	src   pace.Source
}

func (h *heldFirst) Next() (sse.Event, error) {
	if len(h.first) > 0 {
		ev := h.first[0]
		h.first = h.first[1:]
		return ev, nil
	}
	return h.src.Next()
}

// close stops both legs (idempotent): the response is over, or failed.
func (s *handoffSource) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.reason != nil {
		s.reason.done()
	}
	if s.answer != nil {
		s.answer.done()
	}
}
