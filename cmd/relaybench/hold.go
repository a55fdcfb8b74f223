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
}

// runHolds runs one hold per target and prints the table.
func runHolds(o options, targets []*target) []holdResult {
	if err := checkFDs(o.hold); err != nil {
		fatalf("%v", err)
	}
	body := requestBody(true, 0)
	fmt.Printf("\nhold: %d open streams per target (one token every %.0fs after the first)\n", o.hold, 1/o.tokensPerSec)
	fmt.Printf("%-14s %8s %14s %12s\n", "target", "open", "bytes/stream", "vs proxy")
	var proxy float64
	per := make([]float64, len(targets))
	opened := make([]int, len(targets))
	for i := len(targets) - 1; i >= 0; i-- { // reverse_proxy first: the baseline
		per[i], opened[i] = hold(targets[i], body, o.hold)
		if targets[i].mode == "" {
			proxy = per[i]
		}
		time.Sleep(2 * time.Second) // let the last hold's sockets close
	}
	res := make([]holdResult, len(targets))
	for i, t := range targets {
		fmt.Printf("%-14s %8d %14.0f %11.2fx\n", t.name, opened[i], per[i], per[i]/proxy)
		res[i] = holdResult{name: t.name, mode: t.mode, perStream: per[i], open: opened[i]}
	}
	return res
}

// hold opens n streams to t, waits until each has its first event,
// measures, and closes them. It returns the memory per open stream and
// how many were open when it measured.
func hold(t *target, body []byte, n int) (float64, int) {
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
			br := bufio.NewReaderSize(resp.Body, 512)
			_, err = br.ReadSlice('\n') // the first event's data line
			if err == nil {
				open.Add(1)
			}
			first <- struct{}{}
			<-ctx.Done()
		})
	}
	deadline := time.After(time.Minute)
	for range n {
		select {
		case <-first:
		case <-deadline:
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
