package llmrelay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/llmrelay/caddy-llm-relay/internal/journal"
)

// Journals in Redis (state redis), so that any edge of the fleet resumes
// a stream another edge produces, while it is produced and after that
// edge is gone.
//
// Keys. A stream's keys share a Cluster hash slot (the hash tag is its
// id): prefix+"stream:{id}:events", a Redis Stream with one entry per
// emission, and prefix+"stream:{id}:meta", a hash (owner, dialect,
// created, idem, hash, background, state, response_id, clients,
// orphaned, cancel, ended). Three indexes find a stream again, each a
// string holding its id, named by a hash of the owner and the value so
// that neither a long Idempotency-Key nor a key name shapes the key:
// prefix+"stream:by-response:"+h, ":by-idem:", ":by-hash:" (the latest
// stream of that request). They live in other slots and are written by
// commands of their own. Every key has a TTL: while the stream runs it is
// set to ttl again every ttl/4 (a sliding TTL: a stream whose producer
// died goes ttl after its last write), and at Finish to ttl.
//
// Entries. An event at position N (the journal's 1-based position,
// assigned by the producer) is entry id "N-0" with fields q (its
// Responses sequence_number, -1 for none) and d (the block); the end of
// the stream is one more entry, "L-1" after the last event L ("0-1" for
// a stream without events), with field e (the final state). A cursor is
// thus an entry id: XREAD from "N-0" returns the events after N and then
// the end, and a reader sees a gap (the first entry it gets is not N+1)
// as journal.ErrTrimmed, as a Buffer says it.
//
// Bounds. max_bytes is bytes of event data, which Redis cannot count:
// the producer knows each event's size, so it keeps the sizes of what it
// wrote and, past max_bytes, trims with MINID (the oldest position still
// within the bound) on the batch's last XADD, no extra command. MINID
// rather than a MAXLEN count derived from an average size: events differ
// by two orders of magnitude (a reasoning delta against a
// response.completed that repeats the whole output), so a count is
// either loose or drops what the bound allows. Exact ("=") rather than
// "~": "~" keeps a macro-node's older entries, so an event that never
// reached Redis (dropped pending, below) would be a gap inside the
// journal rather than before it; and exact trimming only flags the
// entries deleted in place, the node's memory going with its last entry,
// so it costs what "~" does, and Redis holds at most one macro-node
// (stream-node-max-bytes, 4 KiB by default) beyond max_bytes.
//
// Writes. Append is on the producer's hot path: it assigns the position,
// copies the block into the stream's pending list and returns; a
// goroutine per stream writes what is pending in one pipeline (an XADD
// per event; the TTL refresh every ttl/4; the meta and indexes at the
// start and the end), at most once per redisFlushEvery, so a burst is
// one round trip and a lone event goes at once. That is one Redis
// command per emission, plus about ten per stream. When Redis fails the
// batch is kept (within max_bytes, the oldest pending going first, which
// a reader sees as a trim) and written again after a backoff; while the
// last write failed, Create refuses new streams (they run unjournaled,
// counted as refused) rather than hand out ids nobody can resume.
//
// Cancel. A cancel sets meta's cancel field and PUBLISHes the id on
// prefix+"stream:cancel"; each store subscribes to that channel once and
// closes the Cancelled channel of the stream it produces. When the
// subscription (re)connects, the store reads the cancel field of every
// stream it produces, so a cancel published while it was away is not
// lost. Pub/sub rather than a polled key: a cancel reaches the producer
// in one hop, and a store produces no commands for streams nobody
// cancels.

const (
	// redisJournalTimeout bounds one command's round trip.
	redisJournalTimeout = time.Second
	// redisFlushEvery is the shortest interval between two writes of a
	// stream's pending events.
	redisFlushEvery = 5 * time.Millisecond
	// redisFollowBlock is how long one XREAD waits; a follower whose
	// context ends returns at once, its read finishing in the background.
	redisFollowBlock = 2 * time.Second
	// redisReadCount bounds the events one Follow returns, so a replay of
	// a long journal is many replies, not one.
	redisReadCount = 256
	// redisPendingMax bounds a stream's unwritten events when max_bytes
	// does not.
	redisPendingMax = 8 << 20
	// redisBatchMax bounds the events one pipeline writes, so the
	// backlog of an outage is written in round trips that each fit the
	// command timeout.
	redisBatchMax = 512
	// redisFinalFlush bounds the last writes at Close.
	redisFinalFlush = 2 * time.Second
	// redisLiveEvery and redisLiveLease: while a stream runs its
	// producer sets its live key every redisLiveEvery, to expire
	// redisLiveLease later. A running stream without it has lost its
	// producer (that edge died, or lost Redis): a reader then ends its
	// replay instead of waiting for the stream's keys to expire, ttl
	// after the last write, and a retry starts a new generation instead
	// of re-attaching to one that cannot end.
	redisLiveEvery = 2 * time.Second
	redisLiveLease = 6 * time.Second
)

