package pace

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// runDirect is Run for ModeOff: every block is written as soon as it is
// read, so there is nothing to schedule and no second goroutine. The
// calling goroutine reads and writes; a timer writes heartbeats when the
// upstream is silent; mu serialises the two. Output is flushed once per
// upstream read (when src supports BeforeRead), not once per event.
func runDirect(ctx context.Context, cfg Config, first []sse.Event, src Source, out Output, abort func()) Result {
	d := &direct{p: NewPacer(cfg), out: out, heartbeat: cfg.Heartbeat, lastWrite: time.Now()}
	defer d.release() // last: after the heartbeat timer is stopped
	abort = sync.OnceFunc(abort)
	// A client that goes away must also end a read that is waiting for
	// the upstream.
	stopAbort := context.AfterFunc(ctx, abort)
	defer stopAbort()
	if d.heartbeat > 0 {
		d.mu.Lock()
		d.timer = time.AfterFunc(d.heartbeat, d.beat)
		d.mu.Unlock()
		defer d.stop()
	}
	batched := sse.ForwardBeforeRead(src, d.flush)
	d.final = countedBy(src, &d.mu, d.p)

	res := Result{}
	sawError := false
	handle := func(ev *sse.Event) (End, bool) {
		now := time.Now()
		if ev.Unterminated {
			done, ok := d.p.finalEvent(ev)
			if !ok {
				return EndUnterminated, true
			}
			ev = &done
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		kind := d.p.Push(ev, now)
		b, _ := d.p.Next(now)
		d.write(b, now)
		if !batched || kind == KindDone {
			d.flushLocked()
		}
		if kind == KindError {
			sawError = true
		}
		if d.p.OverBudget() {
			d.flushLocked()
			return EndReasoningBudget, true
		}
		return EndDone, kind == KindDone
	}
	for i := range first {
		if end, stop := handle(&first[i]); stop {
			res.End = end
			if end == EndDone {
				d.passTail(cfg, src, abort)
			}
			return d.finish(res, sawError, abort)
		}
	}
	for {
		if d.failed() {
			res.End = EndClientGone
			return d.finish(res, sawError, abort)
		}
		ev, err := src.Next()
		switch {
		case ctx.Err() != nil:
			res.End, res.Err = EndClientGone, ctx.Err()
			return d.finish(res, sawError, abort)
		case err == io.EOF:
			res.End = EndEOF
			return d.finish(res, sawError, abort)
		case err != nil:
			res.End, res.Err = EndBroken, err
			return d.finish(res, sawError, abort)
		}
		if end, stop := handle(&ev); stop {
			res.End = end
			if end == EndDone {
				d.passTail(cfg, src, abort)
			}
			return d.finish(res, sawError, abort)
		}
	}
}

// passTail passes what the upstream sends after the end event, as it
// comes, to the end of its body, within Config.Tail and TailBytes (see
// Tail). At the time bound abort cuts the read that waits; the stream is
// complete either way, so nothing of this changes how it ended.
func (d *direct) passTail(cfg Config, src Source, abort func()) {
	if cfg.Tail <= 0 {
		return
	}
	bound := time.AfterFunc(cfg.Tail, abort)
	defer bound.Stop()
	for n := 0; n < cfg.TailBytes && !d.failed(); {
		ev, err := src.Next()
		if err != nil {
			return // the body's end, or the bound
		}
		n += len(ev.Raw)
		d.mu.Lock()
		d.write(ev.Raw, time.Now())
		d.flushLocked()
		d.mu.Unlock()
	}
}

// direct is the state runDirect shares with its heartbeat timer.
type direct struct {
	mu         sync.Mutex
	p          *Pacer
	final      func() // gives a RuneCounted source the final count (countedBy)
	out        Output
	heartbeat  time.Duration
	timer      *time.Timer
	lastWrite  time.Time
	pending    []byte  // written since the last flush
	pendingBuf *[]byte // pending's buffer, from pendingBuffers
	err        error
	stopped    bool
}

// write queues b for the next flush (mu held). The events of one upstream
// read go out in one Write: each Write costs a deadline reset in Caddy's
// writer, which a stream of small events would pay per event.
func (d *direct) write(b []byte, now time.Time) {
	if len(b) == 0 || d.err != nil {
		return
	}
	if d.pendingBuf == nil {
		d.pendingBuf = pendingBuffers.Get().(*[]byte)
		d.pending = (*d.pendingBuf)[:0]
	}
	if len(d.pending) > 0 && len(d.pending)+len(b) > cap(d.pending) {
		// A long read: write what is queued (Caddy's buffered writer
		// sends a write this size straight on) and start again.
		_, d.err = d.out.Write(d.pending)
		d.pending = d.pending[:0]
	}
	d.pending = append(d.pending, b...)
	d.lastWrite = now
}

// pendingBuffers are the write buffers of streams in mode off, taken at a
// stream's first write after a flush and given back at the flush: the
// size of Caddy's response buffer.
var pendingBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// release hands the stream's buffers back (see runDirect).
func (d *direct) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.putPending()
	d.p.Release()
}

func (d *direct) flush() {
	d.mu.Lock()
	d.flushLocked()
	d.mu.Unlock()
}

func (d *direct) flushLocked() {
	if len(d.pending) == 0 || d.err != nil {
		return
	}
	if _, d.err = d.out.Write(d.pending); d.err == nil {
		d.err = d.out.Flush()
	}
	d.putPending() // a stream waiting for its upstream holds no buffer
}

// putPending hands the write buffer back to the pool (mu held).
func (d *direct) putPending() {
	if d.pendingBuf != nil && cap(d.pending) <= maxPending {
		*d.pendingBuf = d.pending[:0]
		pendingBuffers.Put(d.pendingBuf)
	}
	d.pending, d.pendingBuf = nil, nil
}

// maxPending is the largest write buffer given back for reuse: one event
// larger than a pending buffer grows it.
const maxPending = 64 << 10

func (d *direct) failed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err != nil
}

// beat runs on the timer: a heartbeat if the stream has been silent for
// the whole interval, else a re-arm for when it will have been.
func (d *direct) beat() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped || d.err != nil {
		return
	}
	now := time.Now()
	if idle := now.Sub(d.lastWrite); idle < d.heartbeat {
		d.timer.Reset(d.heartbeat - idle)
		return
	}
	d.write(HeartbeatEvent, now)
	d.p.tl.add(now, true, LaneHeartbeat, 0)
	d.flushLocked()
	d.timer.Reset(d.heartbeat)
}

func (d *direct) stop() {
	d.mu.Lock()
	d.stopped = true
	d.timer.Stop()
	d.mu.Unlock()
}

// finish flushes, aborts the upstream if the client is gone, and fills in
// the result.
func (d *direct) finish(res Result, sawError bool, abort func()) Result {
	d.mu.Lock()
	d.flushLocked()
	if d.err != nil && res.End != EndClientGone {
		res.End, res.Err = EndClientGone, d.err
	}
	res.SawError = sawError
	res.Stats = d.p.Stats()
	d.final()
	d.mu.Unlock()
	if res.End == EndClientGone {
		abort()
	}
	return res
}
