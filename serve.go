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
		h.servePing(w)
		return
	}
	rec := newRequestLog()
	rec.dialect = clientDialect(r.URL.Path)
	defer h.finishRequest(r, rec)
	cw := &countingWriter{ResponseWriter: w}
	rec.out = cw
	w = cw

	entry, ok := h.keys.authenticate(r)
	if !ok {
		h.reject(w, rec, errUnauthorized)
		return
	}
	key := entry.name
	rec.key = key
	now := time.Now()
	if e := entry.admits(r, now); e != nil {
		h.reject(w, rec, e)
		return
	}
	if entry.expiresSoon(now) {
		h.logger.Warn("key expires soon", zap.String("key", key), zap.Time("expires", entry.expires),
			zap.Int("days_left", int(entry.expires.Sub(now).Hours()/24)))
	}
	rest, ok, bad := v1Rest(r.URL)
	if bad {
		h.reject(w, rec, errInvalidPath(r.URL.EscapedPath()))
		return
	}
	if !ok {
		h.reject(w, rec, errUnknownURL(r.Method, r.URL.Path))
		return
	}
	// The relay's own answers about the key and its aliases cost the
	// provider nothing: they take nothing from the key's budget, rpm, tpm
	// or max_concurrent, and are answered even when those are spent, which
	// is when a client most needs to read them.
	limits := h.keyLimits[key]
	if rest == "balance" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		h.serveBalance(w, rec, key, limits, now)
		return
	}
	if rest == "models" || strings.HasPrefix(rest, "models/") {
		h.serveModels(w, r, rec, rest)
		return
	}
	if period, over := h.overBudget(key); over {
		h.reject(w, rec, errBudgetExceeded(key, period, now))
		return
	}
	if e := limits.takeRequest(w, key, now); e != nil {
		h.reject(w, rec, e)
		return
	}
	if e := limits.enter(key); e != nil {
		h.reject(w, rec, e)
		return
	}
	defer limits.leave() // a stream is in flight until it ends
	if isStored(rest) {
		h.serveStored(w, r, rec, rest)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.reject(w, rec, errMethodNotAllowed(r.Method, r.URL.Path))
		return
	}

	raw, buf, err := readBody(r, h.MaxBody, true)
	if err != nil {
		if e, ok := asAPIError(err); ok {
			h.reject(w, rec, e)
		} else {
			rec.status = statusClientClosed // the client went away mid-body
		}
		return
	}
	defer buf.release() // the handler's hold; upstream requests and shadows hold their own
	body, err := parseRequestBody(raw)
	if err != nil {
		e, _ := asAPIError(err)
		h.reject(w, rec, e)
		return
	}
	body.buf = buf
	rec.requested = body.model
	if limits != nil && limits.tokens != nil {
		est := usage.EstimatePrompt(raw)
		if e := limits.takeTokens(w, key, est, time.Now()); e != nil {
			h.reject(w, rec, e)
			return
		}
		rec.limits, rec.tokenEstimate = limits, est
	}
	rt := h.lookup(body.model)
	if rt == nil {
		h.reject(w, rec, errModelNotFound(body.model))
		return
	}
	rec.alias = rt.alias
	rec.stream = body.stream
	rec.chat = rest == restChat || rest == restMessages || rest == restResponses
	rec.chatRules = chatRules(rest)
	rec.messages = rest == restMessages
	rec.responses = rec.dialect == dialectResponses
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
	assembleFromStream(body, rest, reason.budget)
	rec.effort = applyEffort(body, raw, reason.effort, rest)
	switch {
	case rec.chatRules:
		pol.cfg.DropUsage = askForUsage(body)
	case rec.messages, rec.responses:
		pol.cfg.Format = rec.dialect.format()
	default:
		// A stream the relay does not understand yet passes byte for
		// byte: no pacing, no reasoning rules, no usage injection.
		pol.cfg.Mode, pol.cfg.HideReasoning, pol.cfg.ReasoningBudget = pace.ModeOff, false, 0
		rec.mode = pol.cfg.Mode.String()
	}
	h.newChainRun(w, r, rec, rt, body, rest, pol).run()
	h.accountRequest(rec, raw)
}

