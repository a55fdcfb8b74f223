package llmrelay

// Journals in Redis (resume_redis.go) against a real redis-server: two
// stores on one Redis are two edges of a fleet, each with its own client.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmrelay/caddy-llm-relay/internal/journal"
)

// rjRedis starts a redis-server on a unix socket (StartTestRedis).
func rjRedis(t testing.TB) (sock string, cmd *exec.Cmd) {
	t.Helper()
	sock = filepath.Join(t.TempDir(), "redis.sock")
	return sock, StartTestRedis(t, sock)
}

// StartTestRedis starts a redis-server on a unix socket in a temp dir,
// with no persistence (a kill loses its data, as the outage tests want).
// It skips where redis-server is absent, unless RELAY_REQUIRE_REDIS=1
// (CI). It is the fleet tests' startRedis too (exported for the
// external test package).
func StartTestRedis(t testing.TB, sock string) *exec.Cmd {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server not installed (Debian: apt-get install redis-server)"
		if os.Getenv("RELAY_REQUIRE_REDIS") == "1" {
			t.Fatal(msg + " (RELAY_REQUIRE_REDIS=1)")
		}
		t.Skip(msg)
	}
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", filepath.Dir(sock), "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: sock})
	defer c.Close()
	rjWait(t, 10*time.Second, "redis-server answering", func() bool {
		return c.Ping(context.Background()).Err() == nil
	})
	return cmd
}

