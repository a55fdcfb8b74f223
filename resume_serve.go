package llmrelay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/journal"
	"github.com/llmrelay/caddy-llm-relay/internal/jsonobj"
)

// The resume surfaces (see resume.go): the stream URL, the Responses
// API's GET /v1/responses/{id} (streamed from a cursor, or the response
// as it stands) and its cancel, background responses, and the replay a
// re-attaching retry gets.

// backgroundKey marks the request a background response is generated
// with: its key limits were taken by the request that asked for it.
type backgroundKey struct{}

// backgroundRun is the journal a background generation writes, and the
// key that asked for it.
type backgroundRun struct {
	st    journalStream
	entry *keyEntry
}

func backgroundOf(ctx context.Context) *backgroundRun {
	b, _ := ctx.Value(backgroundKey{}).(*backgroundRun)
	return b
}

// resumeOrJournal decides what a conversation request with resume on
// becomes: a replay of a stream it re-attaches to (answered), a
// background response (answered at once, generated detached), or a new
// journaled stream (j, with the writer and request the chain must use).
// A request that is not a stream is left alone.
func (h *Relay) resumeOrJournal(w http.ResponseWriter, r *http.Request, req *requestState, body *requestBody, raw []byte, bg *backgroundRun, entry *keyEntry) (j *journaled, jw http.ResponseWriter, jr *http.Request, answered bool) {
	if bg != nil {
		j, jw, jr = h.journal(w, r, req, journal.Meta{}, bg.st)
		return j, jw, jr, false
	}
	background := req.ep.kind == kindResponses && string(body.fields["background"]) == "true"
	if !body.clientStream() && !background {
		return nil, w, r, false
	}
	rs := h.resume
	hash := requestHash(r, raw)
	now := time.Now()
	st, after, conflict := rs.reattach(r, req.key, hash, now)
	switch {
	case conflict:
		h.reject(w, req, errIdempotencyConflict)
		return nil, w, r, true
	case st != nil && background && !body.clientStream():
		req.resumed = "reattached"
		rs.counts.count("reattached")
		h.answerBackground(w, r, req, st, nil)
		return nil, w, r, true
	case st != nil:
		req.resumed = "reattached"
		rs.counts.count("reattached")
		h.replay(w, r, req, st, after)
		return nil, w, r, true
	}
	m := journal.Meta{IdemKey: r.Header.Get("Idempotency-Key"), BodyHash: hash, Background: background}
	if background && !body.clientStream() {
		h.startBackground(w, r, req, body, m, entry)
		return nil, w, r, true
	}
	j, jw, jr = h.journal(w, r, req, m, nil)
	return j, jw, jr, false
}

var errIdempotencyConflict = &apiError{Status: http.StatusConflict, Type: "invalid_request_error", Code: "idempotency_key_reused",
	Message: "This Idempotency-Key was used with a different request by this key; use a new key for a new request."}

// journal starts (or, for a background generation, takes over) a
// journaled stream.
func (h *Relay) journal(w http.ResponseWriter, r *http.Request, req *requestState, m journal.Meta, existing journalStream) (*journaled, http.ResponseWriter, *http.Request) {
	j, jw, jr := h.startJournal(w, r, req, m, existing)
	if j == nil {
		return nil, w, r
	}
	return j, jw, jr
}

// startBackground answers a Responses request with background: true: it
// starts the generation on a request of its own (a stream, detached, its
// journal the only reader) and answers as soon as the response exists
// (its response.created), or with the error that ended it before.
func (h *Relay) startBackground(w http.ResponseWriter, r *http.Request, req *requestState, body *requestBody, m journal.Meta, entry *keyEntry) {
	rs := h.resume
	now := time.Now()
	m.ID, m.Owner, m.Dialect, m.Created = journal.NewID(), req.key, req.ep.dialect.String(), now
	st := rs.store.Create(m, now)
	if st == nil {
		h.reject(w, req, errResumeFull)
		return
	}
	rs.counts.count("background")
	var parts [][]byte
	parts = jsonobj.Pieces(parts, body.raw, body.members, []jsonobj.Edit{{Key: "background"}, {Key: "stream", Value: []byte("true")}})
	gen := bytes.Join(parts, nil)
	ctx := context.WithValue(context.WithoutCancel(r.Context()), backgroundKey{}, &backgroundRun{st: st, entry: entry})
	r2 := r.Clone(ctx)
	r2.Body, r2.ContentLength = io.NopCloser(bytes.NewReader(gen)), int64(len(gen))
	r2.Header.Del("Idempotency-Key")
	r2.Header.Del("Last-Event-ID")
	r2.Header.Del("Content-Length")
	hw := &headlessWriter{hdr: http.Header{}}
	h.inflight.enter()
	go func() {
		defer h.inflight.leave()
		h.serve(hw, r2)
	}()
	req.resumed, req.resumeStream = "background", m.ID
	h.answerBackground(w, r, req, st, hw)
}

