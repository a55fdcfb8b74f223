package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// -resume (issue 31): what resumable streams cost and how fast a resume
// answers.
//
//   - CPU per stream: the same Chat streams through two sites of one
//     relay process, identical but for `resume { }` on one of them (every
//     committed stream journaled after pacing, each event sent with its
//     id), interleaved in rounds as every comparison here is. Goal: at
//     most 1.25x (goalResumeCPU).
//   - The journal's cost per stream, in bytes: the event data a journal
//     holds for one of these streams, and the id and retry lines the
//     client is sent on top (read from a probe stream: the simulator
//     answers the same every time). Allocations are the in-process
//     benchmark's (BenchmarkResumeJournal in the root package).
//   - Resume latency: 1 worker, then -c workers, each start a stream, read a random
//     number of its events, drop the connection, and GET the stream URL
//     (X-Relay-Stream) with the Last-Event-ID they saw; the time from
//     sending that GET to having read its first replayed event, p50/p99
//     over -resume-n resumes. Goal: p99 under 50 ms on one edge
//     (goalResumeP99). Every resume is checked: the events before and
//     after, together, are the stream's, each once, in order.
//
// The cross-edge figure (two relays on one redis-server, a stream
// produced on one and resumed on the other) is the root package's
// BenchmarkResumeAcrossEdges (resume_fleet_e2e_test.go).

const (
	goalResumeCPU = 1.25
	goalResumeP99 = 50 * time.Millisecond
)

// resumeSites: the relay with and without `resume { }`, otherwise the
// same, both in front of sim; coalesce is off so that the latency
// probe's dropped streams are never joined by the next identical
// request (a re-attach would replay instead of generating). Ports: with
// resume, without, sim.
const resumeSites = `
http://:%[1]d {
	bind 127.0.0.1
	llm_relay {
		key bench-resume bench
		upstream sim http://127.0.0.1:%[3]d/v1
		model sim-reasoner {
			to sim
		}
		resume {
			coalesce off
		}
	}
}

http://:%[2]d {
	bind 127.0.0.1
	llm_relay {
		key bench-resume bench
		upstream sim http://127.0.0.1:%[3]d/v1
		model sim-reasoner {
			to sim
		}
	}
}
`

// resumeTargets are the two sites' targets: journaled first.
func resumeTargets(sites siteURLs, relay *proc) []*target {
	return []*target{
		{name: "resume", url: sites.resumeOn + "/v1/chat/completions", key: "bench-resume", proc: relay},
		{name: "off", url: sites.resumeOff + "/v1/chat/completions", key: "bench-resume", proc: relay},
	}
}

// journalCost reads one stream from the journaled site and returns the
// bytes its journal holds (the data blocks without the id and retry
// lines) and the bytes the ids and retry hint add to the wire.
func journalCost(client *http.Client, t *target, body []byte) (journal, ids int, err error) {
	resp, err := resumePost(context.Background(), client, t, body)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	all, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	for _, line := range bytes.SplitAfter(all, []byte("\n")) {
		switch {
		case bytes.HasPrefix(line, []byte("id: ")), bytes.HasPrefix(line, []byte("retry: ")):
			ids += len(line)
		case bytes.HasPrefix(line, []byte(":")):
		default:
			journal += len(line)
		}
	}
	return journal, ids, nil
}

func resumePost(ctx context.Context, client *http.Client, t *target, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+t.key)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
	}
	return resp, nil
}

// sseEvent is one event block read off a stream: its id and the rest.
type sseEvent struct{ id, rest string }

// readEvent reads the next block with data (comments skipped).
func readEvent(br *bufio.Reader) (sseEvent, error) {
	var ev sseEvent
	var rest strings.Builder
	data := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return ev, err
		}
		switch {
		case line == "\n":
			if data {
				ev.rest = rest.String()
				return ev, nil
			}
			rest.Reset()
		case strings.HasPrefix(line, "id: "):
			ev.id = strings.TrimSpace(line[4:])
		case strings.HasPrefix(line, "retry: "), strings.HasPrefix(line, ":"):
		default:
			data = data || strings.HasPrefix(line, "data:")
			rest.WriteString(line)
		}
	}
}

