package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/traces"
)

// received is one SSE block the client received.
type received struct {
	at           time.Time
	data         []byte
	hasData      bool
	comment      bool // no fields: a heartbeat or other comment
	unterminated bool
}

// stream is the outcome of one trace's replay.
type stream struct {
	trace    traces.Trace
	status   int
	headerAt time.Time // when the client had the response headers
	events   []received
	err      error       // transport or read error, nil at a clean EOF
	upstream []time.Time // when the upstream began writing each step, if known
}

// replayAll replays the named traces, at most concurrency at once, the
// longest first, and returns the streams in the order of names.
func replayAll(ctx context.Context, url string, up *upstream, names []string, concurrency int) []*stream {
	client := &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		MaxIdleConnsPerHost: concurrency,
		DisableCompression:  true,
	}}
	defer client.CloseIdleConnections()

	out := make([]*stream, len(names))
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	durs := make([]time.Duration, len(names))
	for i, name := range names {
		t, _ := traces.ByName(name)
		durs[i] = t.Duration()
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(durs[b] - durs[a]) })

	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for _, i := range order {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t, _ := traces.ByName(names[i])
			out[i] = replay(ctx, client, url, up, t)
		})
	}
	wg.Wait()
	return out
}

// stampedBody remembers when its last read returned data.
type stampedBody struct {
	r    io.Reader
	last time.Time
}

func (s *stampedBody) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.last = time.Now()
	}
	return n, err
}

// replay streams one trace through the relay. Each block is stamped with
// the time of the read that completed it: the reader only reads when no
// complete block is buffered, so that read delivered the block's end.
func replay(ctx context.Context, client *http.Client, url string, up *upstream, t traces.Trace) *stream {
	s := &stream{trace: t}
	ctx, cancel := context.WithTimeout(ctx, t.Duration()+15*time.Second)
	defer cancel()
	body := fmt.Sprintf(`{"model":%q,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`, t.Name)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		s.err = err
		return s
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		s.err = err
		return s
	}
	defer resp.Body.Close()
	s.headerAt = time.Now()
	s.status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		s.err = fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
		return s
	}
	sb := &stampedBody{r: resp.Body, last: s.headerAt}
	rd := sse.NewReader(sb, 0)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			s.err = err
			break
		}
		s.events = append(s.events, received{
			at:           sb.last,
			data:         bytes.Clone(ev.Data),
			hasData:      ev.HasData,
			comment:      ev.IsComment(),
			unterminated: ev.Unterminated,
		})
	}
	// The upstream's write stamps, once its handler is done.
	if run := up.run(t.Name); run != nil {
		select {
		case <-run.done:
			if st := run.stamps(); len(st) == len(t.Steps) {
				s.upstream = st
			}
		case <-time.After(2 * time.Second):
		}
	}
	return s
}
