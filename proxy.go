package llmrelay

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/health"
)

// serve answers one client request: authenticate, route, then relay.
func (h *Relay) serve(w http.ResponseWriter, r *http.Request) {
	rec := newRequestLog()
	defer h.finishRequest(r, rec)
	cw := &countingWriter{ResponseWriter: w}
	rec.out = cw
	w = cw

	key, ok := h.keys.authenticate(r)
	if !ok {
		h.reject(w, rec, errUnauthorized)
		return
	}
	rec.key = key
	if period, over := h.overBudget(key); over {
		h.reject(w, rec, errBudgetExceeded(key, period))
		return
	}

	rest, ok := v1Rest(r.URL.Path)
	if !ok {
		h.reject(w, rec, errUnknownURL(r.Method, r.URL.Path))
		return
	}
	if rest == "models" || strings.HasPrefix(rest, "models/") {
		h.serveModels(w, r, rec, rest)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.reject(w, rec, errMethodNotAllowed(r.Method, r.URL.Path))
		return
	}

	raw, err := readBody(r, h.MaxBody)
	if err != nil {
		if e, ok := asAPIError(err); ok {
			h.reject(w, rec, e)
		} else {
			rec.status = statusClientClosed // the client went away mid-body
		}
		return
	}
	body, err := parseRequestBody(raw)
	if err != nil {
		e, _ := asAPIError(err)
		h.reject(w, rec, e)
		return
	}
	rec.requested = body.model
	rt := h.lookup(body.model)
	if rt == nil {
		h.reject(w, rec, errModelNotFound(body.model))
		return
	}
	rec.alias = rt.alias
	rec.stream = body.stream
	rec.chat = rest == "chat/completions"
	pol := rt.smooth
	mode, ok, err := requestMode(r, body)
	if err != nil {
		e, _ := asAPIError(err)
		h.reject(w, rec, e)
		return
	}
	if ok {
		pol.cfg.Mode = mode
	}
	rec.mode = pol.cfg.Mode.String()
	reason, err := requestBudget(r, rt.reason)
	if err != nil {
		e, _ := asAPIError(err)
		h.reject(w, rec, e)
		return
	}
	body.budget, rec.budget = reason.budget, reason.budget
	pol.cfg.ReasoningBudget, pol.cfg.BudgetAction = reason.budget, reason.action
	rec.effort = applyEffort(body, raw, reason.effort, rest)
	pol.cfg.DropUsage = askForUsage(body)
	h.relay(w, r, rec, rt, body, rest, pol)
	h.accountRequest(rec, raw)
}

// v1Rest returns what follows the first `/v1/` of the path, so the relay
// works both at the site root and under a `handle /prefix/*` block.
func v1Rest(path string) (string, bool) {
	i := strings.Index(path, "/v1/")
	if i < 0 {
		return "", false
	}
	rest := path[i+len("/v1/"):]
	return rest, rest != ""
}

// readBody reads at most limit bytes of the request body.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errTooLarge
	}
	return b, nil
}

// serveModels answers GET /v1/models and GET /v1/models/<alias>.
func (h *Relay) serveModels(w http.ResponseWriter, r *http.Request, rec *requestLog, rest string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", http.MethodGet)
		h.reject(w, rec, errMethodNotAllowed(r.Method, r.URL.Path))
		return
	}
	body := h.modelList
	if id, ok := strings.CutPrefix(rest, "models/"); ok {
		rt, found := h.routes[id]
		if !found {
			h.reject(w, rec, errModelNotFound(id))
			return
		}
		body = modelObject(rt.alias)
	}
	w.Header().Set("Content-Type", "application/json")
	rec.status = http.StatusOK
	_, _ = w.Write(body)
}