// errJournalGone: the stream's keys expired while it was followed (its
// producer died and the ttl passed, or it ended ttl ago).
var errJournalGone = errors.New("journal: the stream is gone (expired)")

// errProducerGone: the stream is still running as far as Redis knows, but
// its producer stopped renewing its live key (redisLiveLease).
var errProducerGone = errors.New("journal: the edge producing the stream is gone")

// redisStore is the journals of one Redis, as one instance reads and
// writes them.
type redisStore struct {
	client   redis.UniversalClient
	prefix   string
	ttl      time.Duration
	maxBytes int
	logger   *zap.Logger
	// liveEvery and liveLease: redisLiveEvery and redisLiveLease (tests
	// shorten them).
	liveEvery, liveLease time.Duration

	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu       sync.Mutex
	produced map[string]*redisStream // by id: streams this instance produces, and produced within ttl
	pubsub   *redis.PubSub
	refused  int
	refusing bool      // no config uses the store any more (refuse)
	failing  bool      // the last write failed
	warned   time.Time // when a failed write was last logged
}

// newRedisStore keeps journals in Redis under prefix, each for ttl after
// its end and of at most maxBytes of events (0: no bound). The caller
// closes client after the store.
func newRedisStore(client redis.UniversalClient, prefix string, ttl time.Duration, maxBytes int, logger *zap.Logger) *redisStore {
	if logger == nil {
		logger = zap.NewNop()
	}
	ctx, stop := context.WithCancel(context.Background())
	return &redisStore{client: client, prefix: prefix, ttl: ttl, maxBytes: maxBytes, logger: logger,
		liveEvery: redisLiveEvery, liveLease: redisLiveLease,
		ctx: ctx, stop: stop, produced: map[string]*redisStream{}}
}

// Close writes what the streams produced here still hold (within
// redisFinalFlush) and stops. A stream still running stays so in Redis
// until its keys expire, ttl after its last write.
func (st *redisStore) Close() error {
	st.stop()
	st.mu.Lock()
	ps := st.pubsub
	st.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
	}
	st.wg.Wait()
	return nil
}

// refuse makes Create refuse new streams: the store is closing.
func (st *redisStore) refuse() {
	st.mu.Lock()
	st.refusing = true
	st.mu.Unlock()
}

// drain waits, at most max, until every stream produced here has ended
// and its end is written.
func (st *redisStore) drain(max time.Duration) {
	st.mu.Lock()
	var done []<-chan struct{}
	for _, s := range st.produced {
		done = append(done, s.w.done)
	}
	st.mu.Unlock()
	limit := time.NewTimer(max)
	defer limit.Stop()
	for _, d := range done {
		select {
		case <-d:
		case <-limit.C:
			return
		}
	}
}

// eventsKey and metaKey share streamKeyTag(id), "{id}" for a stream id:
// whatever braces the prefix holds, the two names differ only after it,
// so Cluster puts them in one slot.
func (st *redisStore) eventsKey(id string) string {
	return st.prefix + "stream:" + streamKeyTag(id) + ":events"
}
func (st *redisStore) metaKey(id string) string {
	return st.prefix + "stream:" + streamKeyTag(id) + ":meta"
}

// liveKey is set, with a short TTL, while the stream's producer runs.
func (st *redisStore) liveKey(id string) string {
	return st.prefix + "stream:" + streamKeyTag(id) + ":live"
}
func (st *redisStore) cancelChannel() string { return st.prefix + "stream:cancel" }

// indexKey names an index entry: kind is by-response, by-idem or by-hash.
func (st *redisStore) indexKey(kind, owner, value string) string {
	h := sha256.Sum256([]byte(owner + "\x00" + value))
	return st.prefix + "stream:" + kind + ":" + hex.EncodeToString(h[:16])
}

func (st *redisStore) opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), redisJournalTimeout)
}

// wrote records a write's outcome, and logs failures at most every 10s.
func (st *redisStore) wrote(err error, what string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.failing = err != nil
	if err != nil && time.Since(st.warned) > 10*time.Second {
		st.warned = time.Now()
		st.logger.Warn("resume: journal write to Redis failed; retrying", zap.String("write", what), zap.Error(err))
	}
}

// Create starts a journal; its keys are written by its writer, a few
// milliseconds later.
func (st *redisStore) Create(m journal.Meta, now time.Time) journalStream {
	st.mu.Lock()
	if st.failing || st.refusing || st.ctx.Err() != nil {
		st.refused++
		st.mu.Unlock()
		return nil
	}
	st.prune(now)
	s := st.handle(m, journal.StateRunning, "")
	s.w = &redisWriter{next: 1, first: 1, wake: make(chan struct{}, 1), done: make(chan struct{})}
	st.produced[m.ID] = s
	watch := st.pubsub == nil
	if watch {
		st.pubsub = st.client.Subscribe(st.ctx)
		st.wg.Add(1)
	}
	st.wg.Add(1)
	st.mu.Unlock()
	if watch {
		go st.watchCancels()
	}
	go s.write()
	s.w.signal()
	return s
}

