package llmrelay

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/health"
)

// chainRun is one request's walk along its failover chain: attempts, in
// the order health and the canary chose, until one can be committed to the
// client, the attempts run out, or try_duration does.
//
// ServeHTTP-level code makes one with newChainRun and calls run; the loop
// (run) is separate from one iteration (step), as reverse_proxy separates
// ServeHTTP from proxyLoopIteration.
//
// The ResponseWriter has at most one other writer at a time: a
// heartbeatHold (early_commit, or the pause after a reasoning budget
// failover on a committed stream). takeWriter releases it before the
// handler writes anything, and run releases it by a defer on every path,
// so no heartbeat timer outlives the request.
type chainRun struct {
	h    *Relay
	w    http.ResponseWriter
	r    *http.Request
	req  *requestState
	rt   *route
	body *requestBody
	pol  smoothPolicy

	plan        plan
	cur         *chainCursor
	deadline    time.Time // when try_duration runs out
	canaryTried bool

	hold       *heartbeatHold // nil: the handler owns the ResponseWriter
	headersOut bool           // the response's headers were written

	// What the failed attempts were, for the final answer.
	failed       int
	rateLimited  int // answered 429
	notStreaming int // answered a stream request with a 2xx that is not SSE
	// Targets the request could not be translated for, and the last
	// refusal's message (the client's 400 when no target took it).
	untranslated    int
	untranslatedMsg string
	// untranslatedFor names the targets that refused with that message.
	untranslatedFor []string
	// invalid is the client's 400 for a request that is not valid in its
	// own dialect: the chain gives up at once.
	invalid  *apiError
	timedOut bool
	// last is the upstream's own error (attemptResult.upstream) when the
	// latest attempt failed with one: the client's answer if no later
	// attempt does better.
	last *apiError

	// Capacity (capacity.go): targets skipped at shed_at, in a row and in
	// all; when the queue_timeout wait for room ends; whether it ran out.
	fullRun, full int
	queueUntil    time.Time
	shed          bool

	// cut is an assembled answer given up for a reasoning budget's
	// failover: the answer if no later attempt gives one.
	cut *assembledAnswer

	// leg, for one leg of a hand-off (handoff.go): the committed attempt
	// is handed back in it instead of answering the client, and answers
	// come back as Chat chunks (exchange.pivot). bodyFor, when set, is the
	// body each target is sent (the answer leg's inject position depends
	// on the target).
	leg     *legResult
	bodyFor func(*target) *requestBody
}

// chainOutcome is what one iteration of the loop decided.
type chainOutcome uint8

const (
	chainNext     chainOutcome = iota // try the next step of the chain
	chainGiveUp                       // stop trying: answer with the failure
	chainFinished                     // the response is complete (or the client left)
)

func (h *Relay) newChainRun(w http.ResponseWriter, r *http.Request, req *requestState, rt *route, body *requestBody, pol smoothPolicy) *chainRun {
	c := &chainRun{h: h, w: w, r: r, req: req, rt: rt, body: body, pol: pol}
	c.deadline = req.start.Add(h.tryDur)
	c.plan = h.orderTargets(rt, r, body, req.start)
	req.spilled = c.plan.spilledFrom != nil
	attempts := h.attempts
	if c.plan.canaryFirst && attempts > 0 {
		attempts++ // the canary does not use up one of the chain's attempts
	}
	c.cur = newChainCursor(len(c.plan.targets), attempts)
	return c
}

