package llmrelay

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/anthropic"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/gemini"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/tagged"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// maxPrefix caps the non-data blocks (upstream keep-alive comments) kept
// before the commit point; beyond it they are dropped, as they carry no
// content.
const maxPrefix = 64 << 10

// release hands the stream reader's buffer back, once the stream is over:
// nothing reads the events after.
func (res *attemptResult) release() {
	if res.reader != nil {
		res.reader.Release()
		res.reader = nil
	}
}

// attemptResult is what one attempt produced: either a response that can be
// committed to the client (resp != nil), or a failure.
type attemptResult struct {
	// Success: the response, and for SSE streams the reader positioned
	// after the first data event; first holds the blocks read so far (any
	// comments, then that event), each cloned.
	resp   *http.Response
	events pace.Source // in the client's dialect (translated when x crosses)
	reader *sse.Reader // the upstream's, under events: released when the stream is done
	first  []sse.Event
	x      exchange      // the dialects met, and the upstream endpoint
	body   *bufio.Reader // non-stream: the body, its first byte already read
	finish func()        // releases the attempt's context; call after the body is done

	// Failure.
	class        failureClass
	status       int           // upstream status for classStatus
	err          error         // what went wrong; its Error() is safe to show the client
	retryAfter   time.Duration // from a 429/503 Retry-After header
	tryExpired   bool          // try_duration ran out during this attempt
	clientGone   bool          // the client went away; stop everything
	notStreaming bool          // a stream request was answered 2xx without SSE
	untranslated string        // the request could not be translated for this target (the client's 400 message)
	invalid      *apiError     // the request is not valid in the client's dialect: the client's 400, now
	// untranslatedFor names that target: upstream, model and api.
	untranslatedFor string
	// upstream is the upstream's own account of its failure (an error
	// event before any data, insufficient_quota, an Anthropic error in a
	// 200): what the client gets if this is the chain's last attempt.
	upstream *apiError
	quota    bool // the upstream is out of quota (insufficient_quota): not again in this request

	// A Chat upstream's answer translated for another dialect: the
	// request's estimated prompt tokens, and the stream's usage meter
	// (usagemeter.go).
	prompt     int
	promptBody []byte // the request sent, whose prompt promptTokens estimates
	meter      *usageMeter
	// tags reads a Chat upstream's inline reasoning (nil: in fields).
	tags *tagged.Source

	// idle watches the committed body (stream_idle_timeout); idleOut
	// reports whether it cut the body off.
	idle *idleBody

	cause func() error // why the attempt's context ended (errStreamIdle), on success

	started time.Time     // when the attempt began
	ttfb    time.Duration // time to first byte (headers) of this attempt
	ttft    time.Duration // time to the commit point (first data event), on success
}

// promptTokens is the estimate of the prompt the upstream was sent, made
// once, when first asked for.
func (res *attemptResult) promptTokens() int {
	if res.prompt == 0 && res.promptBody != nil {
		res.prompt, res.promptBody = usage.EstimatePrompt(res.promptBody), nil
	}
	return res.prompt
}