func rjWait(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", bound, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func rjClient(t testing.TB, sock string) *redis.Client {
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: sock})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// rjStore is one edge's store, with a client of its own.
func rjStore(t testing.TB, sock string, ttl time.Duration, maxBytes int) *redisStore {
	st := newRedisStore(rjClient(t, sock), "rj:", ttl, maxBytes, nil)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func rjMeta(owner string) journal.Meta {
	return journal.Meta{ID: journal.NewID(), Owner: owner, Dialect: "responses", Created: time.Now()}
}

// rjBlock is event i's block, padded to about size bytes.
func rjBlock(i, size int) []byte {
	b := fmt.Appendf(nil, "event: e\ndata: {\"i\":%d,\"pad\":\"", i)
	for len(b) < size-4 {
		b = append(b, 'x')
	}
	return append(b, "\"}\n\n"...)
}

// rjFollowAll reads from after to the end.
func rjFollowAll(t testing.TB, s journalStream, after uint64, max int) ([]journal.Entry, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []journal.Entry
	for {
		es, ended, err := s.Follow(ctx, after, max, nil)
		if err != nil {
			return out, err
		}
		for _, e := range es {
			out = append(out, e)
			after = e.N
		}
		if ended {
			return out, nil
		}
	}
}

// rjSame checks got is want's events from position from on.
func rjSame(t testing.TB, got, want []journal.Entry, from uint64) {
	t.Helper()
	if int(from) > len(want) {
		t.Fatalf("cursor %d beyond the %d events", from, len(want))
	}
	want = want[from:]
	if len(got) != len(want) {
		t.Fatalf("got %d events after %d, want %d", len(got), from, len(want))
	}
	for i := range got {
		if got[i].N != want[i].N || got[i].Seq != want[i].Seq || !bytes.Equal(got[i].Data, want[i].Data) {
			t.Fatalf("event %d: got N %d seq %d %q, want N %d seq %d %q", i, got[i].N, got[i].Seq, got[i].Data,
				want[i].N, want[i].Seq, want[i].Data)
		}
	}
}

// rjGet waits until store finds the stream (its first write is a few
// milliseconds after Create).
func rjGet(t testing.TB, st *redisStore, owner, id string) journalStream {
	t.Helper()
	var s journalStream
	rjWait(t, 5*time.Second, "the stream visible", func() bool {
		s = st.Get(owner, id, time.Now())
		return s != nil
	})
	return s
}

// TestRedisJournalAcrossEdges: a stream written on edge A is followed on
// edge B while it is written (B blocks in XREAD and sees every event once,
// in order, then the end), and replayed on a third edge after A's store
// is closed, whole and from a cursor.
func TestRedisJournalAcrossEdges(t *testing.T) {
	sock, _ := rjRedis(t)
	a := rjStore(t, sock, time.Minute, 0)
	b := rjStore(t, sock, time.Minute, 0)
	m := rjMeta("alice")
	s := a.Create(m, time.Now())
	if s == nil {
		t.Fatal("Create refused")
	}
	rs := b.Get("alice", m.ID, time.Now())
	for rs == nil {
		time.Sleep(time.Millisecond)
		rs = b.Get("alice", m.ID, time.Now())
	}
	if rs.(*redisStream).w != nil {
		t.Fatal("B's handle is a producer's")
	}
	if got := rs.Info(); got.Owner != "alice" || got.Dialect != "responses" || got.Created.UnixNano() != m.Created.UnixNano() {
		t.Fatalf("B reads meta %+v, want %+v", got, m)
	}

	var want []journal.Entry
	followed := make(chan []journal.Entry)
	go func() {
		got, err := rjFollowAll(t, rs, 0, 7)
		if err != nil {
			t.Error(err)
		}
		followed <- got
	}()
	for i := range 300 {
		block := rjBlock(i, 50+i%200)
		n := s.Append(block, int64(i))
		if n != uint64(i+1) {
			t.Fatalf("Append %d returned position %d", i, n)
		}
		want = append(want, journal.Entry{N: n, Seq: int64(i), Data: block})
		if i%10 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	a.SetResponseID(s, "resp_abc")
	s.Finish(journal.StateCompleted, time.Now())
	rjSame(t, <-followed, want, 0)
	if got := rs.State(); got != journal.StateCompleted {
		t.Fatalf("B reads state %q", got)
	}
	if got := rs.Len(); got != 300 {
		t.Fatalf("B reads Len %d", got)
	}
	<-s.(*redisStream).flushed()
	_ = a.Close()

	c := rjStore(t, sock, time.Minute, 0)
	cs := c.Get("alice", "resp_abc", time.Now())
	if cs == nil || cs.Info().ID != m.ID || cs.ResponseID() != "resp_abc" {
		t.Fatalf("C does not find the stream by its Responses id after A closed: %v", cs)
	}
	for _, from := range []uint64{0, 1, 150, 299, 300} {
		got, err := rjFollowAll(t, cs, from, 0)
		if err != nil {
			t.Fatal(err)
		}
		rjSame(t, got, want, from)
	}
	if after, err := cs.AfterSeq(41); err != nil || after != 42 {
		t.Fatalf("AfterSeq(41) = %d, %v; want 42", after, err)
	}
}

// TestRedisJournalOwners: another key finds nothing of a stream: not by
// id, Responses id, Idempotency-Key or body hash.
func TestRedisJournalOwners(t *testing.T) {
	sock, _ := rjRedis(t)
	a := rjStore(t, sock, time.Minute, 0)
	b := rjStore(t, sock, time.Minute, 0)
	m := rjMeta("alice")
	m.IdemKey, m.BodyHash = "idem-1", "hash-1"
	s := a.Create(m, time.Now())
	s.Attach()
	a.SetResponseID(s, "resp_1")
	s.Append(rjBlock(0, 40), 0)
	rjGet(t, b, "alice", m.ID)
	rjWait(t, 5*time.Second, "the Responses id indexed", func() bool { return b.Get("alice", "resp_1", time.Now()) != nil })
	if !s.Leave(time.Now()) {
		t.Fatal("the last client leaving a running stream is not a detach")
	}
	now := time.Now()
	for _, st := range []*redisStore{a, b} {
		if st.Get("bob", m.ID, now) != nil || st.Get("bob", "resp_1", now) != nil ||
			st.ByIdempotencyKey("bob", "idem-1", now) != nil || st.Orphan("bob", "hash-1", time.Hour, now) != nil {
			t.Fatal("bob finds alice's stream")
		}
		if st.Get("", m.ID, now) != nil || st.Get("alice", "rs_short", now) != nil {
			t.Fatal("an empty owner or a malformed id finds a stream")
		}
	}
	if b.ByIdempotencyKey("alice", "idem-1", now) == nil || b.Orphan("alice", "hash-1", time.Hour, now) == nil {
		t.Fatal("alice does not find her own stream")
	}
}

// TestRedisJournalOrphan: the body-hash index finds a stream only while
// every client of it left before its end and none came back, within the
// window; the Idempotency-Key index finds it whatever its clients.
func TestRedisJournalOrphan(t *testing.T) {
	sock, _ := rjRedis(t)
	a := rjStore(t, sock, time.Minute, 0)
	b := rjStore(t, sock, time.Minute, 0)
	m := rjMeta("alice")
	m.IdemKey, m.BodyHash = "k1", "h1"
	s := a.Create(m, time.Now())
	s.Attach()
	rjGet(t, b, "alice", m.ID)
	now := time.Now()
	if b.Orphan("alice", "h1", time.Hour, now) != nil {
		t.Fatal("a stream with its client connected is an orphan")
	}
	if b.ByIdempotencyKey("alice", "k1", now) == nil {
		t.Fatal("the Idempotency-Key does not find the stream")
	}
	if !s.Leave(time.Now()) {
		t.Fatal("Leave of the last client is not a detach")
	}
	o := b.Orphan("alice", "h1", time.Hour, time.Now())
	if o == nil {
		t.Fatal("a detached stream is not found on B")
	}
	if b.Orphan("alice", "h1", time.Nanosecond, time.Now()) != nil {
		t.Fatal("an orphan outside the window is found")
	}
	o.Attach() // the retry re-attaches on B
	if got := s.Clients(); got != 1 {
		t.Fatalf("A counts %d clients after B attached", got)
	}
	if b.Orphan("alice", "h1", time.Hour, time.Now()) != nil {
		t.Fatal("a stream re-attached to is still an orphan")
	}
	if o.Leave(time.Now()) != true {
		t.Fatal("B's last client leaving is not a detach")
	}
	s.Finish(journal.StateCompleted, time.Now())
	<-s.(*redisStream).flushed()
	o.Attach()
	if o.Leave(time.Now()) {
		t.Fatal("leaving an ended stream is a detach")
	}

	// A newer stream of the same request takes the hash index; it has
	// its client, so no orphan.
	m2 := rjMeta("alice")
	m2.BodyHash = "h1"
	s2 := a.Create(m2, time.Now())
	s2.Attach()
	rjGet(t, b, "alice", m2.ID)
	if b.Orphan("alice", "h1", time.Hour, time.Now()) != nil {
		t.Fatal("the newer stream, connected, is an orphan")
	}
}

// TestRedisJournalCancelAcrossEdges: a cancel asked on B closes the
// producer's Cancelled on A (pub/sub), and a cancel A's subscription
// missed is found when it reconnects.
func TestRedisJournalCancelAcrossEdges(t *testing.T) {
	sock, _ := rjRedis(t)
	a := rjStore(t, sock, time.Minute, 0)
	b := rjStore(t, sock, time.Minute, 0)
	s := a.Create(rjMeta("alice"), time.Now())
	rs := rjGet(t, b, "alice", s.Info().ID)
	select {
	case <-s.Cancelled():
		t.Fatal("cancelled before any cancel")
	default:
	}
	// The subscription is asynchronous: until A subscribed, a publish
	// is lost, and the sweep on subscribing finds the flag.
	start := time.Now()
	rs.Cancel()
	select {
	case <-s.Cancelled():
		t.Logf("a cancel on B reached A in %s", time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatal("a cancel on B did not reach the producer on A")
	}

	// Missed publish: the flag is set without one, then A's subscription
	// is cut; on resubscribing it reads the flags.
	s2 := a.Create(rjMeta("alice"), time.Now())
	rjGet(t, b, "alice", s2.Info().ID)
	c := rjClient(t, sock)
	ctx := context.Background()
	if err := c.HSet(ctx, a.metaKey(s2.Info().ID), "cancel", "1").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s2.Cancelled():
		t.Fatal("cancelled without a publish nor a reconnect")
	case <-time.After(200 * time.Millisecond):
	}
	if err := c.Do(ctx, "client", "kill", "type", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s2.Cancelled():
	case <-time.After(15 * time.Second):
		t.Fatal("a cancel set while A's subscription was away is not found when it comes back")
	}
}

// TestRedisJournalTTL: a running stream's keys live on while its producer
// writes nothing (the TTL is refreshed); after Finish every key (events,
// meta, indexes) goes ttl later; a follower of a stream whose producer
// died gets errJournalGone once its keys expire.
func TestRedisJournalTTL(t *testing.T) {
	sock, _ := rjRedis(t)
	const ttl = 400 * time.Millisecond
	a := rjStore(t, sock, ttl, 0)
	b := rjStore(t, sock, ttl, 0)
	c := rjClient(t, sock)
	ctx := context.Background()
	m := rjMeta("alice")
	m.IdemKey, m.BodyHash = "k", "h"
	s := a.Create(m, time.Now())
	s.Append(rjBlock(0, 40), 0)
	a.SetResponseID(s, "resp_ttl")
	rjGet(t, b, "alice", m.ID)
	keys := []string{a.eventsKey(m.ID), a.metaKey(m.ID), a.indexKey("by-idem", "alice", "k"),
		a.indexKey("by-hash", "alice", "h"), a.indexKey("by-response", "alice", "resp_ttl")}
	rjWait(t, 5*time.Second, "every key written", func() bool { return c.Exists(ctx, keys...).Val() == int64(len(keys)) })
	for _, k := range keys {
		if d := c.PTTL(ctx, k).Val(); d <= 0 || d > ttl {
			t.Fatalf("%s has TTL %s, want within (0, %s]", k, d, ttl)
		}
	}
	time.Sleep(4 * ttl)
	if n := c.Exists(ctx, keys...).Val(); n != int64(len(keys)) {
		t.Fatalf("%d of %d keys left after 4 ttl of a running stream without writes", n, len(keys))
	}

	s.Finish(journal.StateCompleted, time.Now())
	<-s.(*redisStream).flushed()
	if b.Get("alice", m.ID, time.Now()) == nil {
		t.Fatal("a stream just finished is not found")
	}
	rjWait(t, 10*time.Second, "the keys expired", func() bool { return c.Exists(ctx, keys...).Val() == 0 })
	if b.Get("alice", m.ID, time.Now()) != nil || b.Get("alice", "resp_ttl", time.Now()) != nil ||
		b.ByIdempotencyKey("alice", "k", time.Now()) != nil {
		t.Fatal("an expired stream is found")
	}

	// The producer goes (its store closed while the stream runs): the
	// follower on B ends with errJournalGone once the keys expire.
	s2 := a.Create(rjMeta("alice"), time.Now())
	s2.Append(rjBlock(0, 40), 0)
	rs := rjGet(t, b, "alice", s2.Info().ID)
	_ = a.Close()
	got, err := rjFollowAll(t, rs, 0, 0)
	if !errors.Is(err, errJournalGone) || len(got) != 1 {
		t.Fatalf("following a dead producer's stream: %d events, %v; want 1 and errJournalGone", len(got), err)
	}
}

// TestRedisJournalMaxBytes: past max_bytes the oldest events go (MINID),
// exactly as journal.Buffer drops them, also when the producer writes
// faster than Redis takes it (the pending events beyond max_bytes never
// reach Redis: no gap inside the journal); a cursor before them is
// ErrTrimmed; Redis's memory stays within max_bytes and one macro-node.
func TestRedisJournalMaxBytes(t *testing.T) {
	sock, _ := rjRedis(t)
	const maxBytes, size, n = 4096, 100, 600
	a := rjStore(t, sock, time.Minute, maxBytes)
	b := rjStore(t, sock, time.Minute, maxBytes)
	c := rjClient(t, sock)
	s := a.Create(rjMeta("alice"), time.Now())
	var want []journal.Entry
	for i := range n {
		blk := rjBlock(i, size)
		want = append(want, journal.Entry{N: s.Append(blk, int64(i)), Seq: int64(i), Data: blk})
		if i%50 == 0 {
			time.Sleep(2 * time.Millisecond) // several batches
		}
	}
	s.Finish(journal.StateCompleted, time.Now())
	<-s.(*redisStream).flushed()
	ctx := context.Background()
	key := a.eventsKey(s.Info().ID)
	xlen := int(c.XLen(ctx, key).Val()) - 1 // the end entry
	mem := c.MemoryUsage(ctx, key, 0).Val()
	t.Logf("%d events of %d bytes, max_bytes %d: Redis holds %d (%d bytes of data, %d of memory)", n, size, maxBytes, xlen, xlen*size, mem)
	if xlen != maxBytes/size {
		t.Fatalf("Redis holds %d events (%d bytes), want the last %d (max_bytes %d)", xlen, xlen*size, maxBytes/size, maxBytes)
	}
	if mem > 2*maxBytes+4096 {
		t.Fatalf("the events take %d bytes of Redis memory", mem)
	}
	if got := len(c.XRange(ctx, key, "-", "+").Val()); got != xlen+1 {
		t.Fatalf("XRANGE returns %d entries, XLEN says %d", got, xlen+1)
	}
	if st := a.Stats(time.Now()); st.Bytes > maxBytes || st.Bytes < maxBytes-size {
		t.Fatalf("Stats.Bytes %d, want the last max_bytes' worth", st.Bytes)
	}
	rs := rjGet(t, b, "alice", s.Info().ID)
	if _, err := rjFollowAll(t, rs, 0, 0); !errors.Is(err, journal.ErrTrimmed) {
		t.Fatalf("a replay from the start: %v, want ErrTrimmed", err)
	}
	got, err := rjFollowAll(t, rs, n-20, 0)
	if err != nil {
		t.Fatal(err)
	}
	rjSame(t, got, want, n-20)
	if _, err := rs.AfterSeq(3); !errors.Is(err, journal.ErrTrimmed) {
		t.Fatalf("AfterSeq before the held events: %v, want ErrTrimmed", err)
	}
	firstHeld := uint64(n - xlen + 1)
	if after, err := rs.AfterSeq(int64(firstHeld - 2)); err != nil || after != firstHeld-1 {
		t.Fatalf("AfterSeq right before the oldest held: %d, %v; want %d", after, err, firstHeld-1)
	}
}

// TestRedisJournalAfterSeq: AfterSeq on Redis agrees with
// journal.Buffer's for random sequence numbers (increasing, with
// events without one).
func TestRedisJournalAfterSeq(t *testing.T) {
	sock, _ := rjRedis(t)
	a := rjStore(t, sock, time.Minute, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		s := a.Create(rjMeta("alice"), time.Now())
		buf := journal.NewBuffer(0)
		seq := int64(0)
		for i := range 1 + rng.IntN(600) {
			q := seq
			if rng.IntN(20) == 0 {
				q = -1
			} else {
				seq += 1 + int64(rng.IntN(2))
			}
			s.Append(rjBlock(i, 30), q)
			buf.Append(rjBlock(i, 30), q)
		}
		s.Finish(journal.StateCompleted, time.Now())
		<-s.(*redisStream).flushed()
		for range 20 {
			q := int64(rng.IntN(int(seq)+3)) - 1
			got, gerr := s.AfterSeq(q)
			want, werr := buf.AfterSeq(q)
			if got != want || (gerr == nil) != (werr == nil) {
				t.Fatalf("AfterSeq(%d) = %d, %v; Buffer says %d, %v", q, got, gerr, want, werr)
			}
		}
	}
}

// TestRedisJournalResumeProperty: for random streams and random cut
// points, a client that reads from edge B up to the cut, drops, and
// resumes on edge C from its cursor (its last event's position, or for
// Responses its last sequence_number through AfterSeq) ends with exactly
// the events written: no gap, no duplicate. Half the resumes happen
// while A still writes, half after A's store is closed.
func TestRedisJournalResumeProperty(t *testing.T) {
	sock, _ := rjRedis(t)
	b := rjStore(t, sock, time.Minute, 0)
	c := rjStore(t, sock, time.Minute, 0)
	const rounds = 24
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for r := range rounds {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			rjResumeRound(t, sock, b, c, rng, r%2 == 1)
		}()
	}
	wg.Wait()
}

func rjResumeRound(t *testing.T, sock string, b, c *redisStore, rng *rand.Rand, afterClose bool) {
	a := newRedisStore(rjClient(t, sock), "rj:", time.Minute, 0, nil)
	defer a.Close()
	s := a.Create(rjMeta("alice"), time.Now())
	total := 1 + rng.IntN(300)
	withSeq := rng.IntN(2) == 0
	want := make([]journal.Entry, 0, total)
	for i := range total {
		q := int64(-1)
		if withSeq {
			q = int64(i)
		}
		want = append(want, journal.Entry{N: uint64(i + 1), Seq: q, Data: rjBlock(i, 10+rng.IntN(400))})
	}
	written := make(chan struct{})
	wrng := rand.New(rand.NewPCG(rng.Uint64(), 8)) // the writer's own: a Rand is not safe for concurrent use
	go func() {
		defer close(written)
		for i, e := range want {
			if n := s.Append(e.Data, e.Seq); n != e.N {
				t.Errorf("Append %d: position %d", i, n)
			}
			if wrng.IntN(8) == 0 {
				time.Sleep(time.Duration(wrng.IntN(3)) * time.Millisecond)
			}
		}
		s.Finish(journal.StateCompleted, time.Now())
	}()
	if afterClose {
		<-written
		<-s.(*redisStream).flushed()
		_ = a.Close()
	}
	rs := rjGet(t, b, "alice", s.Info().ID)
	cut := rng.IntN(total + 2) // may be past the end
	var got []journal.Entry
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(got) < cut {
		es, ended, err := rs.Follow(ctx, uint64(len(got)), 1+rng.IntN(16), nil)
		if err != nil {
			t.Errorf("follow on B: %v", err)
			return
		}
		got = append(got, es...)
		if ended {
			break
		}
	}
	if len(got) > cut {
		got = got[:cut] // the connection broke within a read
	}
	// Resume on C.
	cs := c.Get("alice", s.Info().ID, time.Now())
	if cs == nil {
		t.Error("C does not find the stream")
		return
	}
	after := uint64(len(got))
	if withSeq && len(got) > 0 {
		var err error
		if after, err = cs.AfterSeq(got[len(got)-1].Seq); err != nil {
			t.Errorf("AfterSeq: %v", err)
			return
		}
	}
	rest, err := rjFollowAll(t, cs, after, 1+rng.IntN(300))
	if err != nil {
		t.Errorf("follow on C: %v", err)
		return
	}
	got = append(got, rest...)
	if len(got) != len(want) {
		t.Errorf("%d events (cut at %d, resumed after %d), want %d", len(got), cut, after, len(want))
		return
	}
	for i := range got {
		if got[i].N != want[i].N || got[i].Seq != want[i].Seq || !bytes.Equal(got[i].Data, want[i].Data) {
			t.Errorf("event %d differs (cut at %d)", i, cut)
			return
		}
	}
	<-written
}

// TestRedisJournalAppendNeverBlocks: with Redis gone, Append returns at
// once (the writer keeps at most max_bytes pending), new streams are
// refused (they run unjournaled), and when Redis is back the store
// writes again.
func TestRedisJournalAppendNeverBlocks(t *testing.T) {
	sock, cmd := rjRedis(t)
	a := rjStore(t, sock, time.Minute, 64<<10)
	s := a.Create(rjMeta("alice"), time.Now())
	s.Append(rjBlock(0, 100), 0)
	rjGet(t, a, "alice", s.Info().ID)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	start := time.Now()
	for i := range 20000 {
		s.Append(rjBlock(i, 100), int64(i))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("20000 Appends with Redis down took %s", d)
	}
	rjWait(t, 10*time.Second, "Create refused while Redis is down", func() bool {
		return a.Create(rjMeta("alice"), time.Now()) == nil
	})
	w := s.(*redisStream).w
	w.mu.Lock()
	pending := w.pendingBytes
	w.mu.Unlock()
	if pending > 64<<10 {
		t.Fatalf("%d bytes pending, beyond max_bytes", pending)
	}
	if a.Stats(time.Now()).Refused == 0 {
		t.Fatal("refused streams not counted")
	}
	StartTestRedis(t, sock)
	rjWait(t, 15*time.Second, "Create accepted once Redis is back", func() bool {
		return a.Create(rjMeta("alice"), time.Now()) != nil
	})
}

// rjCounter counts the commands and round trips a client sends.
type rjCounter struct{ cmds, trips atomic.Int64 }

func (h *rjCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *rjCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.cmds.Add(1)
		h.trips.Add(1)
		return next(ctx, cmd)
	}
}
func (h *rjCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.cmds.Add(int64(len(cmds)))
		h.trips.Add(1)
		return next(ctx, cmds)
	}
}