// run walks the chain and answers the client.
func (c *chainRun) run() {
	if primary := c.h.startShadow(c.shadowInRegion(), c.r, c.body, c.req.ep); primary != nil || (!c.body.clientStream() && c.req.ep.conversation()) {
		// Keep the client's answer: for its usage (non-stream) and to
		// compare a shadow's with (parsed on the shadow's goroutine).
		cw := &captureWriter{ResponseWriter: c.w}
		c.w = cw
		c.req.capture = cw
		if primary != nil {
			defer func() { primary <- c.req.shadowPrimary(cw) }()
		}
	}
	if c.body.clientStream() && c.pol.earlyCommit > 0 {
		c.hold = holdEarlyCommit(c.w, c.pol.earlyCommit-time.Since(c.req.start), c.pol.cfg.Heartbeat)
	}
	defer c.takeWriter() // whatever happens, no heartbeat timer outlives the request

	if c.rt.handoff != nil && c.req.ep.conversation() {
		// A hand-off alias's other endpoints (count_tokens, legacy
		// completions...) are served by its `to` chain.
		c.handoff()
		return
	}
	for {
		st, ok := c.cur.nextStep(time.Now(), c.deadline, c.h.backoff, nil)
		if !ok {
			break
		}
		switch c.step(st) {
		case chainFinished:
			return
		case chainGiveUp:
			c.fail()
			return
		}
	}
	c.fail()
}

