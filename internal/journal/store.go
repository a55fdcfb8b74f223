package journal

import (
	"context"
	"sync"
	"time"
)

// Meta is what a stream's journal knows of the request that started it.
type Meta struct {
	ID         string    // the stream's id (NewID)
	Owner      string    // the key name that started it: the only one that may read it
	Dialect    string    // the client's dialect: chat, messages or responses
	Created    time.Time // when it started
	IdemKey    string    // the client's Idempotency-Key header, if any
	BodyHash   string    // the request's hash (method, path, body), for re-attaching retries
	Background bool      // a Responses request with background: true
}

// States of a stream.
const (
	StateRunning   = "in_progress"
	StateCompleted = "completed"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
)

// Stream is one journaled stream in a Store.
type Stream struct {
	Meta
	*Buffer

	store *Store // told when the stream ends, for its ttl

	mu         sync.Mutex
	state      string
	responseID string
	ended      time.Time
	clients    int       // readers connected, the client that started it included
	orphaned   time.Time // when the last client left before the end (zero: never, or came back)
	cancel     chan struct{}
	cancelOnce sync.Once
}

// State is the stream's state: running until Finish.
func (s *Stream) State() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// ResponseID is the Responses id the stream's response.created carried.
func (s *Stream) ResponseID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.responseID
}

// Finish ends the stream in state (completed, failed or cancelled).
func (s *Stream) Finish(state string, now time.Time) {
	s.mu.Lock()
	first := s.state == StateRunning
	if first {
		s.state, s.ended = state, now
	}
	s.mu.Unlock()
	if first && s.store != nil {
		s.store.finished(s)
	}
	s.Buffer.End()
}

// Attach counts a connected reader.
func (s *Stream) Attach() {
	s.mu.Lock()
	s.clients++
	s.orphaned = time.Time{}
	s.mu.Unlock()
}

// Leave uncounts a reader. It reports whether that was the last one
// while the stream still runs: the stream is detached from then on.
func (s *Stream) Leave(now time.Time) (detached bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients--
	if s.clients == 0 && s.state == StateRunning {
		s.orphaned = now
		return true
	}
	return false
}

// Clients is the number of connected readers.
func (s *Stream) Clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clients
}

// Orphaned reports whether every reader left before the stream ended and
// none came back: a retry of the same request may re-attach to it.
func (s *Stream) Orphaned() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.orphaned.IsZero() && s.clients == 0
}

// Cancel asks the stream's producer to stop.
func (s *Stream) Cancel() { s.cancelOnce.Do(func() { close(s.cancel) }) }

// Cancelled is closed by Cancel.
func (s *Stream) Cancelled() <-chan struct{} { return s.cancel }

// Follow returns the events after position after, waiting until there is
// at least one, the stream has ended, or ctx is done.
func (s *Stream) Follow(ctx context.Context, after uint64, max int, dst []Entry) ([]Entry, bool, error) {
	for {
		es, ended, more, err := s.Buffer.Read(after, max, dst)
		if err != nil || len(es) > len(dst) || ended {
			return es, ended, err
		}
		select {
		case <-more:
		case <-ctx.Done():
			return es, false, ctx.Err()
		}
	}
}

// Store holds one instance's journals.
type Store struct {
	ttl        time.Duration
	maxStreams int
	maxBytes   int

	mu         sync.Mutex
	streams    map[string]*Stream
	order      []*Stream         // by creation, oldest first
	byResponse map[string]string // owner \x00 response id → stream id
	byIdem     map[string]string // owner \x00 Idempotency-Key → stream id
	byHash     map[string]string // owner \x00 body hash → the latest stream id
	endedQ     []*Stream         // streams in the order they ended, for sweep
	evicted    int
	refused    int
}

// NewStore keeps each journal for ttl after its stream ends, at most
// maxStreams journals (the oldest ended one goes first, then the oldest)
// of at most maxBytes each.
func NewStore(ttl time.Duration, maxStreams, maxBytes int) *Store {
	return &Store{ttl: ttl, maxStreams: maxStreams, maxBytes: maxBytes,
		streams: map[string]*Stream{}, byResponse: map[string]string{},
		byIdem: map[string]string{}, byHash: map[string]string{}}
}

func ownerKey(owner, k string) string { return owner + "\x00" + k }

// Create starts a journal. It returns nil when the store is full of
// streams still running (counted as refused): the stream runs unjournaled
// rather than a live one losing its journal.
func (st *Store) Create(m Meta, now time.Time) *Stream {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sweep(now)
	if st.maxStreams > 0 && len(st.streams) >= st.maxStreams && !st.evictOne() {
		st.refused++
		return nil
	}
	s := &Stream{Meta: m, Buffer: NewBuffer(st.maxBytes), store: st, state: StateRunning, cancel: make(chan struct{})}
	st.streams[m.ID] = s
	st.order = append(st.order, s)
	if m.IdemKey != "" {
		st.byIdem[ownerKey(m.Owner, m.IdemKey)] = m.ID
	}
	if m.BodyHash != "" {
		st.byHash[ownerKey(m.Owner, m.BodyHash)] = m.ID
	}
	return s
}

