// Command relaychaos is the relay's chaos suite: anyone can run it on one
// machine, with no network beyond 127.0.0.1 and no API keys.
//
// Usage:
//
//	go run ./cmd/relaychaos -duration 60s [-concurrency 64] [-reload 5s] [-seed N]
//
// In one process it starts Caddy (caddy.Load, as `caddy run` or an admin
// API POST /load would) with four sites on free 127.0.0.1 ports:
// llm_simulator (the healthy upstream), llm_relay in front of it (the
// healthy load of the reload comparison), a second llm_relay with the
// same settings in front of the simulator, the suite's own misbehaving
// upstream (an http.Server in this process) and a closed port (the chaos
// cases), and a plain reverse_proxy in front of the simulator. The
// misbehaving upstream is told what to do by the model name the relay
// sends it: each chaos case is a model alias of the relay (see -list).
//
// A quarter of the workers send healthy requests through the relay, a
// quarter the very same requests through reverse_proxy, and half cycle
// through the chaos cases; each request is streaming or not at random.
// Every -reload the config is reloaded with a small change. Every request
// has its own client deadlines, derived from the relay's timeouts: the
// response headers within try_duration+2s, then no more than
// stream_idle_timeout+2s without an SSE event (heartbeats do not count)
// or body bytes. Every response is classified (see internal/chaos):
//
//	complete     a well-formed answer; a stream that ended with [DONE]
//	             (/v1/messages: message_stop; /v1/responses: response.completed)
//	continued    a complete stream the relay continued on another target
//	             after it broke past the commit point (a `: relay-continued`
//	             comment marks each seam)
//	error        an HTTP error with an error object, or an in-band error event
//	abort        the connection broke after the response began (the
//	             documented abort of a broken non-stream body), or before
//	             it with no reload running
//	reload-fail  EOF/reset before any response byte while a reload ran
//	HANG         still open past a client deadline
//	TRUNCATED    a 200 stream that ended cleanly without [DONE] or an
//	             error event; a non-stream 200 body that is not complete JSON
//	malformed    a 3xx passed through, an error status without an error
//	             object, a data event that is not JSON
//	wrong        (a column, not a class) the case's own expectation
//	             missed, e.g. 429-only must give 429 with Retry-After
//
// The continuation cases (cont-*, issue 30) are chains of two or three
// targets on the misbehaving upstream that break their streams after the
// commit point at random points (a dropped connection, a server error
// event, a stall past stream_idle_timeout), with `after_commit continue`,
// for Chat, Messages and Responses clients. Every target writes the same
// answer, continuing the answer so far it is sent, so a stream that ends
// well must show the client exactly that answer (a strict prefix of it is
// TRUNCATED, other text wrong), and every stream of theirs must be well
// formed for its dialect: one chunk id, role and finish_reason (Chat);
// one message_start and content-block indices in order (Messages); one
// response.created, sequence_number rising by one and output items in
// order (Responses). The Responses cases check the text only for
// truncation until the Responses splice lands (responsesExact).
//
// Beside the load run the fleet cases (-list shows them as redis-*): a
// redis-server and two relay instances on it, each this binary again
// (-peer) as a process of its own. Into their shared state go keys of the
// wrong type, a negative count, a time an hour ahead; then a key's
// max_concurrent and rpm must hold across the two, neither broken nor
// held shut, and the shared state must stay up. Last, resume-edge-kill
// (edgekill.go): streams journaled in Redis by A, A killed mid-stream,
// then served, resumed and retried on B. Without redis-server they are
// skipped, unless RELAY_REQUIRE_REDIS=1.
//
// It prints the table per case and in total, the reload failures of the
// relay next to reverse_proxy's under the same load, and the process's
// goroutines, open fds and RSS before, at peak and after (after: the
// load stopped, idle client connections closed, one more reload, up to
// 10 s for things to settle). It exits 1 on any HANG, TRUNCATED,
// malformed or wrong answer of the relay, on a fleet case whose limits
// did not hold, on any failed reload, and when
// goroutines, fds or RSS are not back to the baseline; it says why.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmrelay/caddy-llm-relay/cmd/internal/inproc"
	"github.com/llmrelay/caddy-llm-relay/internal/chaos"
)