// step runs one slot of the chain: skip it, or make one attempt and act on
// what it produced.
func (c *chainRun) step(st step) chainOutcome {
	t := c.plan.targets[st.idx]
	if st.skip != "" {
		c.req.note(t, st.skip)
		return chainNext
	}
	isCanary := c.plan.canaryFirst && st.idx == 0
	if isCanary {
		if c.canaryTried {
			return chainNext // the chain repeats; the canary had its one try
		}
		c.canaryTried = true
	}
	// A full target is passed before anything is claimed for it (a
	// recovering target's one trial); acquire below decides for good.
	if len(t.caps) > 0 && !t.hasRoom() {
		return c.passFull(t)
	}
	// A recovering target takes one trial request at a time, unless it is
	// the last resort: health may reorder a chain, never make a request
	// fail that would otherwise be tried. Its status is re-read only when
	// the claim fails: it may have recovered since the order was made.
	if now := time.Now(); c.plan.halfOpen[st.idx] && st.idx < len(c.plan.targets)-1 && !t.health.ClaimTrial(now) &&
		t.health.Status(now, t.slo) == health.HalfOpen {
		c.req.note(t, "skipped: recovering, and its one trial request is in flight")
		// Nothing was tried: the slot goes back, or a request with
		// `attempts 1` would fail without any attempt. This cannot loop:
		// the last target of the order is never skipped here.
		c.cur.unuse()
		return chainNext
	}
	body := c.body
	if c.bodyFor != nil {
		body = c.bodyFor(t)
	}
	x, ok := exchangeFor(c.req.ep, t.up, t.think, c.rt.fieldFor(c.req))
	x.request = body.raw
	x.idBase = journalIDBase(c.req)
	x.pivot = c.leg != nil && !c.leg.native
	x.afterward = c.req.gemini // gemini.go translates the answer
	if !ok {
		c.req.note(t, "skipped: speaks "+t.up.api+", which has no /v1/"+c.req.ep.rest)
		// Nothing was tried, and nothing will be: the slot goes to the
		// targets that can serve it, as for an untranslatable request.
		c.cur.exclude(st.idx)
		c.cur.unuse()
		return chainNext
	}
	ctx := c.r.Context()
	if c.leg != nil && c.leg.ctx != nil {
		ctx = c.leg.ctx
	}
	if st.wait > 0 && !sleepCtx(ctx, st.wait) {
		c.req.status = statusClientClosed
		return chainFinished
	}
	if len(t.caps) > 0 {
		occ, ok := t.acquire()
		if !ok {
			return c.passFull(t)
		}
		// Counted until the answer is over: commit streams it whole
		// before step returns; a leg's answer is streamed after, and
		// its slot goes with it.
		release := t.release
		defer func() {
			if release != nil {
				release()
			}
		}()
		if c.leg != nil {
			c.leg.release, release = release, nil
		}
		c.fullRun = 0
		if occ >= c.h.capacity.degrade {
			if d := t.degraded(c.h.capacity, body); d != t {
				t = d
				c.req.degraded = true
				countCapacity(c.rt.alias, t, capDegrade)
			}
		}
	}

	started := time.Now()
	c.last = nil // until this attempt fails with the upstream's own error
	ctx, span := c.req.trace.startAttempt(ctx, c, t, body, x, c.req.attempts+1, isCanary)
	res := c.h.attempt(ctx, c.r, t, body, x, c.deadline)
	c.req.trace.endAttempt(span, c, res)
	if res.invalid != nil {
		// Not valid in the client's own dialect: no target can serve it,
		// and no upstream was called.
		c.invalid = res.invalid
		c.req.note(t, res.err.Error())
		return chainGiveUp
	}
	if res.untranslated == "" {
		// A request never sent says nothing of the upstream: no health
		// sample, no canary record, no attempt counted as failed.
		c.h.recordAttempt(t, res, started)
		observeAttempt(t, res)
		if isCanary {
			c.rt.canary.record(res, started)
		}
	}
	c.req.attempts++
	c.cur.tried(st.idx, time.Now(), res.retryAfter)
	c.h.logAttempt(c.req.requestLog, t, res)

	switch {
	case res.clientGone:
		c.req.status = statusClientClosed
		return chainFinished
	case res.resp != nil && c.leg != nil:
		c.leg.res, c.leg.t = res, t
		return chainFinished
	case res.resp != nil && res.events != nil && c.body.assemble:
		return c.assemble(t, res)
	case res.resp != nil:
		c.req.trace.tap(res, c.req.ep.format(), &c.pol.cfg)
		retry := c.commit(t, res)
		if isCanary && c.req.smooth != nil {
			// The stream is over: its reasoning cluster rate is known.
			c.rt.canary.recordCluster(c.req.smooth.Cluster, time.Now())
		}
		if retry {
			return chainNext
		}
		return chainFinished
	}

	c.failed++
	c.last = res.upstream
	switch {
	case res.status == http.StatusTooManyRequests && !res.quota:
		c.rateLimited++
	case res.notStreaming:
		c.notStreaming++
	case res.untranslated != "":
		c.untranslated++
		if res.untranslated != c.untranslatedMsg {
			c.untranslatedFor = c.untranslatedFor[:0]
		}
		c.untranslatedMsg = res.untranslated
		if !slices.Contains(c.untranslatedFor, res.untranslatedFor) {
			c.untranslatedFor = append(c.untranslatedFor, res.untranslatedFor)
		}
	}
	c.req.note(t, res.err.Error())
	if res.tryExpired {
		c.timedOut = true
		return chainGiveUp
	}
	if res.untranslated != "" {
		// Another target may speak the client's dialect. This one was
		// never sent the request and never will be: the slot goes to the
		// others (with `attempts 1`, the next target is still tried).
		c.cur.exclude(st.idx)
		c.cur.unuse()
		return chainNext
	}
	if res.quota {
		// Out of quota: a billing problem of this target, which neither
		// a wait nor a retry fixes. The next target at once, whatever the
		// triggers, and never this one again in the request.
		c.cur.exclude(st.idx)
		return chainNext
	}
	if !c.h.triggers.retryable(res.class, res.status) && !neverPassThrough(res.status) {
		c.timedOut = res.class == classTimeout
		return chainGiveUp
	}
	return chainNext
}

// commit sends an attempt's answer to the client. It reports whether the
// chain goes on on the same, committed stream: its reasoning ran over the
// budget with the failover action.
func (c *chainRun) commit(t *target, res *attemptResult) (retryOnStream bool) {
	c.req.run = c // a stream that breaks walks the rest of the chain (continuation.go)
	defer func() { c.req.run = nil }()
	if c.takeWriter() {
		// An early commit or an earlier stream already sent the headers.
		if res.events == nil {
			c.h.lateAnswer(c.w, c.req, t, res)
			return false
		}
		retryOnStream = c.h.lateStream(c.w, c.r, c.req, t, res, c.pol)
	} else {
		retryOnStream = c.h.respond(c.w, c.r, c.req, t, res, c.pol)
	}
	c.headersOut = true
	if !retryOnStream {
		return false
	}
	// Fail over on the same stream, with heartbeats while the next target
	// is tried, and a fresh try_duration for it.
	c.hold = holdCommitted(c.w, c.pol.cfg.Heartbeat)
	c.deadline = time.Now().Add(c.h.tryDur)
	return true
}

