package llmrelay

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// respond commits an attempt's response to the client: headers first, then
// the body; SSE streams go through streamOut.
// It reports whether the relay should fail over to the next target on the
// same (committed) stream: the stream's reasoning ran over its budget with
// the failover action.
func (h *Relay) respond(w http.ResponseWriter, r *http.Request, req *requestState, t *target, res *attemptResult, pol smoothPolicy) (failover bool) {
	defer res.finish()
	defer res.resp.Body.Close()
	req.commit(t, res.resp.StatusCode)

	hdr := w.Header()
	copyHeader(hdr, res.resp.Header)
	setRelayHeaders(hdr, t, req)

	if res.events == nil && res.x.rewritesAnswer() {
		return h.respondTranslated(w, r, req, t, res)
	}
	if res.events == nil {
		var whole []byte
		if res.resp.StatusCode/100 == 2 && req.capture != nil {
			// A whole answer whose usage the relay reads: read before
			// its headers, which carry its cost (up to maxAnswer; a
			// longer one goes on as it comes, without).
			var err error
			if whole, err = readWhole(res.body, res.resp.ContentLength); err != nil {
				h.bodyBroken(r, req, t, res)
				return false
			}
			if len(whole) <= maxAnswer {
				h.setAnswerCost(hdr, req, whole)
			}
		}
		w.WriteHeader(res.resp.StatusCode)
		if len(whole) > 0 {
			_, _ = w.Write(whole)
		}
		if _, err := res.copyBody(w); err != nil {
			h.bodyBroken(r, req, t, res)
		}
		return false
	}

	setStreamHeaders(hdr)
	w.WriteHeader(res.resp.StatusCode)
	return h.streamOut(w, r, req, t, res, pol)
}

// readWhole reads a whole answer, up to maxAnswer+1 bytes, into a buffer
// sized by its Content-Length when it has one (io.ReadAll's growing
// buffer was most of what the cost header added to a non-stream answer's
// allocations).
func readWhole(body io.Reader, contentLength int64) ([]byte, error) {
	if contentLength < 0 || contentLength > maxAnswer {
		return io.ReadAll(io.LimitReader(body, maxAnswer+1))
	}
	b := make([]byte, contentLength+1) // +1: room to see EOF, or more than announced
	n, err := io.ReadFull(body, b)
	switch {
	case (err == io.ErrUnexpectedEOF || err == io.EOF) && int64(n) == contentLength:
		return b[:n], nil // all of it
	case err == io.EOF:
		return b[:n], io.ErrUnexpectedEOF // shorter than announced
	case err != nil:
		return b[:n], err
	}
	// More than the Content-Length said: read on, within the bound.
	rest, err := io.ReadAll(io.LimitReader(body, maxAnswer+1-int64(n)))
	return append(b, rest...), err
}

// bodyBroken ends a non-stream answer whose body failed: the client gone,
// or a failure mid-body, where the connection is aborted (as
// reverse_proxy does) so the client sees a broken response, not a short
// one that looks complete.
func (h *Relay) bodyBroken(r *http.Request, req *requestState, t *target, res *attemptResult) {
	if r.Context().Err() != nil {
		req.status = statusClientClosed
		return
	}
	if errors.Is(res.cause(), errStreamIdle) {
		req.note(t, "body idle for stream_idle_timeout "+h.streamIdle.String()+" after commit: connection aborted")
		req.streamError, req.idleTimeout = "upstream_timeout", true
	} else {
		req.note(t, "body interrupted after commit")
	}
	h.recordBroken(t, req.start)
	panic(http.ErrAbortHandler)
}

