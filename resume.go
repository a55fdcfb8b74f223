package llmrelay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/dustin/go-humanize"
	"github.com/redis/go-redis/v9"

	"github.com/llmrelay/caddy-llm-relay/internal/journal"
)

// Resumable streams (issue 31; docs/resume.md). With `resume { }`, a
// committed stream of a conversation endpoint is journaled as its client
// is sent it (journalWriter, between the relay and the client's
// connection, after pacing): each event gets an SSE id naming the stream
// and its position, so whoever holds the id can ask for what followed.
// The generation runs on a context of its own: when the client goes, it
// goes on (for `detach`), so a client that comes back finds it done. A
// client comes back three ways:
//
//   - by cursor: GET the stream URL (X-Relay-Stream) with Last-Event-ID,
//     or, for the Responses API, GET /v1/responses/{id}?stream=true&
//     starting_after=N (resume_serve.go);
//   - by retrying: the same request again re-attaches to the stream it
//     started (an Idempotency-Key, or the same body within `coalesce`
//     when the first client left before the end) and is replayed from
//     the start; a retry that carries Last-Event-ID (EventSource's own
//     reconnect) is replayed from after it;
//   - in the background: a Responses request with background: true is
//     answered at once and generated detached; the client polls or
//     streams it by id, and may cancel it.
//
// Only the key name that started a stream finds it; to any other it does
// not exist.

const (
	defaultResumeTTL        = 5 * time.Minute
	defaultResumeMaxBytes   = 8 << 20
	defaultResumeMaxStreams = 1000
	defaultResumeCoalesce   = 2 * time.Minute
	defaultResumeDetach     = 2 * time.Minute
	defaultResumeRetry      = time.Second
)

// resumer is the relay's resumable streams: the store and the settings
// resolved at Provision.
type resumer struct {
	store     streamStore
	ttl       time.Duration
	maxBytes  int
	coalesce  time.Duration // 0: body matching off
	detach    time.Duration // 0: cancel when the client goes
	retryMS   int
	heartbeat time.Duration // for readers waiting on a quiet stream
	counts    resumeCounts
}

// resumeCounts are the figures for the status page (each also counted in
// llm_relay_resume_total).
type resumeCounts struct {
	journaled, resumed, reattached, background, detached, cancelled, expired atomic.Int64
}

// count counts one thing resumable streams did.
func (c *resumeCounts) count(kind string) {
	metricResume.WithLabelValues(kind).Inc()
	switch kind {
	case "journaled":
		c.journaled.Add(1)
	case "resumed":
		c.resumed.Add(1)
	case "reattached":
		c.reattached.Add(1)
	case "background":
		c.background.Add(1)
	case "detached":
		c.detached.Add(1)
	case "cancelled":
		c.cancelled.Add(1)
	case "detach_expired":
		c.expired.Add(1)
	}
}

// localStores keeps in-memory journals across config reloads: a reload
// must not lose the streams clients are about to resume.
var localStores = caddy.NewUsagePool()

type localStoreHolder struct{ s localStore }

func (localStoreHolder) Destruct() error { return nil }

// provisionResume resolves the resume block (checked by checkResume).
func (h *Relay) provisionResume() {
	c := h.Resume
	if c == nil {
		return
	}
	rs := &resumer{
		ttl:       durationOr(c.TTL, defaultResumeTTL),
		maxBytes:  int(cmpOr(c.MaxBytes, defaultResumeMaxBytes)),
		coalesce:  offOr(c.Coalesce, defaultResumeCoalesce),
		detach:    offOr(c.Detach, defaultResumeDetach),
		retryMS:   int(durationOr(c.Retry, defaultResumeRetry) / time.Millisecond),
		heartbeat: defaultHeartbeat,
	}
	maxStreams := c.MaxStreams
	if maxStreams == 0 {
		maxStreams = defaultResumeMaxStreams
	}
	rs.store = h.newStreamStore(rs, maxStreams)
	h.resume = rs
}

