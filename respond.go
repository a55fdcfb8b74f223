package llmrelay

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// respond commits an attempt's response to the client: headers first, then
// the body. For SSE streams every event is flushed as it arrives; a failure
// after the commit point ends the stream with one in-band error event and
// no [DONE], so no client mistakes a broken stream for a complete one.
func (h *Relay) respond(w http.ResponseWriter, r *http.Request, rec *requestLog, t *target, res *attemptResult) {
	defer res.finish()
	defer res.resp.Body.Close()
	rec.commit(t, res.resp.StatusCode)

	hdr := w.Header()
	copyHeader(hdr, res.resp.Header)
	hdr.Set("X-Relay-Upstream", t.up.name)
	hdr.Set("X-Relay-Model", rec.model)
	hdr.Set("X-Relay-Attempts", strconv.Itoa(rec.attempts))

	if res.events == nil {
		w.WriteHeader(res.resp.StatusCode)
		if _, err := res.copyBody(w); err != nil {
			if r.Context().Err() != nil {
				rec.status = statusClientClosed
				return
			}
			// Mid-body failure of a non-stream answer: abort the connection
			// (as reverse_proxy does) so the client sees a broken response,
			// not a short one that looks complete.
			rec.note(t, "body interrupted after commit")
			panic(http.ErrAbortHandler)
		}
		return
	}

	hdr.Del("Content-Length")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(res.resp.StatusCode)
	h.copyStream(w, r, rec, t, res)
}

// copyStream forwards SSE events one by one, byte-exact. Output is flushed
// whenever the reader is about to wait for the upstream, so every event
// reaches the client as soon as it arrived, with one flush per upstream
// read rather than one per event.
func (h *Relay) copyStream(w http.ResponseWriter, r *http.Request, rec *requestLog, t *target, res *attemptResult) {
	out := &eventWriter{w: w, rc: http.NewResponseController(w)}
	res.events.BeforeRead(out.flush)
	defer out.flush()
	send := out.write
	if !send(res.prefix) {
		rec.status = statusClientClosed
		return
	}
	sawError := false
	for {
		ev, err := res.events.Next()
		switch {
		case err == io.EOF && sawError:
			return // the upstream reported its own error in-band
		case err == io.EOF:
			h.endWithError(send, rec, t, "upstream_stream_truncated", "The upstream closed the stream before it was complete.")
			return
		case err != nil:
			if r.Context().Err() != nil {
				rec.status = statusClientClosed
				return
			}
			rec.note(t, logDetail(&publicError{msg: "stream broke", cause: err}))
			h.endWithError(send, rec, t, "upstream_stream_interrupted", "The upstream stream broke off before it was complete.")
			return
		case ev.Unterminated && ev.IsDone():
			// Some servers (llama.cpp) end with "data: [DONE]" and no blank line.
			send([]byte("data: [DONE]\n\n"))
			return
		case ev.Unterminated:
			h.endWithError(send, rec, t, "upstream_stream_truncated", "The upstream closed the stream in the middle of an event.")
			return
		}
		if !send(ev.Raw) {
			rec.status = statusClientClosed
			return
		}
		if ev.IsDone() {
			return
		}
		if ev.HasData && isErrorEvent(&ev) {
			sawError = true
		}
	}
}

// eventWriter writes to the client and flushes on demand; after the first
// write or flush error (the client went away) it writes nothing more.
type eventWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	dirty bool
	err   error
}

func (ew *eventWriter) write(b []byte) bool {
	if ew.err != nil {
		return false
	}
	_, ew.err = ew.w.Write(b)
	ew.dirty = true
	return ew.err == nil
}

func (ew *eventWriter) flush() {
	if ew.dirty && ew.err == nil {
		ew.err = ew.rc.Flush()
		ew.dirty = false
	}
}

// endWithError writes the in-band error event that ends a broken stream.
func (h *Relay) endWithError(send func([]byte) bool, rec *requestLog, t *target, code, msg string) {
	rec.streamError = code
	send(streamErrorEvent(code, msg))
}

// streamErrorEvent renders `data: {"error":{...}}` in OpenAI's shape, which
// every official SDK raises as an API error.
func streamErrorEvent(code, msg string) []byte {
	b, _ := json.Marshal(struct {
		Error errorObject `json:"error"`
	}{errorObject{Message: msg, Type: "server_error", Code: code}})
	return sse.AppendData(nil, b)
}

// copyHeader copies upstream response headers, except hop-by-hop ones.
func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = v
	}
	for _, k := range hopHeaders {
		delete(dst, k) // hopHeaders are in canonical form
	}
}
