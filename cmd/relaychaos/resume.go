package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/chaos"
)

// The resume cases (issue 31): clients of a relay with `resume { }` that
// disconnect at random points of their streams and come back, while the
// upstream breaks them as the continuation cases do (a drop, a stall
// past stream_idle_timeout, at random points, continued on the next
// target). The answer is paced (chaos.PacedSuffix), so a client leaves
// while it is generated, during a stall, or after its end.
//
// One logical request: a stream request with a nonce in its prompt (and
// an Idempotency-Key, every other time), read up to a random byte count
// (mid-event too) and dropped, 1 to 3 times, each time resumed one of
// the ways a real client resumes: GET the X-Relay-Stream URL with the
// Last-Event-ID it saw (EventSource; none when it saw no event), GET
// /v1/responses/{id}?stream=true&starting_after=<sequence_number>
// (Responses clients), or the same POST again with its Idempotency-Key
// and/or the Last-Event-ID (a retrying client). The last connection
// reads to the end. Then:
//
//   - every connection delivered the positions after its cursor, in
//     order, each equal to what an earlier one delivered there (no
//     duplicate, no gap, no second stream): chaos.ResumeLog;
//   - the events the client assembled are the whole stream, as a replay
//     of the ended journal from its first event gives it (what an
//     uninterrupted client got), id for id and byte for byte;
//   - read as its dialect's SDK reads it, the stream is well formed and
//     its text is exactly chaos.ContAnswer (every target writes it, so
//     this is what an uninterrupted client of the chain reads);
//   - the upstream saw one generation of it: one request without an
//     answer so far on the chain's first upstream (the rest of its
//     requests are continuations), however many times the client came
//     back.
//
// Every logical request draws from its own seeded generator; a failure
// names the seed (-seed), the worker and the iteration.

// resumeKey is the resume site's client key (a stream belongs to it).
const resumeKey = "sk-chaos-resume"

// resumeCase is a dialect's resume case: a model alias of the resume site.
type resumeCase struct {
	name, alias, path string
	dialect           chaos.Dialect
	chain             string
	about             string
}

func resumeCases() []resumeCase {
	const failover = "failover {\n\t\t\t\tafter_commit continue\n\t\t\t}"
	var out []resumeCase
	for _, d := range []struct {
		dialect chaos.Dialect
		path    string
	}{{chaos.DialectChat, "chat/completions"}, {chaos.DialectMessages, "messages"}, {chaos.DialectResponses, "responses"}} {
		name := "resume-" + string(d.dialect)
		to := func(up string, b chaos.Behaviour) string {
			return "to " + up + " " + string(b) + "@" + name + chaos.PacedSuffix
		}
		out = append(out, resumeCase{
			name: name, alias: "chaos-" + name, path: d.path, dialect: d.dialect,
			chain: lines(to("resa", chaos.ContDrop), to("contb", chaos.ContStall), to("contc", chaos.ContGood), failover),
			about: string(d.dialect) + " client of a relay with resume { }: disconnects at random points, resumes by stream URL" +
				map[bool]string{true: ", starting_after", false: ""}[d.dialect == chaos.DialectResponses] +
				" or the same request again, while the upstream drops and stalls at random points",
		})
	}
	return out
}

// resumeSite is the resume cases' relay: the chaos site's settings, the
// misbehaving upstream under three names (resa, the first target, is
// theirs alone: its fresh requests are the generations counted), and
// `resume { }`.
func resumeSite(p ports, gen int, rcs []resumeCase, common string) string {
	var models strings.Builder
	for _, c := range rcs {
		fmt.Fprintf(&models, "\t\tmodel %s {\n\t\t\t%s\n\t\t}\n", c.alias, c.chain)
	}
	return fmt.Sprintf(`
# resume: a relay with resume { } in front of the misbehaving upstream,
# for the resume cases
http://127.0.0.1:%[1]d {
	bind 127.0.0.1
	header X-Chaos-Gen %[2]d
	llm_relay {
		key %[3]s resume
		upstream resa http://127.0.0.1:%[4]d/r/v1 {
			api chat
		}
		upstream contb http://127.0.0.1:%[4]d/b/v1 {
			api chat
			continue_with prefill
		}
		upstream contc http://127.0.0.1:%[4]d/c/v1 {
			api chat
		}
%[5]s%[6]s		resume {
			detach 1m
		}
	}
}
`, p.resume, gen, resumeKey, p.bad, common, models.String())
}