// newStreamStore picks where journals live: Redis with state redis, else
// this instance's memory; either store is kept across reloads while the
// settings hold.
func (h *Relay) newStreamStore(rs *resumer, maxStreams int) streamStore {
	if f := h.fleet; f != nil {
		key := "resume-redis|" + h.fleetKey + "|" + rs.ttl.String() + "|" + strconv.Itoa(rs.maxBytes)
		v, _, _ := redisStores.LoadOrNew(key, func() (caddy.Destructor, error) {
			client := f.dial(redisJournalPool)
			return redisStoreHolder{newRedisStore(client, f.prefix, rs.ttl, rs.maxBytes, h.logger), client}, nil
		})
		h.resumePool, h.resumeKey = redisStores, key
		return v.(redisStoreHolder).st
	}
	key := "resume|" + rs.ttl.String() + "|" + strconv.Itoa(maxStreams) + "|" + strconv.Itoa(rs.maxBytes)
	v, _, _ := localStores.LoadOrNew(key, func() (caddy.Destructor, error) {
		return localStoreHolder{localStore{journal.NewStore(rs.ttl, maxStreams, rs.maxBytes)}}, nil
	})
	h.resumePool, h.resumeKey = localStores, key
	return v.(localStoreHolder).s
}

// redisStores keeps the Redis journal stores across config reloads, by
// Redis, prefix, ttl and max_bytes. The journals are in Redis, but the
// streams this process produces (their writers, the cancel subscription)
// are the store's, and a stream outlives the config that started it
// (Caddy cleans up an old config while its streams are still served; a
// detached or background generation goes on after its client).
var redisStores = caddy.NewUsagePool()

// redisJournalPool is the journal client's connections per node: a
// reader following a stream holds one for the length of its blocking
// read (redisFollowBlock), so it is far larger than the fleet's 2; idle
// connections are not kept open beyond go-redis's defaults.
const redisJournalPool = 256

// redisDrainMax bounds how long a store no config uses any more keeps
// writing the streams it still produces before it closes.
const redisDrainMax = 10 * time.Minute

type redisStoreHolder struct {
	st     *redisStore
	client redis.UniversalClient
}

// Destruct: the last config naming the store let go of it (its settings
// changed, or the server stops). It refuses new streams at once; the
// streams it still produces are written until they end, for at most
// redisDrainMax, and then the store and its client close. (At a process
// exit a stream still running stays so in Redis until its keys expire,
// ttl after its last write.)
func (h redisStoreHolder) Destruct() error {
	h.st.refuse()
	go func() {
		h.st.drain(redisDrainMax)
		_ = h.st.Close()
		_ = h.client.Close()
	}()
	return nil
}

func cmpOr(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

// offOr reads a duration where -1 (the Caddyfile's "off") means 0.
func offOr(d caddy.Duration, def time.Duration) time.Duration {
	switch {
	case d < 0:
		return 0
	case d == 0:
		return def
	}
	return time.Duration(d)
}

// check validates the block (the Caddyfile and JSON alike).
func (c *Resume) check() error {
	for _, d := range []struct {
		name string
		v    caddy.Duration
		off  bool
	}{{"ttl", c.TTL, false}, {"retry", c.Retry, false}, {"coalesce", c.Coalesce, true}, {"detach", c.Detach, true}} {
		if d.v < 0 && !(d.off && d.v == -1) {
			if d.off {
				return fmt.Errorf("resume: %s %v is negative; give a duration such as 2m, or off (-1 in JSON)", d.name, time.Duration(d.v))
			}
			return fmt.Errorf("resume: %s %v is negative; give a duration such as 5m, or leave it out for the default", d.name, time.Duration(d.v))
		}
	}
	if c.MaxBytes < 0 {
		return fmt.Errorf("resume: max_bytes %d is negative; give a size such as 8MiB (JSON: bytes)", c.MaxBytes)
	}
	if c.MaxStreams < 0 {
		return fmt.Errorf("resume: max_streams %d is negative; give a whole number such as 1000", c.MaxStreams)
	}
	return nil
}

// requestHash names a request for re-attaching retries: its method, path
// and body (canonicalBody: the order of an object's keys does not count).
func requestHash(r *http.Request, raw []byte) string {
	s := sha256.New()
	s.Write([]byte(r.Method))
	s.Write([]byte{0})
	s.Write([]byte(r.URL.EscapedPath()))
	s.Write([]byte{0})
	if geminiCallOf(r.Context()) != nil {
		// A Gemini client's request is served as the Chat request it
		// stands for: its stream is not a Chat client's to join.
		s.Write([]byte(journalDialectGemini))
		s.Write([]byte{0})
	}
	s.Write(canonicalBody(raw))
	return hex.EncodeToString(s.Sum(nil)[:16])
}

// streamBase is what comes before /v1/ in the request's path, so the
// stream URL works under a `handle /prefix/*` block too.
func streamBase(r *http.Request) string {
	p := r.URL.EscapedPath()
	if i := strings.Index(p, "/v1/"); i >= 0 {
		return p[:i]
	}
	return ""
}

// streamURL is where a stream is resumed.
func streamURL(r *http.Request, id string) string {
	return streamBase(r) + "/v1/relay/streams/" + id
}

// reattach finds the stream a request should re-attach to instead of
// starting a generation, and the position to replay after: its
// Idempotency-Key's, its Last-Event-ID's (the same request again), or an
// orphan of the same request within the coalesce window. conflict is an
// Idempotency-Key used before with another request.
func (rs *resumer) reattach(r *http.Request, key, hash string, now time.Time) (st journalStream, after uint64, conflict bool) {
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		if st = rs.store.ByIdempotencyKey(key, k, now); st != nil {
			if st.Info().BodyHash != hash {
				return nil, 0, true
			}
			return st, lastEventAfter(r, st), false
		}
		return nil, 0, false
	}
	if id, n, ok := journal.ParseID(r.Header.Get("Last-Event-ID")); ok {
		if st = rs.store.Get(key, id, now); st != nil && st.Info().BodyHash == hash {
			return st, n, false
		}
	}
	if rs.coalesce > 0 {
		if st = rs.store.Orphan(key, hash, rs.coalesce, now); st != nil {
			return st, 0, false
		}
	}
	return nil, 0, false
}

