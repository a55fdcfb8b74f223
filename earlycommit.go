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

// earlyCommit answers a stream request with 200 and SSE headers before any
// upstream has sent data, then keeps the connection alive with heartbeat
// comments while the failover loop goes on. Only comments are sent, which
// every SSE client ignores, so the loop can still switch upstreams
// invisibly. It writes from a timer goroutine; mu serialises those writes
// with stop, after which the handler owns the ResponseWriter again.
type earlyCommit struct {
	mu        sync.Mutex
	w         http.ResponseWriter
	rc        *http.ResponseController
	timer     *time.Timer
	heartbeat time.Duration
	committed bool
	stopped   bool
}

// startEarlyCommit arms the commit to happen after `after`.
func startEarlyCommit(w http.ResponseWriter, after, heartbeat time.Duration) *earlyCommit {
	ec := &earlyCommit{w: w, rc: http.NewResponseController(w), heartbeat: heartbeat}
	// Held while the timer is stored, so fire (which locks) sees it.
	ec.mu.Lock()
	defer ec.mu.Unlock()
	ec.timer = time.AfterFunc(after, ec.fire)
	return ec
}

func (ec *earlyCommit) fire() {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	if ec.stopped {
		return
	}
	if !ec.committed {
		setStreamHeaders(ec.w.Header())
		ec.w.Header().Set("Content-Type", "text/event-stream")
		ec.w.WriteHeader(http.StatusOK)
		ec.committed = true
	}
	// A first comment right away also pushes the headers through proxies
	// that hold them until body bytes come.
	if _, err := ec.w.Write(pace.HeartbeatEvent); err != nil || ec.rc.Flush() != nil {
		return // the client is gone; the handler notices through its context
	}
	if ec.heartbeat > 0 {
		ec.timer.Reset(ec.heartbeat)
	}
}

// keepAliveCommitted sends heartbeats on an already committed stream while the
// relay looks for the next target (after a reasoning budget failover).
func keepAliveCommitted(w http.ResponseWriter, pol smoothPolicy) *earlyCommit {
	ec := &earlyCommit{w: w, rc: http.NewResponseController(w), heartbeat: pol.cfg.Heartbeat, committed: true}
	ec.mu.Lock()
	defer ec.mu.Unlock()
	first := pol.cfg.Heartbeat
	if first <= 0 {
		first = time.Hour // no heartbeats; the timer only keeps stop simple
	}
	ec.timer = time.AfterFunc(first, ec.fire)
	return ec
}

// stop ends the heartbeats and reports whether the response was committed.
// A nil earlyCommit was never armed.
func (ec *earlyCommit) stop() bool {
	if ec == nil {
		return false
	}
	ec.mu.Lock()
	defer ec.mu.Unlock()
	ec.stopped = true
	ec.timer.Stop()
	return ec.committed
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
	h.endWithError(&eventWriter{w: w, rc: http.NewResponseController(w)}, rec, e.Code, e.Message)
}

// lateAnswer handles a committed attempt after an early commit when it is
// not a stream: an upstream error whose body is an OpenAI error object is
// forwarded as the in-band error; anything else is summarised.
func (h *Relay) lateAnswer(w http.ResponseWriter, rec *requestLog, t *target, res *attemptResult) {
	defer res.finish()
	defer res.resp.Body.Close()
	rec.commit(t, http.StatusOK)
	var buf bytes.Buffer
	if res.body != nil {
		_, _ = buf.ReadFrom(io.LimitReader(res.body, 64<<10))
	}
	var probe struct {
		Error json.RawMessage `json:"error"`
	}
	if res.resp.StatusCode >= 400 && json.Unmarshal(buf.Bytes(), &probe) == nil && len(probe.Error) > 0 && string(probe.Error) != "null" {
		rec.streamError = "upstream_error"
		out := &eventWriter{w: w, rc: http.NewResponseController(w)}
		if _, err := out.Write(sse.AppendData(nil, bytes.TrimSpace(buf.Bytes()))); err == nil {
			_ = out.Flush()
		}
		return
	}
	h.endWithError(&eventWriter{w: w, rc: http.NewResponseController(w)}, rec, "upstream_not_streaming",
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