// streamOut relays a committed SSE stream through the re-pacer (which in
// mode off forwards every block as it comes, adding only heartbeats). How
// the upstream ended decides the tail: after [DONE] or the upstream's own
// error event nothing is added; any other end gets one in-band error
// event and no [DONE], so no client mistakes a broken stream for a
// complete one.
func (h *Relay) streamOut(w http.ResponseWriter, r *http.Request, req *requestState, t *target, res *attemptResult, pol smoothPolicy) (failover bool) {
	var out pace.Output = &eventWriter{w: w, rc: http.NewResponseController(w)}
	out = withReasoningOutput(out, res.x.reasoningField)
	tl := newTimeline()
	pol.cfg.Timeline = tl
	if pol.cfg.Mode == pace.ModeOff && !res.x.crosses() {
		// `off` is byte-identical to the end of the upstream's body, not
		// only to its end event (OpenRouter ends its Responses streams
		// with `data: [DONE]` after response.completed), within a bound
		// for an upstream that holds its connection open after it.
		pol.cfg.Tail, pol.cfg.TailBytes = offTail, pace.DefaultTailBytes
	}
	first, src, abort := res.first, res.events, res.finish
	k := req.run.newContinuer(t, res)
	if k != nil {
		first, src, abort = k.passFirst(first), k, k.abort
	}
	result := pace.Run(r.Context(), pol.cfg, first, src, out, abort)
	res.release() // Run has read its last event
	if k != nil {
		defer k.finish()
	}
	if k != nil && len(k.conts) > 0 {
		// Continued: what follows reads the attempt that ended the
		// stream (its meter, tags and cause); the first was closed at
		// the break.
		res, t = k.res, k.t
	}
	if res.tags != nil && res.tags.State().Unclosed {
		// Sent as reasoning, all of it: never dumped into the answer.
		req.note(t, "the reasoning never ended (no closing tag): all of it went out as reasoning")
	}
	result.Stats.Cluster = tl.Clusters()
	recordStream(req.requestLog, tl, &result.Stats)
	if req.smooth != nil {
		// An earlier stream of this request, given up for a reasoning
		// budget failover: its usage still counts.
		if u, ok := usage.ParseUsage(req.smooth.Usage); ok {
			req.earlier = req.earlier.Add(u)
		}
	}
	req.smooth = &result.Stats
	req.reasoningRunes = result.Stats.ReasoningRunes
	if m := res.meter; m != nil {
		req.upstreamReasoning = m.reasoning
	}
	if m := res.meter; m != nil && !m.upstreamUsage() {
		// The upstream reported no usage: the translation carried the
		// meter's estimate, or, cut short, none at all.
		req.usageEstimated, req.outEstimate = true, m.completion()
	}
	if pol.cfg.ReasoningBudget > 0 && !pol.cfg.HideReasoning && result.Stats.HiddenRunes > 0 {
		req.budgetCut = true // a truncating budget left reasoning out
	}
	switch result.End {
	case pace.EndReasoningBudget:
		req.budgetCut = true
		// A Messages stream is one message, a Responses stream one
		// response: after its start and some reasoning, a second
		// upstream's cannot follow on the same stream, so there the
		// failover action ends the stream as the error action does.
		if pol.cfg.BudgetAction == pace.BudgetFailover && req.ep.budgetFailoverOnStream() {
			req.budgetHits++
			req.note(t, "reasoning passed the budget of "+strconv.Itoa(pol.cfg.ReasoningBudget)+" tokens before any answer: failing over")
			return true
		}
		h.endWithError(out, req, "reasoning_budget_exceeded",
			"The reasoning passed this request's budget of "+strconv.Itoa(pol.cfg.ReasoningBudget)+" tokens.")
	case pace.EndClientGone:
		req.status = statusClientClosed
		return false
	case pace.EndBroken:
		if r.Context().Err() != nil {
			req.status = statusClientClosed
			return false
		}
	}
	// Chat Completions and legacy completions end with [DONE], Messages
	// with message_stop, Responses with response.completed (or
	// .incomplete); other streams end at EOF when complete. Any other end
	// gets one in-band error event.
	if b, broken := h.classifyEnd(req.ep, result.End, result.SawError, result.Err, res.cause(), ""); broken {
		h.recordBroken(t, req.start)
		req.note(t, b.why)
		req.idleTimeout = req.idleTimeout || b.idle
		h.endWithError(out, req, b.code, b.msg)
	}
	return false
}

// offTail bounds how long a stream in mode off waits, after its end
// event, for the rest of the upstream's body (pace.Config.Tail). An
// upstream sends what follows its end event at once; one that keeps its
// connection open holds the client this long at most (the SDKs read a
// stream to its end, so the client would wait for the upstream itself).
const offTail = 2 * time.Second

