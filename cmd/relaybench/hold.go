package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// A hold (-hold N) measures the memory an open stream costs: N streaming
// requests to one target, each on a fresh connection, held open after
// their first event (the simulator then sends a token every few seconds),
// and the heap and goroutine stacks of the target's process measured
// against before the streams were opened, per stream. The targets are the
// relay in each smoothing mode (X-Relay-Mode) and reverse_proxy, one
// after the other.

// holdTargets are the targets of -hold.
func holdTargets(relayURL string, relay *proc, proxyURL string, proxy *proc) []*target {
	return []*target{
		{name: "relay off", url: relayURL, mode: "off", proc: relay},
		{name: "relay pace", url: relayURL, mode: "pace", proc: relay},
		{name: "relay split", url: relayURL, mode: "split-reasoning", proc: relay},
		{name: "reverse_proxy", url: proxyURL, proc: proxy},
	}
}

// holdResult is one target's figures: its process's memory per open
// stream, and how many streams were open.
type holdResult struct {
	name      string
	mode      string
	perStream float64
	open      int
	baseline  bool // the last target, which the others are compared with
}

// runHolds runs one hold per target and prints the table. The last target
// is the baseline (reverse_proxy; with -handoff, the plain stream).
func runHolds(o options, targets []*target) []holdResult {
	if err := checkFDs(o.hold); err != nil {
		fatalf("%v", err)
	}
	body := requestBody(true, 0)
	pace := fmt.Sprintf("one token every %.0fs after the first", 1/o.tokensPerSec)
	if o.handoff {
		pace = "the slow simulators: a token every 5s after the first"
	}
	base := targets[len(targets)-1]
	fmt.Printf("\nhold: %d open streams per target (%s)\n", o.hold, pace)
	fmt.Printf("%-14s %8s %14s %12s\n", "target", "open", "bytes/stream", "vs "+base.name)
	per := make([]float64, len(targets))
	opened := make([]int, len(targets))
	for i := len(targets) - 1; i >= 0; i-- { // the baseline first
		per[i], opened[i] = hold(targets[i], body, o.hold)
		time.Sleep(2 * time.Second) // let the last hold's sockets close
	}
	baseline := per[len(per)-1]
	res := make([]holdResult, len(targets))
	for i, t := range targets {
		fmt.Printf("%-14s %8d %14.0f %11.2fx\n", t.name, opened[i], per[i], per[i]/baseline)
		res[i] = holdResult{name: t.name, mode: t.mode, perStream: per[i], open: opened[i], baseline: i == len(targets)-1}
	}
	if o.handoff && !o.inReport {
		for _, r := range res[:len(res)-1] {
			verdict := "MET"
			if r.perStream/baseline > goalHandoffMem {
				verdict = "NOT MET"
			}
			fmt.Printf("goal %s memory per stream <= %.1fx %s: %s (%.2fx)\n", r.name, goalHandoffMem, base.name, verdict, r.perStream/baseline)
		}
	}
	return res
}

// hold opens n streams to t, waits until each has its first event,
// measures, and closes them. It returns the memory per open stream and
// how many were open when it measured.
func hold(t *target, body []byte, n int) (float64, int) {
	if t.body != nil {
		body = t.body
	}
	before := t.proc.mem()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var open, done atomic.Int64
	first := make(chan struct{}, n)
	for range n {
		wg.Go(func() {
			defer done.Add(1)
			tr := &http.Transport{
				Proxy:              nil,
				DisableKeepAlives:  true,
				DisableCompression: true,
				DialContext:        (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
			}
			defer tr.CloseIdleConnections()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
			if err != nil {
				first <- struct{}{}
				return
			}
			req.Header.Set("Content-Type", "application/json")
			if t.mode != "" {
				req.Header.Set("X-Relay-Mode", t.mode)
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				first <- struct{}{}
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReaderSize(resp.Body, 4096)
			line, err := br.ReadSlice('\n') // the first event's data line
			for err == nil && t.holdUntil != nil && !t.holdUntil(line) {
				line, err = br.ReadSlice('\n')
			}
			if err == nil {
				open.Add(1)
			}
			first <- struct{}{}
			<-ctx.Done()
		})
	}
	// A minute for all of them: the streams not open by then are not
	// counted (time.After's channel fires once, so the wait ends there).
	wait, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	for range n {
		select {
		case <-first:
		case <-wait.Done():
		}
	}
	time.Sleep(500 * time.Millisecond) // the proxies settle after the first event
	after := t.proc.mem()
	got := int(open.Load())
	cancel()
	wg.Wait()
	if got == 0 {
		return 0, 0
	}
	return float64(after-before) / float64(got), got
}
