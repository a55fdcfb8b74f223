// Command smoothreport replays the trace set (internal/traces) through the
// llm_relay handler over loopback and reports, per trace, how smooth the
// client's stream was compared with the upstream's, how much lag the relay
// added, and whether every byte of text arrived.
//
// Usage:
//
//	go run ./cmd/smoothreport [flags]
//
// In one process it starts a plain net/http server on a free 127.0.0.1
// port serving traces.Handler() (the upstream), and Caddy (admin off, on
// another free 127.0.0.1 port) with this relay site:
//
//	llm_relay {
//		upstream traces http://127.0.0.1:UPPORT/v1
//		model * {
//			to traces
//		}
//		smoothing <mode> {
//			max_delay <-max-delay>
//			reasoning_max_delay <-reasoning-max-delay>
//			min_interval <-min-interval>
//		}
//	}
//
// (no smoothing block with -mode off), once per mode of -mode (default
// pace,split-reasoning; all adds off), one report each. The
// site also has an upstream for the tagged traces (traces.Trace.Tagged,
// reasoning inline in content between <think> tags), and an alias per
// tagged trace routed to it:
//
//	upstream traces_tagged http://127.0.0.1:UPPORT/v1 {
//		reasoning_format tags
//	}
//	model tagged-reasoning {
//		to traces_tagged tagged-reasoning
//	}
//
// -tagged=false leaves them out (for a relay older than that directive:
// a config that names it does not load there). With -clock virtual there is no Caddy and no network: the pacer
// alone (pace.Simulate) replays each trace on a virtual clock with the
// same configuration, and its writes are the client's stream, stamped at
// their virtual times; a tagged trace's events go through
// tagged.NewSource (the default tag syntax, reasoning_content) first, as
// the relay's do. The figures are the same in every run; CI gates them
// (TestVirtualTargets). The real clock is what a user sees, noise
// included. For each trace a client posts
// {"model":"<trace>","stream":true,...} to the relay and reads the SSE
// stream with internal/sse, stamping each event with the time the read
// that completed it returned. At most -concurrency streams run at once,
// longest first.
//
// # Measurement
//
// Input times are when the upstream began writing each step: the
// upstream's ResponseWriter is wrapped to stamp the first write after each
// flush (the trace server writes and flushes once per step). These are
// the real times, so a late upstream (a loaded machine) shows up as input
// jitter rather than as relay lag. Should the stamps be missing (they are
// matched to the client's request by trace name), the input times fall
// back to the steps' scheduled offsets (Step.At) counted from the moment
// the client received the response headers — an approximation that hides
// any delay of the headers themselves. Output times are the client's
// receive times. Both sides share one clock (one process).
//
// A smoothness.Recorder per trace gets Input for each upstream data event
// (runes = visible characters, the code points of content and
// reasoning_content; tool-call arguments are not visible text; a tagged
// trace's events as the relay reads them, the reasoning parsed out of the
// content and the tags gone, each stamped with the arrival of the
// upstream event that released it) and Output
// for each data event the client received (SSE comments, i.e. heartbeats,
// are not events). An "eof" trace's cut-off last block counts as an input
// event without text, as the upstream's last bytes. The per-rune lag
// pairs characters in order per choice and channel: the k-th reasoning
// character of choice 0 received by the client is the k-th such character
// the upstream sent. Text input is judged for bridgeable stalls by the max
// delay of its channel (reasoning_max_delay for reasoning text in
// split-reasoning mode, max_delay otherwise). Traces with both reasoning
// and answer text get one more row per channel, from recorders fed with
// that channel's text events only.
//
// Columns: events in/out; the windowed-rate CV (100 ms windows sliding by
// 10 ms, see internal/smoothness) of input and output and the change; the
// text gap p99 of input and output (gaps between text events that a relay
// could bridge); stalls (gaps > 250 ms between text events: input,
// output, and of the output's how many were bridgeable); steady share
// (the share of windows in which the text grew, input and output); added
// lag p50/p99/max; tail flush (last output − last input); exact:
// per choice and channel the text the client reassembled equals the
// trace's, tool calls, logprobs, finish reasons and usage agree, and the
// ending is right (a tagged trace's text is its reasoning and answer
// without the tags; [DONE] iff the trace ends with it; the upstream's error
// event for "error"; for "eof" no [DONE], the relay's own truncation error
// event being allowed).
//
// # Targets
//
// On the clustered traces: output CV at least 80 % below input where the
// mode's bound can bridge the trace's cadence (traces.Trace.Cadence); no
// bridgeable stall; lag p99 <= the channel's max delay + 30 ms; tail <=
// 100 ms. The CV and stall targets hold on each channel's row as well
// where both channels are clustered (traces.Trace.LanesClustered), and
// there the reasoning surge (the most reasoning in a 100 ms window once
// the answer began, over the larger of its mean per 100 ms before and a
// steady drain of what was queued over 300 ms) is at most 2: no dump of
// reasoning when the answer starts. On every trace and channel row: never worse than pass-through
// (output CV <= input CV·1.05 + 0.02; text gap p99 <= the larger of the
// input's and one tick interval, ·1.05, + 1 ms on the virtual clock or
// 10 ms of scheduling jitter on the real one; no more gaps over 250 ms).
// A failed target, or any trace not byte-exact, exits with status 1
// (-strict, on by default). With -mode off the targets are printed for
// information only; exactness still counts.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/llmrelay/caddy-llm-relay/cmd/internal/inproc"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/traces"
)

