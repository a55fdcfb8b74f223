package llmrelay_test

// Resumable streams across a fleet (state redis, resume_redis.go), with
// real processes: two relay instances, each this test binary started as
// a Caddy (startRelayProc), on one redis-server (unix socket); the
// upstream is a fake Chat provider in the test process that streams
// numbered chunks at a steady pace, so every generation is the same text.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	llmrelay "github.com/llmrelay/caddy-llm-relay"
)

// rfClient has no overall timeout: a stream's bound is its context's.
var rfClient = &http.Client{}

// rfRelay is the llm_relay block of both instances.
func rfRelay(upstream, sock, resume string) string {
	return `llm_relay {
		key sk-rf-a a
		key sk-rf-b b
		upstream up ` + upstream + ` {
			api chat
		}
		model m {
			to up
		}
		state redis unix:` + sock + ` {
			sync_interval 250ms
		}
		resume {
			` + resume + `
		}
	}`
}

// rfDo sends a request and returns its response; body "" sends none.
func rfDo(t testing.TB, method, url, body string, header ...string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := rfClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp
}

// rfStream reads an SSE response in the background: its data blocks as
// they come, and when.
type rfStream struct {
	resp  *http.Response
	start time.Time // when the request was sent
	done  chan struct{}

	mu    sync.Mutex
	all   []rsBlock
	at    []time.Time
	tail  string // the last bytes read, for messages
	err   error
	ended time.Time
}

func rfOpen(t testing.TB, resp *http.Response, start time.Time) *rfStream {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("%s %s: %d %s", resp.Request.Method, resp.Request.URL, resp.StatusCode, b)
	}
	s := &rfStream{resp: resp, start: start, done: make(chan struct{})}
	t.Cleanup(func() { resp.Body.Close(); <-s.done })
	go func() {
		defer close(s.done)
		br := bufio.NewReader(resp.Body)
		var cur strings.Builder
		for {
			line, err := br.ReadString('\n')
			cur.WriteString(line)
			if line == "\n" || err != nil {
				bs := rsBlocks(cur.String())
				now := time.Now()
				s.mu.Lock()
				for _, b := range bs {
					s.all = append(s.all, b)
					s.at = append(s.at, now)
				}
				if c := cur.String(); c != "" {
					s.tail = c
				}
				if err != nil {
					if err != io.EOF {
						s.err = err
					}
					s.ended = now
				}
				s.mu.Unlock()
				cur.Reset()
			}
			if err != nil {
				return
			}
		}
	}()
	return s
}

// waitN waits until n data blocks came, and returns them.
func (s *rfStream) waitN(t testing.TB, n int, bound time.Duration) []rsBlock {
	t.Helper()
	waitFor(t, bound, fmt.Sprintf("%d events of %s", n, s.resp.Request.URL), func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.all) >= n || !s.ended.IsZero()
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.all) < n {
		t.Fatalf("%s ended after %d events (%v): %q", s.resp.Request.URL, len(s.all), s.err, s.tail)
	}
	return slices.Clone(s.all)
}

// wait waits for the end of the stream and returns its blocks.
func (s *rfStream) wait(t testing.TB, bound time.Duration) []rsBlock {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(bound):
		s.mu.Lock()
		n := len(s.all)
		s.mu.Unlock()
		t.Fatalf("%s did not end within %s (%d events so far)", s.resp.Request.URL, bound, n)
	}
	if s.err != nil {
		t.Fatalf("reading %s: %v", s.resp.Request.URL, s.err)
	}
	return s.all
}

// rfSeq is the event number of a relay event id ("rs_….n").
func rfSeq(t testing.TB, id string) int {
	t.Helper()
	_, n, ok := strings.Cut(id, ".")
	v, err := strconv.Atoi(n)
	if !ok || err != nil {
		t.Fatalf("not a relay event id: %q", id)
	}
	return v
}

