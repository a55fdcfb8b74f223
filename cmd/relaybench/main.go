// Command relaybench measures the latency and throughput that the
// llm_relay handler adds on top of a plain Caddy reverse_proxy.
//
// Usage:
//
//	go run ./cmd/relaybench [flags]
//
// It starts three Caddy processes (this binary run as `relaybench -child
// <config>`), each on a free 127.0.0.1 port, so that each one's CPU time
// is its own:
//
//	sim            llm_simulator: a fake OpenAI-compatible provider that
//	               answers at once (no TTFB, `pattern steady 0` unless
//	               -tokens-per-sec) with a small fixed answer
//	relay          llm_relay in front of sim
//	reverse_proxy  a plain `reverse_proxy` in front of sim (the baseline)
//
// It then sends the same chat completion request
// (POST /v1/chat/completions, model sim-reasoner, non-streaming unless
// -stream) through relay and through reverse_proxy. The two targets are
// interleaved in rounds: -round requests to one target, then -round to
// the other, the order swapping every round (ABBA...), so slow drifts of
// the machine (CPU frequency, GC, other processes) hit both alike. Within
// a round -c workers share one keep-alive HTTP client. Each target gets
// at most -n measured requests, after -warmup unmeasured ones, and the
// whole run is cut off after -max-time.
//
// Every figure is client-side and includes the client, Caddy and the
// simulator, which all share the same CPUs; only the difference between
// the two targets is the relay's own cost. How to read the output:
//
//   - latency is the time from sending the request to having read the
//     whole response body (time to last byte, also for -stream);
//     p50/p90/p99 are the nearest-rank percentiles of the recorded
//     per-request latencies of successful requests;
//   - req/s is the target's completed requests divided by the wall time
//     of its own rounds, i.e. its throughput at concurrency -c;
//   - errors are transport failures, non-200 answers and bodies that do
//     not look complete (no JSON object, or no `data: [DONE]` for a
//     stream); requests cut off by -max-time are reported separately;
//   - the ratios are relay / reverse_proxy: above 1 means the relay is
//     slower (for latency) or faster (for req/s);
//   - the last line says whether the goal "relay p50 <= 1.10x
//     reverse_proxy" was met.
//
// With -stream and the default -tokens-per-sec 0 the simulator writes its
// events back to back, so several SSE events reach the proxies in one
// read: reverse_proxy then flushes once per read, while a proxy that
// flushes once per event pays one write per event. With a real model's
// pace (e.g. -tokens-per-sec 50) events arrive one by one and both flush
// per event.
//
// -cpuprofile F writes a CPU profile of the relay's process during the
// measured phase to F and one of reverse_proxy's to F.reverse_proxy;
// -memprofile an allocation profile of the relay's process over the whole
// run. Compare them with, e.g.,
//
//	go tool pprof -top -cum -hide 'Syscall6' F
//	go tool pprof -peek 'sse.\(\*Reader\).fill$' F
//
// -report runs every measurement issue 12 sets a target for (goals.go),
// each -reps times with fresh processes, and prints one table: each
// figure the median of its runs' ratios, against its target.
//
// -storm N runs connect storms instead of the measurements above: N
// streaming requests released at the same instant, each on a fresh client
// connection, against relay and then reverse_proxy (-storm-rounds rounds,
// alternating which goes first), and prints every outcome by status and
// error code for both. Each stream holds 4 file descriptors in this one
// process; use -tokens-per-sec (e.g. 50) so the streams overlap.
//
// -translate compares, through the same relay and the same simulator
// speaking Anthropic Messages, an OpenAI client (its stream translated
// event by event) with an Anthropic client (the stream passed through):
// the ratio is the cost of translation. -translate-responses does the same
// for Responses clients: the simulator as a Chat provider (the Responses
// stream made from Chat chunks) against the simulator answering Responses
// itself. Both state their goal as the issues' bound, 1.2x.
// -translate-gemini does it for Gemini clients (issue 32): a Gemini
// client's streamGenerateContent (?alt=sse) through the relay's Gemini
// front door to the simulator as a Chat provider (the Chat stream
// translated into Gemini's chunks) against a Chat client's stream of the
// same prompt to the same alias (passed through); goal 1.2x on p50 and on
// the relay's CPU per stream. It implies -stream.
//
// -handoff measures the baton pass (issue 28; handoff.go): Chat streams
// through a hand-off alias (reasoning on one simulator, answer on another,
// both `api chat`) beside plain streams of the answer target, and every
// hand-off's gap (the relay's own time from the hand-off point to the
// answer leg's request written) read from the relay's log lines:
// p50/p90/p99/max against the goal, p99 under 1 ms. -reasoning-tokens and
// -content-tokens size the legs, -tokens-per-sec paces them. With -hold N
// it measures memory per open stream instead: a hand-off stream held
// during its answer leg and during its reasoning, against a plain stream
// (goal: at most 2x). Neither is part of -report (see docs/benchmark.md).
//
// -after-commit compares streams through an alias with `failover {
// after_commit continue }` (issue 30: every committed stream goes through
// the continuer and its splice.Recorder, so that a break can be
// continued) against the same streams with after_commit error (today's
// path), in the same relay process: the cost of continuation for a
// stream that never breaks. Goal: 1.05x on p50 and on CPU per stream.
//
// -resume measures resumable streams (issue 31; resume.go): CPU per
// stream with `resume { }` against the same site without it (goal 1.25x),
// the journal's bytes per stream, and the latency of a resume at the
// stream URL with Last-Event-ID to its first replayed event (goal p99
// under 50 ms).
//
// -print-config prints the generated Caddyfile and JSON and exits.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"github.com/llmrelay/caddy-llm-relay/cmd/internal/inproc"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"
)

