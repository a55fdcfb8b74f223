package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/chaos"
)

// driver sends the load.
type driver struct {
	o      options
	client *http.Client
	lim    chaos.Limits
	ld     *loader
	cases  []chaosCase
	relay  string // base URLs: the healthy relay site,
	chaos  string // the relay site of the chaos cases,
	proxy  string // reverse_proxy
}

// request is one request to send.
type request struct {
	site   string // "relay" or "reverse_proxy"
	cas    string // the case's name ("healthy" for the reload comparison)
	url    string
	alias  string
	stream bool
	want   chaos.Want
	resp   bool // a /v1/responses request
	msgs   bool // a /v1/messages request
	// dialect: check the stream's shape and text (chaos.CheckStream)
	dialect chaos.Dialect
}

func (d *driver) newRequest(site string, c *chaosCase, stream bool) request {
	base, alias, path, name := d.relay, "healthy", "chat/completions", "healthy"
	if site == siteProxy {
		base, alias = d.proxy, "sim-reasoner"
	}
	rq := request{site: site, stream: stream}
	if c != nil {
		base, alias, path, name, rq.want, rq.dialect = d.chaos, c.alias, c.path, c.name, c.want, c.dialect
	}
	rq.cas, rq.alias, rq.url, rq.resp, rq.msgs = name, alias, base+"/v1/"+path, path == "responses", path == "messages"
	return rq
}

const (
	siteRelay = "relay"
	siteProxy = "reverse_proxy"
)

func (rq request) body() []byte {
	s := `{"model":"` + rq.alias + `","stream":` + fmt.Sprint(rq.stream)
	if rq.resp {
		return []byte(s + `,"input":"hi"}`)
	}
	if rq.msgs {
		s += `,"max_tokens":256`
	}
	return []byte(s + `,"messages":[{"role":"user","content":"hi"}]}`)
}