// attempt sends the request to one target and waits for the commit point:
// the first data event of a stream, the first body byte of a 2xx non-stream
// answer, or the headers of an answer to pass through unchanged.
func (h *Relay) attempt(ctx context.Context, r *http.Request, t *target, body *requestBody, x exchange, deadline time.Time) *attemptResult {
	started := time.Now()
	actx, cancel := context.WithCancelCause(ctx)
	wait, cause := h.firstByte, errFirstByteTimeout
	if rem := time.Until(deadline); rem < wait {
		wait, cause = rem, errTryDuration
	}
	timer := time.AfterFunc(wait, func() { cancel(cause) })
	res := &attemptResult{x: x, started: started}
	res.finish = func() {
		timer.Stop()
		if res.idle != nil {
			res.idle.stop()
		}
		cancel(context.Canceled)
		if res.body != nil {
			res.body.Reset(nil)
			bodyReaders.Put(res.body)
			res.body = nil
		}
	}
	fail := func(class failureClass, err error) *attemptResult {
		res.finish()
		res.release()
		res.resp, res.events = nil, nil
		res.class, res.err = class, err
		if ctx.Err() != nil {
			res.clientGone = true
			return res
		}
		switch c := context.Cause(actx); {
		case errors.Is(c, errFirstByteTimeout):
			res.class, res.err = classTimeout, fmt.Errorf("timeout: no data within first_byte_timeout %s", h.firstByte)
		case errors.Is(c, errTryDuration):
			res.class, res.tryExpired, res.err = classTimeout, true, errors.New("timeout: try_duration ran out")
		}
		return res
	}

	payload, err := body.forTarget(t, x)
	if err != nil {
		if ie, ok := errors.AsType[*invalidRequestError](err); ok {
			res.invalid = errInvalidRequest(ie.param, ie.msg)
			return fail(classStatus, fmt.Errorf("the request is not valid: %s", ie.msg))
		}
		if ue, ok := errors.AsType[*untranslatableError](err); ok {
			res.untranslated, res.untranslatedFor = ue.msg, ue.target(t.up.name, cmp.Or(t.model, body.model))
			return fail(classStatus, fmt.Errorf("cannot translate the request to %s: %s", x.upstream, ue.Error()))
		}
		return fail(classStatus, fmt.Errorf("rewriting body: %w", err))
	}
	if body.mark != nil && x.upstream == dialectChat {
		b, err := body.mark(payload.Bytes())
		if err != nil {
			return fail(classStatus, fmt.Errorf("marking the continuation's prefix: %w", err))
		}
		payload = bytesPayload(b)
	}
	req, err := t.up.newRequest(actx, http.MethodPost, t.up.url(x.restFor(cmp.Or(t.model, body.model), body.stream), x.query(r.URL.RawQuery)), r.Header, payload)
	if err != nil {
		return fail(classConnect, err)
	}
	propagateTrace(ctx, t.up, req.Header) // the attempt's span is the upstream's parent (tracing.go)

	resp, err := t.up.transportFor(r.Header).RoundTrip(req)
	if err != nil {
		return fail(classConnect, &publicError{msg: "connect failed", cause: unwrapURLError(err)})
	}
	res.ttfb = time.Since(started)
	res.idle = watchIdle(resp.Body, h.streamIdle, func() { cancel(errStreamIdle) })
	resp.Body = res.idle
	res.resp = resp

	if x.upstream == dialectMessages && resp.StatusCode/100 == 2 && !isEventStream(resp.Header) {
		// An Anthropic 200 whose body is an error is that error: failed
		// over, passed through or answered as the status its type means.
		b := res.wholeBody()
		if e := upstreamErrorOf(b); e != nil {
			e.messagesBody = bytes.Clone(b)
			res.upstream = e
			resp.StatusCode, resp.Status = e.Status, ""
		}
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		if e := upstreamErrorOf(res.wholeBody()); e != nil && e.Code == codeInsufficientQuota {
			// A billing problem, which retrying will not fix: the next
			// target at once, never this one again in the request, no
			// Retry-After wait, whatever the triggers say.
			_ = resp.Body.Close() // reads what is left first (see reusing), within bounds
			res.status, res.upstream, res.quota = resp.StatusCode, e, true
			return fail(classStatus, errors.New("status 429 "+e.describe()))
		}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		if !h.triggers.retryable(classStatus, resp.StatusCode) && !neverPassThrough(resp.StatusCode) {
			timer.Stop() // pass through as is: committed from here on
			res.idle.arm()
			if res.body == nil {
				res.body = bodyReaders.Get().(*bufio.Reader)
				res.body.Reset(resp.Body)
			}
			return res
		}
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == anthropic.StatusOverloaded {
			res.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
			if res.retryAfter == 0 && x.upstream == dialectGemini {
				// Gemini says when in its body: a RetryInfo detail.
				res.retryAfter, _ = gemini.RetryDelay(res.wholeBody())
			}
		}
		_ = resp.Body.Close() // reads what is left first (see reusing), within bounds
		res.status = resp.StatusCode
		if res.upstream != nil {
			return fail(classStatus, fmt.Errorf("status %d (answered 200 with an error body: %s)", resp.StatusCode, res.upstream.describe()))
		}
		return fail(classStatus, fmt.Errorf("status %d", resp.StatusCode))
	}

	if body.clientStream() && !isEventStream(resp.Header) {
		// A clean-looking answer that no stream client can read: SDKs
		// would see zero chunks and no error. Nothing was sent yet, so
		// it is a failure like any other before the commit point.
		_ = resp.Body.Close() // reads what is left first (see reusing), within bounds
		res.notStreaming = true
		return fail(classStream, fmt.Errorf("answered %d without a stream (Content-Type %q)", resp.StatusCode, resp.Header.Get("Content-Type")))
	}
	if x.needsUsage() {
		// The translation's usage when the upstream reports none (see
		// usagemeter.go), and a Messages stream's input_tokens: estimated
		// now for a translation here, which may need it at once; for an
		// answer translated afterward (a Gemini client's) only when no
		// usage came, since nearly every upstream sends one.
		res.promptBody = payload.Bytes()
		if x.crosses() {
			res.promptTokens()
		}
	}
	if isEventStream(resp.Header) {
		res.reader = sse.NewReader(res.resp.Body, 0).NormalizeLineEndings()
		var src pace.Source = res.reader
		if res.tags = x.tagSource(src); res.tags != nil {
			src = res.tags
		}
		if x.needsUsage() {
			res.meter = newUsageMeter(src, res.promptTokens)
			src = res.meter
		}
		res.events = x.translateStream(src, "", true, res.prompt)
		if err := awaitFirstEvent(res); err != nil {
			_ = resp.Body.Close() // reads what is left first (see reusing), within bounds
			return fail(classStream, err)
		}
	} else {
		if res.body == nil { // else read already (wholeBody), and kept
			res.body = bodyReaders.Get().(*bufio.Reader)
			res.body.Reset(resp.Body)
		}
		if _, err := res.body.Peek(1); err != nil && err != io.EOF {
			_ = resp.Body.Close() // reads what is left first (see reusing), within bounds
			return fail(classStream, &publicError{msg: "body broke before any data", cause: err})
		}
	}
	if !timer.Stop() {
		// The timeout fired while the first event was being read: the
		// attempt's context is cancelled, so the body is unusable.
		_ = resp.Body.Close() // reads what is left first (see reusing), within bounds
		return fail(classTimeout, errors.New("timeout"))
	}
	res.idle.arm()
	res.ttft = time.Since(started)
	res.cause = func() error { return context.Cause(actx) }
	return res
}

