package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"time"
)

// goalP50Ratio is the target: the relay's median latency at most 10% above
// reverse_proxy's. goalTranslateRatio is the translation's: a translated
// stream at most 20% above the same stream untranslated (issues 10, 11).
const (
	goalP50Ratio       = 1.10
	goalTranslateRatio = 1.20
	// goalSplitCPU: a stream paced in split-reasoning mode costs at most
	// 1.5x the CPU of the same stream in mode off (issue 12). Pacing adds
	// latency by design, so the p50 goal does not apply to -split.
	goalSplitCPU = 1.5
	// goalStateRedisRatio: the relay with `state redis` adds at most 2 %
	// to the non-stream p50 of the same relay without it (issue 13).
	goalStateRedisRatio = 1.02
	// goalHandoffGap: the relay's own time from the hand-off point to
	// the answer leg's request on the wire, p99 under 1 ms at c=32
	// (issue 28); a time, not a ratio.
	goalHandoffGap = time.Millisecond
	// goalHandoffMem: an open hand-off stream holds at most twice the
	// memory of a plain stream of the same answer target (issue 28).
	goalHandoffMem = 2.0
	// goalAfterCommitRatio: a stream with after_commit continue that never
	// breaks costs the same as with after_commit error (issue 30): p50 and
	// CPU per stream within noise, stated as 1.05x.
	goalAfterCommitRatio = 1.05
	// goalTranslateGeminiRatio: a Chat stream translated for a Gemini
	// client at most 20% above the same stream passed through to a Chat
	// client, at c=32 (issue 32).
	goalTranslateGeminiRatio = 1.20
)

// summary holds one target's figures.
type summary struct {
	name          string
	ok, errs, cut int
	p50, p90, p99 time.Duration
	mean          time.Duration
	rps           float64
	avgBytes      float64
	cpu           time.Duration // CPU of the target's process per successful request
	syscalls      float64       // read and write system calls of the target's process per successful request
}

func summarize(r *result) summary {
	s := summary{name: r.target.name, ok: len(r.latencies), errs: r.errors, cut: r.cut}
	if s.ok == 0 {
		return s
	}
	lat := slices.Clone(r.latencies)
	slices.Sort(lat)
	s.p50, s.p90, s.p99 = percentile(lat, 0.50), percentile(lat, 0.90), percentile(lat, 0.99)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	s.mean = sum / time.Duration(len(lat))
	if r.wall > 0 {
		s.rps = float64(s.ok) / r.wall.Seconds()
	}
	s.avgBytes = float64(r.bytes) / float64(s.ok)
	s.cpu = r.cpu / time.Duration(s.ok)
	s.syscalls = float64(r.syscalls) / float64(s.ok)
	return s
}

// percentile returns the nearest-rank p-quantile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// report prints the per-target table, the relay/reverse_proxy ratios and
// whether the p50 goal was met, and returns the figures. results[0] is the
// relay, results[1] the reverse_proxy baseline.
func report(w io.Writer, results []*result, perTarget int, goal float64) []summary {
	sums := make([]summary, len(results))
	for i, r := range results {
		sums[i] = summarize(r)
	}

	fmt.Fprintf(w, "%-14s %9s %7s %5s %10s %10s %10s %10s %10s %9s %9s %8s\n",
		"target", "requests", "errors", "cut", "p50", "p90", "p99", "mean", "req/s", "body B", "CPU/req", "sys/req")
	for _, s := range sums {
		fmt.Fprintf(w, "%-14s %9d %7d %5d %10s %10s %10s %10s %10.0f %9.0f %9s %8.1f\n",
			s.name, s.ok, s.errs, s.cut, ms(s.p50), ms(s.p90), ms(s.p99), ms(s.mean), s.rps, s.avgBytes, us(s.cpu), s.syscalls)
	}
	for i, r := range results {
		for _, msg := range slices.Sorted(maps.Keys(r.errKinds)) {
			fmt.Fprintf(w, "  %s error x%d: %s\n", sums[i].name, r.errKinds[msg], msg)
		}
		if done := sums[i].ok + sums[i].errs + sums[i].cut; done < perTarget {
			fmt.Fprintf(w, "  %s: only %d of %d requests ran before -max-time\n", sums[i].name, done, perTarget)
		}
	}

	relay, proxy := sums[0], sums[1]
	a, b := relay.name, proxy.name
	if relay.ok == 0 || proxy.ok == 0 {
		fmt.Fprintf(w, "\nno successful requests to compare; goal %s p50 <= %.2fx %s: UNKNOWN\n", a, goal, b)
		return sums
	}
	p50 := ratio(relay.p50, proxy.p50)
	fmt.Fprintf(w, "\n%s / %s: p50 %.3fx, p99 %.3fx, req/s %.3fx\n",
		a, b, p50, ratio(relay.p99, proxy.p99), relay.rps/proxy.rps)
	fmt.Fprintf(w, "%s overhead at p50: %+.3fms per request\n", a, float64(relay.p50-proxy.p50)/1e6)
	fmt.Fprintf(w, "%s CPU per request: %s against %s, %+.1fµs, %.3fx (each the CPU time of the process serving it)\n",
		a, us(relay.cpu), us(proxy.cpu), float64(relay.cpu-proxy.cpu)/1e3, ratio(relay.cpu, proxy.cpu))
	if goal == 0 {
		return sums // no latency goal (-split: pacing adds latency by design)
	}
	verdict := "MET"
	if p50 > goal {
		verdict = "NOT MET"
	}
	if relay.errs > 0 || proxy.errs > 0 {
		verdict += " (but there were errors; see above)"
	}
	fmt.Fprintf(w, "goal %s p50 <= %.2fx %s: %s (%.3fx)\n", a, goal, b, verdict, p50)
	return sums
}

// reportCPUGoal prints whether the first target's CPU per request stayed
// within goal times the second's.
func reportCPUGoal(w io.Writer, results []*result, goal float64) {
	a, b := summarize(results[0]), summarize(results[1])
	if a.ok == 0 || b.ok == 0 {
		return
	}
	r := ratio(a.cpu, b.cpu)
	verdict := "MET"
	if r > goal {
		verdict = "NOT MET"
	}
	fmt.Fprintf(w, "goal %s CPU per stream <= %.2fx %s: %s (%.3fx, %+.1fµs per stream)\n", a.name, goal, b.name, verdict, r, float64(a.cpu-b.cpu)/1e3)
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return math.Inf(1)
	}
	return float64(a) / float64(b)
}

// us formats a duration as microseconds.
func us(d time.Duration) string {
	return fmt.Sprintf("%.1fµs", float64(d)/1e3)
}

// ms formats a duration as milliseconds with microsecond precision.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.3fms", float64(d)/1e6)
}