var errResumeFull = &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "resume_full",
	Message: "The relay holds as many resumable streams as resume max_streams allows, all still running; retry shortly.", RetryAfter: time.Second}

// answerBackground answers a background request with the response as it
// stands once it exists; hw, for a generation this request started, has
// the error that ended it before it did.
func (h *Relay) answerBackground(w http.ResponseWriter, r *http.Request, req *requestState, st journalStream, hw *headlessWriter) {
	_, _, err := st.Follow(r.Context(), 0, 1, nil)
	if err != nil && !errors.Is(err, journal.ErrTrimmed) {
		req.status = statusClientClosed
		return
	}
	obj, ok := responseObject(st)
	if !ok {
		// Ended before its response existed: the error it ended with.
		if hw != nil {
			status, hdr, b := hw.result()
			for _, k := range []string{"Content-Type", "Retry-After", "X-Should-Retry"} {
				if v := hdr.Get(k); v != "" {
					w.Header().Set(k, v)
				}
			}
			req.status = status
			w.WriteHeader(status)
			_, _ = w.Write(b)
			return
		}
		h.reject(w, req, errStreamNotFound(st.Info().ID))
		return
	}
	writeJSON(w, req, obj)
}

func writeJSON(w http.ResponseWriter, req *requestState, obj []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(obj)))
	req.status = http.StatusOK
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(obj)
}

// headlessWriter is the client side of a background generation: no one
// reads it but the journal (which sits above it). It keeps the status and
// the first bytes of an error answered before the stream began.
type headlessWriter struct {
	hdr    http.Header
	status int
	body   []byte
}

func (hw *headlessWriter) Header() http.Header { return hw.hdr }
func (hw *headlessWriter) WriteHeader(code int) {
	if hw.status == 0 {
		hw.status = code
	}
}
func (hw *headlessWriter) Write(b []byte) (int, error) {
	if hw.status == 0 {
		hw.status = http.StatusOK
	}
	if room := 64<<10 - len(hw.body); room > 0 {
		hw.body = append(hw.body, b[:min(len(b), room)]...)
	}
	return len(b), nil
}
func (hw *headlessWriter) FlushError() error { return nil }

// result is the generation's answer, read once its journal ended: the
// journal ends after the chain wrote everything (and its lock orders
// the two).
func (hw *headlessWriter) result() (int, http.Header, []byte) {
	status := hw.status
	if status == 0 {
		status = http.StatusBadGateway
	}
	return status, hw.hdr, hw.body
}

// serveStream answers the stream URL: GET replays after Last-Event-ID
// (or ?after=N) and follows live; DELETE cancels the generation.
func (h *Relay) serveStream(w http.ResponseWriter, r *http.Request, req *requestState) {
	id := strings.TrimPrefix(req.ep.rest, restStreams)
	req.ep.dialect = headerDialect(r)
	if h.resume == nil {
		h.reject(w, req, errResumeOff)
		return
	}
	st := h.findStream(req, id)
	if st != nil && st.Info().Dialect == journalDialectGemini || st == nil && geminiCallOf(r.Context()) != nil {
		// A Gemini client's stream is replayed in Gemini's shape, and a
		// Gemini client is refused in it.
		var gw *geminiWriter
		gw, r = geminiStreamWriter(w, r)
		defer gw.finish()
		w = gw
	}
	if st == nil {
		h.reject(w, req, errStreamNotFound(id))
		return
	}
	switch r.Method {
	case http.MethodGet:
		after := lastEventAfter(r, st)
		if v := r.URL.Query().Get("after"); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				h.reject(w, req, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_cursor",
					Message: "after " + strconv.Quote(v) + " is not an event position; give the number after the dot of an event id."})
				return
			}
			after = n
		}
		req.resumed = "resumed"
		h.resume.counts.count("resumed")
		h.replay(w, r, req, st, after)
	case http.MethodDelete:
		st.Cancel()
		writeJSON(w, req, []byte(`{"id":`+strconv.Quote(id)+`,"object":"relay.stream","status":"cancelled"}`))
	default:
		w.Header().Set("Allow", "GET, DELETE")
		h.reject(w, req, errMethodNotAllowed(r.Method, r.URL.Path))
	}
}

