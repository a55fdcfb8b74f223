package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// target is one endpoint under test.
type target struct {
	name string
	url  string // the full endpoint URL
	// messages: the target speaks Anthropic Messages (/v1/messages): it
	// gets messagesBody, and its streams end with message_stop.
	messages bool
	// responses: the target speaks the Responses API (/v1/responses): its
	// streams end with response.completed.
	responses bool
	// gemini: the target is a Gemini client's streamGenerateContent
	// (?alt=sse): its key goes in x-goog-api-key, and its streams have no
	// [DONE]: a complete one ends with the chunk carrying finishReason.
	gemini bool
	// body, when set, replaces the run's request body (the translated
	// target asks for the same thinking budget as the Messages one).
	body []byte
	// mode, when set, is sent as X-Relay-Mode: the smoothing mode the
	// relay applies to this target's streams.
	mode string
	// key, when set, is sent as the client key (Authorization: Bearer).
	key string
	// proc is the process that serves the target: its CPU time during
	// the target's rounds is the target's.
	proc *proc
	// holdUntil, when set, is the line of the stream a hold reads up to
	// before it counts the stream open (default: the first line).
	holdUntil func(line []byte) bool
}

// result is what the measured requests to one target produced.
type result struct {
	target    *target
	latencies []time.Duration // successful requests only
	errors    int             // failed requests (see outcome.err)
	cut       int             // requests cut off by the time bound
	wall      time.Duration   // summed wall time of this target's rounds
	cpu       time.Duration   // summed CPU time of the target's process during its rounds
	syscalls  int64           // summed read and write system calls of the target's process during its rounds
	bytes     int64           // response body bytes of successful requests
	errKinds  map[string]int  // error message -> count, for the report
}

// add merges a worker's partial result into r.
func (r *result) add(p *result) {
	r.latencies = append(r.latencies, p.latencies...)
	r.errors += p.errors
	r.cut += p.cut
	r.bytes += p.bytes
	for k, v := range p.errKinds {
		if r.errKinds == nil {
			r.errKinds = map[string]int{}
		}
		r.errKinds[k] += v
	}
}

// record files one request's outcome; ctx is the run's context, used to
// tell requests cut off by the time bound from real failures.
func (r *result) record(ctx context.Context, o outcome) {
	switch {
	case o.err == nil:
		r.latencies = append(r.latencies, o.dur)
		r.bytes += o.bytes
	case ctx.Err() != nil:
		r.cut++
	default:
		r.errors++
		if r.errKinds == nil {
			r.errKinds = map[string]int{}
		}
		if len(r.errKinds) < 20 {
			r.errKinds[o.err.Error()]++
		}
	}
}

// bench drives the targets in alternating rounds.
type bench struct {
	client      *http.Client
	targets     []*target
	body        []byte
	stream      bool
	concurrency int
	round       int
	results     []*result // one per target, same order
}

func newBench(client *http.Client, targets []*target, body []byte, stream bool, concurrency, round int) *bench {
	b := &bench{client: client, targets: targets, body: body, stream: stream, concurrency: concurrency, round: round}
	for _, t := range targets {
		b.results = append(b.results, &result{target: t})
	}
	return b
}

// run sends perTarget requests to every target, in rounds of b.round
// requests whose target order alternates (A B, B A, A B, ...), and stops
// early when maxTime has passed. It returns the wall time taken.
func (b *bench) run(ctx context.Context, perTarget int, maxTime time.Duration) time.Duration {
	start := time.Now()
	ctx, cancel := context.WithDeadline(ctx, start.Add(maxTime))
	defer cancel()

	remaining := make([]int, len(b.targets))
	for i := range remaining {
		remaining[i] = perTarget
	}
	for r := 0; ctx.Err() == nil; r++ {
		progressed := false
		for k := range b.targets {
			i := k
			if r%2 == 1 {
				i = len(b.targets) - 1 - k // reversed order on odd rounds
			}
			if remaining[i] == 0 || ctx.Err() != nil {
				continue
			}
			n := min(b.round, remaining[i])
			remaining[i] -= n
			b.runRound(ctx, b.results[i], n)
			progressed = true
		}
		if !progressed {
			break
		}
	}
	return time.Since(start)
}