// options are the command's flags.
type options struct {
	concurrency     int
	requests        int
	warmup          int
	round           int
	maxTime         time.Duration
	stream          bool
	reasoningTokens int
	contentTokens   int
	tokensPerSec    float64
	cpuProfile      string
	memProfile      string
	printConfig     bool
	shadow          bool
	translate       bool
	translateResp   bool
	translateGemini bool
	split           bool
	handoff         bool
	afterCommit     bool
	resume          bool
	trace           bool
	resumeN         int
	stateRedis      bool
	hold            int
	storm           int
	stormRounds     int
	logLevel        string
	promptBytes     int
	mode            string
	report          bool
	reps            int
	inReport        bool // a run of -report, which states the goals in its table
}

func parseFlags() options {
	var o options
	flag.IntVar(&o.concurrency, "c", 32, "concurrent requests (workers) per round")
	flag.StringVar(&o.logLevel, "log-level", "INFO", "Caddy's log level (INFO: the relay's per-request line is on, as by default)")
	flag.IntVar(&o.promptBytes, "prompt-bytes", 0, "make the user message this many bytes long (a large prompt)")
	flag.IntVar(&o.requests, "n", 20000, "measured requests per target")
	flag.IntVar(&o.warmup, "warmup", 1000, "unmeasured warm-up requests per target")
	flag.IntVar(&o.round, "round", 500, "requests per round; rounds alternate between the targets")
	flag.DurationVar(&o.maxTime, "max-time", 60*time.Second, "time bound of the measured phase")
	flag.BoolVar(&o.stream, "stream", false, `send streaming requests ("stream":true); latency is time to last byte`)
	flag.IntVar(&o.reasoningTokens, "reasoning-tokens", 4, "simulator reasoning_tokens per answer")
	flag.IntVar(&o.contentTokens, "content-tokens", 16, "simulator content_tokens per answer")
	flag.Float64Var(&o.tokensPerSec, "tokens-per-sec", 0, "simulator pacing in tokens per second (pattern steady <n>); 0 = as fast as possible")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the relay's process during the measured phase to this file (and reverse_proxy's to this file plus .reverse_proxy)")
	flag.StringVar(&o.memProfile, "memprofile", "", "write an allocation profile of the relay's process (whole run) to this file at the end")
	flag.BoolVar(&o.printConfig, "print-config", false, "print the Caddyfile and its JSON, then exit")
	flag.BoolVar(&o.shadow, "shadow", false, "compare the relay with every request shadowed to a slow simulator (relay+shadow) against the plain relay, instead of relay against reverse_proxy")
	flag.BoolVar(&o.translateResp, "translate-responses", false, "compare a Responses stream translated for a Chat provider (`api chat`) against the same request answered natively (`api openai`), both from the simulator, instead of relay against reverse_proxy")
	flag.BoolVar(&o.translateGemini, "translate-gemini", false, "compare a Gemini client's stream (streamGenerateContent?alt=sse, translated from the Chat stream of an `api chat` upstream, the simulator) against a Chat client's stream of the same prompt to the same alias (passed through), by latency and the relay's CPU per stream; implies -stream")
	flag.BoolVar(&o.translate, "translate", false, "compare a translated stream (an OpenAI client, an `api anthropic` upstream: the simulator's Messages mode) against the same stream passed through (an Anthropic client, the same upstream), instead of relay against reverse_proxy")
	flag.BoolVar(&o.split, "split", false, "compare the relay's streams in split-reasoning mode against the same streams in mode off (X-Relay-Mode), by process CPU per stream; implies -stream")
	flag.BoolVar(&o.handoff, "handoff", false, "the baton pass (issue 28): Chat streams through a hand-off alias (reasoning on one simulator, answer on another, both api chat; -reasoning-tokens and -content-tokens size the legs) against plain streams of its answer target, and every hand-off's gap (the relay's time from the hand-off point to the answer leg's request written) read from the relay's log lines, p50/p99/max against the 1 ms p99 goal; with -hold, memory per open hand-off stream against a plain stream instead; implies -stream")
	flag.BoolVar(&o.afterCommit, "after-commit", false, "compare the relay's streams with `failover { after_commit continue }` (every committed stream recorded, so that a break can be continued; issue 30) against the same streams with after_commit error, through the same relay process and simulator (aliases sim-continue and sim-error), by latency, req/s and CPU per stream; implies -stream")
	flag.BoolVar(&o.resume, "resume", false, "resumable streams (issue 31): the relay's CPU per stream with `resume { }` against the same site without it, in the same relay process over the same simulator (goal 1.25x), the journal's bytes per stream, then -resume-n resumes (a stream dropped after a random event, resumed at its stream URL with Last-Event-ID) and their latency to the first replayed event, p50/p99 (goal p99 < 50ms); implies -stream")
	flag.BoolVar(&o.trace, "trace", false, "tracing (issue 33): the relay and reverse_proxy each with and without Caddy's `tracing` (sampler always_off, exporter none), four targets interleaved (rounds of 5000 unless -round is set); the relay's extra CPU per request under tracing beyond reverse_proxy's, against 5% of its untraced cost")
	flag.IntVar(&o.resumeN, "resume-n", 2000, "with -resume: resumes measured for the resume latency")
	flag.BoolVar(&o.stateRedis, "state-redis", false, "compare the relay with `state redis` (a redis-server on a unix socket, which must be installed) against the same relay with `state local`, both with a client key that has a budget and a price, so every request is accounted and its spend shared")
	flag.IntVar(&o.hold, "hold", 0, "memory per open stream: hold this many streams open against the relay in each mode and against reverse_proxy, one target at a time (the simulator slowed to a token every 5s; the other measurements are skipped)")
	flag.IntVar(&o.storm, "storm", 0, "connect storm: send this many streaming requests at once, each on a fresh connection, to the relay and to reverse_proxy, and count the failures of each (the other measurements are skipped)")
	flag.StringVar(&o.mode, "mode", "", "send X-Relay-Mode with this smoothing mode to the relay (off, pace, split-reasoning); empty: the relay's default")
	flag.BoolVar(&o.report, "report", false, "run every measurement issues 12 and 13 set a target for, one after the other, and print each figure against its target (the other flags but -log-level, -max-time, -reps and -c are ignored)")
	flag.IntVar(&o.reps, "reps", 3, "with -report: runs of each measurement (fresh processes each; memory per stream runs once); each figure is the median of its runs' ratios")
	flag.IntVar(&o.stormRounds, "storm-rounds", 3, "with -storm: storms per target, alternating which target goes first")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: go run ./cmd/relaybench [flags]\n\n"+
			"Benchmarks llm_relay against a plain reverse_proxy, both in front of\n"+
			"llm_simulator, each a Caddy in its own process on 127.0.0.1.\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fatalf("unexpected arguments: %s", strings.Join(flag.Args(), " "))
	}
	switch {
	case o.concurrency < 1:
		fatalf("-c must be at least 1")
	case o.requests < 1:
		fatalf("-n must be at least 1")
	case o.warmup < 0:
		fatalf("-warmup must not be negative")
	case o.round < 1:
		fatalf("-round must be at least 1")
	case o.maxTime <= 0:
		fatalf("-max-time must be positive")
	case o.tokensPerSec < 0:
		fatalf("-tokens-per-sec must not be negative")
	case o.reasoningTokens < 0 || o.contentTokens < 0:
		fatalf("-reasoning-tokens and -content-tokens must not be negative")
	case o.storm < 0 || o.stormRounds < 1:
		fatalf("-storm must not be negative and -storm-rounds must be at least 1")
	}
	return o
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "-child" {
		runChild(os.Args[2])
		return
	}
	o := parseFlags()

	cleanup, err := inproc.PrivateData() // no state from, or for, another run
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer cleanup()
	fmt.Printf("relaybench: %s, GOMAXPROCS=%d, NumCPU=%d, %s/%s\n",
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	var used []string
	flag.VisitAll(func(f *flag.Flag) { used = append(used, "-"+f.Name+"="+f.Value.String()) })
	fmt.Printf("flags: %s\n", strings.Join(used, " "))
	defer stopProcs()

	if o.report {
		runReport(o)
		return
	}
	runScenario(o)
}