// findStream looks a stream up for the request's key; the errors that
// follow are in the stream's dialect.
func (h *Relay) findStream(req *requestState, id string) journalStream {
	st := h.resume.store.Get(req.key, id, time.Now())
	if st != nil {
		req.ep.dialect = dialectNamed(st.Info().Dialect)
		req.resumeStream = st.Info().ID
	}
	return st
}

// headerDialect guesses the dialect of a request that names no endpoint
// of one: an Anthropic client sends anthropic-version.
func headerDialect(r *http.Request) dialect {
	if r.Header.Get("Anthropic-Version") != "" {
		return dialectMessages
	}
	return dialectChat
}

func dialectNamed(s string) dialect {
	switch s {
	case dialectMessages.String():
		return dialectMessages
	case dialectResponses.String():
		return dialectResponses
	}
	return dialectChat
}

var errResumeOff = &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "stream_not_found",
	Message: "This relay does not keep streams (no resume block), so there is none to resume."}

func errStreamNotFound(id string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "stream_not_found",
		Message: "No stream " + strconv.Quote(id) + " for this key: it is unknown, expired (a stream is kept for resume ttl after it ends), or another key's."}
}

// serveJournaledResponse answers GET /v1/responses/{id} and POST
// /v1/responses/{id}/cancel from the journal, when the id is a response
// this relay journaled for this key; false: not one, ask the upstreams
// (stored.go).
func (h *Relay) serveJournaledResponse(w http.ResponseWriter, r *http.Request, req *requestState) bool {
	rest := strings.TrimPrefix(req.ep.rest, restResponses+"/")
	id, action, _ := strings.Cut(rest, "/")
	st := h.resume.store.Get(req.key, id, time.Now())
	if st == nil || st.Info().Dialect != dialectResponses.String() {
		return false
	}
	req.ep.dialect = dialectResponses
	req.resumeStream = st.Info().ID
	switch {
	case action == "" && r.Method == http.MethodGet:
		q := r.URL.Query()
		if q.Get("stream") != "true" {
			obj, ok := responseObject(st)
			if !ok {
				h.reject(w, req, errStreamNotFound(id))
				return true
			}
			writeJSON(w, req, obj)
			return true
		}
		after := uint64(0)
		if v := q.Get("starting_after"); v != "" {
			seq, err := strconv.ParseInt(v, 10, 64)
			if err != nil || seq < 0 {
				h.reject(w, req, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_cursor", Param: "starting_after",
					Message: "starting_after " + strconv.Quote(v) + " is not a sequence_number."})
				return true
			}
			if after, err = st.AfterSeq(seq); err != nil {
				h.reject(w, req, errStreamTrimmed(id))
				return true
			}
		}
		req.resumed = "resumed"
		h.resume.counts.count("resumed")
		h.replay(w, r, req, st, after)
	case action == "cancel" && r.Method == http.MethodPost:
		st.Cancel()
		// The generation stops at its next write; the journal says so.
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		for st.State() == journal.StateRunning && ctx.Err() == nil {
			_, _, _ = st.Follow(ctx, st.Len(), 1, nil)
		}
		cancel()
		obj, ok := responseObject(st)
		if !ok {
			h.reject(w, req, errStreamNotFound(id))
			return true
		}
		writeJSON(w, req, obj)
	default:
		return false // input_items, DELETE: the upstream's
	}
	return true
}

func errStreamTrimmed(id string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "stream_trimmed",
		Message: "Stream " + strconv.Quote(id) + " no longer holds the events after this cursor: they went for resume max_bytes. Resume from a later cursor or start again."}
}