type options struct {
	duration    time.Duration
	concurrency int
	reload      time.Duration
	seed        uint64
	only, skip  string
	list        bool
	logLevel    string
	settle      time.Duration
	peer        string
	resumers    int
}

func parseFlags() options {
	var o options
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "how long to send requests (in-flight ones then finish)")
	flag.IntVar(&o.concurrency, "concurrency", 64, "concurrent clients: 1/4 healthy via the relay, 1/4 the same via reverse_proxy, 1/2 chaos")
	flag.DurationVar(&o.reload, "reload", 5*time.Second, "reload the config this often; 0 = never")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the request mix and the garbage bytes")
	flag.StringVar(&o.only, "only", "", "comma-separated chaos cases to run (default: all; see -list)")
	flag.StringVar(&o.skip, "skip", "", "comma-separated chaos cases to leave out")
	flag.BoolVar(&o.list, "list", false, "list the chaos cases and exit")
	flag.StringVar(&o.logLevel, "log", "", `Caddy's log level to stderr, e.g. ERROR or INFO (default: discarded)`)
	flag.DurationVar(&o.settle, "settle", 10*time.Second, "how long the end may take to return to the baseline")
	flag.IntVar(&o.resumers, "resume-workers", 4, "clients of the resume cases (beside -concurrency): each disconnects from its streams at random points and resumes them")
	flag.StringVar(&o.peer, "peer", "", "(internal) run as a fleet case's relay instance, from this directory's Caddyfile, until stdin closes")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: go run ./cmd/relaychaos [flags]\n\n"+
			"The relay's chaos suite: llm_relay in front of llm_simulator and a misbehaving\n"+
			"upstream, mixed clients, config reloads, every response classified.\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fatalf("unexpected arguments: %s", strings.Join(flag.Args(), " "))
	}
	switch {
	case o.duration <= 0:
		fatalf("-duration must be positive")
	case o.concurrency < 3:
		fatalf("-concurrency must be at least 3 (one relay, one reverse_proxy, one chaos client)")
	case o.reload < 0:
		fatalf("-reload must not be negative")
	case o.resumers < 0:
		fatalf("-resume-workers must not be negative")
	}
	return o
}

// selectCases applies -only and -skip to the chaos cases, the fleet
// cases and the resume cases.
func selectCases(o options) ([]chaosCase, []chaos.RedisCase, []resumeCase) {
	all := cases()
	known := map[string]bool{}
	for _, c := range all {
		known[c.name] = true
	}
	for _, c := range chaos.RedisCases() {
		known[c.Name] = true
	}
	for _, c := range resumeCases() {
		known[c.name] = true
	}
	set := func(list string) map[string]bool {
		m := map[string]bool{}
		for _, n := range strings.Split(list, ",") {
			if n = strings.TrimSpace(n); n == "" {
				continue
			}
			if !known[n] {
				fatalf("unknown chaos case %q (see -list)", n)
			}
			m[n] = true
		}
		return m
	}
	only, skip := set(o.only), set(o.skip)
	var out []chaosCase
	for _, c := range all {
		if (len(only) == 0 || only[c.name]) && !skip[c.name] {
			c.alias = "chaos-" + c.name
			if c.path == "" {
				c.path = "chat/completions"
			}
			out = append(out, c)
		}
	}
	var rcs []chaos.RedisCase
	for _, c := range chaos.RedisCases() {
		if (len(only) == 0 || only[c.Name]) && !skip[c.Name] {
			rcs = append(rcs, c)
		}
	}
	var res []resumeCase
	for _, c := range resumeCases() {
		if (len(only) == 0 || only[c.name]) && !skip[c.name] {
			res = append(res, c)
		}
	}
	if len(out) == 0 && len(rcs) == 0 && len(res) == 0 {
		fatalf("no chaos case left to run")
	}
	return out, rcs, res
}