// handle is a stream's handle: a producer's, or a reader's elsewhere.
func (st *redisStore) handle(m journal.Meta, state, rid string) *redisStream {
	return &redisStream{st: st, meta: m, events: st.eventsKey(m.ID), metaKey: st.metaKey(m.ID),
		state: state, responseID: rid, cancel: make(chan struct{})}
}

// prune forgets the streams produced here whose ttl passed. st.mu held.
func (st *redisStore) prune(now time.Time) {
	for id, s := range st.produced {
		if ended, ok := s.endedAt(); ok && now.Sub(ended) > st.ttl {
			delete(st.produced, id)
		}
	}
}

// local is the producer's handle of a stream produced here, when owner's.
func (st *redisStore) local(owner, id string) *redisStream {
	st.mu.Lock()
	s := st.produced[id]
	st.mu.Unlock()
	if s == nil || s.meta.Owner != owner {
		return nil
	}
	return s
}

// load reads a stream's meta: nil when it is unknown, expired, or not
// owner's.
func (st *redisStore) load(owner, id string) journalStream {
	if !journal.ValidID(id) {
		return nil
	}
	ctx, cancel := st.opCtx()
	defer cancel()
	f, err := st.client.HGetAll(ctx, st.metaKey(id)).Result()
	if err != nil || f["created"] == "" || f["owner"] != owner {
		return nil
	}
	if s := st.local(owner, id); s != nil {
		return s
	}
	created, _ := strconv.ParseInt(f["created"], 10, 64)
	m := journal.Meta{ID: id, Owner: f["owner"], Dialect: f["dialect"], Created: time.Unix(0, created),
		IdemKey: f["idem"], BodyHash: f["hash"], Background: f["background"] == "1"}
	return st.handle(m, f["state"], f["response_id"])
}

// lookup reads an index.
func (st *redisStore) lookup(key string) string {
	ctx, cancel := st.opCtx()
	defer cancel()
	id, _ := st.client.Get(ctx, key).Result()
	return id
}

// Get finds owner's stream by its id or by its Responses id. A stream
// produced here is found before its first write reaches Redis.
func (st *redisStore) Get(owner, id string, now time.Time) journalStream {
	if journal.ValidID(id) {
		if s := st.local(owner, id); s != nil && s.running() {
			return s
		}
		if s := st.load(owner, id); s != nil {
			return s
		}
	}
	if sid := st.lookup(st.indexKey("by-response", owner, id)); sid != "" {
		return st.load(owner, sid)
	}
	return nil
}

// ByIdempotencyKey finds owner's stream started with that key.
func (st *redisStore) ByIdempotencyKey(owner, key string, now time.Time) journalStream {
	if sid := st.lookup(st.indexKey("by-idem", owner, key)); sid != "" {
		return st.alive(st.load(owner, sid))
	}
	return nil
}

// alive is js, unless it is a stream Redis holds as running whose
// producer is gone: a retry must not re-attach to a generation that can
// never end, and starts a new one.
func (st *redisStore) alive(js journalStream) journalStream {
	s, ok := js.(*redisStream)
	if !ok || s.w != nil {
		return js
	}
	s.mu.Lock()
	state := s.state // as load just read it
	s.mu.Unlock()
	if state != journal.StateRunning {
		return js
	}
	ctx, cancel := st.opCtx()
	defer cancel()
	if s.producerGone(ctx) {
		return nil
	}
	return js
}