// journalIDBase is the base of the ids a journaled Responses stream's
// translation mints (resp_<base>, its items'): its journal's random part,
// so that the response id finds this stream and no other. A translated
// response's ids used to come from the upstream's chunk id, which some
// providers repeat for every answer (or leave out): two streams of one
// key then had one response id, and a starting_after resume of the first
// was answered from the second. "" for any other request (the upstream's
// ids, as before).
func journalIDBase(req *requestState) string {
	if req.resumeStream == "" || req.ep.dialect != dialectResponses {
		return ""
	}
	return strings.TrimPrefix(req.resumeStream, "rs_")
}

// lastEventAfter is the position a Last-Event-ID of st names (0: none).
func lastEventAfter(r *http.Request, st journalStream) uint64 {
	if id, n, ok := journal.ParseID(r.Header.Get("Last-Event-ID")); ok && id == st.Info().ID {
		return n
	}
	return 0
}

// journalWriter is the client side of a journaled stream: everything the
// relay writes to the client passes here. An SSE answer is cut into
// events, each journaled and sent with its id; anything else (an error
// answered before the commit point) passes untouched and the journal
// ends failed. Once the client is gone its writes are dropped, not
// failed, so the generation goes on.
type journalWriter struct {
	http.ResponseWriter
	rs      *resumer
	st      journalStream
	id      string
	dialect dialect
	url     string

	sse, headerDone bool
	sawID           bool // a Responses stream's response.created was indexed
	gone            atomic.Bool
	split           journal.Splitter
	out             []byte
	mu              sync.Mutex // the pacer's writes and early commit's heartbeats
}

func (jw *journalWriter) Unwrap() http.ResponseWriter { return jw.ResponseWriter }

func (jw *journalWriter) WriteHeader(code int) {
	jw.mu.Lock()
	defer jw.mu.Unlock()
	jw.writeHeader(code)
}

func (jw *journalWriter) writeHeader(code int) {
	if jw.headerDone {
		return
	}
	jw.headerDone = true
	hdr := jw.ResponseWriter.Header()
	if code == http.StatusOK && strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
		jw.sse = true
		hdr.Set("X-Relay-Stream-Id", jw.id)
		hdr.Set("X-Relay-Stream", jw.url)
		hdr.Del("Content-Length")
	}
	if !jw.gone.Load() {
		jw.ResponseWriter.WriteHeader(code)
	}
}

func (jw *journalWriter) Write(b []byte) (int, error) {
	jw.mu.Lock()
	defer jw.mu.Unlock()
	if !jw.headerDone {
		jw.writeHeader(http.StatusOK)
	}
	if !jw.sse {
		jw.toClient(b)
		return len(b), nil
	}
	jw.split.Write(b, jw.event)
	return len(b), nil
}