// resumeRow is the tally of one resume case.
type resumeRow struct {
	n, ok, skipped int
	conns          map[string]int // connections by how they resumed
	problems       []string
	nProblems      int
}

// resumeResults is the outcome of the resume workers.
type resumeResults struct {
	mu   sync.Mutex
	rows map[string]*resumeRow
}

func (rr *resumeResults) add(c string, how []string, skipped bool, problem string) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rw := rr.rows[c]
	if rw == nil {
		rw = &resumeRow{conns: map[string]int{}}
		rr.rows[c] = rw
	}
	rw.n++
	for _, h := range how {
		rw.conns[h]++
	}
	switch {
	case problem != "":
		rw.nProblems++
		if len(rw.problems) < 5 {
			rw.problems = append(rw.problems, problem)
		}
	case skipped:
		rw.skipped++
	default:
		rw.ok++
	}
}

// resumer drives the resume cases.
type resumer struct {
	d      *driver
	up     *chaos.Upstream
	client *http.Client
	base   string // the resume site
	cases  []resumeCase
	// est: the bytes of a whole stream per case, for the disconnect
	// points (under mu)
	mu  sync.Mutex
	est map[string]int
}

// runResumeWorkers runs workers resume clients until end, each at most
// maxIter logical requests.
func (rz *resumer) run(workers int, end time.Time, maxIter int) *resumeResults {
	rr := &resumeResults{rows: map[string]*resumeRow{}}
	if len(rz.cases) == 0 || workers <= 0 {
		return rr
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for it := 0; it < maxIter && time.Now().Before(end); it++ {
				c := &rz.cases[(w+it)%len(rz.cases)]
				seed := rz.d.o.seed<<32 | uint64(w)<<20 | uint64(it)
				how, skipped, problem := rz.once(c, rand.New(rand.NewPCG(seed, 0x726573756d65)))
				if problem != "" {
					problem = fmt.Sprintf("-seed %d worker %d iteration %d (rng seed %d): %s", rz.d.o.seed, w, it, seed, problem)
				}
				rr.add(c.name, how, skipped, problem)
			}
		})
	}
	wg.Wait()
	return rr
}

// rconn is one connection's answer, read.
type rconn struct {
	status int
	header http.Header
	events []chaos.REvent
	ended  bool // read to its end (not dropped by the client)
	body   string
}

// errBeforeResponse: the request failed before any response byte.
var errBeforeResponse = errors.New("no response")

// connLimit bounds one connection: the stall and its continuation, with
// room to spare.
const connLimit = tryDuration + 6*streamIdleTimeout + 10*time.Second

// fetch sends req and reads its answer: all of it (budget < 0), or
// budget bytes of its body, then drops the connection.
func (rz *resumer) fetch(req *http.Request, budget int) (*rconn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), connLimit)
	defer cancel()
	req.Header.Set("Authorization", "Bearer "+resumeKey)
	resp, err := rz.client.Do(req.WithContext(ctx))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("HANG: no response headers within %s", connLimit)
		}
		return nil, fmt.Errorf("%w: %v", errBeforeResponse, err)
	}
	defer resp.Body.Close()
	rc := &rconn{status: resp.StatusCode, header: resp.Header}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		rc.body = string(b)
		return rc, nil
	}
	var ps chaos.RParser
	buf := make([]byte, 4096)
	for budget != 0 {
		n := len(buf)
		if budget > 0 {
			n = min(n, budget)
		}
		n, err := resp.Body.Read(buf[:n])
		rc.events = append(rc.events, ps.Feed(buf[:n])...)
		if budget > 0 {
			budget -= n
		}
		if err == io.EOF {
			rc.ended = true
			return rc, nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("HANG: the stream did not end within %s (%d events read)", connLimit, len(rc.events))
			}
			return nil, fmt.Errorf("reading the stream: %v (%d events read)", err, len(rc.events))
		}
	}
	return rc, nil // the client goes away (the deferred Close, then cancel)
}

// body is a logical request's body: the case's dialect, the nonce in
// its prompt.
func (c *resumeCase) body(nonce string) []byte {
	s := `{"model":"` + c.alias + `","stream":true`
	switch c.dialect {
	case chaos.DialectResponses:
		return []byte(s + `,"input":"hi ` + nonce + `"}`)
	case chaos.DialectMessages:
		s += `,"max_tokens":256`
	}
	return []byte(s + `,"messages":[{"role":"user","content":"hi ` + nonce + `"}]}`)
}