// Orphan finds owner's latest stream of that request hash, started within
// window, whose clients all left before its end (see journal.Store.Orphan).
func (st *redisStore) Orphan(owner, hash string, window time.Duration, now time.Time) journalStream {
	sid := st.lookup(st.indexKey("by-hash", owner, hash))
	if !journal.ValidID(sid) {
		return nil
	}
	ctx, cancel := st.opCtx()
	defer cancel()
	v, err := st.client.HMGet(ctx, st.metaKey(sid), "owner", "created", "clients", "orphaned").Result()
	if err != nil || str(v[0]) != owner {
		return nil
	}
	created, _ := strconv.ParseInt(str(v[1]), 10, 64)
	clients, _ := strconv.Atoi(str(v[2]))
	orphaned, _ := strconv.ParseInt(str(v[3]), 10, 64)
	if created == 0 || now.Sub(time.Unix(0, created)) > window || orphaned == 0 || clients > 0 {
		return nil
	}
	return st.alive(st.load(owner, sid))
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// SetResponseID indexes a stream by its Responses id: through the writer
// for a stream produced here, else at once.
func (st *redisStore) SetResponseID(js journalStream, rid string) {
	s, ok := js.(*redisStream)
	if !ok || rid == "" {
		return
	}
	s.mu.Lock()
	s.responseID = rid
	s.mu.Unlock()
	if s.w != nil {
		s.w.mu.Lock()
		queued := s.w.finish == ""
		if queued {
			s.w.rid = rid
		}
		s.w.mu.Unlock()
		if queued {
			s.w.signal()
			return
		}
	}
	ctx, cancel := st.opCtx()
	defer cancel()
	pipe := st.client.Pipeline()
	pipe.HSet(ctx, s.metaKey, "response_id", rid)
	pipe.Do(ctx, "pexpire", s.metaKey, st.ttl.Milliseconds(), "nx")
	pipe.Set(ctx, st.indexKey("by-response", s.meta.Owner, rid), s.meta.ID, st.ttl)
	_, err := pipe.Exec(ctx)
	st.wrote(err, "response id")
}

// Stats is the figures of the streams this instance produced: cheap, as
// it reads no Redis. Evicted is always 0 (Redis bounds its journals by
// ttl and max_bytes, not by number); Refused counts the streams not
// journaled while Redis failed.
func (st *redisStore) Stats(now time.Time) journal.Stats {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.prune(now)
	out := journal.Stats{Streams: len(st.produced), Refused: st.refused}
	for _, s := range st.produced {
		s.w.mu.Lock()
		out.Bytes += s.w.kept
		if s.w.finish == "" {
			out.Running++
		}
		s.w.mu.Unlock()
	}
	return out
}

// watchCancels closes the Cancelled channel of the streams produced here
// when a cancel for them is published.
func (st *redisStore) watchCancels() {
	defer st.wg.Done()
	st.mu.Lock()
	ps := st.pubsub
	st.mu.Unlock()
	if err := ps.Subscribe(st.ctx, st.cancelChannel()); err != nil && st.ctx.Err() == nil {
		st.logger.Warn("resume: subscribing to journal cancels failed", zap.Error(err))
	}
	for st.ctx.Err() == nil {
		msg, err := ps.ReceiveTimeout(st.ctx, 5*time.Second)
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				st.sweepCancels()
			}
		case *redis.Message:
			st.mu.Lock()
			s := st.produced[m.Payload]
			st.mu.Unlock()
			if s != nil {
				s.closeCancel()
			}
		}
		if err != nil && st.ctx.Err() == nil {
			var ne interface{ Timeout() bool }
			if !errors.As(err, &ne) || !ne.Timeout() {
				select { // Redis away: the next Receive reconnects
				case <-time.After(100 * time.Millisecond):
				case <-st.ctx.Done():
				}
			}
		}
	}
}

// sweepCancels reads the cancel field of the streams running here.
func (st *redisStore) sweepCancels() {
	st.mu.Lock()
	var running []*redisStream
	for _, s := range st.produced {
		if s.running() {
			running = append(running, s)
		}
	}
	st.mu.Unlock()
	if len(running) == 0 {
		return
	}
	ctx, cancel := st.opCtx()
	defer cancel()
	pipe := st.client.Pipeline()
	cmds := make([]*redis.StringCmd, len(running))
	for i, s := range running {
		cmds[i] = pipe.HGet(ctx, s.metaKey, "cancel")
	}
	_, _ = pipe.Exec(ctx)
	for i, c := range cmds {
		if c.Val() == "1" {
			running[i].closeCancel()
		}
	}
}

// redisStream is one stream's journal in Redis: the producer's handle
// (w set) or a reader's.
type redisStream struct {
	st      *redisStore
	meta    journal.Meta
	events  string
	metaKey string
	w       *redisWriter // the producer's writes; nil on a reader's handle

	mu         sync.Mutex
	state      string
	responseID string
	cancel     chan struct{}
	cancelOnce sync.Once
}

// redisWriter is what a producer has not written yet, and what it wrote.
type redisWriter struct {
	mu           sync.Mutex
	next         uint64          // the next position
	pending      []journal.Entry // not written yet
	pendingBytes int
	lost         int     // pending events dropped while Redis failed
	sizes        []int32 // sizes of the events from position first on
	first        uint64  // the oldest position within max_bytes
	kept         int     // bytes of events first..next-1
	rid          string  // a Responses id to write
	finish       string  // the final state, once Finish was called
	ended        time.Time
	wake         chan struct{}
	done         chan struct{}
}

// requeue puts a batch that failed back before what came since, within
// the bound of what may be pending.
func (w *redisWriter) requeue(batch []journal.Entry, rid string, maxBytes int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if rid != "" && w.rid == "" {
		w.rid = rid
	}
	w.pending = append(batch, w.pending...)
	w.pendingBytes = 0
	for _, e := range w.pending {
		w.pendingBytes += len(e.Data)
	}
	w.bound(maxBytes)
}

// bound drops the oldest pending events beyond what may be pending (they
// are beyond max_bytes too). w.mu held.
func (w *redisWriter) bound(maxBytes int) {
	limit := maxBytes
	if limit <= 0 || limit > redisPendingMax {
		limit = redisPendingMax
	}
	for w.pendingBytes > limit && len(w.pending) > 1 {
		n := w.pending[0].N
		w.pendingBytes -= len(w.pending[0].Data)
		w.pending[0] = journal.Entry{}
		w.pending = w.pending[1:]
		w.lost++
		// The journal now starts after it: the next write trims what
		// Redis holds before it (MINID), so the loss is a trim at the
		// front, which readers are told of, never a hole inside (with
		// max_bytes above redisPendingMax, or none, the window
		// would not have moved past it).
		for w.first <= n && len(w.sizes) > 0 {
			w.kept -= int(w.sizes[0])
			w.sizes = w.sizes[1:]
			w.first++
		}
	}
}

