package llmrelay

import (
	"context"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/journal"
)

// Where journals live. With `state off` or `state local` they are in this
// instance's memory (internal/journal's Store); with `state redis` in
// Redis Streams (resume_redis.go), so any edge of the fleet resumes a
// stream another produced, while it is produced and after that edge is
// gone. The relay reads and writes them only through these two
// interfaces.

// streamStore holds the journals.
type streamStore interface {
	// Create starts a journal; nil when there is no room (the stream
	// then runs unjournaled).
	Create(m journal.Meta, now time.Time) journalStream
	// Get finds owner's stream by its id, or by the Responses id it
	// carries: nil when unknown, expired, or another key's.
	Get(owner, id string, now time.Time) journalStream
	// ByIdempotencyKey finds owner's stream started with that
	// Idempotency-Key.
	ByIdempotencyKey(owner, key string, now time.Time) journalStream
	// Orphan finds owner's latest stream of that request hash, started
	// within window, whose clients all went away before its end.
	Orphan(owner, hash string, window time.Duration, now time.Time) journalStream
	// SetResponseID indexes a stream by its Responses id.
	SetResponseID(s journalStream, id string)
	// Stats reads the store's figures for metrics and the status page.
	Stats(now time.Time) journal.Stats
}

// journalStream is one stream's journal, as its producer writes it and
// its readers follow it.
type journalStream interface {
	Info() journal.Meta
	// Append journals one event block; it returns the event's position.
	Append(block []byte, seq int64) uint64
	// Finish ends the journal in a state (journal.StateCompleted, ...).
	Finish(state string, now time.Time)
	State() string
	ResponseID() string
	// Follow returns the events after a position, waiting for one.
	Follow(ctx context.Context, after uint64, max int, dst []journal.Entry) ([]journal.Entry, bool, error)
	// AfterSeq maps a Responses starting_after to a position.
	AfterSeq(seq int64) (uint64, error)
	// Attach and Leave count the clients reading the stream live; Leave
	// reports that the last one left a stream still running.
	Attach()
	Leave(now time.Time) (detached bool)
	Clients() int
	// Cancel asks the producer to stop; Cancelled is closed then.
	Cancel()
	Cancelled() <-chan struct{}
	// Len is the number of events journaled.
	Len() uint64
}

// localStore is the in-memory store.
type localStore struct{ s *journal.Store }

func (l localStore) Create(m journal.Meta, now time.Time) journalStream {
	return nilOr(l.s.Create(m, now))
}

func (l localStore) Get(owner, id string, now time.Time) journalStream {
	return nilOr(l.s.Get(owner, id, now))
}

func (l localStore) ByIdempotencyKey(owner, key string, now time.Time) journalStream {
	return nilOr(l.s.ByIdempotencyKey(owner, key, now))
}

func (l localStore) Orphan(owner, hash string, window time.Duration, now time.Time) journalStream {
	return nilOr(l.s.Orphan(owner, hash, window, now))
}

func (l localStore) SetResponseID(s journalStream, id string) {
	if js, ok := s.(*journal.Stream); ok {
		l.s.SetResponseID(js, id)
	}
}

func (l localStore) Stats(now time.Time) journal.Stats { return l.s.Stats(now) }

// nilOr keeps a nil *journal.Stream a nil interface.
func nilOr(s *journal.Stream) journalStream {
	if s == nil {
		return nil
	}
	return s
}
