package llmrelay

import (
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// serve answers one client request: authenticate, route, then relay.
func (h *Relay) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/v1/ping") && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		h.servePing(w, r) // regions.go
		return
	}
	ep, bad := endpointOf(r.URL)
	req := newRequestState(ep)
	req.trace = h.newRequestTrace(r.Context(), ep) // nil unless the request's span records (tracing.go)
	gc := geminiCallOf(r.Context())                // a Gemini client's, translated (gemini.go)
	if gc != nil {
		req.api, req.gemini = "gemini", true
	}
	defer h.finishRequest(r, req)
	cw := &countingWriter{ResponseWriter: w}
	req.out = cw
	w = cw

	bg := backgroundOf(r.Context()) // a background response's own generation (resume_serve.go)
	entry, ok := h.keys.authenticate(r)
	if bg != nil {
		// The request that asked for it was let in; its credentials are
		// gone from the headers since.
		entry, ok = bg.entry, true
	}
	if !ok {
		h.reject(w, req, errUnauthorized)
		return
	}
	key := entry.name
	req.key = key
	now := time.Now()
	if e := entry.admits(r, now); e != nil {
		h.reject(w, req, e)
		return
	}
	if entry.expiresSoon(now) {
		h.logger.Warn("key expires soon", zap.String("key", key), zap.Time("expires", entry.expires),
			zap.Int("days_left", int(entry.expires.Sub(now).Hours()/24)))
	}
	if bad {
		h.reject(w, req, errInvalidPath(r.URL.EscapedPath()))
		return
	}
	if gc != nil && gc.refusal != nil {
		h.reject(w, req, gc.refusal) // its body did not translate
		return
	}
	if ep.kind == kindUnknown {
		h.reject(w, req, errUnknownURL(r.Method, r.URL.Path))
		return
	}
	// The relay's own answers about the key and its aliases cost the
	// provider nothing: they take nothing from the key's budget, rpm, tpm
	// or max_concurrent, and are answered even when those are spent, which
	// is when a client most needs to read them.
	limits := h.keyLimits[key]
	if ep.kind == kindBalance && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		h.serveBalance(w, req, key, limits, now)
		return
	}
	if ep.kind == kindModels {
		h.serveModels(w, r, req)
		return
	}
	// A journaled stream is read back from the journal: the provider was
	// paid once, when it was generated (resume_serve.go).
	if ep.kind == kindStream {
		h.serveStream(w, r, req)
		return
	}
	if ep.kind == kindStored && h.resume != nil && h.serveJournaledResponse(w, r, req) {
		return
	}
	if period, over := h.overBudget(key); over {
		h.reject(w, req, errBudgetExceeded(key, period, now))
		return
	}
	if e := h.overReasoningBudget(key, now); e != nil {
		h.reject(w, req, e)
		return
	}
	if bg == nil {
		if e := limits.takeRequest(w, key, now); e != nil {
			h.reject(w, req, e)
			return
		}
	}
	if e := limits.enter(key); e != nil {
		h.reject(w, req, e)
		return
	}
	defer limits.leave() // a stream is in flight until it ends
	if ep.kind == kindStored {
		h.serveStored(w, r, req)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.reject(w, req, errMethodNotAllowed(r.Method, r.URL.Path))
		return
	}

	raw, buf, err := readBody(r, h.MaxBody, true)
	if err != nil {
		if e, ok := asAPIError(err); ok {
			h.reject(w, req, e)
		} else {
			req.status = statusClientClosed // the client went away mid-body
		}
		return
	}
	defer func() {
		req.raw = nil // it may point into buf: nothing after serve (finishRequest) reads a recycled buffer
		buf.release() // the handler's hold; upstream requests and shadows hold their own
	}()
	body, err := parseRequestBody(raw)
	if err != nil {
		e, _ := asAPIError(err)
		h.reject(w, req, e)
		return
	}
	if body.merged {
		raw = body.raw // extra_body merged in: what everything below reads
	} else {
		body.buf = buf
	}
	req.raw = raw
	if gc != nil {
		body.native = gc.native // a Gemini client's own body, for Gemini targets
	}
	req.requested = body.model
	if limits != nil && limits.tokens != nil && bg == nil {
		est := usage.EstimatePrompt(raw)
		if e := limits.takeTokens(w, key, est, time.Now()); e != nil {
			h.reject(w, req, e)
			return
		}
		req.limits, req.tokenEstimate = limits, est
	}
	rt := h.lookup(body.model)
	if rt == nil {
		h.reject(w, req, errModelNotFound(body.model))
		return
	}
	req.alias = rt.alias
	req.stream = body.stream
	pin, e := checkRegion(rt, r)
	if e != nil {
		h.reject(w, req, e)
		return
	}
	req.regionPin = pin
	pol := rt.smooth
	mode, ok, err := requestMode(r, body)
	if err != nil {
		e, _ := asAPIError(err)
		h.reject(w, req, e)
		return
	}
	if ok {
		pol.cfg.Mode = mode
	}
	if body.splitRatio != nil {
		pol.cfg.SplitRatio = body.splitRatio // the pacer reads it in split-reasoning only
	}
	req.mode = pol.cfg.Mode.String()
	reason, err := requestBudget(r, rt.reason)
	if err != nil {
		e, _ := asAPIError(err)
		h.reject(w, req, e)
		return
	}
	body.budget, req.budget, req.budgetAction = reason.budget, reason.budget, reason.action
	pol.cfg.ReasoningBudget, pol.cfg.BudgetAction = reason.budget, reason.action
	assembleFromStream(body, ep, reason.budget)
	req.effort = applyEffort(body, raw, reason.effort, ep)
	if rt.judgesEffort {
		req.effortKey = requestEffort(body) // a JSON read: only when judged
	}
	req.canary = rt.canary
	switch {
	case !ep.understood():
		// A stream the relay does not understand yet passes byte for
		// byte: no pacing, no reasoning rules, no usage injection.
		pol.cfg.Mode, pol.cfg.HideReasoning, pol.cfg.ReasoningBudget = pace.ModeOff, false, 0
		req.mode = pol.cfg.Mode.String()
	case ep.chatRules():
		pol.cfg.DropUsage = askForUsage(body)
	default:
		pol.cfg.Format = ep.format()
	}
	if pol.cfg.Mode == pace.ModeSplit {
		req.splitRatio = pol.cfg.SplitRatio
	}
	if h.resume != nil && ep.conversation() && ep.understood() {
		j, jw, jr, answered := h.resumeOrJournal(w, r, req, body, raw, bg, entry)
		if answered {
			return
		}
		if j != nil {
			w, r = jw, jr
			defer j.finish(req)
		}
	}
	h.newChainRun(w, r, req, rt, body, pol).run()
	h.accountRequest(req, raw)
	h.writeStreamCost(w, req)
}