func (w *redisWriter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (s *redisStream) Info() journal.Meta { return s.meta }

func (s *redisStream) running() bool {
	if s.w == nil {
		return false
	}
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	return s.w.finish == ""
}

func (s *redisStream) endedAt() (time.Time, bool) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	return s.w.ended, s.w.finish != ""
}

// Append queues the block for the writer and returns its position.
func (s *redisStream) Append(block []byte, seq int64) uint64 {
	w := s.w
	if w == nil {
		return 0 // a reader's handle
	}
	w.mu.Lock()
	n := w.next
	w.next++
	if w.finish == "" {
		w.pending = append(w.pending, journal.Entry{N: n, Seq: seq, Data: append([]byte(nil), block...)})
		w.pendingBytes += len(block)
		w.sizes = append(w.sizes, int32(len(block)))
		w.kept += len(block)
		for limit := s.st.maxBytes; limit > 0 && w.kept > limit && len(w.sizes) > 1; {
			w.kept -= int(w.sizes[0])
			w.sizes = w.sizes[1:]
			w.first++
		}
		w.bound(s.st.maxBytes)
	}
	w.mu.Unlock()
	w.signal()
	return n
}

// Finish ends the stream; the writer writes the end after what is
// pending.
func (s *redisStream) Finish(state string, now time.Time) {
	s.mu.Lock()
	if s.state == journal.StateRunning {
		s.state = state
	}
	s.mu.Unlock()
	if s.w == nil {
		return
	}
	s.w.mu.Lock()
	if s.w.finish == "" {
		s.w.finish, s.w.ended = state, now
	}
	s.w.mu.Unlock()
	s.w.signal()
}

// flushed waits until the writer is done (tests).
func (s *redisStream) flushed() <-chan struct{} { return s.w.done }