// do sends one request and classifies its answer.
func (d *driver) do(rq request) (*chaos.Observation, chaos.Result) {
	req, err := http.NewRequest(http.MethodPost, rq.url, bytes.NewReader(rq.body()))
	if err != nil {
		panic(err) // the URL is ours
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	obs := chaos.Do(context.Background(), d.client, req, rq.stream, d.lim)
	obs.Responses = rq.resp
	obs.Dialect = rq.dialect
	if obs.PreResponseErr && !(rq.want.BodyAbort && !rq.stream) {
		obs.ReloadOverlap = d.ld.overlaps(start, time.Now())
	}
	return obs, rq.want.Judge(obs, chaos.Classify(obs))
}

// warmUp sends one healthy request of each kind to each site, so lazy
// initialisation is done before the baseline is taken.
func (d *driver) warmUp() error {
	for _, site := range []string{siteRelay, siteProxy, "chaos"} {
		for _, stream := range []bool{false, true} {
			rq := d.newRequest(site, nil, stream)
			if site == "chaos" {
				rq.url = d.chaos + "/v1/chat/completions"
			}
			obs, r := d.do(rq)
			if r.Class != chaos.Complete {
				return fmt.Errorf("%s %s: %s (%s; status %d)", site, mode(stream), r.Class, r.Detail, obs.Status)
			}
		}
	}
	return nil
}

func mode(stream bool) string {
	if stream {
		return "stream"
	}
	return "non-stream"
}

// row is the tally of one (site, case, mode).
type row struct {
	site, cas string
	stream    bool
	want      chaos.Want

	n         int
	classes   [chaos.NumClasses]int
	statuses  map[int]int
	preResp   int // transport failures before any response byte, reload or not
	wrong     int
	examples  [chaos.NumClasses]string
	wrongWhy  string
	fiveXX    int
	durations []time.Duration
}

// results is the outcome of the load phase.
type results struct {
	mu             sync.Mutex
	rows           map[string]*row
	peak           chaos.Snapshot
	reloadErrs     int
	firstReloadErr string
	elapsed        time.Duration
}

func (res *results) add(rq request, obs *chaos.Observation, r chaos.Result, took time.Duration) {
	key := rq.site + "|" + rq.cas + "|" + mode(rq.stream)
	res.mu.Lock()
	defer res.mu.Unlock()
	rw := res.rows[key]
	if rw == nil {
		rw = &row{site: rq.site, cas: rq.cas, stream: rq.stream, want: rq.want, statuses: map[int]int{}}
		res.rows[key] = rw
	}
	rw.n++
	rw.classes[r.Class]++
	rw.durations = append(rw.durations, took)
	if obs.Status != 0 {
		rw.statuses[obs.Status]++
	}
	if obs.PreResponseErr {
		rw.preResp++
	}
	if obs.Status >= 500 {
		rw.fiveXX++
	}
	if rw.examples[r.Class] == "" {
		rw.examples[r.Class] = r.Detail
	}
	if why := rq.want.Check(obs, r); why != "" {
		rw.wrong++
		if rw.wrongWhy == "" {
			rw.wrongWhy = why
		}
	}
}

// count counts one class over the rows of a site ("" = every site).
func (res *results) count(site string, c chaos.Class) int {
	n := 0
	for _, rw := range res.rows {
		if site == "" || rw.site == site {
			n += rw.classes[c]
		}
	}
	return n
}

// run sends the load for -duration, with reloads and a resource
// sampler, and waits for every request to finish.
func (d *driver) run() *results {
	res := &results{rows: map[string]*row{}}
	start := time.Now()
	end := start.Add(d.o.duration)
	stop := make(chan struct{})
	var bg sync.WaitGroup

	// The sampler keeps the peak of goroutines, fds and RSS.
	bg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			s := chaos.Measure()
			res.mu.Lock()
			res.peak = res.peak.Max(s)
			res.mu.Unlock()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	if d.o.reload > 0 {
		bg.Go(func() {
			t := time.NewTicker(d.o.reload)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				if err := d.ld.load(); err != nil {
					res.mu.Lock()
					if res.reloadErrs == 0 {
						res.firstReloadErr = err.Error()
					}
					res.reloadErrs++
					res.mu.Unlock()
				}
			}
		})
	}
	bg.Go(func() { // progress, so a crash shows how far it got
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			res.mu.Lock()
			n := 0
			for _, rw := range res.rows {
				n += rw.n
			}
			fmt.Printf("  t=%3.0fs  %6d answers  relay: %d hangs, %d truncated\n", time.Since(start).Seconds(), n,
				res.count(siteRelay, chaos.Hang), res.count(siteRelay, chaos.Truncation))
			res.mu.Unlock()
		}
	})

	// A quarter of the workers: healthy via the relay; a quarter: the very
	// same requests via reverse_proxy; the rest: the chaos cases in turn.
	nHealthy := d.o.concurrency / 4
	var workers sync.WaitGroup
	for i := range d.o.concurrency {
		var kind string
		switch {
		case i < nHealthy:
			kind = siteRelay
		case i < 2*nHealthy:
			kind = siteProxy
		default:
			kind = "chaos"
		}
		seed := d.o.seed*1000 + uint64(i)
		if kind == siteProxy {
			seed -= uint64(nHealthy) // the same stream/non-stream sequence as its relay twin
		}
		workers.Go(func() {
			rng := rand.New(rand.NewPCG(seed, 0x6368616f73))
			for it := 0; time.Now().Before(end); it++ {
				stream := rng.IntN(2) == 0
				var rq request
				if kind == "chaos" && len(d.cases) > 0 {
					c := &d.cases[(i+it)%len(d.cases)]
					rq = d.newRequest(siteRelay, c, stream || c.streamOnly)
				} else if kind == "chaos" { // only fleet cases selected
					rq = d.newRequest(siteRelay, nil, stream)
				} else {
					rq = d.newRequest(kind, nil, stream)
				}
				t0 := time.Now()
				obs, r := d.do(rq)
				res.add(rq, obs, r, time.Since(t0))
			}
		})
	}
	workers.Wait()
	res.elapsed = time.Since(start)
	close(stop)
	bg.Wait()
	return res
}

// verdict lists why the run fails: any hang or silent truncation, a
// malformed answer from the relay (reverse_proxy's empty-bodied 502s
// are Caddy's), a case's expectation missed.
func (res *results) verdict() []string {
	var out []string
	for _, f := range []struct {
		site string
		c    chaos.Class
	}{{"", chaos.Hang}, {"", chaos.Truncation}, {siteRelay, chaos.Malformed}} {
		if n := res.count(f.site, f.c); n > 0 {
			var where []string
			for _, k := range res.sortedKeys() {
				if rw := res.rows[k]; (f.site == "" || rw.site == f.site) && rw.classes[f.c] > 0 {
					where = append(where, fmt.Sprintf("%s %s %s ×%d", rw.site, rw.cas, mode(rw.stream), rw.classes[f.c]))
				}
			}
			out = append(out, fmt.Sprintf("%d %s answers: %s", n, f.c, strings.Join(where, ", ")))
		}
	}
	wrong, where := 0, []string(nil)
	for _, k := range res.sortedKeys() {
		if rw := res.rows[k]; rw.wrong > 0 {
			wrong += rw.wrong
			where = append(where, fmt.Sprintf("%s %s ×%d (%s)", rw.cas, mode(rw.stream), rw.wrong, rw.wrongWhy))
		}
	}
	if wrong > 0 {
		out = append(out, fmt.Sprintf("%d wrong answers: %s", wrong, strings.Join(where, ", ")))
	}
	return out
}