// replay sends a journaled stream from after a position and follows it
// live until it ends, with heartbeats while it is quiet.
func (h *Relay) replay(w http.ResponseWriter, r *http.Request, req *requestState, st journalStream, after uint64) {
	rs := h.resume
	info := st.Info()
	req.ep.dialect = dialectNamed(info.Dialect)
	req.resumeStream = info.ID
	resumedAfter := after
	if info.Dialect == journalDialectGemini {
		// A Gemini stream's position counts its own events, and it is
		// translated again from the journal's start (geminiCall.skip).
		if c := geminiCallOf(r.Context()); c != nil {
			c.skip = int(min(after, 1<<30))
		}
		after = 0
	}
	check, cancel := context.WithCancel(r.Context())
	cancel()
	if _, _, err := st.Follow(check, after, 1, nil); errors.Is(err, journal.ErrTrimmed) {
		h.reject(w, req, errStreamTrimmed(info.ID))
		return
	}
	hdr := w.Header()
	hdr.Set("X-Relay-Resumed-After", strconv.FormatUint(resumedAfter, 10))
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Relay-Stream-Id", info.ID)
	hdr.Set("X-Relay-Stream", streamURL(r, info.ID))
	req.status, req.stream = http.StatusOK, true
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	st.Attach()
	defer st.Leave(time.Now())
	var es []journal.Entry
	var out []byte
	for {
		ctx, cancel := context.WithTimeout(r.Context(), rs.heartbeat)
		var ended bool
		var err error
		es, ended, err = st.Follow(ctx, after, 256, es[:0])
		cancel()
		for _, e := range es {
			out = journal.Render(out[:0], info.ID, e.N, rs.retryMS, e.Data)
			if _, werr := w.Write(out); werr != nil {
				req.status = statusClientClosed
				return
			}
			after = e.N
		}
		switch {
		case errors.Is(err, journal.ErrTrimmed):
			_, _ = w.Write(req.ep.errorEvent(&apiError{Status: http.StatusOK, Type: "server_error", Code: "stream_trimmed",
				Message: "The journal dropped events this reader had not read yet (resume max_bytes)."}))
			_ = rc.Flush()
			return
		case ended:
			_ = rc.Flush()
			return
		case r.Context().Err() != nil:
			req.status = statusClientClosed
			return
		case errors.Is(err, errProducerGone):
			// The edge producing it died (or lost Redis) before its
			// end: what it journaled was replayed, the rest never
			// will be. A retry of the request starts a new generation.
			_, _ = w.Write(req.ep.errorEvent(&apiError{Status: http.StatusOK, Type: "server_error", Code: "stream_lost",
				Message: "The relay instance producing this stream stopped before the stream ended; every event it sent was replayed. Send the request again to start a new generation."}))
			_ = rc.Flush()
			return
		case err != nil && !errors.Is(err, context.DeadlineExceeded):
			// The journal cannot be read any more (a Redis journal
			// whose keys expired, its producer gone; Redis away): the
			// client is told in its dialect rather than kept waiting.
			_, _ = w.Write(req.ep.errorEvent(&apiError{Status: http.StatusOK, Type: "server_error", Code: "stream_unavailable",
				Message: "The stream's journal can no longer be read (it expired, or the journal store is unavailable)."}))
			_ = rc.Flush()
			return
		case len(es) == 0:
			_, _ = w.Write([]byte(": relay-heartbeat\n"))
		}
		if rc.Flush() != nil {
			req.status = statusClientClosed
			return
		}
	}
}

// responseObject is a journaled Responses stream's response as it
// stands: its last response object (response.completed, .incomplete or
// .failed once it ended; else response.created or .in_progress with the
// output items done so far), its status the journal's when it was
// cancelled.
func responseObject(st journalStream) ([]byte, bool) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	var all []journal.Entry
	var after uint64
	for {
		es, _, err := st.Follow(done, after, 1024, nil)
		if len(es) == 0 || err != nil && !errors.Is(err, context.Canceled) {
			break
		}
		all = append(all, es...)
		after = es[len(es)-1].N
	}
	var resp map[string]json.RawMessage
	var items []json.RawMessage
	final := false
	for _, e := range all {
		var ev struct {
			Type     string                     `json:"type"`
			Response map[string]json.RawMessage `json:"response"`
			Item     json.RawMessage            `json:"item"`
		}
		if json.Unmarshal(eventData(e.Data), &ev) != nil {
			continue
		}
		switch ev.Type {
		case "response.created", "response.in_progress", "response.queued":
			resp = ev.Response
		case "response.completed", "response.incomplete", "response.failed":
			resp, final = ev.Response, true
		case "response.output_item.done":
			items = append(items, ev.Item)
		}
	}
	if resp == nil {
		return nil, false
	}
	if !final {
		if items == nil {
			items = []json.RawMessage{}
		}
		resp["output"], _ = json.Marshal(items)
		switch st.State() {
		case journal.StateCancelled:
			resp["status"] = json.RawMessage(`"cancelled"`)
		case journal.StateFailed:
			resp["status"] = json.RawMessage(`"failed"`)
		}
	}
	if st.Info().Background {
		resp["background"] = json.RawMessage(`true`)
	}
	b, err := json.Marshal(resp)
	return b, err == nil
}