// write is the producer's writer: it writes what is pending, at most once
// per redisFlushEvery, refreshes the TTLs every ttl/4 and the live key
// every liveEvery, and ends after writing the end (or when the store
// closes).
func (s *redisStream) write() {
	st, w := s.st, s.w
	defer st.wg.Done()
	defer close(w.done)
	ttlEvery := max(st.ttl/4, 10*time.Millisecond)
	refreshEvery := max(min(ttlEvery, st.liveEvery), 10*time.Millisecond)
	refresh := time.NewTimer(refreshEvery)
	defer refresh.Stop()
	liveKey := st.liveKey(s.meta.ID)
	var (
		created, eventsTTL    bool
		lastRefresh, lastLive time.Time
		backoff               time.Duration
	)
	for {
		closing := false
		select {
		case <-w.wake:
		case <-refresh.C:
		case <-st.ctx.Done():
			closing = true
		}
		w.mu.Lock()
		batch := w.pending
		w.pending, w.pendingBytes = nil, 0
		if len(batch) > redisBatchMax { // the rest in the next pipeline
			w.pending, batch = batch[redisBatchMax:], batch[:redisBatchMax:redisBatchMax]
			for _, e := range w.pending {
				w.pendingBytes += len(e.Data)
			}
		}
		more := len(w.pending) > 0
		first, rid, finish := w.first, w.rid, w.finish
		if more {
			finish = "" // the end goes after the last event
		}
		w.rid = ""
		last := w.next - 1
		w.mu.Unlock()

		ttl := st.ttl
		due := !created || finish != "" || time.Since(lastRefresh) >= ttlEvery || (len(batch) > 0 && !eventsTTL)
		liveDue := finish == "" && (!created || time.Since(lastLive) >= st.liveEvery)
		timeout := redisJournalTimeout
		if closing {
			timeout = redisFinalFlush
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		pipe := st.client.Pipeline()
		if liveDue {
			// First: a reader that finds the meta finds the live key.
			pipe.Set(ctx, liveKey, "1", st.liveLease)
		}
		if !created {
			m := s.meta
			bg := ""
			if m.Background {
				bg = "1"
			}
			pipe.HSet(ctx, s.metaKey, "owner", m.Owner, "dialect", m.Dialect, "created", m.Created.UnixNano(),
				"idem", m.IdemKey, "hash", m.BodyHash, "background", bg, "state", journal.StateRunning)
			if m.IdemKey != "" {
				pipe.Set(ctx, st.indexKey("by-idem", m.Owner, m.IdemKey), m.ID, ttl)
			}
			if m.BodyHash != "" {
				pipe.Set(ctx, st.indexKey("by-hash", m.Owner, m.BodyHash), m.ID, ttl)
			}
		}
		for i, e := range batch {
			a := &redis.XAddArgs{Stream: s.events, ID: strconv.FormatUint(e.N, 10) + "-0",
				Values: []any{"q", e.Seq, "d", e.Data}}
			if i == len(batch)-1 && first > 1 {
				a.MinID = strconv.FormatUint(first, 10) + "-0"
			}
			pipe.XAdd(ctx, a)
		}
		if rid != "" {
			pipe.HSet(ctx, s.metaKey, "response_id", rid)
			pipe.Set(ctx, st.indexKey("by-response", s.meta.Owner, rid), s.meta.ID, ttl)
		}
		if finish != "" {
			pipe.XAdd(ctx, &redis.XAddArgs{Stream: s.events, ID: strconv.FormatUint(last, 10) + "-1",
				Values: []any{"e", finish}})
			pipe.HSet(ctx, s.metaKey, "state", finish, "ended", time.Now().UnixNano())
		}
		if due {
			for _, k := range s.keys() {
				pipe.PExpire(ctx, k, ttl)
			}
		}
		cmds, err := pipe.Exec(ctx)
		cancel()
		err = redisWriteErr(cmds, err)
		st.wrote(err, "events")
		if err == nil {
			created, backoff = true, 0
			if liveDue {
				lastLive = time.Now()
			}
			if due {
				lastRefresh = time.Now()
				eventsTTL = eventsTTL || len(batch) > 0 || finish != ""
			}
			if finish != "" || closing && !more {
				return
			}
			if more {
				w.signal()
			}
			refresh.Reset(refreshEvery)
			select { // at most one write per redisFlushEvery
			case <-time.After(redisFlushEvery):
			case <-st.ctx.Done():
			}
			continue
		}
		if closing {
			return
		}
		w.requeue(batch, rid, st.maxBytes)
		backoff = min(max(2*backoff, 50*time.Millisecond), time.Second)
		select {
		case <-time.After(backoff):
			w.signal()
		case <-st.ctx.Done():
		}
	}
}

// redisWriteErr is a pipeline's error, except an XADD of an id Redis
// already holds: a retried batch that had reached it.
func redisWriteErr(cmds []redis.Cmder, err error) error {
	if err == nil {
		return nil
	}
	for _, c := range cmds {
		e := c.Err()
		if e == nil || c.Name() == "xadd" && strings.Contains(e.Error(), "equal or smaller") {
			continue
		}
		return e
	}
	return nil
}

// keys is the stream's keys and its index entries.
func (s *redisStream) keys() []string {
	m, st := s.meta, s.st
	ks := []string{s.events, s.metaKey}
	if m.IdemKey != "" {
		ks = append(ks, st.indexKey("by-idem", m.Owner, m.IdemKey))
	}
	if m.BodyHash != "" {
		ks = append(ks, st.indexKey("by-hash", m.Owner, m.BodyHash))
	}
	s.mu.Lock()
	rid := s.responseID
	s.mu.Unlock()
	if rid != "" {
		ks = append(ks, st.indexKey("by-response", m.Owner, rid))
	}
	return ks
}

// State is the stream's state: the producer's own, else Redis's.
func (s *redisStream) State() string {
	if s.w == nil {
		ctx, cancel := s.st.opCtx()
		v, err := s.st.client.HGet(ctx, s.metaKey, "state").Result()
		cancel()
		if err == nil && v != "" {
			s.mu.Lock()
			s.state = v
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// ResponseID is the Responses id the stream carries.
func (s *redisStream) ResponseID() string {
	s.mu.Lock()
	rid := s.responseID
	s.mu.Unlock()
	if rid != "" || s.w != nil {
		return rid
	}
	ctx, cancel := s.st.opCtx()
	defer cancel()
	rid, _ = s.st.client.HGet(ctx, s.metaKey, "response_id").Result()
	s.mu.Lock()
	s.responseID = rid
	s.mu.Unlock()
	return rid
}

// Follow returns the events after position after, waiting (XREAD BLOCK)
// until there is one, the stream ended, or ctx is done. With ctx done
// already it reads what is there without waiting, as journal.Stream's
// Follow does: the relay asks so whether a cursor was trimmed and what a
// Responses object holds so far.
func (s *redisStream) Follow(ctx context.Context, after uint64, max int, dst []journal.Entry) ([]journal.Entry, bool, error) {
	if max <= 0 || max > redisReadCount {
		max = redisReadCount
	}
	if ctx.Err() != nil {
		c, cancel := s.st.opCtx()
		defer cancel()
		r, err := s.st.client.XRead(c, &redis.XReadArgs{Streams: []string{s.events, strconv.FormatUint(after, 10) + "-0"},
			Count: int64(max + 1), Block: -1}).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return dst, false, err
		}
		n0 := len(dst)
		var msgs []redis.XMessage
		if len(r) > 0 {
			msgs = r[0].Messages
		}
		dst, ended, err := appendEntries(dst, msgs, after, max)
		if err != nil || ended || len(dst) > n0 {
			return dst, ended, err
		}
		switch gone, ended, _ := s.endedBefore(after); {
		case gone:
			return dst, false, errJournalGone
		case ended:
			return dst, true, nil
		}
		return dst, false, ctx.Err()
	}
	fails := 0
	for {
		block := redisFollowBlock
		if dl, ok := ctx.Deadline(); ok {
			block = min(block, time.Until(dl))
		}
		block = maxDuration(block, time.Millisecond)
		msgs, err := s.xread(ctx, after, int64(max+1), block)
		if ctx.Err() != nil {
			return dst, false, ctx.Err()
		}
		switch {
		case errors.Is(err, redis.Nil):
			// Nothing within block: is the stream still there, did
			// it end before the cursor (a cursor past its end), is its
			// producer still there?
			gone, ended, dead := s.endedBefore(after)
			if gone {
				return dst, false, errJournalGone
			}
			if dead {
				return dst, false, errProducerGone
			}
			if ended {
				return dst, true, nil
			}
			continue
		case err != nil:
			if fails++; fails > 3 {
				return dst, false, err
			}
			select {
			case <-time.After(time.Duration(fails) * 100 * time.Millisecond):
			case <-ctx.Done():
			}
			continue
		}
		return appendEntries(dst, msgs, after, max)
	}
}

// endedBefore reports, for a read after position after that found
// nothing, whether the stream's keys are gone, or whether it ended at or
// before after (a cursor past its end reads nothing, ever, as in
// journal.Buffer), or whether it runs without a producer (dead). A read
// error is none of them: the caller reads again.
func (s *redisStream) endedBefore(after uint64) (gone, ended, dead bool) {
	ctx, cancel := s.st.opCtx()
	defer cancel()
	state, err := s.st.client.HGet(ctx, s.metaKey, "state").Result()
	switch {
	case errors.Is(err, redis.Nil):
		return true, false, false
	case err != nil:
		return false, false, false
	case state == journal.StateRunning:
		return false, false, s.producerGone(ctx)
	}
	// Ended: the end entry is the stream's last; an end written after
	// the read is not before the cursor, and the next read returns it.
	last, err := s.st.client.XRevRangeN(ctx, s.events, "+", "-", 1).Result()
	if err != nil || len(last) == 0 {
		return false, false, false
	}
	n, end, ok := parseEntryID(last[0].ID)
	return false, ok && end && n <= after, false
}

// producerGone reports whether a stream Redis holds as running has lost
// its producer: its live key expired (redisLiveLease). The state is read
// again after the live key, since a producer that ends its stream stops
// renewing it.
func (s *redisStream) producerGone(ctx context.Context) bool {
	if s.w != nil {
		return false // produced here
	}
	n, err := s.st.client.Exists(ctx, s.st.liveKey(s.meta.ID)).Result()
	if err != nil || n > 0 {
		return false
	}
	state, err := s.st.client.HGet(ctx, s.metaKey, "state").Result()
	return err == nil && state == journal.StateRunning
}

func maxDuration(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

// appendEntries turns the entries after position after into events, up
// to max: a gap before the first is ErrTrimmed; one later stops there
// (the next read reports it).
func appendEntries(dst []journal.Entry, msgs []redis.XMessage, after uint64, max int) ([]journal.Entry, bool, error) {
	n0 := len(dst)
	for _, m := range msgs {
		n, end, ok := parseEntryID(m.ID)
		if !ok {
			continue
		}
		if end {
			return dst, true, nil
		}
		if len(dst)-n0 == max {
			break
		}
		if n != after+1 {
			if len(dst) == n0 {
				return dst, false, journal.ErrTrimmed
			}
			break
		}
		seq, _ := strconv.ParseInt(str(m.Values["q"]), 10, 64)
		dst = append(dst, journal.Entry{N: n, Seq: seq, Data: []byte(str(m.Values["d"]))})
		after = n
	}
	return dst, false, nil
}

// parseEntryID reads an entry id: "N-0" is the event at position N,
// "N-1" the end.
func parseEntryID(id string) (n uint64, end, ok bool) {
	a, b, found := strings.Cut(id, "-")
	if !found {
		return 0, false, false
	}
	n, err := strconv.ParseUint(a, 10, 64)
	if err != nil || (b != "0" && b != "1") {
		return 0, false, false
	}
	return n, b == "1", true
}

// xread is one XREAD BLOCK from after. It returns when ctx ends without
// waiting for the read, which finishes within block on its own.
func (s *redisStream) xread(ctx context.Context, after uint64, count int64, block time.Duration) ([]redis.XMessage, error) {
	type result struct {
		msgs []redis.XMessage
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		c, cancel := context.WithTimeout(context.Background(), block+redisJournalTimeout)
		defer cancel()
		r, err := s.st.client.XRead(c, &redis.XReadArgs{Streams: []string{s.events, strconv.FormatUint(after, 10) + "-0"},
			Count: count, Block: block}).Result()
		var msgs []redis.XMessage
		if len(r) > 0 {
			msgs = r[0].Messages
		}
		ch <- result{msgs, err}
	}()
	select {
	case r := <-ch:
		return r.msgs, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// AfterSeq maps a Responses starting_after to a position, as
// journal.Buffer.AfterSeq does: it reads the journal from its oldest
// event until one carries a larger sequence_number (pages of
// redisReadCount, so at most max_bytes).
func (s *redisStream) AfterSeq(seq int64) (uint64, error) {
	ctx, cancel := s.st.opCtx()
	defer cancel()
	var (
		first, after uint64
		firstSeq     int64
		start        = "-"
	)
	for {
		msgs, err := s.st.client.XRangeN(ctx, s.events, start, "+", redisReadCount).Result()
		if err != nil {
			return 0, err
		}
		for _, m := range msgs {
			n, end, ok := parseEntryID(m.ID)
			if !ok || end {
				continue
			}
			q, _ := strconv.ParseInt(str(m.Values["q"]), 10, 64)
			if first == 0 {
				first, firstSeq, after = n, q, n-1
			}
			if q < 0 || q > seq {
				return afterSeqEnd(first, firstSeq, after, seq)
			}
			after = n
		}
		if len(msgs) < redisReadCount {
			if first == 0 {
				return 0, nil
			}
			return afterSeqEnd(first, firstSeq, after, seq)
		}
		n, _, _ := parseEntryID(msgs[len(msgs)-1].ID)
		start = strconv.FormatUint(n, 10) + "-1"
	}
}

// afterSeqEnd: nothing at or before seq is held, and the oldest event
// held is not the one right after it: those were trimmed.
func afterSeqEnd(first uint64, firstSeq int64, after uint64, seq int64) (uint64, error) {
	if after == first-1 && first > 1 && firstSeq != seq+1 {
		return 0, journal.ErrTrimmed
	}
	return after, nil
}

// Attach counts a reader, on any edge.
func (s *redisStream) Attach() {
	ctx, cancel := s.st.opCtx()
	defer cancel()
	pipe := s.st.client.Pipeline()
	pipe.HIncrBy(ctx, s.metaKey, "clients", 1)
	pipe.HSet(ctx, s.metaKey, "orphaned", 0)
	pipe.Do(ctx, "pexpire", s.metaKey, s.st.ttl.Milliseconds(), "nx")
	_, _ = pipe.Exec(ctx)
}

// Leave uncounts a reader; the last one leaving a running stream marks it
// orphaned (Orphan finds it then).
func (s *redisStream) Leave(now time.Time) (detached bool) {
	ctx, cancel := s.st.opCtx()
	defer cancel()
	pipe := s.st.client.Pipeline()
	n := pipe.HIncrBy(ctx, s.metaKey, "clients", -1)
	state := pipe.HGet(ctx, s.metaKey, "state")
	pipe.Do(ctx, "pexpire", s.metaKey, s.st.ttl.Milliseconds(), "nx")
	_, _ = pipe.Exec(ctx)
	if n.Err() != nil {
		return false
	}
	if s.w == nil && errors.Is(state.Err(), redis.Nil) {
		// The stream's keys expired while it was read (its producer
		// gone): the count just made a meta of its own; it goes.
		s.st.client.Del(ctx, s.metaKey)
		return false
	}
	running := state.Val() == journal.StateRunning
	if s.w != nil {
		running = s.running()
	}
	if n.Val() > 0 || !running {
		return false
	}
	s.st.client.HSet(ctx, s.metaKey, "orphaned", now.UnixNano())
	return true
}

// Clients is the number of readers on every edge.
func (s *redisStream) Clients() int {
	ctx, cancel := s.st.opCtx()
	defer cancel()
	n, _ := s.st.client.HGet(ctx, s.metaKey, "clients").Int()
	return n
}

// Cancel asks the producer to stop, wherever it runs.
func (s *redisStream) Cancel() {
	s.closeCancel()
	if p := s.st.local(s.meta.Owner, s.meta.ID); p != nil {
		p.closeCancel()
	}
	ctx, cancel := s.st.opCtx()
	defer cancel()
	pipe := s.st.client.Pipeline()
	pipe.HSet(ctx, s.metaKey, "cancel", "1")
	pipe.Do(ctx, "pexpire", s.metaKey, s.st.ttl.Milliseconds(), "nx")
	pipe.Publish(ctx, s.st.cancelChannel(), s.meta.ID)
	_, err := pipe.Exec(ctx)
	s.st.wrote(err, "cancel")
}

func (s *redisStream) closeCancel() { s.cancelOnce.Do(func() { close(s.cancel) }) }

// Cancelled is closed by Cancel: for the producer, a cancel from any
// edge; for a reader's handle, its own.
func (s *redisStream) Cancelled() <-chan struct{} { return s.cancel }

// Len is the number of events journaled.
func (s *redisStream) Len() uint64 {
	if s.w != nil {
		s.w.mu.Lock()
		defer s.w.mu.Unlock()
		return s.w.next - 1
	}
	ctx, cancel := s.st.opCtx()
	defer cancel()
	msgs, err := s.st.client.XRevRangeN(ctx, s.events, "+", "-", 1).Result()
	if err != nil || len(msgs) == 0 {
		return 0
	}
	n, _, _ := parseEntryID(msgs[0].ID)
	return n
}