// evictOne drops the stream that ended first, else the oldest orphaned
// one.
func (st *Store) evictOne() bool {
	for len(st.endedQ) > 0 {
		s := st.endedQ[0]
		st.endedQ[0] = nil
		st.endedQ = st.endedQ[1:]
		if st.streams[s.ID] == s {
			st.drop(s)
			st.evicted++
			return true
		}
	}
	for _, s := range st.order {
		if s.Orphaned() && !s.Buffer.Ended() {
			s.Cancel()
			st.drop(s)
			st.evicted++
			return true
		}
	}
	return false
}

// finished queues a stream that ended for sweep.
func (st *Store) finished(s *Stream) {
	st.mu.Lock()
	if st.streams[s.ID] == s {
		st.endedQ = append(st.endedQ, s)
	}
	st.mu.Unlock()
}

// sweep drops the journals whose ttl passed. They are queued in the
// order they ended, so it reads only the front of the queue: every
// request calls it, and a scan of every stream held (up to max_streams,
// each under its lock) was a large part of what a journaled stream cost.
func (st *Store) sweep(now time.Time) {
	for len(st.endedQ) > 0 {
		s := st.endedQ[0]
		if st.streams[s.ID] == s {
			s.mu.Lock()
			ended := s.ended
			s.mu.Unlock()
			if now.Sub(ended) <= st.ttl {
				return
			}
			st.drop(s)
		}
		st.endedQ[0] = nil
		st.endedQ = st.endedQ[1:]
	}
}

func (st *Store) drop(s *Stream) {
	delete(st.streams, s.ID)
	for i, o := range st.order {
		if o == s {
			st.order = append(st.order[:i], st.order[i+1:]...)
			break
		}
	}
	if rid := s.ResponseID(); rid != "" && st.byResponse[ownerKey(s.Owner, rid)] == s.ID {
		delete(st.byResponse, ownerKey(s.Owner, rid))
	}
	if s.IdemKey != "" && st.byIdem[ownerKey(s.Owner, s.IdemKey)] == s.ID {
		delete(st.byIdem, ownerKey(s.Owner, s.IdemKey))
	}
	if s.BodyHash != "" && st.byHash[ownerKey(s.Owner, s.BodyHash)] == s.ID {
		delete(st.byHash, ownerKey(s.Owner, s.BodyHash))
	}
}

// SetResponseID indexes the stream by the Responses id it carries.
func (st *Store) SetResponseID(s *Stream, id string) {
	s.mu.Lock()
	s.responseID = id
	s.mu.Unlock()
	st.mu.Lock()
	st.byResponse[ownerKey(s.Owner, id)] = s.ID
	st.mu.Unlock()
}

// Get finds a stream by its id, or by the Responses id it carries, for
// owner: nil when unknown, expired, or another key's.
func (st *Store) Get(owner, id string, now time.Time) *Stream {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sweep(now)
	s := st.streams[id]
	if s == nil {
		s = st.streams[st.byResponse[ownerKey(owner, id)]]
	}
	if s == nil || s.Owner != owner {
		return nil
	}
	return s
}

// ByIdempotencyKey finds owner's stream started with that key.
func (st *Store) ByIdempotencyKey(owner, key string, now time.Time) *Stream {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sweep(now)
	return st.streams[st.byIdem[ownerKey(owner, key)]]
}

// Orphan finds owner's latest stream of that request hash, if it started
// within window and every client of it went away before its end: a retry
// of a request whose stream was lost re-attaches to it. A stream whose
// client is still connected is never an orphan (two identical requests
// at once are two samples), nor one that ended with its client there.
func (st *Store) Orphan(owner, hash string, window time.Duration, now time.Time) *Stream {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sweep(now)
	s := st.streams[st.byHash[ownerKey(owner, hash)]]
	if s == nil || now.Sub(s.Created) > window {
		return nil
	}
	s.mu.Lock()
	orphan := !s.orphaned.IsZero() && s.clients == 0
	s.mu.Unlock()
	if !orphan {
		return nil
	}
	return s
}

// Stats is what a Store holds.
type Stats struct {
	Streams int // journals held
	Running int // of them, streams still running
	Bytes   int // event data held
	Evicted int // journals dropped for max_streams before their ttl
	Refused int // streams not journaled: the store was full of running ones
}

// Stats reads the store's figures.
func (st *Store) Stats(now time.Time) Stats {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sweep(now)
	s := Stats{Streams: len(st.streams), Evicted: st.evicted, Refused: st.refused}
	for _, x := range st.order {
		s.Bytes += x.Buffer.Size()
		if !x.Buffer.Ended() {
			s.Running++
		}
	}
	return s
}

// Info is the stream's Meta.
func (s *Stream) Info() Meta { return s.Meta }