// TestRedisJournalCost measures a producer's Redis commands per emission
// at a pacer's rate and the bytes a finished stream takes in Redis. The
// bounds are generous: the figures are logged.
func TestRedisJournalCost(t *testing.T) {
	sock, _ := rjRedis(t)
	client := rjClient(t, sock)
	var count rjCounter
	client.AddHook(&count)
	a := newRedisStore(client, "rj:", time.Minute, 0, nil)
	defer a.Close()
	const n, size = 1000, 180
	m := rjMeta("alice")
	m.IdemKey, m.BodyHash = "k", "h"
	s := a.Create(m, time.Now())
	s.Attach()
	a.SetResponseID(s, "resp_cost")
	data := 0
	for i := range n {
		blk := rjBlock(i, size)
		data += len(blk)
		s.Append(blk, int64(i))
		if i%4 == 0 {
			time.Sleep(time.Millisecond) // about a fast pacer's rate
		}
	}
	s.Leave(time.Now())
	s.Finish(journal.StateCompleted, time.Now())
	<-s.(*redisStream).flushed()
	cmds, trips := count.cmds.Load(), count.trips.Load()
	ctx := context.Background()
	mem := client.MemoryUsage(ctx, a.eventsKey(m.ID), 0).Val() + client.MemoryUsage(ctx, a.metaKey(m.ID), 0).Val()
	t.Logf("%d emissions of %d bytes: %d commands (%.3f per emission), %d round trips (%.3f per emission); "+
		"Redis holds %d bytes for %d of data (%.2f×, %.1f bytes per event beyond the data)",
		n, size, cmds, float64(cmds)/n, trips, float64(trips)/n, mem, data, float64(mem)/float64(data), float64(mem-int64(data))/n)
	if float64(cmds)/n > 1.1 {
		t.Fatalf("%.3f commands per emission, want about 1", float64(cmds)/n)
	}
	if mem > int64(data)*3/2 {
		t.Fatalf("Redis holds %d bytes for %d of data", mem, data)
	}
}

