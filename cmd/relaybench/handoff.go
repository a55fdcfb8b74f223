package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"time"
)

// -handoff measures the baton pass (issue 28): a hand-off alias whose
// reasoning leg is one simulator and whose answer leg is another, both
// `api chat`, each a site of its own in the simulator's process (so each
// leg has its own connection pool in the relay, as two providers would).
// The client sends Chat streams.
//
// The figure is the relay's own time from the hand-off point (the
// reasoning leg's first answer chunk) to the answer leg's request being
// written to its connection (httptrace WroteRequest), which the relay
// measures for every request (handoffSource.startAnswer) and logs as the
// `gap` of the log line's `handoff` object. The bench reads every measured
// request's line from the relay process's log (its stderr, a file): each
// request's exact figure, where the llm_relay_handoff_gap_seconds
// histogram only has buckets. It prints p50/p90/p99/max against the
// issue's bound (p99 under 1 ms), beside the time to last byte of the
// hand-off streams and of plain streams of an alias with the same `to`
// line and no `reason` lines.
//
// With -hold N it measures memory per open stream instead: a hand-off
// stream held during its answer leg, one held during its reasoning, and a
// plain stream of the answer leg's target, each after the same kind of
// first event (see handoffHoldTargets).

// handoffSimSites are the legs' simulators (-handoff), in the simulator's
// process. reason writes its reasoning, then an answer the relay never
// reads (the reasoning leg is stopped at its first answer chunk); answer
// writes no reasoning, only the answer. The -slow ones keep a stream open
// in the phase a hold measures: reason-slow sends a reasoning token every
// 5 s after the first, answer-slow reasons at once and then sends an
// answer token every 5 s after the first. Ports: reason, answer,
// reason-slow, answer-slow; then the reasoning and content tokens and the
// steady pace of the fast ones.
const handoffSimSites = `
http://:%[1]d {
	bind 127.0.0.1
	llm_simulator {
		seed 28
		reasoning_tokens %[5]d
		content_tokens 16
		pattern steady %[7]s
		ttfb 0
	}
}

http://:%[2]d {
	bind 127.0.0.1
	llm_simulator {
		seed 29
		reasoning_tokens 0
		content_tokens %[6]d
		pattern steady %[7]s
		ttfb 0
	}
}

http://:%[3]d {
	bind 127.0.0.1
	llm_simulator {
		seed 28
		reasoning_tokens %[5]d
		content_tokens 16
		reasoning_pattern steady 0.2
		content_pattern steady 0
		ttfb 0
	}
}

http://:%[4]d {
	bind 127.0.0.1
	llm_simulator {
		seed 29
		reasoning_tokens 0
		content_tokens %[6]d
		pattern steady 0.2
		ttfb 0
	}
}
`

// handoffRelaySite is the relay's site for -handoff: the hand-off alias
// (handoff), the plain alias of the same answer target (plain), and for
// -hold the same pair over the slow simulators. Every upstream is `api
// chat`, so the reasoning is injected into the last user turn (`inject
// user`, the default for a Chat target). Ports: the site, then the
// simulators as in handoffSimSites.
const handoffRelaySite = `
http://:%[1]d {
	bind 127.0.0.1
	llm_relay {
		upstream reason http://127.0.0.1:%[2]d/v1 {
			api chat
		}
		upstream answer http://127.0.0.1:%[3]d/v1 {
			api chat
		}
		upstream reason-slow http://127.0.0.1:%[4]d/v1 {
			api chat
		}
		upstream answer-slow http://127.0.0.1:%[5]d/v1 {
			api chat
		}
		model handoff {
			reason reason sim-r1
			to answer sim-chat
		}
		model plain {
			to answer sim-chat
		}
		model handoff-hold-answer {
			reason reason sim-r1
			to answer-slow sim-chat
		}
		model handoff-hold-reason {
			reason reason-slow sim-r1
			to answer-slow sim-chat
		}
		model plain-hold {
			to answer-slow sim-chat
		}
	}
}
`

// withModel is a request body for another model (the bench's bodies all
// name sim-reasoner).
func withModel(body []byte, model string) []byte {
	return bytes.Replace(body, []byte(`"model":"sim-reasoner"`), []byte(`"model":"`+model+`"`), 1)
}

// handoffTargets are the gap measurement's targets: hand-off streams and,
// as the baseline, plain streams of the same answer target.
func handoffTargets(site string, relay *proc, mode string, promptBytes int) []*target {
	body := requestBody(true, promptBytes)
	return []*target{
		{name: "handoff", url: site + "/v1/chat/completions", body: withModel(body, "handoff"), mode: mode, proc: relay},
		{name: "plain", url: site + "/v1/chat/completions", body: withModel(body, "plain"), mode: mode, proc: relay},
	}
}