// options are the command's flags.
type options struct {
	mode              string
	modes             []string // -mode: the modes to run, one report each
	clock             string   // "real" or "virtual"
	maxDelay          time.Duration
	reasoningMaxDelay time.Duration
	minInterval       time.Duration
	traces            []string
	json              bool
	strict            bool
	concurrency       int
	timeout           time.Duration
	printConfig       bool
	// tagged: on the real clock, replay the tagged traces too, through a
	// second upstream with `reasoning_format tags` (the default). The
	// virtual clock always replays them (it parses the tags itself, with
	// internal/tagged, as the relay does).
	tagged bool
}

// answerMax and reasoningMax are the max delays of each channel.
func (o options) answerMax() time.Duration { return o.maxDelay }
func (o options) reasoningMax() time.Duration {
	if o.mode == "split-reasoning" {
		return o.reasoningMaxDelay
	}
	return o.maxDelay
}

func defaultOptions() options {
	return options{
		mode:              "pace",
		modes:             []string{"pace", "split-reasoning"},
		clock:             "real",
		maxDelay:          400 * time.Millisecond,
		reasoningMaxDelay: 1500 * time.Millisecond,
		minInterval:       30 * time.Millisecond,
		strict:            true,
		concurrency:       4,
		timeout:           2 * time.Minute,
		tagged:            true,
	}
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := defaultOptions()
	fs := flag.NewFlagSet("smoothreport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	modeList := fs.String("mode", strings.Join(o.modes, ","), "smoothing modes, comma-separated, one report each: pace, split-reasoning, off (no smoothing block) or all")
	fs.StringVar(&o.clock, "clock", o.clock, "real: through Caddy over loopback in real time; virtual: the pacer alone on a virtual clock (deterministic, what CI gates)")
	fs.DurationVar(&o.maxDelay, "max-delay", o.maxDelay, "smoothing max_delay")
	fs.DurationVar(&o.reasoningMaxDelay, "reasoning-max-delay", o.reasoningMaxDelay, "smoothing reasoning_max_delay")
	fs.DurationVar(&o.minInterval, "min-interval", o.minInterval, "smoothing min_interval")
	list := fs.String("traces", "", "comma-separated trace names (default: all of "+strings.Join(traces.Names(), ",")+")")
	fs.BoolVar(&o.json, "json", false, "print machine-readable JSON instead of the table")
	fs.BoolVar(&o.strict, "strict", o.strict, "exit with status 1 when a target fails")
	fs.IntVar(&o.concurrency, "concurrency", o.concurrency, "streams replayed at once")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "bound on the whole run")
	fs.BoolVar(&o.printConfig, "print-config", false, "print the Caddyfile and exit")
	fs.BoolVar(&o.tagged, "tagged", o.tagged, "real clock: replay the tagged traces too, through an upstream with reasoning_format tags (-tagged=false leaves them out)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: go run ./cmd/smoothreport [flags]\n\n"+
			"Replays the trace set through llm_relay over loopback and reports\n"+
			"smoothness, added lag and exactness per trace.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	o.modes = nil
	for _, m := range strings.Split(*modeList, ",") {
		switch m = strings.TrimSpace(m); m {
		case "all":
			o.modes = append(o.modes, "off", "pace", "split-reasoning")
		case "pace", "split-reasoning", "off":
			o.modes = append(o.modes, m)
		default:
			return o, fmt.Errorf("-mode %q: want pace, split-reasoning, off or all", m)
		}
	}
	o.mode = o.modes[0]
	if o.clock != "real" && o.clock != "virtual" {
		return o, fmt.Errorf("-clock %q: want real or virtual", o.clock)
	}
	if o.maxDelay <= 0 || o.reasoningMaxDelay <= 0 || o.minInterval <= 0 {
		return o, fmt.Errorf("-max-delay, -reasoning-max-delay and -min-interval must be positive")
	}
	if o.concurrency < 1 || o.timeout <= 0 {
		return o, fmt.Errorf("-concurrency and -timeout must be positive")
	}
	if *list != "" {
		for _, name := range strings.Split(*list, ",") {
			name = strings.TrimSpace(name)
			if _, ok := traces.ByName(name); !ok {
				return o, fmt.Errorf("unknown trace %q (known: %s)", name, strings.Join(traces.Names(), ", "))
			}
			if !slices.Contains(o.traces, name) {
				o.traces = append(o.traces, name)
			}
		}
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err == flag.ErrHelp {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "smoothreport: %v\n", err)
		os.Exit(2)
	}
	if o.printConfig {
		fmt.Print(caddyfile(o, 8080, 8081))
		return
	}
	cleanup, err := inproc.PrivateData() // no state from, or for, another run
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer cleanup()
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	var reps []*report
	ok := true
	for _, m := range o.modes {
		o.mode = m
		rep, err := run(ctx, o, os.Stderr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "smoothreport: %v\n", err)
			os.Exit(1)
		}
		reps = append(reps, rep)
		ok = ok && rep.OK
		if !o.json {
			rep.print(os.Stdout)
			fmt.Println()
		}
	}
	if o.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(reps); err != nil {
			fmt.Fprintf(os.Stderr, "smoothreport: %v\n", err)
			os.Exit(1)
		}
	}
	if !ok {
		os.Exit(1)
	}
}