// BenchmarkRedisJournalAppendFollow: an event appended on A and read on B
// (XREAD BLOCK), per event; cmds/event counts the producer's commands.
func BenchmarkRedisJournalAppendFollow(b *testing.B) {
	sock, _ := rjRedis(b)
	client := rjClient(b, sock)
	var count rjCounter
	client.AddHook(&count)
	a := newRedisStore(client, "rj:", time.Minute, 0, nil)
	defer a.Close()
	r := rjStore(b, sock, time.Minute, 0)
	blk := rjBlock(0, 200)
	s := a.Create(rjMeta("alice"), time.Now())
	rs := rjGet(b, r, "alice", s.Info().ID)
	done := make(chan error)
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		after := uint64(0)
		var buf []journal.Entry
		for {
			es, ended, err := rs.Follow(context.Background(), after, 0, buf[:0])
			if err != nil || ended {
				done <- err
				return
			}
			after = es[len(es)-1].N
		}
	}()
	for i := range b.N {
		s.Append(blk, int64(i))
	}
	s.Finish(journal.StateCompleted, time.Now())
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(count.cmds.Load())/float64(b.N), "cmds/event")
	b.ReportMetric(float64(count.trips.Load())/float64(b.N), "trips/event")
}

// TestRedisJournalFollowDone: Follow with a context already done reads
// what the journal holds without waiting, as journal.Stream's does: the
// relay asks so whether a cursor was trimmed (replay) and what a
// Responses object holds (responseObject, answerBackground), on an edge
// that reads another's stream.
func TestRedisJournalFollowDone(t *testing.T) {
	sock, _ := rjRedis(t)
	a := rjStore(t, sock, time.Minute, 1000)
	b := rjStore(t, sock, time.Minute, 1000)
	s := a.Create(rjMeta("alice"), time.Now())
	var want []journal.Entry
	for i := range 5 {
		blk := rjBlock(i, 100)
		want = append(want, journal.Entry{N: s.Append(blk, int64(i)), Seq: int64(i), Data: blk})
	}
	rs := rjGet(t, b, "alice", s.Info().ID)
	rjWait(t, 5*time.Second, "the events written", func() bool { return rs.Len() == 5 })
	done, cancel := context.WithCancel(context.Background())
	cancel()
	got, ended, err := rs.Follow(done, 2, 0, nil)
	if err != nil || ended {
		t.Fatalf("Follow(done) of a running stream with events held: ended %v, %v; want the events", ended, err)
	}
	rjSame(t, got, want, 2)
	if _, _, err := rs.Follow(done, 5, 0, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow(done) with nothing after the cursor: %v, want context.Canceled", err)
	}
	for i := 5; i < 20; i++ { // past max_bytes: the first events go
		s.Append(rjBlock(i, 100), int64(i))
	}
	s.Finish(journal.StateCompleted, time.Now())
	<-s.(*redisStream).flushed()
	if _, _, err := rs.Follow(done, 0, 0, nil); !errors.Is(err, journal.ErrTrimmed) {
		t.Fatalf("Follow(done) from a trimmed cursor: %v, want ErrTrimmed", err)
	}
	if es, ended, err := rs.Follow(done, 20, 0, nil); err != nil || !ended || len(es) != 0 {
		t.Fatalf("Follow(done) at the end of an ended stream: %d events, ended %v, %v; want the end", len(es), ended, err)
	}
}