func main() {
	o := parseFlags()
	if o.peer != "" {
		os.Exit(runPeer(o.peer))
	}
	cs, rcs, res := selectCases(o)
	cleanup, err := inproc.PrivateData() // no state from, or for, another run
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer cleanup()
	if o.list {
		for _, c := range cs {
			fmt.Printf("%-22s %s\n", c.name, c.about)
		}
		for _, c := range rcs {
			fmt.Printf("%-22s %s\n", c.Name, c.About)
		}
		for _, c := range res {
			fmt.Printf("%-22s %s\n", c.name, c.about)
		}
		return
	}
	fmt.Printf("relaychaos: %s, GOMAXPROCS=%d, %s/%s; -duration %s -concurrency %d -reload %s -seed %d\n",
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, o.duration, o.concurrency, o.reload, o.seed)
	fmt.Printf("relay: first_byte_timeout %s, try_duration %s, stream_idle_timeout %s, heartbeat %s; client deadlines: headers %s, idle %s\n",
		firstByteTimeout, tryDuration, streamIdleTimeout, heartbeat, tryDuration+clientMargin, streamIdleTimeout+clientMargin)

	os.Exit(run(o, cs, rcs, res))
}

// run is the whole suite; it returns the exit code.
func run(o options, cs []chaosCase, rcs []chaos.RedisCase, res []resumeCase) int {
	pp, err := inproc.FreePorts(7)
	if err != nil {
		fatalf("%v", err)
	}
	p := ports{sim: pp[0], relay: pp[1], chaos: pp[2], proxy: pp[3], bad: pp[4], dead: pp[5], resume: pp[6]} // dead: nothing listens there

	up := chaos.NewUpstream(chaos.UpstreamParams{MaxStall: 2 * time.Minute, StormPeriod: 4 * time.Second, RetryAfter: 1, Seed: o.seed})
	badLn, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p.bad))
	if err != nil {
		fatalf("misbehaving upstream: %v", err)
	}
	badSrv := &http.Server{Handler: up, ReadHeaderTimeout: 10 * time.Second, ErrorLog: discardLog()}
	go func() { _ = badSrv.Serve(badLn) }()
	defer func() {
		up.Close()
		_ = badSrv.Close()
	}()

	logOutput, logLevel := "discard", "ERROR"
	if o.logLevel != "" {
		logOutput, logLevel = "stderr", o.logLevel
	}
	ld := &loader{ports: p, cases: cs, resumes: res, logOutput: logOutput, logLevel: logLevel}
	if err := ld.load(); err != nil {
		fatalf("starting Caddy: %v", err)
	}
	defer func() { _ = caddy.Stop() }()
	fmt.Printf("ports on 127.0.0.1: sim %d, relay %d, relay (chaos cases) %d, relay (resume cases) %d, reverse_proxy %d, misbehaving upstream %d, closed %d\n",
		p.sim, p.relay, p.chaos, p.resume, p.proxy, p.bad, p.dead)

	client := newClient(o.concurrency)
	lim := chaos.Limits{
		FirstByte: tryDuration + clientMargin,
		Idle:      streamIdleTimeout + clientMargin,
		Total:     tryDuration + 6*streamIdleTimeout + 10*time.Second,
		MaxBody:   1 << 20,
	}
	d := &driver{o: o, client: client, lim: lim, ld: ld, cases: cs,
		relay: fmt.Sprintf("http://127.0.0.1:%d", p.relay), chaos: fmt.Sprintf("http://127.0.0.1:%d", p.chaos),
		proxy: fmt.Sprintf("http://127.0.0.1:%d", p.proxy)}
	if err := d.warmUp(); err != nil {
		fatalf("warm-up: %v", err)
	}
	client.CloseIdleConnections()
	if err := ld.load(); err != nil { // a fresh config: the baseline holds no warm-up connections
		fatalf("reload before the baseline: %v", err)
	}
	base := settledSnapshot(250 * time.Millisecond)
	fmt.Printf("\nbefore  %s\n", base)

	// The fleet cases run beside the load, in processes of their own;
	// they are over (and their processes gone) before the after check.
	fleetDone := make(chan fleetOutcome, 1)
	go func() { fleetDone <- runFleet(rcs) }()
	// The resume cases run beside the load too, on clients of their own
	// (no keep-alive: a reload's closing of idle connections is not
	// theirs to tell apart).
	rz := &resumer{d: d, up: up, base: fmt.Sprintf("http://127.0.0.1:%d", p.resume), cases: res, est: map[string]int{},
		client: &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true, DisableCompression: true}}}
	resumeDone := make(chan *resumeResults, 1)
	go func() { resumeDone <- rz.run(o.resumers, time.Now().Add(o.duration), maxResumeIterations) }()
	results := d.run()
	resumed := <-resumeDone
	fleet := <-fleetDone
	nReloads, meanReload, maxReload := ld.stats()

	// After: no load, no idle client connections, one more reload (the
	// replaced config must let go of everything), then wait for idle.
	client.CloseIdleConnections()
	finalReloadErr := ld.load()
	after, settledIn := waitForBaseline(base, o.settle)

	code := report(os.Stdout, results, cs, reloadFigures{n: nReloads, mean: meanReload, max: maxReload, every: o.reload})
	fleetWhy := reportFleet(os.Stdout, fleet)
	resumeWhy := reportResume(os.Stdout, resumed, res)
	fmt.Printf("\nresources (after: load stopped, idle client connections closed, one more reload, waited %s)\n", settledIn.Round(10*time.Millisecond))
	fmt.Printf("  before  %s\n  peak    %s\n  after   %s\n", base, results.peak, after)

	var why []string
	why = append(why, results.verdict()...)
	why = append(why, fleetWhy...)
	why = append(why, resumeWhy...)
	if results.reloadErrs > 0 {
		why = append(why, fmt.Sprintf("%d config reloads failed (first: %s)", results.reloadErrs, results.firstReloadErr))
	}
	if finalReloadErr != nil {
		why = append(why, "the final reload failed: "+finalReloadErr.Error())
	}
	leaks := chaos.Leaks(base, after, leakMargins)
	why = append(why, leaks...)
	if len(leaks) > 0 {
		printGoroutines(os.Stdout, 12)
	}
	if code != 0 || len(why) > 0 {
		fmt.Printf("\nFAIL\n")
		for _, w := range why {
			fmt.Printf("  - %s\n", w)
		}
		return 1
	}
	held := ""
	if len(fleet.rows) > 0 {
		held = ", fleet limits held on Redis"
	}
	fmt.Printf("\nPASS: no hang, no silent truncation, no malformed or wrong answer%s, back to baseline\n", held)
	return 0
}

// maxResumeIterations bounds each resume worker's logical requests.
const maxResumeIterations = 2000

// leakMargins: how far above the baseline "back to baseline" may be. A
// few goroutines and fds come and go (timers, the runtime, Caddy's own);
// a leak of one per request or per reload is far above these.
var leakMargins = chaos.Margins{Goroutines: 10, FDs: 10, RSSRatio: 2}

func newClient(concurrency int) *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        2 * concurrency,
		MaxIdleConnsPerHost: concurrency,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	return &http.Client{
		Transport: tr,
		// A 3xx is an answer to judge, not to follow.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "relaychaos: "+format+"\n", args...)
	_ = caddy.Stop()
	os.Exit(2)
}