// runScenario starts the processes for o, runs what its flags ask for and
// prints the figures; it returns them (nil for -storm and -hold, which
// print their own tables) with the per-stream memory of -hold.
func runScenario(o options) (sums []summary, holds []holdResult) {
	if o.hold > 0 && o.tokensPerSec == 0 && !o.handoff {
		// Streams that stay open: a token every 5 s after the first.
		o.tokensPerSec = 0.2
	}
	dir, err := os.MkdirTemp("", "relaybench-")
	if err != nil {
		fatalf("%v", err)
	}
	sites, err := startProcs(o, dir)
	if err != nil {
		fatalf("starting the processes: %v", err)
	}
	defer stopProcs()
	fmt.Printf("processes: sim %s (pid %d), relay %s (pid %d), reverse_proxy %s (pid %d); logs in %s\n",
		sites.sim, sites.simProc.cmd.Process.Pid, sites.relay, sites.relayProc.cmd.Process.Pid,
		sites.proxy, sites.proxyProc.cmd.Process.Pid, dir)
	if o.handoff {
		fmt.Printf("hand-off site (the relay process): %s\n", sites.handoff)
	}

	client := newClient(o.concurrency)
	body := requestBody(o.stream, o.promptBytes)
	relay, proxy := sites.relayProc, sites.proxyProc
	targets := []*target{
		{name: "relay", url: sites.relay + "/v1/chat/completions", proc: relay, mode: o.mode},
		{name: "reverse_proxy", url: sites.proxy + "/v1/chat/completions", proc: proxy},
	}
	if o.translate {
		targets = []*target{
			{name: "translated", url: sites.claude + "/v1/chat/completions", body: translatedBody(o.stream), proc: relay},
			{name: "passed_through", url: sites.claude + "/v1/messages", messages: true, proc: relay},
		}
	}
	if o.translateResp {
		targets = []*target{
			{name: "translated", url: sites.claude + "/v1/responses", body: responsesBody("sim-chat", o.stream), responses: true, proc: relay},
			{name: "native", url: sites.claude + "/v1/responses", body: responsesBody("sim-native", o.stream), responses: true, proc: relay},
		}
	}
	if o.translateGemini {
		o.stream = true
		targets = []*target{
			{name: "gemini", url: sites.claude + "/v1beta/models/sim-chat:streamGenerateContent?alt=sse", body: geminiBody(), gemini: true, key: "bench-key", proc: relay},
			{name: "native", url: sites.claude + "/v1/chat/completions", body: geminiChatBody(), key: "bench-key", proc: relay},
		}
	}
	if o.split {
		o.stream = true
		body = requestBody(true, o.promptBytes)
		targets = []*target{
			{name: "split-reasoning", url: sites.relay + "/v1/chat/completions", mode: "split-reasoning", proc: relay},
			{name: "off", url: sites.relay + "/v1/chat/completions", mode: "off", proc: relay},
		}
	}
	if o.afterCommit {
		o.stream = true
		body = requestBody(true, o.promptBytes)
		targets = []*target{
			{name: "continue", url: sites.relay + "/v1/chat/completions", body: withModel(body, "sim-continue"), mode: o.mode, proc: relay},
			{name: "error", url: sites.relay + "/v1/chat/completions", body: withModel(body, "sim-error"), mode: o.mode, proc: relay},
		}
	}
	if o.resume {
		o.stream = true
		body = requestBody(true, o.promptBytes)
		targets = resumeTargets(sites, relay)
	}
	if o.trace {
		targets = traceTargets(sites)
		if !flagSet("round") {
			o.round = traceRound
		}
	}
	if o.handoff {
		o.stream = true
		targets = handoffTargets(sites.handoff, relay, o.mode, o.promptBytes)
	}
	if o.stateRedis {
		targets = []*target{
			{name: "relay+redis", url: sites.redis + "/v1/chat/completions", key: "bench-key", proc: sites.redisProc},
			{name: "relay+local", url: sites.local + "/v1/chat/completions", key: "bench-key", proc: sites.localProc},
		}
	}
	if o.shadow {
		targets = []*target{
			{name: "relay+shadow", url: sites.shadowed + "/v1/chat/completions", proc: relay},
			{name: "relay", url: sites.relay + "/v1/chat/completions", proc: relay},
		}
	}

	// A first request to each target, so a broken setup fails fast with
	// a readable message instead of thousands of errors.
	if err := probe(newBench(client, targets, body, o.stream, 1, 1)); err != nil {
		fatalf("%v", err)
	}

	if o.storm > 0 {
		runStorms(o, targets)
		return nil, nil
	}
	if o.hold > 0 && o.handoff {
		return nil, runHolds(o, handoffHoldTargets(sites.handoff, relay, o.mode, o.promptBytes))
	}
	if o.hold > 0 {
		return nil, runHolds(o, holdTargets(sites.relay+"/v1/chat/completions", relay, sites.proxy+"/v1/chat/completions", proxy))
	}
	if o.handoff {
		sums, _ := runHandoff(o, client, targets)
		return sums, nil
	}

	if o.warmup > 0 {
		b := newBench(client, targets, body, o.stream, o.concurrency, o.round)
		b.run(context.Background(), o.warmup, min(o.maxTime, 15*time.Second))
		fmt.Printf("warm-up: %d requests per target\n", o.warmup)
	}

	stopProfile := startCPUProfile(targets, o.cpuProfile)
	runtime.GC()
	b := newBench(client, targets, body, o.stream, o.concurrency, o.round)
	elapsed := b.run(context.Background(), o.requests, o.maxTime)
	stopProfile()
	client.CloseIdleConnections()

	kind := "non-streaming"
	if o.stream {
		kind = "streaming"
	}
	fmt.Printf("\nmeasured: %s requests, concurrency %d, %.1fs wall time\n", kind, o.concurrency, elapsed.Seconds())
	goal := goalP50Ratio
	if o.translate || o.translateResp {
		goal = goalTranslateRatio
	}
	if o.translateGemini {
		goal = goalTranslateGeminiRatio
	}
	if o.stateRedis {
		goal = goalStateRedisRatio
	}
	if o.afterCommit {
		goal = goalAfterCommitRatio
	}
	if o.split || o.resume || o.trace || o.inReport {
		goal = 0 // split: a CPU goal, below; -report: each its own, in the table
	}
	sums = report(os.Stdout, b.results, o.requests, goal)
	if o.split && !o.inReport {
		reportCPUGoal(os.Stdout, b.results, goalSplitCPU)
	}
	if o.afterCommit && !o.inReport {
		reportCPUGoal(os.Stdout, b.results, goalAfterCommitRatio)
	}
	if o.translateGemini && !o.inReport {
		reportCPUGoal(os.Stdout, b.results, goalTranslateGeminiRatio)
	}
	if o.trace {
		reportTraceGoal(os.Stdout, b.results)
	}
	if o.resume {
		reportCPUGoal(os.Stdout, b.results, goalResumeCPU)
		runResume(o, client, targets, body)
	}
	if o.memProfile != "" {
		if _, err := relay.ask("memprofile " + o.memProfile); err != nil {
			fatalf("writing the relay's allocation profile: %v", err)
		}
		fmt.Printf("allocation profile of the relay process written to %s (try: go tool pprof -sample_index=alloc_space -top -focus=llmrelay %s)\n", o.memProfile, o.memProfile)
	}
	return sums, nil
}

