package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A storm (-storm N) is a connect storm: N streaming requests released at
// the same instant, each on a fresh client connection (so each also needs a
// fresh connection from the proxy to the simulator), first against the
// relay and then against reverse_proxy, in -storm-rounds rounds whose
// order alternates. Every request is classified: "ok" (200 ending with
// data: [DONE]), "status N <code>" (the error code of a JSON error body),
// "in-band <code>" (a 200 stream carrying an error event), "truncated", or
// the client-side transport error.

// fdsPerStream is what one stream holds open in the process that holds
// the most: the proxy's accepted connection and its connection to the
// simulator (the client's and the simulator's are one each, in their own
// processes).
const fdsPerStream = 2

// stormResult counts one target's outcomes over every round.
type stormResult struct {
	name     string
	outcomes map[string]int
	slowest  time.Duration
}

// runStorms runs the storm rounds and prints the table.
func runStorms(o options, targets []*target) {
	if err := checkFDs(o.storm); err != nil {
		fatalf("%v", err)
	}
	body := requestBody(true, 0)
	res := make([]*stormResult, len(targets))
	for i, t := range targets {
		res[i] = &stormResult{name: t.name, outcomes: map[string]int{}}
	}
	for r := range o.stormRounds {
		for k := range targets {
			i := k
			if r%2 == 1 {
				i = len(targets) - 1 - k
			}
			start := time.Now()
			storm(targets[i], body, o.storm, res[i])
			fmt.Printf("round %d: %-13s %d streams in %.1fs\n", r+1, targets[i].name, o.storm, time.Since(start).Seconds())
			// Let the sockets of the last storm close before the next.
			time.Sleep(2 * time.Second)
		}
	}
	fmt.Printf("\nstorm: %d new streams at once, %d rounds per target\n", o.storm, o.stormRounds)
	for _, sr := range res {
		failed := 0
		for k, n := range sr.outcomes {
			if k != "ok" {
				failed += n
			}
		}
		fmt.Printf("%-13s failed %d of %d (slowest %.2fs)\n", sr.name, failed, o.storm*o.stormRounds, sr.slowest.Seconds())
		for _, k := range slices.Sorted(maps.Keys(sr.outcomes)) {
			fmt.Printf("    %6d  %s\n", sr.outcomes[k], k)
		}
	}
}

// checkFDs refuses n streams a process cannot hold open (Go raises every
// process's soft limit to the hard one, this one's and the children's).
func checkFDs(n int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return nil // unknown: try
	}
	need := uint64(n)*fdsPerStream + 256
	if need > lim.Cur {
		return fmt.Errorf("%d streams need about %d open files in the proxy's process (%d per stream) but the limit is %d; open fewer or raise ulimit -n",
			n, need, fdsPerStream, lim.Cur)
	}
	return nil
}

// storm releases n requests to t at once and files their outcomes.
func storm(t *target, body []byte, n int, sr *stormResult) {
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		ready sync.WaitGroup
		gate  = make(chan struct{})
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ready.Add(n)
	for range n {
		wg.Go(func() {
			// A transport of its own without keep-alive: a fresh
			// connection for every stream.
			tr := &http.Transport{
				Proxy:              nil,
				DisableKeepAlives:  true,
				DisableCompression: true,
				DialContext:        (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
			}
			defer tr.CloseIdleConnections()
			ready.Done()
			<-gate
			start := time.Now()
			k := stormOnce(ctx, tr, t.url, body)
			d := time.Since(start)
			mu.Lock()
			sr.outcomes[k]++
			sr.slowest = max(sr.slowest, d)
			mu.Unlock()
		})
	}
	ready.Wait()
	close(gate)
	wg.Wait()
}

// stormOnce sends one streaming request and classifies its outcome.
func stormOnce(ctx context.Context, tr *http.Transport, url string, body []byte) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "building request: " + err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return "transport: " + shortErr(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("status %d %s", resp.StatusCode, errorCode(b))
	}
	if err != nil {
		return "reading body: " + shortErr(err)
	}
	if i := bytes.Index(b, []byte(`"error"`)); i >= 0 {
		return "in-band " + inBandCode(b[i:])
	}
	if !bytes.HasSuffix(bytes.TrimRight(b, "\n"), []byte("data: [DONE]")) {
		return "truncated (no data: [DONE])"
	}
	return "ok"
}

// errorCode reads the code of an OpenAI-style JSON error body.
func errorCode(b []byte) string {
	var e struct {
		Error struct {
			Code any `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Code != nil {
		return fmt.Sprint(e.Error.Code)
	}
	if len(b) == 0 {
		return "(empty body)"
	}
	return "(not a JSON error)"
}

// inBandCode finds the code of an in-band error event.
func inBandCode(b []byte) string {
	if i := bytes.Index(b, []byte(`"code":"`)); i >= 0 {
		rest := b[i+len(`"code":"`):]
		if j := bytes.IndexByte(rest, '"'); j >= 0 {
			return string(rest[:j])
		}
	}
	return "error"
}

// shortErr drops addresses and ports, so equal failures count together.
func shortErr(err error) string {
	var ne *net.OpError
	if errors.As(err, &ne) && ne.Err != nil {
		return ne.Op + ": " + ne.Err.Error()
	}
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}
