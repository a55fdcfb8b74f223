package llmrelay

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// heartbeatHold keeps a stream request's connection alive with SSE
// comment heartbeats while the failover loop has no upstream stream to
// relay. It is used two ways:
//
//   - early_commit: 200 and SSE headers go out after a delay, before any
//     upstream has sent data. Only comments are sent, which every SSE
//     client ignores, so the loop can still switch upstreams invisibly.
//   - after a reasoning budget failover, on a stream already committed,
//     while the next target is tried.
//
// A timer goroutine writes; mu serialises those writes with release, after
// which the handler owns the ResponseWriter again. The chain loop
// (chainRun) releases every hold it makes exactly once: before it writes
// anything itself, and by a defer when the request ends, so no timer can
// write to a finished response.
type heartbeatHold struct {
	mu         sync.Mutex
	w          http.ResponseWriter
	rc         *http.ResponseController
	timer      *time.Timer
	heartbeat  time.Duration
	headersOut bool // the 200 and SSE headers were written
	released   bool
}

// holdEarlyCommit commits the response after `after`, then sends a
// heartbeat every `heartbeat` (none if 0) until released.
func holdEarlyCommit(w http.ResponseWriter, after, heartbeat time.Duration) *heartbeatHold {
	return newHold(w, after, heartbeat, false)
}

// holdCommitted sends heartbeats on a stream whose headers are already out.
func holdCommitted(w http.ResponseWriter, heartbeat time.Duration) *heartbeatHold {
	return newHold(w, heartbeat, heartbeat, true)
}

func newHold(w http.ResponseWriter, first, heartbeat time.Duration, headersOut bool) *heartbeatHold {
	hh := &heartbeatHold{w: w, rc: http.NewResponseController(w), heartbeat: heartbeat, headersOut: headersOut}
	if first <= 0 && headersOut {
		return hh // heartbeats are off and nothing is to be committed: no timer
	}
	// Held while the timer is stored, so fire (which locks) sees it.
	hh.mu.Lock()
	defer hh.mu.Unlock()
	hh.timer = time.AfterFunc(max(first, 0), hh.fire)
	return hh
}

func (hh *heartbeatHold) fire() {
	hh.mu.Lock()
	defer hh.mu.Unlock()
	if hh.released {
		return
	}
	if !hh.headersOut {
		setStreamHeaders(hh.w.Header())
		hh.w.Header().Set("Content-Type", "text/event-stream")
		hh.w.WriteHeader(http.StatusOK)
		hh.headersOut = true
	}
	// A first comment right away also pushes the headers through proxies
	// that hold them until body bytes come.
	if _, err := hh.w.Write(pace.HeartbeatEvent); err != nil || hh.rc.Flush() != nil {
		return // the client is gone; the handler notices through its context
	}
	if hh.heartbeat > 0 {
		hh.timer.Reset(hh.heartbeat)
	}
}

// release stops the heartbeats for good and reports whether the response
// headers were written. It is safe to call more than once.
func (hh *heartbeatHold) release() (headersOut bool) {
	hh.mu.Lock()
	defer hh.mu.Unlock()
	hh.released = true
	if hh.timer != nil {
		hh.timer.Stop()
	}
	return hh.headersOut
}

// setStreamHeaders sets the headers of every SSE answer of the relay.
func setStreamHeaders(h http.Header) {
	h.Del("Content-Length")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
}

// lateFailure ends an early-committed stream whose attempts produced no
// stream: the relay's own error, or an upstream answer that cannot be
// passed through any more, becomes one in-band error event.
func (h *Relay) lateFailure(w http.ResponseWriter, rec *requestLog, e *apiError) {
	rec.status = http.StatusOK
	rec.errCode = e.Code
	rec.streamError = e.Code
	out := &eventWriter{w: w, rc: http.NewResponseController(w)}
	if _, err := out.Write(streamErrorEvent(e, rec.dialect)); err == nil {
		_ = out.Flush()
	}
}

// lateAnswer handles a committed attempt after an early commit when it is
// not a stream: an upstream error whose body is an error object (in the
// client's dialect, translated if need be) is forwarded as the in-band
// error; anything else is summarised.
func (h *Relay) lateAnswer(w http.ResponseWriter, rec *requestLog, t *target, res *attemptResult) {
	defer res.finish()
	defer res.resp.Body.Close()
	rec.commit(t, http.StatusOK)
	var buf bytes.Buffer
	if res.body != nil {
		_, _ = buf.ReadFrom(io.LimitReader(res.body, 64<<10))
	}
	status, body := res.x.translateAnswer(res.resp.StatusCode, buf.Bytes())
	body = bytes.TrimSpace(body)
	var probe struct {
		Error json.RawMessage `json:"error"`
	}
	out := &eventWriter{w: w, rc: http.NewResponseController(w)}
	if status >= 400 && json.Unmarshal(body, &probe) == nil && len(probe.Error) > 0 && string(probe.Error) != "null" {
		rec.streamError = "upstream_error"
		ev := sse.AppendData(nil, body)
		switch rec.dialect {
		case dialectMessages:
			ev = sse.NewEvent("error", body).Raw
		case dialectResponses:
			ev = sse.NewEvent("error", apiErrorIn(probe.Error).responsesErrorData()).Raw
		}
		if _, err := out.Write(ev); err == nil {
			_ = out.Flush()
		}
		return
	}
	h.endWithError(out, rec, "upstream_not_streaming",
		"The upstream answered status "+strconv.Itoa(res.resp.StatusCode)+" without a stream after the response was committed.")
}

// lateStream relays an attempt's stream after an early commit: the
// headers are already out, so only the events follow.
func (h *Relay) lateStream(w http.ResponseWriter, r *http.Request, rec *requestLog, t *target, res *attemptResult, pol smoothPolicy) (failover bool) {
	defer res.finish()
	defer res.resp.Body.Close()
	rec.commit(t, res.resp.StatusCode)
	return h.streamOut(w, r, rec, t, res, pol)
}
