package journal

import (
	"testing"
	"time"
)

func newStream(st *Store, owner string, now time.Time) *Stream {
	return st.Create(Meta{ID: NewID(), Owner: owner, Created: now}, now)
}

// TestStoreTTL: a journal is kept ttl after its stream ends, then gone;
// a running one is kept however old.
func TestStoreTTL(t *testing.T) {
	t0 := time.Unix(1000, 0)
	st := NewStore(time.Minute, 0, 0)
	a, b, run := newStream(st, "k", t0), newStream(st, "k", t0), newStream(st, "k", t0)
	a.Finish(StateCompleted, t0.Add(time.Second))
	b.Finish(StateCompleted, t0.Add(2*time.Second))
	if st.Get("k", a.ID, t0.Add(time.Minute)) == nil {
		t.Fatal("a went before its ttl")
	}
	if st.Get("k", a.ID, t0.Add(time.Minute+1500*time.Millisecond)) != nil {
		t.Fatal("a outlived its ttl")
	}
	if st.Get("k", b.ID, t0.Add(time.Minute+1500*time.Millisecond)) == nil {
		t.Fatal("b went with a, before its ttl")
	}
	if st.Get("k", b.ID, t0.Add(time.Hour)) != nil || st.Get("k", run.ID, t0.Add(time.Hour)) == nil {
		t.Fatal("after an hour: b must be gone, the running stream kept")
	}
	if st.Get("other", run.ID, t0) != nil {
		t.Fatal("another key found the stream")
	}
	if s := st.Stats(t0.Add(time.Hour)); s.Streams != 1 || s.Running != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestStoreEviction: beyond max_streams the stream that ended first goes,
// then the oldest orphan (stopped); with every stream running and
// connected, a new one is refused.
func TestStoreEviction(t *testing.T) {
	t0 := time.Unix(1000, 0)
	st := NewStore(time.Hour, 2, 0)
	a, b := newStream(st, "k", t0), newStream(st, "k", t0)
	b.Finish(StateCompleted, t0)
	a.Finish(StateCompleted, t0.Add(time.Second))
	c := newStream(st, "k", t0) // b ended first: it goes
	if st.Get("k", b.ID, t0) != nil || st.Get("k", a.ID, t0) == nil || c == nil {
		t.Fatal("the stream that ended first was not the one evicted")
	}
	d := newStream(st, "k", t0) // a goes
	if st.Get("k", a.ID, t0) != nil || d == nil {
		t.Fatal("a was not evicted")
	}
	c.Attach()
	d.Attach()
	if newStream(st, "k", t0) != nil {
		t.Fatal("a stream was journaled in a store full of connected running streams")
	}
	d.Leave(t0) // d is orphaned: it goes, stopped
	e := newStream(st, "k", t0)
	if e == nil || st.Get("k", d.ID, t0) != nil {
		t.Fatal("the orphan was not evicted")
	}
	select {
	case <-d.Cancelled():
	default:
		t.Fatal("the evicted orphan was not cancelled")
	}
	d.Finish(StateCancelled, t0) // its producer stops later: not queued again
	if s := st.Stats(t0); s.Streams != 2 || s.Evicted != 3 || s.Refused != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// BenchmarkStoreCreate is what a journaled stream pays the store with
// max_streams journals held (1000, the default), most of them ended: a
// Create, a Finish and a Get.
func BenchmarkStoreCreate(b *testing.B) {
	st := NewStore(5*time.Minute, 1000, 0)
	now := time.Unix(1000, 0)
	for range 1000 {
		newStream(st, "k", now).Finish(StateCompleted, now)
	}
	b.ReportAllocs()
	for b.Loop() {
		s := newStream(st, "k", now)
		s.Finish(StateCompleted, now)
		st.Get("k", s.ID, now)
	}
}