// handoffHoldTargets are -handoff -hold's targets, the baseline last. A
// hand-off stream is held during its answer leg (the reasoning streamed,
// the reasoning leg stopped, the answer's first token read), where it
// holds the most: the reasoning text, the answer leg's body with the
// reasoning injected, and the answer leg's stream and connection. It is
// also held during its reasoning (the first reasoning token read, the
// reasoning leg's connection open), the phase a reasoning model spends
// longest in. The plain stream is held after its first answer token. All
// send the same conversation (-prompt-bytes), which the relay keeps while
// a stream is open.
func handoffHoldTargets(site string, relay *proc, mode string, promptBytes int) []*target {
	body := requestBody(true, promptBytes)
	url := site + "/v1/chat/completions"
	return []*target{
		{name: "handoff answer", url: url, body: withModel(body, "handoff-hold-answer"), mode: mode, proc: relay, holdUntil: hasContent},
		{name: "handoff reason", url: url, body: withModel(body, "handoff-hold-reason"), mode: mode, proc: relay, holdUntil: hasReasoning},
		{name: "plain", url: url, body: withModel(body, "plain-hold"), mode: mode, proc: relay, holdUntil: hasContent},
	}
}

// hasContent reports a Chat chunk line with answer text (not the role
// chunk's empty or null content).
func hasContent(line []byte) bool {
	i := bytes.Index(line, []byte(`"content":"`))
	return i >= 0 && i+len(`"content":"`) < len(line) && line[i+len(`"content":"`)] != '"'
}

// hasReasoning reports a Chat chunk line with reasoning text.
func hasReasoning(line []byte) bool {
	i := bytes.Index(line, []byte(`"reasoning_content":"`))
	return i >= 0 && i+len(`"reasoning_content":"`) < len(line) && line[i+len(`"reasoning_content":"`)] != '"'
}

// gapResult is what the hand-off lines of the measured requests say.
type gapResult struct {
	gaps      []time.Duration // sorted
	noGap     int             // hand-off lines without a gap (the answer leg never wrote: the client left)
	streams   int             // successful hand-off streams the client counted
	p50, p90  time.Duration
	p99, max  time.Duration
	config    string
	reasoning int // the reasoning leg's reasoning tokens, as the log line estimates them (median)
	// runWait is the time the relay's threads waited for a CPU, per
	// second of the measured phase: how busy the machine was for it (a
	// gap's tail is mostly such waits; see docs/benchmark.md).
	runWait float64
}

// runHandoff runs -handoff's gap measurement on targets (the hand-off
// alias first) and prints the figures.
func runHandoff(o options, client *http.Client, targets []*target) ([]summary, *gapResult) {
	relay := targets[0].proc
	if o.warmup > 0 {
		b := newBench(client, targets, nil, true, o.concurrency, o.round)
		b.run(context.Background(), o.warmup, min(o.maxTime, 15*time.Second))
		fmt.Printf("warm-up: %d requests per target\n", o.warmup)
	}
	from := settledSize(relay.log)

	stopProfile := startCPUProfile(targets, o.cpuProfile)
	runtime.GC()
	b := newBench(client, targets, nil, true, o.concurrency, o.round)
	wait0 := relay.runWait()
	elapsed := b.run(context.Background(), o.requests, o.maxTime)
	waited := relay.runWait() - wait0
	stopProfile()
	client.CloseIdleConnections()

	mode := o.mode
	if mode == "" {
		mode = "the relay's default (off)"
	}
	cfg := fmt.Sprintf("hand-off alias: reason on a simulator (api chat, %d reasoning tokens, then an answer the relay stops), answer on another (api chat, no reasoning, %d content tokens), inject user (the default for api chat); Chat streaming clients, smoothing mode %s, pace %s, prompt %s, c=%d",
		o.reasoningTokens, o.contentTokens, mode, paceWords(o.tokensPerSec), promptWords(o.promptBytes), o.concurrency)
	fmt.Printf("\nmeasured: %s\n%.1fs wall time\n", cfg, elapsed.Seconds())
	sums := report(os.Stdout, b.results, o.requests, 0)

	settledSize(relay.log) // every measured request's line written
	g, err := readGaps(relay.log, from)
	if err != nil {
		fatalf("reading the hand-off gaps from the relay's log %s: %v", relay.log, err)
	}
	g.streams, g.config = sums[0].ok, cfg
	g.runWait = float64(waited) / float64(elapsed)
	printGaps(os.Stdout, g, o.concurrency, !o.inReport)
	if o.memProfile != "" {
		if _, err := relay.ask("memprofile " + o.memProfile); err != nil {
			fatalf("writing the relay's allocation profile: %v", err)
		}
		fmt.Printf("allocation profile of the relay process written to %s\n", o.memProfile)
	}
	return sums, g
}