// startCPUProfile starts a CPU profile of each target's process into
// path (the first target's, the relay's) and path.<name> (the others'),
// if path is set, and returns the function that stops them.
func startCPUProfile(targets []*target, path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	files := map[*proc]string{}
	for i, t := range targets {
		if _, ok := files[t.proc]; ok {
			continue
		}
		f := path
		if i > 0 {
			f = path + "." + t.name
		}
		if _, err := t.proc.ask("cpuprofile " + f); err != nil {
			fatalf("starting the %s process's CPU profile: %v", t.proc.name, err)
		}
		files[t.proc] = f
	}
	return func() {
		for p, f := range files {
			if _, err := p.ask("stopprofile"); err != nil {
				fatalf("writing the %s process's CPU profile: %v", p.name, err)
			}
			fmt.Printf("CPU profile of the %s process written to %s (try: go tool pprof -top -cum %s)\n", p.name, f, f)
		}
	}
}

// messagesBody is requestBody in Anthropic Messages, with thinking on so
// that the simulator sends its reasoning as it does in Chat.
func messagesBody(stream bool) []byte {
	s := `{"model":"sim-reasoner","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]`
	if stream {
		s += `,"stream":true`
	}
	return []byte(s + "}")
}

// translatedBody is requestBody with reasoning_effort minimal, which the
// relay translates to the thinking budget messagesBody asks for (1024), so
// both targets carry the same stream.
func translatedBody(stream bool) []byte {
	s := `{"model":"sim-reasoner","reasoning_effort":"minimal","messages":[{"role":"user","content":"hi"}]`
	if stream {
		s += `,"stream":true`
	}
	return []byte(s + "}")
}