// run starts the upstream and Caddy, replays the selected traces and
// evaluates them. Log lines go to logw.
func run(ctx context.Context, o options, logw io.Writer) (*report, error) {
	names := o.traces
	if len(names) == 0 {
		names = traces.Names()
	}
	if o.clock == "virtual" {
		return runVirtual(o, names)
	}
	if !o.tagged {
		var skipped []string
		names = slices.DeleteFunc(slices.Clone(names), func(name string) bool {
			t, _ := traces.ByName(name)
			if t.Tagged {
				skipped = append(skipped, name)
			}
			return t.Tagged
		})
		if len(skipped) > 0 {
			fmt.Fprintf(logw, "smoothreport: not replaying %s on the real clock (-tagged replays them through an upstream with reasoning_format tags)\n", strings.Join(skipped, ", "))
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("no trace to replay: %s need -tagged on the real clock", strings.Join(skipped, ", "))
		}
	}
	up, err := startUpstream()
	if err != nil {
		return nil, err
	}
	defer up.close()
	relayURL, err := startCaddy(o, up.port, logw)
	if err != nil {
		return nil, err
	}
	defer stopCaddy(logw)

	streams := replayAll(ctx, relayURL+"/v1/chat/completions", up, names, o.concurrency)
	return newReport(o, streams), nil
}

// newReport analyses the streams of one mode and evaluates the targets.
func newReport(o options, streams []*stream) *report {
	rep := &report{
		Mode:              o.mode,
		Clock:             o.clock,
		MaxDelay:          jsonDur(o.maxDelay),
		ReasoningMaxDelay: jsonDur(o.reasoningMax()),
		MinInterval:       jsonDur(o.minInterval),
	}
	for _, s := range streams {
		rep.Traces = append(rep.Traces, analyze(s, o))
	}
	rep.evaluate(o)
	return rep
}