// event journals one block and sends it.
func (jw *journalWriter) event(b journal.Block) {
	if b.Comment {
		jw.toClient(journal.CommentLines(b.Raw))
		return
	}
	seq := int64(-1)
	if jw.dialect == dialectResponses {
		seq = responsesSeq(b.Raw)
		if !jw.sawID {
			if id := createdResponseID(b.Raw); id != "" {
				jw.sawID = true
				jw.rs.store.SetResponseID(jw.st, id)
			}
		}
	}
	n := jw.st.Append(b.Raw, seq)
	jw.out = journal.Render(jw.out[:0], jw.id, n, jw.rs.retryMS, b.Raw)
	jw.toClient(jw.out)
}

func (jw *journalWriter) toClient(b []byte) {
	if len(b) == 0 || jw.gone.Load() {
		return
	}
	if _, err := jw.ResponseWriter.Write(b); err != nil {
		jw.gone.Store(true)
	}
}

// FlushError flushes to the client while it is there (the pacer's
// eventWriter flushes through http.ResponseController).
func (jw *journalWriter) FlushError() error {
	if jw.gone.Load() {
		return nil
	}
	if err := http.NewResponseController(jw.ResponseWriter).Flush(); err != nil {
		jw.gone.Store(true)
	}
	return nil
}

func (jw *journalWriter) Flush() { _ = jw.FlushError() }