// readEvents reads every event to the end of the stream.
func readEvents(br *bufio.Reader) ([]sseEvent, error) {
	var out []sseEvent
	for {
		ev, err := readEvent(br)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// resumeLatency runs n resumes with the given number of workers, each
// checked against ref (the stream's events read whole), and returns the
// latencies and the failures by message.
func resumeLatency(client *http.Client, t *target, body []byte, ref []sseEvent, n, workers int, maxTime time.Duration) ([]time.Duration, map[string]int) {
	ctx, cancel := context.WithTimeout(context.Background(), maxTime)
	defer cancel()
	var mu sync.Mutex
	var lats []time.Duration
	fails := map[string]int{}
	var wg sync.WaitGroup
	jobs := make(chan int64)
	go func() {
		defer close(jobs)
		for i := range n {
			select {
			case jobs <- int64(i):
			case <-ctx.Done():
				return
			}
		}
	}()
	for range workers {
		wg.Go(func() {
			for seed := range jobs {
				d, err := resumeOnce(ctx, client, t, body, ref, rand.New(rand.NewSource(seed)))
				mu.Lock()
				if err != nil {
					if len(fails) < 20 || fails[err.Error()] > 0 {
						fails[err.Error()]++
					}
				} else {
					lats = append(lats, d)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return lats, fails
}

// resumeOnce starts a stream, reads 1 to len(ref)-1 of its events, drops
// the connection, resumes it and reads the rest.
func resumeOnce(ctx context.Context, client *http.Client, t *target, body []byte, ref []sseEvent, rng *rand.Rand) (time.Duration, error) {
	cctx, drop := context.WithCancel(ctx)
	defer drop()
	resp, err := resumePost(cctx, client, t, body)
	if err != nil {
		return 0, err
	}
	url := resp.Header.Get("X-Relay-Stream")
	if url == "" {
		resp.Body.Close()
		return 0, errors.New("no X-Relay-Stream header")
	}
	br := bufio.NewReader(resp.Body)
	k := 1 + rng.Intn(len(ref)-1)
	var before []sseEvent
	for len(before) < k {
		ev, err := readEvent(br)
		if err != nil {
			resp.Body.Close()
			return 0, fmt.Errorf("reading the stream: %v", err)
		}
		before = append(before, ev)
	}
	drop() // the client goes away
	resp.Body.Close()

	base := strings.TrimSuffix(strings.TrimSuffix(t.url, "/v1/chat/completions"), "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+t.key)
	req.Header.Set("Last-Event-ID", before[len(before)-1].id)
	start := time.Now()
	r2, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer r2.Body.Close()
	if r2.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(r2.Body)
		return 0, fmt.Errorf("resume: status %d: %.200s", r2.StatusCode, b)
	}
	br2 := bufio.NewReader(r2.Body)
	first, err := readEvent(br2)
	lat := time.Since(start)
	if err != nil {
		if errors.Is(err, io.EOF) && len(before) == len(ref) {
			return lat, nil
		}
		return 0, fmt.Errorf("resume: no event: %v", err)
	}
	rest, err := readEvents(br2)
	if err != nil {
		return 0, fmt.Errorf("resume: reading: %v", err)
	}
	all := append(append(before, first), rest...)
	if len(all) != len(ref) {
		return 0, fmt.Errorf("resume: %d events in all, the stream has %d", len(all), len(ref))
	}
	for i := range ref {
		if stripVolatile(all[i].rest) != ref[i].rest || !strings.HasSuffix(all[i].id, fmt.Sprintf(".%d", i+1)) {
			return 0, fmt.Errorf("resume: event %d differs", i+1)
		}
	}
	return lat, nil
}

// runResume is -resume: the CPU comparison (the bench's rounds, already
// run by the caller into results), then the journal's bytes and the
// resume latency.
func runResume(o options, client *http.Client, targets []*target, body []byte) {
	j, ids, err := journalCost(client, targets[0], body)
	if err != nil {
		fatalf("a journaled stream: %v", err)
	}
	fmt.Printf("journal per stream: %d bytes of event data held (max_bytes bounds it), %d bytes of id and retry lines on the wire\n", j, ids)

	resp, err := resumePost(context.Background(), client, targets[0], body)
	if err != nil {
		fatalf("the reference stream: %v", err)
	}
	ref, err := readEvents(bufio.NewReader(resp.Body))
	resp.Body.Close()
	if err != nil || len(ref) < 2 {
		fatalf("the reference stream: %d events, %v", len(ref), err)
	}
	// Volatile fields (the completion id, created) differ between two
	// generations: compare what is left.
	for i := range ref {
		ref[i].rest = stripVolatile(ref[i].rest)
	}
	for _, workers := range []int{1, o.concurrency} {
		lats, fails := resumeLatency(client, targets[0], body, ref, o.resumeN, workers, o.maxTime)
		slices.Sort(lats)
		fmt.Printf("\nresume latency, one edge (GET the stream URL with Last-Event-ID -> first replayed event), %d workers, %d resumes, %d failed:\n",
			workers, len(lats), sumFails(fails))
		for msg, c := range fails {
			fmt.Printf("  failed %d: %s\n", c, msg)
		}
		if len(lats) == 0 {
			continue
		}
		p99 := percentile(lats, 0.99)
		fmt.Printf("  p50 %s  p90 %s  p99 %s  max %s\n", ms(percentile(lats, 0.5)), ms(percentile(lats, 0.9)), ms(p99), ms(lats[len(lats)-1]))
		verdict := "MET"
		if p99 >= goalResumeP99 || sumFails(fails) > 0 {
			verdict = "NOT MET"
		}
		fmt.Fprintf(os.Stdout, "goal resume latency p99 < %s on one edge, %d workers: %s (%s)\n", goalResumeP99, workers, verdict, ms(p99))
	}
}

// stripVolatile drops the fields two generations of one answer differ
// in: the completion's id and its created time.
func stripVolatile(s string) string {
	for _, f := range []string{`"id":"`, `"created":`} {
		for from := 0; ; {
			i := strings.Index(s[from:], f)
			if i < 0 {
				break
			}
			i += from
			j := i + len(f)
			for j < len(s) && s[j] != ',' && s[j] != '}' {
				j++
			}
			s, from = s[:i]+s[j:], i
		}
	}
	return s
}

func sumFails(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}