// runRound sends n requests to one target with up to b.concurrency
// workers, and adds their outcomes and the round's wall time to res.
func (b *bench) runRound(ctx context.Context, res *result, n int) {
	workers := min(b.concurrency, n)
	parts := make([]result, workers)
	var claimed atomic.Int64
	var wg sync.WaitGroup
	cpu0, sys0 := res.target.proc.cpu(), res.target.proc.syscalls()
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			part := &parts[w]
			var buf bytes.Buffer
			for claimed.Add(1) <= int64(n) && ctx.Err() == nil {
				part.record(ctx, b.do(ctx, res.target, &buf))
			}
		})
	}
	wg.Wait()
	res.wall += time.Since(start)
	res.cpu += res.target.proc.cpu() - cpu0
	res.syscalls += res.target.proc.syscalls() - sys0
	for i := range parts {
		res.add(&parts[i])
	}
}

// outcome is one request's result.
type outcome struct {
	dur   time.Duration // request sent -> whole body read
	bytes int64
	err   error
}

// do sends one chat completion request and reads the whole answer into
// buf (reused across a worker's requests to keep the client cheap).
func (b *bench) do(ctx context.Context, t *target, buf *bytes.Buffer) outcome {
	body := b.body
	if t.body != nil {
		body = t.body
	}
	if t.messages {
		body = messagesBody(b.stream)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return outcome{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if t.mode != "" {
		req.Header.Set("X-Relay-Mode", t.mode)
	}
	if t.key != "" {
		if t.gemini {
			req.Header.Set("x-goog-api-key", t.key)
		} else {
			req.Header.Set("Authorization", "Bearer "+t.key)
		}
	}
	start := time.Now()
	resp, err := b.client.Do(req)
	if err != nil {
		return outcome{err: err}
	}
	buf.Reset()
	_, err = buf.ReadFrom(resp.Body)
	_ = resp.Body.Close()
	dur := time.Since(start)
	if err != nil {
		return outcome{err: fmt.Errorf("reading body: %w", err)}
	}
	if err := checkAnswer(resp, buf.Bytes(), b.stream, t); err != nil {
		return outcome{err: err}
	}
	return outcome{dur: dur, bytes: int64(buf.Len())}
}

// checkAnswer rejects answers that are not a complete 200 completion.
func checkAnswer(resp *http.Response, body []byte, stream bool, t *target) error {
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %.200s", resp.StatusCode, body)
	}
	messages := t.messages
	switch {
	case t.gemini && stream:
		if !lastDataHas(body, []byte(`"finishReason":`)) {
			return errors.New("stream did not end with a chunk carrying finishReason")
		}
		return nil
	case t.gemini:
		if !bytes.Contains(body, []byte(`"finishReason":`)) {
			return fmt.Errorf("not a Gemini response: %.200s", body)
		}
		return nil
	case t.responses && stream:
		if !bytes.Contains(body, []byte("event: response.completed\n")) {
			return errors.New("stream did not end with response.completed")
		}
		return nil
	case t.responses:
		if !bytes.Contains(body, []byte(`"object":"response"`)) {
			return fmt.Errorf("not a Responses response: %.200s", body)
		}
		return nil
	case messages && stream:
		if !bytes.HasSuffix(bytes.TrimRight(body, "\n"), []byte(`data: {"type":"message_stop"}`)) {
			return errors.New("stream did not end with message_stop")
		}
		return nil
	case messages:
		if !bytes.Contains(body, []byte(`"type":"message"`)) {
			return fmt.Errorf("not a Messages message: %.200s", body)
		}
		return nil
	}
	if stream {
		if !bytes.HasSuffix(bytes.TrimRight(body, "\n"), []byte("data: [DONE]")) {
			return errors.New("stream did not end with data: [DONE]")
		}
		return nil
	}
	if !bytes.HasPrefix(body, []byte("{")) || !bytes.Contains(body, []byte(`"chat.completion"`)) {
		return fmt.Errorf("not a chat.completion object: %.200s", body)
	}
	return nil
}

// lastDataHas reports whether the last data line of an SSE body contains
// want: a Gemini stream's end is its last chunk (the one with the
// finishReason), not a [DONE] line, and a stream cut before it ends on a
// chunk without one. Lines may end in \n or \r\n.
func lastDataHas(body, want []byte) bool {
	body = bytes.TrimRight(body, "\r\n")
	line := body
	if i := bytes.LastIndexByte(body, '\n'); i >= 0 {
		line = body[i+1:]
	}
	return bytes.HasPrefix(line, []byte("data:")) && bytes.Contains(line, want)
}