// passFull skips a target at shed_at. Nothing was tried: the slot goes
// back, as for a recovering target. When every target of the chain was
// skipped so, in a row, the request waits for room until queue_timeout
// (from the first time) runs out, then gives up: fail answers 503
// overloaded.
func (c *chainRun) passFull(t *target) chainOutcome {
	c.req.note(t, t.fullNote())
	c.cur.unuse()
	ctx := c.r.Context()
	c.full++
	c.fullRun++
	if c.fullRun < len(c.plan.targets) {
		return chainNext
	}
	c.fullRun = 0
	now := time.Now()
	if c.queueUntil.IsZero() {
		c.queueUntil = now.Add(c.h.capacity.queue)
		if c.queueUntil.After(c.deadline) {
			c.queueUntil = c.deadline
		}
		if c.h.capacity.queue > 0 {
			c.req.queued = true
			countCapacity(c.rt.alias, c.plan.targets[0], capQueued)
		}
	}
	if awaitRoom(ctx, c.queueUntil, c.plan.hasRoom) {
		return chainNext
	}
	if ctx.Err() != nil {
		c.req.status = statusClientClosed
		return chainFinished
	}
	c.shed = true
	countCapacity(c.rt.alias, c.plan.targets[0], capShed)
	return chainGiveUp
}

// takeWriter releases the heartbeat hold, if any, so the handler owns the
// ResponseWriter, and reports whether the response headers are out.
func (c *chainRun) takeWriter() (headersOut bool) {
	if c.hold != nil {
		if c.hold.release() {
			c.headersOut = true
		}
		c.hold = nil
	}
	return c.headersOut
}

// fail answers a request whose attempts all failed: the relay's own error,
// or, on a response already committed, one in-band error event.
func (c *chainRun) fail() {
	if c.cut != nil && !c.takeWriter() {
		c.writeAssembled(c.cut) // a reasoning budget's failover found no better answer
		return
	}
	if c.req.ep.kind == kindCountTokens && !c.takeWriter() {
		c.h.estimateTokens(c.w, c.req, c.body.raw)
		return
	}
	e := c.failure()
	if c.takeWriter() {
		c.h.lateFailure(c.w, c.req, e)
		return
	}
	c.h.reject(c.w, c.req, e)
}

// failure is the error of a chain whose attempts all failed.
func (c *chainRun) failure() *apiError {
	summary := c.req.summary()
	var e *apiError
	switch {
	case c.invalid != nil:
		e = c.invalid
	case c.full > 0 && c.failed == 0:
		e = errOverloaded(summary, c.h.capacity.queue)
	case c.failed > 0 && c.untranslated == c.failed:
		e = errUntranslatableRequest(c.untranslatedMsg, c.untranslatedFor)
	case c.last != nil:
		// The last attempt failed with the upstream's own error: its code
		// and message are what the client can act on (errors.go).
		e = c.last
	case c.timedOut || !time.Now().Before(c.deadline):
		e = errUpstreamTimeout(summary)
	case c.failed > 0 && c.rateLimited == c.failed:
		e = errRateLimited(summary, c.cur.soonest(time.Now()))
	case c.failed > 0 && c.notStreaming == c.failed:
		e = errNotStreaming(summary)
	default:
		e = errAllFailed(summary)
	}
	if pin := c.pinned(); pin != "" {
		e = regionFailure(e, pin, summary) // regions.go
	}
	return e
}

// sleepCtx waits d, or returns false early if ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