// rfSame fails unless got is want, event for event: the same ids (so no
// gap and no duplicate) and the same data.
func rfSame(t testing.TB, what string, got, want []rsBlock) {
	t.Helper()
	for i := 0; i < len(got) && i < len(want); i++ {
		if got[i].id != want[i].id || got[i].data != want[i].data {
			t.Fatalf("%s: event %d is %s %s, want %s %s", what, i, got[i].id, got[i].data, want[i].id, want[i].data)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
}

// rfConsecutive fails unless the blocks' ids count up by one from first.
func rfConsecutive(t testing.TB, what string, bs []rsBlock, first int) {
	t.Helper()
	for i, b := range bs {
		if b.id == "" { // an in-band error event carries no id
			continue
		}
		if n := rfSeq(t, b.id); n != first+i {
			t.Fatalf("%s: event %d has id %s, want number %d (a gap or a duplicate)", what, i, b.id, first+i)
		}
	}
}

// TestResumeAcrossEdges: with `state redis` a stream produced on edge A
// is resumed on edge B: (a) a Chat stream at its stream URL with
// Last-Event-ID while A still writes it, B following live to the end;
// (d) meanwhile another key on B finds nothing, in its dialect, and
// cannot cancel it; (c) a Responses stream with starting_after, live; a
// retry with the same Idempotency-Key sent to B re-attaches to A's
// stream (one generation); then A is killed (SIGKILL): a stream it finished is still served whole
// by B, and (b) one it was producing is replayed by B as far as it was
// journaled and, once A's live key expires (redisLiveLease, no longer
// renewed by A; its journal is kept for ttl), ends with an in-band
// stream_lost error; a retry of it with its Idempotency-Key then starts a
// new generation on B instead of re-attaching to one that cannot end.
func TestResumeAcrossEdges(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	startRedis(t, sock)
	rc := redis.NewClient(&redis.Options{Network: "unix", Addr: sock})
	defer rc.Close()
	// 60 chunks, 50 ms apart: 3 s a stream.
	up := rsStreamUpstream(t, 60, 50*time.Millisecond, nil)
	const ttl = 30 * time.Second
	block := rfRelay(up.v1(), sock, "ttl 30s\n\t\t\tdetach 30s\n\t\t\tcoalesce off")
	a := startRelayProc(t, filepath.Join(dir, "a"), block)
	b := startRelayProc(t, filepath.Join(dir, "b"), block)
	authA := []string{"Authorization", "Bearer sk-rf-a"}
	authB := []string{"Authorization", "Bearer sk-rf-b"}
	const chatBody = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`

	// (a) Chat, resumed on B while A writes.
	respA := rfDo(t, "POST", a.base+"/v1/chat/completions", chatBody, authA...)
	path, id := respA.Header.Get("X-Relay-Stream"), respA.Header.Get("X-Relay-Stream-Id")
	if !strings.HasPrefix(path, "/v1/relay/streams/rs_") || !strings.HasSuffix(path, id) {
		t.Fatalf("stream headers: X-Relay-Stream %q, X-Relay-Stream-Id %q", path, id)
	}
	sA := rfOpen(t, respA, time.Now())
	head := sA.waitN(t, 5, 10*time.Second)
	sB := rfOpen(t, rfDo(t, "GET", b.base+path, "", append(authA, "Last-Event-ID", head[4].id)...), time.Now())
	sB.waitN(t, 1, 5*time.Second)

	// (d) Another key, on B, while the stream runs: 404 in the dialect of
	// its headers, the same as an unknown id's, and nothing of the
	// stream; its cancel is a 404 too, and cancels nothing.
	unknown := "/v1/relay/streams/rs_" + strings.Repeat("0", 22)
	for _, d := range []struct {
		dialect string
		header  []string
	}{{"chat", nil}, {"messages", []string{"anthropic-version", "2023-06-01"}}} {
		for _, method := range []string{"GET", "DELETE"} {
			h := append(append(slices.Clone(authB), d.header...), "Last-Event-ID", head[4].id)
			other := rfDo(t, method, b.base+path, "", h...)
			ob := readAll(t, other)
			none := rfDo(t, method, b.base+unknown, "", h...)
			nb := readAll(t, none)
			if other.StatusCode != http.StatusNotFound || none.StatusCode != http.StatusNotFound {
				t.Fatalf("%s %s of another key's stream: %d %s; of an unknown one: %d %s", d.dialect, method, other.StatusCode, ob, none.StatusCode, nb)
			}
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Type string `json:"type"`
					Code string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(ob), &e); err != nil {
				t.Fatalf("%s %s: not JSON: %s", d.dialect, method, ob)
			}
			switch d.dialect {
			case "chat":
				if e.Type != "" || e.Error.Code != "stream_not_found" {
					t.Fatalf("chat %s: not an OpenAI stream_not_found error: %s", method, ob)
				}
			case "messages":
				if e.Type != "error" || e.Error.Type == "" {
					t.Fatalf("messages %s: not an Anthropic error: %s", method, ob)
				}
			}
			if strings.ReplaceAll(ob, id, "ID") != strings.ReplaceAll(nb, "rs_"+strings.Repeat("0", 22), "ID") {
				t.Fatalf("%s %s: another key's stream is answered unlike an unknown one:\n%s\n%s", d.dialect, method, ob, nb)
			}
			if strings.Contains(ob, `w1 `) || strings.Contains(ob, `"a"`) {
				t.Fatalf("%s %s: the 404 says something of the stream: %s", d.dialect, method, ob)
			}
		}
	}

	whole := sA.wait(t, 15*time.Second)
	fromB := sB.wait(t, 15*time.Second)
	if !strings.Contains(whole[len(whole)-2].data+whole[len(whole)-3].data, "w59 ") || whole[len(whole)-1].data != "[DONE]" || fromB[len(fromB)-1].data != "[DONE]" {
		t.Fatalf("A's stream (%d events, last %q) or B's (last %q) did not complete: was it cancelled?", len(whole), whole[len(whole)-1].data, fromB[len(fromB)-1].data)
	}
	rfConsecutive(t, "A's stream", whole, 1)
	rfSame(t, "B's resume after "+head[4].id, fromB, whole[5:])
	// Live: B sent its first event before A's stream ended, and went on
	// for as long as A wrote.
	if !sB.at[0].Before(sA.ended) || sB.at[len(sB.at)-1].Sub(sB.at[0]) < time.Second {
		t.Fatalf("B did not follow live: its first event %s before A's end, its events spread over %s",
			sA.ended.Sub(sB.at[0]), sB.at[len(sB.at)-1].Sub(sB.at[0]))
	}
	t.Logf("(a) resumed on B after event 5: first event %s after the request; %d events live",
		sB.at[0].Sub(sB.start).Round(time.Millisecond), len(fromB))

	// (c) Responses, GET ?stream=true&starting_after on B, live.
	const respBody = `{"model":"m","stream":true,"input":"hello"}`
	rA := rfOpen(t, rfDo(t, "POST", a.base+"/v1/responses", respBody, authA...), time.Now())
	rhead := rA.waitN(t, 6, 10*time.Second)
	var created struct {
		Response struct{ ID string } `json:"response"`
	}
	if err := json.Unmarshal([]byte(rhead[0].data), &created); err != nil || !strings.HasPrefix(created.Response.ID, "resp_") {
		t.Fatalf("no response id in %s", rhead[0].data)
	}
	var cur struct {
		Seq int `json:"sequence_number"`
	}
	if err := json.Unmarshal([]byte(rhead[5].data), &cur); err != nil {
		t.Fatal(err)
	}
	rB := rfOpen(t, rfDo(t, "GET", b.base+"/v1/responses/"+created.Response.ID+"?stream=true&starting_after="+strconv.Itoa(cur.Seq), "", authA...), time.Now())
	rwhole := rA.wait(t, 15*time.Second)
	rfromB := rB.wait(t, 15*time.Second)
	rfSame(t, "B's Responses resume after sequence_number "+strconv.Itoa(cur.Seq), rfromB, rwhole[6:])
	if !rB.at[0].Before(rA.ended) || !strings.Contains(rwhole[len(rwhole)-1].data, `"response.completed"`) {
		t.Fatalf("the Responses resume was not live (first event %s before A's end) or A's stream did not complete: %s",
			rA.ended.Sub(rB.at[0]), rwhole[len(rwhole)-1].data)
	}
	// Another key on B reads nothing of it.
	if o := rfDo(t, "GET", b.base+"/v1/responses/"+created.Response.ID+"?stream=true", "", authB...); o.StatusCode == http.StatusOK {
		t.Fatalf("another key streamed the response on B: %s", readAll(t, o))
	} else if ob := readAll(t, o); strings.Contains(ob, "w1 ") {
		t.Fatalf("another key's answer holds the response's text: %s", ob)
	}

	// A retry with the same Idempotency-Key that reaches B re-attaches to
	// the stream A produces: replayed from its first event, then live,
	// and generated once.
	before := len(up.requests())
	idem := append(slices.Clone(authA), "Idempotency-Key", "rf-idem-1")
	iA := rfOpen(t, rfDo(t, "POST", a.base+"/v1/chat/completions", chatBody, idem...), time.Now())
	iA.waitN(t, 5, 10*time.Second)
	iB := rfOpen(t, rfDo(t, "POST", b.base+"/v1/chat/completions", chatBody, idem...), time.Now())
	iwhole, ifromB := iA.wait(t, 15*time.Second), iB.wait(t, 15*time.Second)
	rfSame(t, "the retry re-attached on B", ifromB, iwhole)
	if n := len(up.requests()) - before; n != 1 || !iB.at[0].Before(iA.ended) {
		t.Fatalf("the retry on B: the upstream got %d requests (want 1); its first event %s before A's end", n, iA.ended.Sub(iB.at[0]))
	}

	// (b) A produces a stream and dies (SIGKILL) in its middle.
	oidem := append(slices.Clone(authA), "Idempotency-Key", "rf-idem-orphan")
	orphan := rfOpen(t, rfDo(t, "POST", a.base+"/v1/chat/completions", chatBody, oidem...), time.Now())
	ohead := orphan.waitN(t, 10, 10*time.Second)
	oid := orphan.resp.Header.Get("X-Relay-Stream-Id")
	opath := orphan.resp.Header.Get("X-Relay-Stream")
	events := "llm_relay:stream:{" + oid + "}:events"
	var seen []rsBlock
	waitFor(t, 5*time.Second, "the events A's client saw journaled", func() bool {
		orphan.mu.Lock()
		seen = slices.Clone(orphan.all)
		orphan.mu.Unlock()
		last, err := rc.XRevRangeN(context.Background(), events, "+", "-", 1).Result()
		if err != nil || len(last) == 0 {
			return false
		}
		n, _ := strconv.Atoi(strings.TrimSuffix(last[0].ID, "-0"))
		return n >= len(seen)
	})
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	killed := time.Now()
	if seen[len(seen)-1].data == "[DONE]" {
		t.Fatalf("A's stream ended before A was killed (%d events)", len(seen))
	}

	// A stream A finished is served whole by B after A is gone.
	again := rfOpen(t, rfDo(t, "GET", b.base+"/v1/responses/"+created.Response.ID+"?stream=true", "", authA...), time.Now())
	rfSame(t, "the finished Responses stream from B after A's death", again.wait(t, 10*time.Second), rwhole)

	// The orphan: B replays what was journaled, then waits (the stream
	// is still running as far as Redis knows) until A's live key
	// expires.
	ob := rfOpen(t, rfDo(t, "GET", b.base+opath, "", append(authA, "Last-Event-ID", ohead[2].id)...), time.Now())
	got := ob.wait(t, llmrelay.RedisLiveLease+llmrelay.RedisFollowBlock+5*time.Second)
	endedAfter := ob.ended.Sub(killed)
	if len(got) < len(seen)-3+1 {
		t.Fatalf("B replayed %d events of the orphan; A's client had seen %d (from event 4 on: %d)", len(got), len(seen), len(seen)-3)
	}
	last := got[len(got)-1]
	replayed := got[:len(got)-1]
	rfConsecutive(t, "the orphan's replay", replayed, 4)
	rfSame(t, "the orphan's replay, as far as A's client read", replayed[:len(seen)-3], seen[3:])
	var e apiErr
	if last.id != "" || json.Unmarshal([]byte(last.data), &e) != nil || e.Error.Code != "stream_lost" {
		t.Fatalf("the orphan's replay ended with %q (id %q), want the in-band error stream_lost", last.data, last.id)
	}
	if n, _ := rc.Exists(context.Background(), events, "llm_relay:stream:{"+oid+"}:meta").Result(); n != 2 {
		t.Fatalf("the orphan's journal is gone (%d of its 2 keys left) %s after A's death; ttl is %s", n, endedAfter, ttl)
	}
	// A's last renewal was at most llmrelay.RedisLiveEvery before the kill; B
	// looks at the live key after each empty blocking read.
	if endedAfter < llmrelay.RedisLiveLease-llmrelay.RedisLiveEvery-time.Second || endedAfter > llmrelay.RedisLiveLease+llmrelay.RedisFollowBlock+3*time.Second {
		t.Fatalf("the orphan's replay ended %s after A's death; A's live key goes %s after its last renewal", endedAfter, llmrelay.RedisLiveLease)
	}
	t.Logf("(b) orphan: %d events journaled of the %d A's client saw; B replayed %d from event 4 and ended with stream_lost %s after A's death",
		len(replayed)+3, len(seen), len(replayed), endedAfter.Round(time.Millisecond))

	// The orphan's retry with its Idempotency-Key, on B: a new generation.
	before = len(up.requests())
	retry := rfOpen(t, rfDo(t, "POST", b.base+"/v1/chat/completions", chatBody, oidem...), time.Now())
	rgot := retry.wait(t, 15*time.Second)
	if rid := retry.resp.Header.Get("X-Relay-Stream-Id"); rid == oid || rid == "" {
		t.Fatalf("the orphan's retry on B answered from stream %q (the orphan is %q)", rid, oid)
	}
	if n := len(up.requests()) - before; n != 1 || rgot[len(rgot)-1].data != "[DONE]" {
		t.Fatalf("the orphan's retry on B: the upstream got %d requests (want 1), its last event %q", n, rgot[len(rgot)-1].data)
	}
}

// BenchmarkResumeAcrossEdges: the time from a resume request on edge B
// to its first replayed event, for streams produced on edge A (state
// redis on one redis-server, unix socket). Each op starts a stream on A
// (40 chunks 10 ms apart), reads a random number k (2..31) of its events,
// drops the connection, and resumes on B (the stream goes on, detached,
// on A), then reads to the end and checks the events came once each, in
// order, to [DONE]. held: the resume is after a random event before the
// k-th, so the first event it gets is journaled already (the replay's
// own latency); live: after the k-th, so it often waits for the
// upstream's next chunk (up to 10 ms) and its write to Redis. Reported:
// p50-ms, p99-ms and max-ms of the time to the first replayed event.
// Run:
//
//	go test -run '^$' -bench ResumeAcrossEdges -benchtime 200x .
func BenchmarkResumeAcrossEdges(b *testing.B) {
	dir := b.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	startRedis(b, sock)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 40 {
			_, _ = io.WriteString(w, "data: "+chunk("w"+strconv.Itoa(i)+" ")+"\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer up.Close()
	block := rfRelay(up.URL+"/v1", sock, "detach 30s\n\t\t\tcoalesce off")
	a := startRelayProc(b, filepath.Join(dir, "a"), block)
	e := startRelayProc(b, filepath.Join(dir, "b"), block)
	auth := []string{"Authorization", "Bearer sk-rf-a"}
	const body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	for _, mode := range []string{"held", "live"} {
		b.Run(mode, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			rng := rand.New(rand.NewPCG(31, 31))
			for range b.N {
				resp := rfDo(b, "POST", a.base+"/v1/chat/completions", body, auth...)
				path := resp.Header.Get("X-Relay-Stream")
				k := 2 + rng.IntN(30)
				head := rsReadEvents(b, resp, k)
				j := k
				if mode == "held" {
					j = 1 + rng.IntN(k-1)
				}
				start := time.Now()
				s := rfOpen(b, rfDo(b, "GET", e.base+path, "", append(auth, "Last-Event-ID", head[j-1].id)...), start)
				rest := s.wait(b, 10*time.Second)
				if len(rest) == 0 || rest[len(rest)-1].data != "[DONE]" {
					b.Fatalf("the resume on B did not end with [DONE]: %q", s.tail)
				}
				rfConsecutive(b, "the resume on B", rest[:len(rest)-1], rfSeq(b, head[j-1].id)+1)
				rfSame(b, "the resume on B, over what A's client read", rest[:k-j], head[j:])
				lat = append(lat, s.at[0].Sub(start))
			}
			slices.Sort(lat)
			q := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
			}
			b.ReportMetric(q(0.5), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(float64(lat[len(lat)-1])/float64(time.Millisecond), "max-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// TestResumeRedisAcrossReload: a stream produced under one config goes on
// being journaled in Redis through a reload with the same settings (the
// store is kept) and through one that changes them (the old store takes
// no new streams but writes the ones it produces until they end): its
// journal ends in Redis, and the new config resumes it to [DONE].
func TestResumeRedisAcrossReload(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "redis.sock")
	startRedis(t, sock)
	rc := redis.NewClient(&redis.Options{Network: "unix", Addr: sock})
	defer rc.Close()
	up := rsStreamUpstream(t, 40, 50*time.Millisecond, nil) // 2 s
	auth := []string{"Authorization", "Bearer sk-rf-a"}
	startRelay(t, rfRelay(up.v1(), sock, "ttl 1m"))
	s := rfOpen(t, rfDo(t, "POST", relayBase+"/v1/chat/completions",
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, auth...), time.Now())
	head := s.waitN(t, 5, 10*time.Second)
	id, path := s.resp.Header.Get("X-Relay-Stream-Id"), s.resp.Header.Get("X-Relay-Stream")
	startRelay(t, rfRelay(up.v1(), sock, "ttl 1m")) // the same settings
	time.Sleep(300 * time.Millisecond)
	startRelay(t, rfRelay(up.v1(), sock, "ttl 2m")) // other settings: another store
	events := "llm_relay:stream:{" + id + "}:events"
	waitFor(t, 10*time.Second, "the stream's end in Redis", func() bool {
		last, err := rc.XRevRangeN(context.Background(), events, "+", "-", 1).Result()
		return err == nil && len(last) == 1 && strings.HasSuffix(last[0].ID, "-1") && last[0].Values["e"] == "completed"
	})
	r := rfOpen(t, rfDo(t, "GET", relayBase+path, "", append(auth, "Last-Event-ID", head[4].id)...), time.Now())
	rest := r.wait(t, 10*time.Second)
	if len(rest) == 0 || rest[len(rest)-1].data != "[DONE]" {
		t.Fatalf("the resume after the reloads did not end with [DONE]: %q", r.tail)
	}
	rfConsecutive(t, "the resume after the reloads", rest, 6)
	if !strings.Contains(rest[len(rest)-2].data+rest[len(rest)-3].data, "w39 ") {
		t.Fatalf("the resume after the reloads lacks the last chunk: %q", rest[len(rest)-3:])
	}
}