// awaitFirstEvent reads the stream (in the client's dialect) up to its
// commit point: the first event that carries content. Before it:
//
//   - comments are kept in first, up to maxPrefix bytes (then dropped:
//     they carry nothing);
//   - Anthropic's message_start, content_block_start and ping are kept in
//     first (up to maxHeld bytes): they say nothing yet, and an upstream
//     may still fail after them, so failover stays invisible;
//   - [DONE], an error event, an event the translator cannot read (a
//     *chat.UnreadableError), or the stream's end are failures that move
//     on to the next attempt.
func awaitFirstEvent(res *attemptResult) error {
	kept, held := 0, 0
	for {
		ev, err := res.events.Next()
		if err != nil {
			if err == io.EOF {
				return errors.New("stream ended before any data")
			}
			if ue, ok := errors.AsType[*chat.UnreadableError](err); ok {
				// Its reason names what was wrong, never upstream bytes.
				return errors.New("an event the relay cannot read before any data: " + ue.Reason)
			}
			return &publicError{msg: "stream broke before any data", cause: err}
		}
		switch {
		case ev.Unterminated:
			return errors.New("stream ended before any data")
		case !ev.HasData:
			if kept+len(ev.Raw) <= maxPrefix {
				kept += len(ev.Raw)
				res.first = append(res.first, ev.Clone())
			}
			continue
		case ev.IsDone():
			return errors.New("stream ended ([DONE]) before any data")
		case isErrorEvent(&ev):
			e := upstreamErrorOf(ev.Data)
			if e == nil {
				return errors.New("error event before any data: unknown")
			}
			if res.x.client == dialectMessages && !res.x.pivot {
				e.messagesBody = bytes.Clone(ev.Data) // an Anthropic error object: the body as it is
			}
			res.upstream, res.quota = e, e.Code == codeInsufficientQuota
			return errors.New("error event before any data: " + e.describe())
		case res.x.ep.beforeContent(ev.Type):
			if held += len(ev.Raw); held > maxHeld {
				return errors.New("stream sent more than 1 MiB before any content")
			}
			res.first = append(res.first, ev.Clone())
			continue
		}
		res.first = append(res.first, ev.Clone())
		return nil
	}
}

// maxHeld bounds the events held before the commit point.
const maxHeld = 1 << 20

// isEventStream reports whether the response is an SSE stream
// ("text/event-stream", any case, parameters allowed).
func isEventStream(h http.Header) bool {
	const sseType = "text/event-stream"
	ct := strings.TrimSpace(h.Get("Content-Type"))
	if len(ct) < len(sseType) || !strings.EqualFold(ct[:len(sseType)], sseType) {
		return false
	}
	params := strings.TrimSpace(ct[len(sseType):])
	return params == "" || params[0] == ';'
}

// bodyReaders pools the buffered readers of non-stream bodies: the relay
// peeks one byte before committing, then copies through the same buffer.
var bodyReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}