// TestRedisJournalCursorPastEnd: a cursor beyond the last event of an
// ended stream (a number the client chose) reads the end, as in
// journal.Buffer, instead of waiting for events that never come.
func TestRedisJournalCursorPastEnd(t *testing.T) {
	sock, _ := rjRedis(t)
	a := rjStore(t, sock, time.Minute, 0)
	b := rjStore(t, sock, time.Minute, 0)
	s := a.Create(rjMeta("alice"), time.Now())
	s.Append(rjBlock(0, 50), 0)
	s.Append(rjBlock(1, 50), 1)
	s.Finish(journal.StateCompleted, time.Now())
	<-s.(*redisStream).flushed()
	rs := rjGet(t, b, "alice", s.Info().ID)
	ctx, cancel := context.WithTimeout(context.Background(), 4*redisFollowBlock)
	defer cancel()
	es, ended, err := rs.Follow(ctx, 7, 0, nil)
	if err != nil || !ended || len(es) != 0 {
		t.Fatalf("a cursor past the end of an ended stream: %d events, ended %v, %v; want the end", len(es), ended, err)
	}
}

// TestRedisJournalOutageTrimsFront: events dropped while Redis did not
// answer (beyond what a stream may keep pending, with no max_bytes below
// it) make the journal start after them: Redis, which kept what it had,
// holds no hole, a reader from before them is told ErrTrimmed, and one
// from after reads every event since.
func TestRedisJournalOutageTrimsFront(t *testing.T) {
	sock, cmd := rjRedis(t)
	a := rjStore(t, sock, time.Minute, 0) // no max_bytes: only redisPendingMax bounds what waits
	b := rjStore(t, sock, time.Minute, 0)
	c := rjClient(t, sock)
	s := a.Create(rjMeta("alice"), time.Now())
	var want []journal.Entry
	add := func(i int) {
		blk := rjBlock(i, 1000)
		want = append(want, journal.Entry{N: s.Append(blk, int64(i)), Seq: int64(i), Data: blk})
	}
	for i := range 10 {
		add(i)
	}
	rs := rjGet(t, b, "alice", s.Info().ID)
	rjWait(t, 5*time.Second, "the first events written", func() bool { return rs.Len() == 10 })
	// Redis stops answering (it keeps its data): the writes time out.
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			_ = cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	for i := 10; len(want) < redisPendingMax/1000+2000; i++ {
		add(i)
		if i%1000 == 0 {
			time.Sleep(300 * time.Millisecond) // some writes start, stall and fail
		}
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	stopped = false
	s.Finish(journal.StateCompleted, time.Now())
	select {
	case <-s.(*redisStream).flushed():
	case <-time.After(30 * time.Second):
		t.Fatal("the backlog was not written within 30s of Redis answering again")
	}
	msgs := c.XRange(context.Background(), a.eventsKey(s.Info().ID), "-", "+").Val()
	if len(msgs) < 2 {
		t.Fatalf("Redis holds %d entries", len(msgs))
	}
	w := s.(*redisStream).w
	t.Logf("%d events dropped pending; Redis holds %d entries from %s", w.lost, len(msgs), msgs[0].ID)
	if w.lost == 0 {
		t.Fatal("nothing was dropped: the test did not test")
	}
	first, _, _ := parseEntryID(msgs[0].ID)
	for i, m := range msgs[:len(msgs)-1] {
		if n, _, _ := parseEntryID(m.ID); n != first+uint64(i) {
			t.Fatalf("a hole in the journal: entry %d is %s, want %d-0 (the journal starts at %d)", i, m.ID, first+uint64(i), first)
		}
	}
	if last, end, _ := parseEntryID(msgs[len(msgs)-1].ID); !end || last != uint64(len(want)) {
		t.Fatalf("the journal ends with %s, want the end after %d", msgs[len(msgs)-1].ID, len(want))
	}
	if _, err := rjFollowAll(t, rs, first-2, 0); !errors.Is(err, journal.ErrTrimmed) {
		t.Fatalf("a reader from before the dropped events: %v, want ErrTrimmed", err)
	}
	got, err := rjFollowAll(t, rs, first-1, 0)
	if err != nil {
		t.Fatal(err)
	}
	rjSame(t, got, want, first-1)
}

// goneStream is a journal whose reads fail after its first event, as a
// Redis journal's do once the keys of a stream whose producer died
// expire.
type goneStream struct {
	journalStream // the methods replay does not call
	reads         atomic.Int64
}

func (g *goneStream) Info() journal.Meta {
	return journal.Meta{ID: "rs_0000000000000000000000", Owner: "alice", Dialect: "chat"}
}
func (g *goneStream) Attach()                  {}
func (g *goneStream) Leave(now time.Time) bool { return false }
func (g *goneStream) Follow(ctx context.Context, after uint64, max int, dst []journal.Entry) ([]journal.Entry, bool, error) {
	switch {
	case ctx.Err() != nil:
		return dst, false, ctx.Err()
	case after == 0:
		return append(dst, journal.Entry{N: 1, Seq: -1, Data: []byte("data: {\"i\":1}\n\n")}), false, nil
	}
	g.reads.Add(1)
	return dst, false, errJournalGone
}

// TestReplayEndsWhenJournalUnreadable: a replay whose journal cannot be
// read any more ends with an in-band error in the client's dialect,
// instead of sending heartbeats for as long as the client stays.
func TestReplayEndsWhenJournalUnreadable(t *testing.T) {
	h := &Relay{resume: &resumer{heartbeat: 20 * time.Millisecond, retryMS: 1000}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := httptest.NewRequestWithContext(ctx, "GET", "/v1/relay/streams/rs_0000000000000000000000", nil)
	w := httptest.NewRecorder()
	req := newRequestState(endpoint{dialect: dialectChat})
	g := &goneStream{}
	done := make(chan struct{})
	go func() { defer close(done); h.replay(w, r, req, g, 0) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cancel()
		<-done
		t.Fatalf("the replay of an unreadable journal still runs after 5s (%d reads): %.300q", g.reads.Load(), w.Body.String())
	}
	body := w.Body.String()
	if !strings.Contains(body, `"i":1`) || !strings.Contains(body, "stream_unavailable") || strings.Contains(body, "relay-heartbeat") {
		t.Fatalf("the replay sent %q; want the event, then the error stream_unavailable", body)
	}
}

// TestRedisJournalProducerGone: a stream whose producing edge dies before
// its end stays "running" in Redis until its keys expire; its live key,
// which the producer renews, tells the other edges sooner. A reader on B
// reads what was journaled, then gets errProducerGone within the lease
// (not ttl later), and B no longer offers the stream to a retry, by
// Idempotency-Key or as an orphan, so the retry starts a new generation.
// While A runs, even quiet, B keeps following and offers it.
func TestRedisJournalProducerGone(t *testing.T) {
	sock, _ := rjRedis(t)
	const every, lease = 50 * time.Millisecond, 300 * time.Millisecond
	short := func(st *redisStore) *redisStore { st.liveEvery, st.liveLease = every, lease; return st }
	a := short(rjStore(t, sock, time.Minute, 0))
	b := short(rjStore(t, sock, time.Minute, 0))
	m := rjMeta("alice")
	m.IdemKey, m.BodyHash = "idem-gone", "hash-gone"
	s := a.Create(m, time.Now())
	if s == nil {
		t.Fatal("Create refused")
	}
	s.Attach()
	var want []journal.Entry
	for i := range 5 {
		block := rjBlock(i, 60)
		want = append(want, journal.Entry{N: s.Append(block, int64(i)), Seq: int64(i), Data: block})
	}
	if !s.Leave(time.Now()) {
		t.Fatal("the last reader leaving a running stream did not detach it")
	}
	rs := rjGet(t, b, "alice", m.ID)

	// A alive but quiet for several leases: B waits, and offers it.
	var got []journal.Entry
	for len(got) < 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 4*lease)
		es, ended, err := rs.Follow(ctx, uint64(len(got)), 10, nil)
		cancel()
		if err != nil || ended {
			t.Fatalf("B's read after %d: ended %v, %v", len(got), ended, err)
		}
		got = append(got, es...)
	}
	rjSame(t, got, want, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 4*lease)
	_, _, err := rs.Follow(ctx, 5, 10, nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("B's read past the end while A runs, quiet: %v, want to wait (deadline)", err)
	}
	if b.ByIdempotencyKey("alice", "idem-gone", time.Now()) == nil {
		t.Fatal("B does not offer a live stream to its Idempotency-Key")
	}
	if b.Orphan("alice", "hash-gone", time.Minute, time.Now()) == nil {
		t.Fatal("B does not offer a live orphan to a retry of its request")
	}

	// A dies: its store stops without ending the stream.
	_ = a.Close()
	died := time.Now()
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	_, _, err = rs.Follow(ctx, 5, 10, nil)
	cancel()
	if !errors.Is(err, errProducerGone) {
		t.Fatalf("B's read after A died: %v, want errProducerGone", err)
	}
	if took := time.Since(died); took > lease+redisFollowBlock+time.Second {
		t.Fatalf("B noticed A's death %s after it (lease %s, block %s)", took, lease, redisFollowBlock)
	}
	if st := b.ByIdempotencyKey("alice", "idem-gone", time.Now()); st != nil {
		t.Fatal("B offers a stream whose producer is gone to its Idempotency-Key")
	}
	if st := b.Orphan("alice", "hash-gone", time.Minute, time.Now()); st != nil {
		t.Fatal("B offers a stream whose producer is gone to a retry of its request")
	}
	if st := b.Get("alice", m.ID, time.Now()); st == nil {
		t.Fatal("B no longer finds the stream by id: its journal is still there to replay")
	}
}

// The live key's timing, for the external tests of the fleet.
const (
	RedisLiveLease   = redisLiveLease
	RedisLiveEvery   = redisLiveEvery
	RedisFollowBlock = redisFollowBlock
)