// estimateTokens answers /v1/messages/count_tokens from the relay's own
// estimator, when no Anthropic target of the chain answered it: Claude
// Code asks before long prompts, and a chain of Chat providers has no
// such endpoint. The estimate is what usage accounting uses for the
// prompt (about 2.5 % off o200k on English text).
func (h *Relay) estimateTokens(w http.ResponseWriter, rec *requestLog, raw []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Relay-Estimated", "true")
	rec.status = http.StatusOK
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(`{"input_tokens":` + strconv.Itoa(usage.EstimatePrompt(raw)) + "}"))
}

// chatRules reports whether the relay's Chat Completions rules apply to an
// endpoint: streams end with [DONE] (an EOF before it is a truncation),
// usage is asked for and its chunk dropped unless the client asked, and
// the re-pacer and reasoning rules understand the chunks. Other endpoints
// pass byte for byte until the relay speaks their dialect.
func chatRules(rest string) bool {
	return rest == "chat/completions" || rest == "completions"
}

// v1Rest returns what follows the first `/v1/` of the request's path, so
// the relay works both at the site root and under a `handle /prefix/*`
// block. rest is taken from the path as the client escaped it, which is
// how it is sent upstream: decoding first would turn `%2F` into a path
// separator and `%3F` into a query. bad reports a rest the relay refuses
// to forward: a dot segment (`..`, `%2e%2e`, `.`), which would climb
// out of the upstream's base path, or an encoded `/`, `?`, `#` or `\`,
// or a raw `\`.
func v1Rest(u *url.URL) (rest string, ok, bad bool) {
	path := u.EscapedPath()
	i := strings.Index(path, "/v1/")
	if i < 0 {
		return "", false, false
	}
	rest = path[i+len("/v1/"):]
	if rest == "" {
		return "", false, false
	}
	if strings.ContainsRune(rest, '\\') {
		return "", false, true
	}
	for _, enc := range []string{"%2f", "%3f", "%23", "%5c"} {
		if containsFold(rest, enc) {
			return "", false, true
		}
	}
	for seg := range strings.SplitSeq(rest, "/") {
		if dec, err := url.PathUnescape(seg); err != nil || dec == "." || dec == ".." {
			return "", false, true
		}
	}
	return rest, true, false
}

// containsFold reports whether s contains the ASCII string sub, in any case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
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
func (h *Relay) serveModels(w http.ResponseWriter, r *http.Request, rec *requestLog, rest string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", http.MethodGet)
		h.reject(w, rec, errMethodNotAllowed(r.Method, r.URL.Path))
		return
	}
	body := h.modelList
	if id, ok := strings.CutPrefix(rest, "models/"); ok {
		id, _ = url.PathUnescape(id) // v1Rest checked it unescapes
		rt, found := h.routes[id]
		if !found {
			h.reject(w, rec, errModelNotFound(id))
			return
		}
		body = modelObject(rt.alias)
	}
	w.Header().Set("Content-Type", "application/json")
	rec.status = http.StatusOK
	rec.modelList = true
	_, _ = w.Write(body)
}

// reject answers with one of the relay's own errors.
func (h *Relay) reject(w http.ResponseWriter, rec *requestLog, e *apiError) {
	rec.status = e.Status
	rec.errCode = e.Code
	writeAPIError(w, e, rec.dialect)
}

// statusClientClosed is logged when the client went away (nginx's 499,
// which Caddy's reverse_proxy also uses).
const statusClientClosed = 499

// servePing answers GET /v1/ping: the edge's region and time, without a
// key, a log line or a metric, cheap enough for a client to measure its
// round trip to each edge.
func (h *Relay) servePing(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	now := time.Now().UTC()
	b := make([]byte, 0, 96)
	b = append(b, `{"object":"relay.ping","region":`...)
	b = strconv.AppendQuote(b, h.Region)
	b = append(b, `,"time":"`...)
	b = now.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","unix_ms":`...)
	b = strconv.AppendInt(b, now.UnixMilli(), 10)
	b = append(b, "}\n"...)
	_, _ = w.Write(b)
}
