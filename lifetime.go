package llmrelay

import (
	"context"
	"sync/atomic"
)

// A config's lifetime. Caddy cleans up a replaced config while its
// in-flight requests may still be served (a reload does not wait for
// streams), so Cleanup cannot simply close everything: it cancels the
// background work that belongs to the config (shadow copies) and closes
// the idle upstream connections at once, and the connections still in use
// are closed when the last in-flight request of the config ends, instead
// of lingering idle for the transport's idle timeout (2 minutes by
// default).

// inflight counts a config's requests (and shadow copies) that may still
// use its transports, and runs onIdle when the config is retired and the
// count reaches 0.
type inflight struct {
	n       atomic.Int64
	retired atomic.Bool
	onIdle  atomic.Pointer[func()]
}

func (f *inflight) enter() {
	if f != nil {
		f.n.Add(1)
	}
}

func (f *inflight) leave() {
	if f != nil && f.n.Add(-1) == 0 && f.retired.Load() {
		f.fire()
	}
}

// A nil *inflight (a Relay never provisioned) counts nothing.

// retire marks the config as unloaded: onIdle runs now if nothing is in
// flight, else when the last request leaves. It may run more than once
// (a leave racing with retire); it must be idempotent.
func (f *inflight) retire(onIdle func()) {
	if f == nil {
		onIdle()
		return
	}
	f.onIdle.Store(&onIdle)
	f.retired.Store(true)
	if f.n.Load() == 0 {
		f.fire()
	}
}

func (f *inflight) fire() {
	if p := f.onIdle.Load(); p != nil {
		(*p)()
	}
}

// lifetime returns the config's context: cancelled at Cleanup.
func (h *Relay) lifetime() context.Context {
	if h.life == nil {
		return context.Background() // not provisioned (unit tests)
	}
	return h.life
}