// responsesBody is a Responses request for model, asking for reasoning so
// that the native simulator reasons as the Chat one always does.
func responsesBody(model string, stream bool) []byte {
	s := `{"model":"` + model + `","input":"hi","reasoning":{"effort":"low"}`
	if stream {
		s += `,"stream":true`
	}
	return []byte(s + "}")
}

// geminiBody is the Gemini request of -translate-gemini's translated
// target: the prompt of geminiChatBody, which is what the relay's front
// door makes of it (the model from the path; stream and usage added for
// :streamGenerateContent), so both targets carry the same Chat stream.
func geminiBody() []byte {
	return []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
}

// geminiChatBody is the Chat request a Chat client sends for
// -translate-gemini's native target.
func geminiChatBody() []byte {
	return []byte(`{"model":"sim-chat","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`)
}

// requestBody is the chat completion request every measured request
// sends: a one-word prompt, or with promptBytes a user message of about
// that many bytes of text (words, punctuation, a few escapes), as a long
// conversation or a pasted file makes.
func requestBody(stream bool, promptBytes int) []byte {
	content := "hi"
	if promptBytes > 0 {
		var b strings.Builder
		words := []string{"the ", "relay ", "streams ", "tokens, ", "and ", `\n`, `\"quotes\" `, "caddy ", "50% ", "<tag> "}
		for i := 0; b.Len() < promptBytes; i++ {
			b.WriteString(words[i%len(words)])
		}
		content = b.String()
	}
	s := `{"model":"sim-reasoner","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"` + content + `"}],"temperature":0.2`
	if stream {
		s += `,"stream":true`
	}
	return []byte(s + "}")
}

// probe sends one request to every target and reports the first one
// whose answer is wrong.
func probe(b *bench) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var buf bytes.Buffer
	for _, t := range b.targets {
		if out := b.do(ctx, t, &buf); out.err != nil {
			return fmt.Errorf("%s: probe request failed: %v", t.name, out.err)
		}
	}
	return nil
}

// newClient is the one HTTP client of the run: keep-alive connections,
// enough idle ones per host for every worker, no transparent gzip (so
// both targets return the same bytes).
func newClient(concurrency int) *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        4 * concurrency,
		MaxIdleConnsPerHost: 2 * concurrency,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "relaybench: "+format+"\n", args...)
	stopProcs()
	os.Exit(1)
}