// estimateTokens answers /v1/messages/count_tokens from the relay's own
// estimator, when no Anthropic target of the chain answered it: Claude
// Code asks before long prompts, and a chain of Chat providers has no
// such endpoint. The estimate is what usage accounting uses for the
// prompt (about 2.5 % off o200k on English text).
func (h *Relay) estimateTokens(w http.ResponseWriter, req *requestState, raw []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Relay-Estimated", "true")
	req.status = http.StatusOK
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(`{"input_tokens":` + strconv.Itoa(usage.EstimatePrompt(raw)) + "}"))
}

// readBody reads at most limit bytes of the request body. With pooled, a
// body whose length is known and large goes into a pooled buffer, returned
// held once (see bodyBuffer); buf is nil otherwise.
func readBody(r *http.Request, limit int64, pooled bool) (b []byte, buf *bodyBuffer, err error) {
	if r.ContentLength > limit {
		return nil, nil, errTooLarge
	}
	size := int64(512) // io.ReadAll's start, for a body of unknown length
	if r.ContentLength >= 0 {
		size = r.ContentLength + 1 // +1: the read that sees EOF needs room
	}
	size = min(size, limit+1)
	if pooled && r.ContentLength >= 0 {
		buf = getBodyBuffer(size)
	}
	if buf != nil {
		b = buf.b
	} else {
		b = make([]byte, 0, size)
	}
	fail := func(err error) ([]byte, *bodyBuffer, error) {
		buf.release()
		return nil, nil, err
	}
	for {
		if len(b) == cap(b) {
			if int64(len(b)) > limit {
				return fail(errTooLarge)
			}
			b = append(b, 0)[:len(b)] // grow as io.ReadAll does
		}
		n, err := r.Body.Read(b[len(b):min(cap(b), int(limit+1))])
		b = b[:len(b)+n]
		if int64(len(b)) > limit {
			return fail(errTooLarge)
		}
		if err == io.EOF {
			return b, buf, nil
		}
		if err != nil {
			return fail(err)
		}
	}
}

// serveModels answers GET /v1/models and GET /v1/models/<alias>.
func (h *Relay) serveModels(w http.ResponseWriter, r *http.Request, req *requestState) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", http.MethodGet)
		h.reject(w, req, errMethodNotAllowed(r.Method, r.URL.Path))
		return
	}
	body := h.modelList
	if id, ok := strings.CutPrefix(req.ep.rest, restModels+"/"); ok {
		id, _ = url.PathUnescape(id) // v1Rest checked it unescapes
		rt, found := h.routes[id]
		if !found {
			h.reject(w, req, errModelNotFound(id))
			return
		}
		body = modelObject(rt.alias)
	}
	w.Header().Set("Content-Type", "application/json")
	req.status = http.StatusOK
	req.modelList = true
	_, _ = w.Write(body)
}

// reject answers with one of the relay's own errors.
func (h *Relay) reject(w http.ResponseWriter, req *requestState, e *apiError) {
	req.status = e.Status
	req.errCode = e.Code
	writeAPIError(w, e, req.ep)
}

// statusClientClosed is logged when the client went away (nginx's 499,
// which Caddy's reverse_proxy also uses).
const statusClientClosed = 499