// once runs one logical request of case c: how its connections resumed,
// whether it was skipped (its first request failed before any answer
// while a reload ran: nothing to resume), and its first problem.
func (rz *resumer) once(c *resumeCase, rng *rand.Rand) (how []string, skipped bool, problem string) {
	nonce := chaos.Nonce(rng.Uint64())
	defer rz.up.TakeHits(nonce)
	body := c.body(nonce)
	idem := ""
	if rng.IntN(2) == 0 {
		idem = "chaos-" + nonce
	}
	post := func(lastID string) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, rz.base+"/v1/"+c.path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if idem != "" {
			req.Header.Set("Idempotency-Key", idem)
		}
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		return req
	}
	rz.mu.Lock()
	est := rz.est[c.name]
	rz.mu.Unlock()
	if est == 0 {
		est = 8 << 10
	}
	drops := 1 + rng.IntN(3)
	budget := func(i int) int {
		if i == drops {
			return -1
		}
		return rng.IntN(est + est/4)
	}

	start := time.Now()
	first, err := rz.fetch(post(""), budget(0))
	switch {
	case errors.Is(err, errBeforeResponse) && rz.d.ld.overlaps(start, time.Now()):
		return []string{"post"}, true, ""
	case err != nil:
		return []string{"post"}, false, "the first request: " + err.Error()
	case first.status != http.StatusOK:
		return []string{"post"}, false, fmt.Sprintf("the first request: status %d: %.200s", first.status, first.body)
	}
	how = append(how, "post")
	streamURL := first.header.Get("X-Relay-Stream")
	if streamURL == "" || first.header.Get("X-Relay-Stream-Id") == "" {
		return how, false, "no X-Relay-Stream or X-Relay-Stream-Id header on the stream"
	}
	var log chaos.ResumeLog
	if p := log.Add(0, first.events); p != "" {
		return how, false, "the first connection: " + p
	}
	respID := ""
	conn := first
	for i := 1; !conn.ended; i++ {
		if i > drops {
			return how, false, "the last connection did not read to the end"
		}
		if respID == "" && c.dialect == chaos.DialectResponses && len(log.Events) > 0 {
			respID = createdID(log.Events[0].Event.Data)
		}
		// The ways back this client has: the stream URL always; a
		// Responses cursor once it saw an event with a sequence_number
		// (and the response id); the same request again with an
		// Idempotency-Key, or with the Last-Event-ID it saw.
		ways := []string{"stream-url"}
		lastSeq := int64(-1)
		if n := len(log.Events); n > 0 {
			lastSeq = log.Events[n-1].Seq
		}
		if respID != "" && lastSeq >= 0 {
			ways = append(ways, "starting_after")
		}
		if idem != "" || log.Last() > 0 {
			ways = append(ways, "repost")
		}
		way := ways[rng.IntN(len(ways))]
		lastID := ""
		if log.Last() > 0 {
			lastID = log.Events[log.Last()-1].ID
		}
		var mk func() *http.Request
		after := log.Last()
		switch way {
		case "stream-url":
			mk = func() *http.Request {
				req, _ := http.NewRequest(http.MethodGet, rz.base+streamURL, nil)
				if lastID != "" {
					req.Header.Set("Last-Event-ID", lastID)
				}
				return req
			}
		case "starting_after":
			u := rz.base + "/v1/responses/" + respID + "?stream=true&starting_after=" + strconv.FormatInt(lastSeq, 10)
			mk = func() *http.Request { req, _ := http.NewRequest(http.MethodGet, u, nil); return req }
			a, ok := log.AfterSeq(lastSeq)
			if !ok {
				return how, false, fmt.Sprintf("no event of sequence_number %d held", lastSeq)
			}
			after = a
		case "repost":
			if idem != "" && rng.IntN(2) == 0 {
				lastID = "" // the whole stream again, from its start
			}
			if lastID == "" {
				after = 0
			}
			mk = func() *http.Request { return post(lastID) }
		}
		how = append(how, way)
		b := budget(i)
		var next *rconn
		for try := 0; ; try++ { // a resume is safe to send again
			t0 := time.Now()
			next, err = rz.fetch(mk(), b)
			if err == nil || try >= 2 || !errors.Is(err, errBeforeResponse) || !rz.d.ld.overlaps(t0, time.Now()) {
				break
			}
		}
		if err != nil {
			return how, false, fmt.Sprintf("resume %d (%s after %d): %v", i, way, after, err)
		}
		if next.status != http.StatusOK {
			return how, false, fmt.Sprintf("resume %d (%s after %d): status %d: %.200s", i, way, after, next.status, next.body)
		}
		if got := next.header.Get("X-Relay-Resumed-After"); got != strconv.FormatUint(after, 10) {
			return how, false, fmt.Sprintf("resume %d (%s after %d): X-Relay-Resumed-After %q", i, way, after, got)
		}
		if p := log.Add(after, next.events); p != "" {
			return how, false, fmt.Sprintf("resume %d (%s after %d): %s", i, way, after, p)
		}
		conn = next
	}

	// The whole stream, as a client reading it from its first event got
	// it: the ended journal replayed from 0.
	req, _ := http.NewRequest(http.MethodGet, rz.base+streamURL+"?after=0", nil)
	full, err := rz.fetch(req, -1)
	switch {
	case err != nil:
		return how, false, "the whole stream: " + err.Error()
	case full.status != http.StatusOK:
		return how, false, fmt.Sprintf("the whole stream: status %d: %.200s", full.status, full.body)
	}
	var whole chaos.ResumeLog
	if p := whole.Add(0, full.events); p != "" {
		return how, false, "the whole stream: " + p
	}
	if p := log.Same(whole.Events); p != "" {
		return how, false, p
	}
	text, shape := chaos.CheckStream(c.dialect, log.Dispatched(), true)
	switch {
	case shape != "":
		return how, false, "the stream is not well formed: " + shape
	case text != chaos.ContAnswer:
		return how, false, fmt.Sprintf("the text is %q, want %q", text, chaos.ContAnswer)
	}
	if n := chaos.Generations(rz.up.TakeHits(nonce), "/r/"); n != 1 {
		return how, false, fmt.Sprintf("the upstream started %d generations of it, want 1", n)
	}
	rz.mu.Lock()
	rz.est[c.name] = streamBytes(full.events)
	rz.mu.Unlock()
	return how, false, ""
}