// responsesSeq reads a Responses event's sequence_number (-1: none).
func responsesSeq(block []byte) int64 {
	const field = `"sequence_number":`
	i := bytes.Index(block, []byte(field))
	if i < 0 {
		return -1
	}
	j := i + len(field)
	for j < len(block) && block[j] == ' ' {
		j++
	}
	k := j
	for k < len(block) && '0' <= block[k] && block[k] <= '9' {
		k++
	}
	n, err := strconv.ParseInt(string(block[j:k]), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// createdResponseID is the response id a response.created event carries.
func createdResponseID(block []byte) string {
	if !bytes.Contains(block, []byte(`"response.created"`)) {
		return ""
	}
	var ev struct {
		Type     string `json:"type"`
		Response struct {
			ID string `json:"id"`
		} `json:"response"`
	}
	if json.Unmarshal(eventData(block), &ev) != nil || ev.Type != "response.created" {
		return ""
	}
	return ev.Response.ID
}

// eventData is the data of one SSE block (its data lines joined).
func eventData(block []byte) []byte {
	var out []byte
	for len(block) > 0 {
		i := bytes.IndexByte(block, '\n')
		line := block
		if i >= 0 {
			line, block = block[:i], block[i+1:]
		} else {
			block = nil
		}
		line = bytes.TrimRight(line, "\r")
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if len(out) > 0 {
				out = append(out, '\n')
			}
			out = append(out, bytes.TrimPrefix(v, []byte(" "))...)
		}
	}
	return out
}

// journaled is one request's journaled stream, from its start to its end.
type journaled struct {
	rs     *resumer
	st     journalStream
	jw     *journalWriter
	cancel context.CancelFunc
	ctx    context.Context
	done   chan struct{}
	why    atomic.Value // string: why the generation was cancelled
	left   sync.Once    // the producing client's Leave
	client bool         // a client started it (a background generation has none)
	// detached: the client that started it went away before its end.
	detached atomic.Bool
}

// leave uncounts the client that started the stream, once.
func (j *journaled) leave() {
	j.left.Do(func() {
		if j.client && j.st.Leave(time.Now()) {
			j.rs.counts.count("detached")
		}
	})
}

// startJournal journals the stream a request is about to produce. It
// returns the writer and request the chain must use: the request's
// context no longer ends when the client goes (watch ends it, after
// detach). nil: the store had no room; the stream runs as without
// resume.
func (h *Relay) startJournal(w http.ResponseWriter, r *http.Request, req *requestState, m journal.Meta, st journalStream) (*journaled, http.ResponseWriter, *http.Request) {
	rs := h.resume
	existing := st
	if st == nil {
		now := time.Now()
		m.ID, m.Owner, m.Dialect, m.Created = journal.NewID(), req.key, req.ep.dialect.String(), now
		if geminiCallOf(r.Context()) != nil {
			m.Dialect = journalDialectGemini // its replays are translated (gemini.go)
		}
		if st = rs.store.Create(m, now); st == nil {
			return nil, w, r
		}
		rs.counts.count("journaled")
		st.Attach()
	} else {
		m = st.Info() // a background generation: no client of its own
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	j := &journaled{rs: rs, st: st, cancel: cancel, ctx: ctx, done: make(chan struct{}), client: !m.Background || existing == nil}
	j.jw = &journalWriter{ResponseWriter: w, rs: rs, st: st, id: m.ID, dialect: req.ep.dialect, url: streamURL(r, m.ID)}
	req.resumeStream = m.ID
	go j.watch(r.Context(), m.Background)
	return j, j.jw, r.WithContext(ctx)
}

// watch ends the generation: when the client went away and no reader has
// come back within detach, or when someone cancelled it.
func (j *journaled) watch(client context.Context, background bool) {
	select {
	case <-client.Done():
		j.jw.gone.Store(true)
		j.detached.Store(true)
		j.leave()
	case <-j.st.Cancelled():
		j.stop(whyCancelled)
		return
	case <-j.done:
		return
	}
	if j.rs.detach == 0 && !background {
		j.stop("its client went away (resume detach off)")
		return
	}
	tick := time.NewTicker(min(time.Second, max(j.rs.detach/4, 10*time.Millisecond)))
	defer tick.Stop()
	var alone time.Time
	for {
		select {
		case <-j.done:
			return
		case <-j.st.Cancelled():
			j.stop(whyCancelled)
			return
		case now := <-tick.C:
			if j.st.Clients() > 0 || background {
				alone = time.Time{}
				continue
			}
			if alone.IsZero() {
				alone = now
			}
			if now.Sub(alone) >= j.rs.detach {
				j.rs.counts.count("detach_expired")
				j.stop("no client came back within resume detach " + j.rs.detach.String())
				return
			}
		}
	}
}

// whyCancelled is why a generation a client cancelled ended.
const whyCancelled = "cancelled by request"

func (j *journaled) stop(why string) {
	j.why.Store(why)
	j.cancel()
}

// finish ends the journal when the request's chain is done: completed,
// failed (the stream ended with an error, or was never a stream), or
// cancelled, which appends an in-band error so a reader knows.
func (j *journaled) finish(req *requestState) {
	close(j.done)
	jw := j.jw
	jw.mu.Lock()
	if rest := jw.split.Close(jw.event); len(rest) > 0 {
		jw.toClient(rest)
	}
	sse := jw.sse
	jw.mu.Unlock()
	state := journal.StateCompleted
	switch {
	case j.ctx.Err() != nil:
		state = journal.StateCancelled
		why, _ := j.why.Load().(string)
		if sse {
			e := &apiError{Status: http.StatusOK, Type: "server_error", Code: "stream_cancelled",
				Message: "The stream was cancelled: " + why + "."}
			_, _ = jw.Write(req.ep.errorEvent(e))
		}
		req.streamError = "stream_cancelled"
		if why == whyCancelled {
			j.rs.counts.count("cancelled")
		}
	case !sse || req.streamError != "":
		state = journal.StateFailed
	}
	j.st.Finish(state, time.Now())
	req.resumeDetached = j.detached.Load()
	j.leave()
	j.cancel()
}

// resumeStatus is the status view's line on resumable streams: the
// journals held and what the streams did since the relay started.
type resumeStatus struct {
	Journals   int    `json:"journals"`
	Running    int    `json:"running"`
	Bytes      int    `json:"bytes"`
	Size       string `json:"size"`
	Journaled  int64  `json:"journaled"`
	Resumed    int64  `json:"resumed"`
	Reattached int64  `json:"reattached"`
	Background int64  `json:"background"`
	Detached   int64  `json:"detached"`
	Cancelled  int64  `json:"cancelled"`
	Expired    int64  `json:"detach_expired"`
	Evicted    int    `json:"evicted"`
	Refused    int    `json:"unjournaled"`
}

func (h *Relay) resumeStatus(now time.Time) *resumeStatus {
	rs := h.resume
	if rs == nil {
		return nil
	}
	st := rs.store.Stats(now)
	c := &rs.counts
	return &resumeStatus{Journals: st.Streams, Running: st.Running, Bytes: st.Bytes, Size: humanize.IBytes(uint64(st.Bytes)),
		Journaled: c.journaled.Load(), Resumed: c.resumed.Load(), Reattached: c.reattached.Load(), Background: c.background.Load(),
		Detached: c.detached.Load(), Cancelled: c.cancelled.Load(), Expired: c.expired.Load(), Evicted: st.Evicted, Refused: st.Refused}
}