// maxAnswer bounds a non-stream answer that is translated: it is read
// whole, since JSON cannot be translated a piece at a time.
const maxAnswer = 32 << 20

// respondTranslated commits a non-stream answer from an upstream of the
// other dialect: read whole (up to maxAnswer), translated (a response
// object, or an error object with its status mapped), then written with
// its own Content-Length.
func (h *Relay) respondTranslated(w http.ResponseWriter, r *http.Request, req *requestState, t *target, res *attemptResult) bool {
	body, err := io.ReadAll(io.LimitReader(res.body, maxAnswer+1))
	switch {
	case err != nil && r.Context().Err() != nil:
		req.status = statusClientClosed
		return false
	case err != nil:
		req.note(t, logDetail(&publicError{msg: "body broke before it was translated", cause: err}))
		h.recordBroken(t, req.start)
		h.reject(w, req, errAllFailed(req.summary()))
		return false
	case len(body) > maxAnswer:
		req.note(t, "answer larger than 32 MiB: not translated")
		h.reject(w, req, errUntranslatable(errors.New("the answer is larger than 32 MiB")))
		return false
	}
	chatOK := res.x.upstream == dialectChat && res.resp.StatusCode/100 == 2
	if chatOK {
		// Its inline reasoning read once, here: the counts below and the
		// translation read it as a field.
		body = res.x.untagAnswer(res.resp.StatusCode, body)
		if u, ok := usage.ParseUsage(topUsage(body)); ok && u.Reasoning > 0 {
			req.upstreamReasoning = u.Reasoning
		} else {
			// Counted only for a usage that counts no reasoning (spend.go).
			req.reasoningRunes = answerReasoningRunes(body)
		}
	}
	if res.x.needsUsage() && chatOK {
		var estimated bool
		body, estimated = withUsage(body, res.promptTokens) // see usagemeter.go
		req.usageEstimated = req.usageEstimated || estimated
	}
	status, out := res.x.translateUntagged(res.resp.StatusCode, body)
	req.status = status
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Content-Length", strconv.Itoa(len(out)))
	if status/100 == 2 {
		h.setAnswerCost(hdr, req, out)
	}
	w.WriteHeader(status)
	_, _ = w.Write(out)
	return false
}

// eventWriter is the client side of a stream, for the pacer.
type eventWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (ew *eventWriter) Write(b []byte) (int, error) { return ew.w.Write(b) }
func (ew *eventWriter) Flush() error                { return ew.rc.Flush() }

// endWithError writes the in-band error event that ends a broken stream.
func (h *Relay) endWithError(out pace.Output, req *requestState, code, msg string) {
	req.streamError = code
	e := &apiError{Status: http.StatusOK, Type: "server_error", Code: code, Message: msg}
	if _, err := out.Write(req.ep.errorEvent(e)); err == nil {
		_ = out.Flush()
	}
}

// upstreamOnlyHeaders describe the relay's account at the provider, not the
// client's: never forwarded to clients.
var upstreamOnlyHeaders = []string{"Set-Cookie", "Openai-Organization", "Openai-Project"}

// copyHeader copies upstream response headers, except hop-by-hop ones and
// the provider account's.
// setRelayHeaders says which upstream and model answered, after how many
// attempts (req.commit has set the model).
func setRelayHeaders(hdr http.Header, t *target, req *requestState) {
	hdr.Set("X-Relay-Upstream", t.up.name)
	if t.up.region != "" {
		hdr.Set("X-Relay-Region", t.up.region)
	}
	hdr.Set("X-Relay-Model", req.model)
	hdr.Set("X-Relay-Attempts", strconv.Itoa(req.attempts))
}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		// Caddy names itself in Server; the provider's server software is
		// not the client's business (and may say which host answered).
		if k != "Server" {
			dst[k] = v
		}
	}
	for _, k := range hopHeaders {
		delete(dst, k) // hopHeaders are in canonical form
	}
	for _, k := range upstreamOnlyHeaders {
		delete(dst, k)
	}

}