// streamBytes is about what a stream of these events is on the wire.
func streamBytes(evs []chaos.REvent) int {
	n := 0
	for _, ev := range evs {
		n += len(ev.ID) + 5 + len(ev.Fields) + 1
	}
	return n
}

// createdID is the response id a response.created event carries.
func createdID(data []byte) string {
	const f = `"response":{"id":"`
	i := bytes.Index(data, []byte(f))
	if !bytes.Contains(data, []byte(`"response.created"`)) || i < 0 {
		return ""
	}
	rest := data[i+len(f):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

// reportResume prints the resume cases' table and returns why they fail.
func reportResume(w io.Writer, rr *resumeResults, rcs []resumeCase) []string {
	if len(rcs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nresume cases (a client of a relay with resume { } disconnects at random points and resumes; the upstream breaks as in cont-*)\n")
	fmt.Fprintf(w, "  %-18s %6s %6s %8s %8s   %s\n", "case", "n", "ok", "skipped", "problem", "connections by how they came back")
	var why []string
	for _, c := range rcs {
		rw := rr.rows[c.name]
		if rw == nil {
			rw = &resumeRow{conns: map[string]int{}}
		}
		var ways []string
		for _, k := range []string{"post", "stream-url", "starting_after", "repost"} {
			if rw.conns[k] > 0 {
				ways = append(ways, fmt.Sprintf("%s %d", k, rw.conns[k]))
			}
		}
		fmt.Fprintf(w, "  %-18s %6d %6d %8s %8s   %s\n", c.name, rw.n, rw.ok, dash(rw.skipped), dash(rw.nProblems), strings.Join(ways, ", "))
		for _, p := range rw.problems {
			fmt.Fprintf(w, "      %s\n", p)
		}
		if rw.nProblems > 0 {
			why = append(why, fmt.Sprintf("%s: %d resumed streams lost, duplicated or regenerated events (first: %s)", c.name, rw.nProblems, rw.problems[0]))
		}
		if rw.ok == 0 {
			why = append(why, c.name+": no logical request completed")
		}
	}
	return why
}