// relay runs the failover loop: attempts along the chain until one can be
// committed to the client, the attempts run out, or try_duration does.
func (h *Relay) relay(w http.ResponseWriter, r *http.Request, rec *requestLog, rt *route, body *requestBody, rest string, pol smoothPolicy) {
	ctx := r.Context()
	deadline := rec.start.Add(h.tryDur)
	pl := h.orderTargets(rt, r, body, rec.start)
	order, canaryFirst := pl.targets, pl.canaryFirst
	attempts := h.attempts
	if canaryFirst && attempts > 0 {
		attempts++ // the canary does not use up one of the chain's attempts
	}
	cur := newChainCursor(len(order), attempts)
	canaryTried := false
	var timedOut bool
	primary := h.startShadow(rt.shadow, r, body, rest)
	if primary != nil || (!body.stream && rest == "chat/completions") {
		// Keep the client's answer: for its usage (non-stream) and to
		// compare a shadow's with (parsed on the shadow's goroutine).
		cw := &captureWriter{ResponseWriter: w}
		w = cw
		rec.capture = cw
		if primary != nil {
			defer func() { primary <- bytes.Clone(cw.buf.Bytes()) }()
		}
	}
	committed := false // a reasoning budget failover went on after the response was committed
	var ec *earlyCommit
	if body.stream && pol.earlyCommit > 0 {
		ec = startEarlyCommit(w, pol.earlyCommit-time.Since(rec.start), pol.cfg.Heartbeat)
	}

	for {
		st, ok := cur.nextStep(time.Now(), deadline, h.backoff, nil)
		if !ok {
			break
		}
		t := order[st.idx]
		if st.skip != "" {
			rec.note(t, st.skip)
			continue
		}
		if canaryFirst && st.idx == 0 {
			if canaryTried {
				continue // the chain repeats; the canary had its one try
			}
			canaryTried = true
		}
		// A recovering target takes one trial request at a time (unless it
		// is the last resort). Its status is re-read only when the claim
		// fails: it may have recovered since the order was made.
		if now := time.Now(); pl.halfOpen[st.idx] && st.idx < len(order)-1 && !t.health.ClaimTrial(now) &&
			t.health.Status(now, t.slo) == health.HalfOpen {
			rec.note(t, "skipped: recovering, and its one trial request is in flight")
			continue
		}
		if st.wait > 0 && !sleepCtx(ctx, st.wait) {
			ec.stop()
			rec.status = statusClientClosed
			return
		}
		started := time.Now()
		res := h.attempt(ctx, r, t, body, rest, deadline)
		h.recordAttempt(t, res, started)
		observeAttempt(t, res)
		if canaryFirst && st.idx == 0 {
			rt.canary.record(res, started)
		}
		rec.attempts++
		cur.tried(st.idx, time.Now(), res.retryAfter)
		h.logAttempt(rec, t, res)

		switch {
		case res.clientGone:
			ec.stop()
			rec.status = statusClientClosed
			return
		case res.resp != nil && (committed || ec.stop()):
			if res.events == nil {
				h.lateAnswer(w, rec, t, res)
				return
			}
			if !h.lateStream(w, r, rec, t, res, pol) {
				return
			}
			committed = true
			ec, deadline = keepAliveCommitted(w, pol), time.Now().Add(h.tryDur)
			continue
		case res.resp != nil:
			if !h.respond(w, r, rec, t, res, pol) {
				return
			}
			// The stream's reasoning ran over budget: fail over on the same
			// stream, with heartbeats while the next target is tried, and
			// a fresh try_duration for it.
			committed = true
			ec, deadline = keepAliveCommitted(w, pol), time.Now().Add(h.tryDur)
			continue
		}
		rec.note(t, res.err.Error())
		if res.tryExpired {
			timedOut = true
			break
		}
		if !h.triggers.retryable(res.class, res.status) && !upstreamAuthFailure(res.status) {
			timedOut = res.class == classTimeout
			break
		}
	}
	e := errAllFailed(rec.summary())
	if timedOut || !time.Now().Before(deadline) {
		e = errUpstreamTimeout(rec.summary())
	}
	if committed || ec.stop() {
		h.lateFailure(w, rec, e)
		return
	}
	h.reject(w, rec, e)
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

// reject answers with one of the relay's own errors.
func (h *Relay) reject(w http.ResponseWriter, rec *requestLog, e *apiError) {
	rec.status = e.Status
	rec.errCode = e.Code
	writeAPIError(w, e)
}

// statusClientClosed is logged when the client went away (nginx's 499,
// which Caddy's reverse_proxy also uses).
const statusClientClosed = 499