// copyBody copies a non-stream body to w through its buffered reader.
func (res *attemptResult) copyBody(w io.Writer) (int64, error) {
	return res.body.WriteTo(w)
}

// isErrorEvent reports whether an SSE event is an in-band error: `event:
// error` (Anthropic's), or a JSON object with a top-level "error" (OpenAI, vLLM, SGLang)
// or "object":"error" (older vLLM). The byte check keeps the common case
// (a content delta) free of JSON decoding.
func isErrorEvent(ev *sse.Event) bool {
	if ev.Type == "error" || ev.Type == "response.failed" {
		return true
	}
	if !bytes.Contains(ev.Data, []byte(`"error"`)) {
		return false
	}
	var probe struct {
		Error  json.RawMessage `json:"error"`
		Object string          `json:"object"`
		Type   string          `json:"type"`
	}
	if json.Unmarshal(ev.Data, &probe) != nil {
		return false
	}
	// A Responses response.failed is one without its `event:` line too
	// (a proxy between may drop the line; the type is in the data).
	return (len(probe.Error) > 0 && string(probe.Error) != "null") || probe.Object == "error" || probe.Type == "response.failed"
}

// errorEventCode extracts a short description of an error event for logs.
func errorEventCode(data []byte) string {
	if e := upstreamErrorOf(data); e != nil {
		return e.Code
	}
	return "unknown"
}

// wholeBody is a non-stream body, read into res.body (which keeps it for
// whatever reads the body next), if it fits in the reader's buffer: the
// error bodies it is asked for are small. nil: larger, or unreadable.
func (res *attemptResult) wholeBody() []byte {
	if res.body == nil {
		res.body = bodyReaders.Get().(*bufio.Reader)
		res.body.Reset(res.resp.Body)
	}
	b, err := res.body.Peek(res.body.Size())
	if err != io.EOF {
		return nil
	}
	return b
}

// unwrapURLError drops the *url.Error wrapper, whose text repeats the URL.
func unwrapURLError(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok && ue.Err != nil {
		return ue.Err
	}
	return err
}

// publicError is a failure whose message is safe to show clients in a 502,
// while its cause (which may name internal addresses) goes to the log only.
type publicError struct {
	msg   string
	cause error
}

func (e *publicError) Error() string { return e.msg }
func (e *publicError) Unwrap() error { return e.cause }

// logDetail renders an attempt error with its hidden cause, for logs.
func logDetail(err error) string {
	if pe, ok := errors.AsType[*publicError](err); ok && pe.cause != nil {
		return pe.msg + ": " + pe.cause.Error()
	}
	return err.Error()
}

// neverPassThrough reports an upstream status whose answer is never passed
// to the client, whatever the failover triggers say; the relay moves on to
// the next target instead:
//
//   - 401 and 403 mean the upstream rejected the relay's own credentials:
//     their bodies may quote part of the upstream key, and they say
//     nothing the client could fix.
//   - 3xx: a redirect's Location can name an internal address or carry a
//     token, and no LLM API answers a POST with one on purpose.
func neverPassThrough(status int) bool {
	return status/100 == 3 || status == http.StatusUnauthorized || status == http.StatusForbidden
}

// idleBody is an upstream body under stream_idle_timeout. Once armed (at
// the commit point), a Read that waits longer than idle for the
// upstream's next bytes calls onIdle, which cancels the attempt's context
// and so makes the Read fail. Only time spent inside Read counts: while
// the relay stops reading because the client is slow (back-pressure), the
// upstream is not idle. The relay's own heartbeats never touch it.
type idleBody struct {
	io.ReadCloser
	idle  time.Duration
	timer *time.Timer // nil: no timeout
	armed bool
}

func watchIdle(body io.ReadCloser, idle time.Duration, onIdle func()) *idleBody {
	b := &idleBody{ReadCloser: body, idle: idle}
	if idle > 0 {
		b.timer = time.AfterFunc(idle, onIdle)
		b.timer.Stop()
	}
	return b
}

// arm starts watching. It is called on the goroutine that reads first
// after the commit point (or before that goroutine starts).
func (b *idleBody) arm() { b.armed = b.timer != nil }

func (b *idleBody) stop() {
	if b.timer != nil {
		b.timer.Stop()
	}
}

func (b *idleBody) Read(p []byte) (int, error) {
	if !b.armed {
		return b.ReadCloser.Read(p)
	}
	b.timer.Reset(b.idle)
	n, err := b.ReadCloser.Read(p)
	b.timer.Stop()
	return n, err
}