func paceWords(tps float64) string {
	if tps == 0 {
		return "as fast as possible"
	}
	return strconv.FormatFloat(tps, 'f', -1, 64) + " tokens/s"
}

func promptWords(n int) string {
	if n == 0 {
		return "one word"
	}
	return fmt.Sprintf("%d bytes", n)
}

// printGaps prints the gap figures and, with goal, whether p99 is under
// the bound.
func printGaps(w io.Writer, g *gapResult, c int, goal bool) {
	fmt.Fprintf(w, "\nhand-off gap (the relay's own time from the hand-off point to the answer leg's request written), from the relay's log lines:\n")
	fmt.Fprintf(w, "  %d lines with a gap for %d successful hand-off streams", len(g.gaps), g.streams)
	if g.noGap > 0 {
		fmt.Fprintf(w, " (%d hand-off lines without one: the answer leg never wrote)", g.noGap)
	}
	fmt.Fprintf(w, "; reasoning handed off: %d tokens (the log's estimate, median)\n", g.reasoning)
	if len(g.gaps) == 0 {
		fmt.Fprintf(w, "goal hand-off gap p99 < %s: UNKNOWN (no gaps read)\n", ms(goalHandoffGap))
		return
	}
	fmt.Fprintf(w, "  p50 %s  p90 %s  p99 %s  max %s\n", ms(g.p50), ms(g.p90), ms(g.p99), ms(g.max))
	fmt.Fprintf(w, "  the relay's threads waited for a CPU %.0f ms per second of the run (run-queue delay, both legs and the plain streams)\n", g.runWait*1000)
	if len(g.gaps) != g.streams {
		fmt.Fprintf(w, "  note: the lines and the streams differ in number (cut or failed streams log too); the figures are the lines'\n")
	}
	if !goal {
		return
	}
	verdict := "MET"
	if g.p99 >= goalHandoffGap {
		verdict = "NOT MET"
	}
	fmt.Fprintf(w, "goal hand-off gap p99 < %s at c=%d: %s (%s)\n", ms(goalHandoffGap), c, verdict, ms(g.p99))
}

// settledSize waits until the file at path stops growing (the relay
// writes a request's log line when its handler returns, just after the
// client read the last byte) and returns its size.
func settledSize(path string) int64 {
	var last int64 = -1
	stable := 0
	for range 100 { // 10 s at most
		fi, err := os.Stat(path)
		if err != nil {
			fatalf("the relay's log: %v", err)
		}
		if fi.Size() == last {
			if stable++; stable >= 3 {
				return last
			}
		} else {
			last, stable = fi.Size(), 0
		}
		time.Sleep(100 * time.Millisecond)
	}
	return last
}

// logLine is the part of the relay's `relayed` line the bench reads: zap
// encodes durations as seconds (a float).
type logLine struct {
	Msg     string `json:"msg"`
	Alias   string `json:"alias"`
	Handoff *struct {
		Gap             *float64 `json:"gap"`
		ReasoningTokens int      `json:"reasoning_tokens"`
	} `json:"handoff"`
}

// readGaps reads the gap of every hand-off line of the log at path from
// byte offset from.
func readGaps(path string, from int64) (*gapResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(from, 0); err != nil {
		return nil, err
	}
	g := &gapResult{}
	var tokens []int
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"handoff":{`)) {
			continue
		}
		var l logLine
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("a log line is not JSON (%v): %.200s", err, line)
		}
		if l.Msg != "relayed" || l.Handoff == nil {
			continue
		}
		if l.Handoff.Gap == nil || *l.Handoff.Gap <= 0 {
			g.noGap++
			continue
		}
		g.gaps = append(g.gaps, time.Duration(math.Round(*l.Handoff.Gap*1e9)))
		tokens = append(tokens, l.Handoff.ReasoningTokens)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	slices.Sort(g.gaps)
	slices.Sort(tokens)
	if n := len(g.gaps); n > 0 {
		g.p50, g.p90, g.p99, g.max = percentile(g.gaps, 0.50), percentile(g.gaps, 0.90), percentile(g.gaps, 0.99), g.gaps[n-1]
		g.reasoning = tokens[(n-1)/2]
	}
	return g, nil
}
