package main

import (
	"bytes"
	"context"
	"encoding/json"
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

// The resume-edge-kill case (issue 31), the fleet part's last: journals
// in Redis outlive the edge that wrote them. Both peers run `resume { }`
// on the same redis-server; the gate streams model slow (edgeChunks
// pieces, edgeGap apart).
//
//  1. edgeWhole clients stream from A to the end.
//  2. edgeCut clients stream from A, each dropping its connection after
//     a random number of events; A's generations go on (detached).
//  3. A is killed (SIGKILL) while it still generates them.
//  4. Each whole stream is fetched from B at its stream URL: the same
//     events, id for id and byte for byte, ending in [DONE].
//  5. Each cut stream is resumed on B at its stream URL with the
//     Last-Event-ID it saw: the events after it, none lost or repeated
//     (chaos.ResumeLog), the text a prefix of the answer, then, since
//     its producer is gone, an in-band stream_lost error within the live
//     key's lease; never a hang.
//  6. Each cut request is sent again to B with its Idempotency-Key: a
//     new generation (one gate request each, none re-attached to the
//     dead one), the whole answer.
//
// And the gate saw one generation per stream on A: a resume is never a
// second one.

const (
	edgeKey    = "sk-edge"
	edgeChunks = 60
	edgeGap    = 40 * time.Millisecond
	edgeWhole  = 2
	edgeCut    = 6
	// edgeEnd bounds a resume on B of a stream whose producer died: the
	// live key's lease (6 s) after A's last renewal, one blocking read
	// (2 s), and a margin for a loaded machine.
	edgeEnd = 15 * time.Second
)

// edgeAnswer is model slow's answer, piece i being "w<i> ".
func edgeAnswer() string {
	var b strings.Builder
	for i := range edgeChunks {
		fmt.Fprintf(&b, "w%d ", i)
	}
	return b.String()
}

// stream is model slow: a Chat stream of edgeChunks pieces, edgeGap
// apart, unless the client (a relay) goes.
func (g *gate) stream(w http.ResponseWriter, r *http.Request, who string) {
	g.mu.Lock()
	g.slow[who]++
	g.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	chunk := func(delta, finish string) {
		f := "null"
		if finish != "" {
			f = strconv.Quote(finish)
		}
		fmt.Fprintf(w, "data: {\"id\":\"g\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"slow\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, f)
		_ = rc.Flush()
	}
	chunk(`{"role":"assistant","content":""}`, "")
	for i := range edgeChunks {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(edgeGap):
		}
		chunk(`{"content":"w`+strconv.Itoa(i)+` "}`, "")
	}
	chunk(`{}`, "stop")
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

// slowBy is how many model slow requests peer who sent.
func (g *gate) slowBy(who string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.slow[who]
}

// edgeRow is the case's outcome.
type edgeRow struct {
	ran                     bool
	whole, cut              int
	replayed, lost, retried int
	lostAfter               time.Duration // the longest from the kill to a stream_lost
	why                     []string
}

// edgeConn is one connection to a journaled stream.
type edgeConn struct {
	path   string // X-Relay-Stream
	events []chaos.REvent
	tail   []chaos.REvent // events without an id (an in-band error)
	done   bool           // ended with [DONE]
}

// edgeRequest sends a model slow stream request to base and reads up to
// stopAfter events with ids (0: to the end).
func (fr *fleetRun) edgeRequest(ctx context.Context, client *http.Client, method, url, idem, lastID string, stopAfter int) (edgeConn, error) {
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"model":"slow","stream":true,"messages":[{"role":"user","content":"edge ` + idem + `"}]}`)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return edgeConn{}, err
	}
	req.Header.Set("Authorization", "Bearer "+edgeKey)
	req.Header.Set("Content-Type", "application/json")
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := client.Do(req)
	if err != nil {
		return edgeConn{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return edgeConn{}, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	c := edgeConn{path: resp.Header.Get("X-Relay-Stream")}
	var ps chaos.RParser
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		for _, ev := range ps.Feed(buf[:n]) {
			switch {
			case ev.N == 0:
				c.tail = append(c.tail, ev)
			case len(c.tail) > 0:
				return c, fmt.Errorf("event %s after an event without an id", ev.ID)
			default:
				c.events = append(c.events, ev)
				c.done = c.done || string(ev.Event.Data) == "[DONE]"
			}
			if stopAfter > 0 && len(c.events) >= stopAfter {
				return c, nil // the client goes: the body is closed
			}
		}
		if errors.Is(err, io.EOF) {
			return c, nil
		}
		if err != nil {
			return c, err
		}
	}
}

// edgeText is the Chat content of a stream's events.
func edgeText(evs []chaos.REvent) string {
	var b strings.Builder
	for _, ev := range evs {
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal(ev.Event.Data, &c) == nil && len(c.Choices) > 0 {
			b.WriteString(c.Choices[0].Delta.Content)
		}
	}
	return b.String()
}

// runEdgeKill runs the case; A is dead after it.
func (fr *fleetRun) runEdgeKill(ctx context.Context) (row edgeRow) {
	row.ran = true
	a, b := fr.peers[0], fr.peers[1]
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 30 * time.Second}
	fail := func(format string, args ...any) { row.why = append(row.why, fmt.Sprintf(format, args...)) }
	answer := edgeAnswer()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	gateA, gateB := fr.gate.slowBy(a.name), fr.gate.slowBy(b.name)

	// 1. Whole streams on A.
	wholes := make([]edgeConn, edgeWhole)
	var wg sync.WaitGroup
	errs := make([]error, edgeWhole+edgeCut)
	for i := range wholes {
		wg.Go(func() {
			wholes[i], errs[i] = fr.edgeRequest(ctx, client, http.MethodPost, a.base()+"/v1/chat/completions", "whole-"+run+"-"+strconv.Itoa(i), "", 0)
		})
	}
	wg.Wait()
	// 2. Cut streams on A.
	cuts := make([]edgeConn, edgeCut)
	idems := make([]string, edgeCut)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 31))
	stops := make([]int, edgeCut)
	for i := range cuts {
		idems[i] = "cut-" + run + "-" + strconv.Itoa(i)
		stops[i] = 2 + rng.IntN(edgeChunks/3) // well before A's end
		wg.Go(func() {
			cuts[i], errs[edgeWhole+i] = fr.edgeRequest(ctx, client, http.MethodPost, a.base()+"/v1/chat/completions", idems[i], "", stops[i])
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		fail("on A, before the kill: %v", err)
		return row
	}
	for i, w := range wholes {
		if !w.done || edgeText(w.events) != answer {
			fail("whole stream %d on A: [DONE] %v, text %.60q", i, w.done, edgeText(w.events))
		}
	}
	// Let A's writer put what its clients saw into Redis (it writes
	// within about 5 ms of an event), then kill it mid-generation.
	time.Sleep(100 * time.Millisecond)
	if err := a.cmd.Process.Kill(); err != nil {
		fail("killing A: %v", err)
		return row
	}
	_ = a.cmd.Wait()
	killed := time.Now()
	row.whole, row.cut = edgeWhole, edgeCut
	if n := fr.gate.slowBy(a.name) - gateA; n != edgeWhole+edgeCut {
		fail("the gate saw %d generations from A for %d streams", n, edgeWhole+edgeCut)
	}

	// 4. The whole streams from B.
	for i, w := range wholes {
		got, err := fr.edgeRequest(ctx, client, http.MethodGet, b.base()+w.path, "", "", 0)
		if err != nil {
			fail("whole stream %d from B after A's death: %v", i, err)
			continue
		}
		log := chaos.ResumeLog{}
		if p := log.Add(0, got.events); p != "" || len(got.events) != len(w.events) || !got.done {
			fail("whole stream %d from B: %d events of %d, [DONE] %v %s", i, len(got.events), len(w.events), got.done, p)
			continue
		}
		if p := log.Same(w.events); p != "" {
			fail("whole stream %d from B: %s", i, p)
		}
	}

	// 5. The cut streams resumed on B, all at once; 6. then retried on B.
	resumed := make([]edgeConn, edgeCut)
	ended := make([]time.Duration, edgeCut)
	for i, c := range cuts {
		wg.Go(func() {
			last := c.events[len(c.events)-1].ID
			resumed[i], errs[i] = fr.edgeRequest(ctx, client, http.MethodGet, b.base()+c.path, "", last, 0)
			ended[i] = time.Since(killed)
		})
	}
	wg.Wait()
	for i, c := range cuts {
		log := chaos.ResumeLog{}
		if p := log.Add(0, c.events); p != "" {
			fail("cut stream %d on A: %s", i, p)
			continue
		}
		got, took := resumed[i], ended[i]
		switch {
		case errs[i] != nil:
			fail("cut stream %d resumed on B: %v", i, errs[i])
			continue
		case took > edgeEnd:
			fail("cut stream %d resumed on B: ended %s after A's death (bound %s)", i, took.Round(time.Millisecond), edgeEnd)
		}
		if p := log.Add(log.Last(), got.events); p != "" {
			fail("cut stream %d resumed on B after %d: %s", i, len(c.events), p)
			continue
		}
		row.replayed += len(got.events)
		text := edgeText(log.Events)
		switch {
		case got.done:
			if text != answer {
				fail("cut stream %d, ended on B: text %.60q", i, text)
			}
		case len(got.tail) != 1 || !bytes.Contains(got.tail[0].Event.Data, []byte(`"stream_lost"`)):
			fail("cut stream %d resumed on B: neither [DONE] nor one stream_lost error at its end (%d events without id: %.120q)", i, len(got.tail), tailData(got.tail))
		case !strings.HasPrefix(answer, text):
			fail("cut stream %d resumed on B: its text %.60q is not a prefix of the answer", i, text)
		default:
			row.lost++
			row.lostAfter = max(row.lostAfter, took)
		}
	}
	agains := make([]edgeConn, edgeCut)
	for i := range cuts {
		wg.Go(func() {
			agains[i], errs[i] = fr.edgeRequest(ctx, client, http.MethodPost, b.base()+"/v1/chat/completions", idems[i], "", 0)
		})
	}
	wg.Wait()
	for i, again := range agains {
		c := cuts[i]
		if errs[i] != nil {
			fail("cut stream %d retried on B: %v", i, errs[i])
			continue
		}
		if again.path == c.path || !again.done || edgeText(again.events) != answer {
			fail("cut stream %d retried on B: stream %s (the cut one %s), [DONE] %v, text %.60q", i, again.path, c.path, again.done, edgeText(again.events))
			continue
		}
		row.retried++
	}
	if n := fr.gate.slowBy(b.name) - gateB; n != row.retried {
		fail("the gate saw %d generations from B for %d retries (a resume is never a generation)", n, row.retried)
	}
	return row
}

func tailData(evs []chaos.REvent) string {
	var b strings.Builder
	for _, ev := range evs {
		b.Write(ev.Event.Data)
		b.WriteByte('\n')
	}
	return b.String()
}

// reportEdgeKill prints the case's row and returns its failures.
func reportEdgeKill(w io.Writer, r edgeRow) []string {
	if !r.ran {
		return nil
	}
	verdict := "ok"
	if len(r.why) > 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "  %-16s %d whole and %d cut streams on A, A killed: B served the whole ones, resumed the cut ones (%d events replayed, %d ended stream_lost, at most %s after the kill), %d retries on B generated anew: %s\n",
		"resume-edge-kill", r.whole, r.cut, r.replayed, r.lost, r.lostAfter.Round(100*time.Millisecond), r.retried, verdict)
	why := make([]string, len(r.why))
	for i, y := range r.why {
		why[i] = "resume-edge-kill: " + y
	}
	return why
}
