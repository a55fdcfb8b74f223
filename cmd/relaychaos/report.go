package main

import (
	"fmt"
	"io"
	"log"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/chaos"
)

// sortedKeys orders rows: the relay's healthy row, reverse_proxy's, then
// the chaos cases in their list order; stream before non-stream.
func (res *results) sortedKeys() []string {
	rank := map[string]int{"healthy": -1}
	for i, c := range cases() {
		rank[c.name] = i
	}
	keys := make([]string, 0, len(res.rows))
	for k := range res.rows {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := res.rows[keys[i]], res.rows[keys[j]]
		if rank[a.cas] != rank[b.cas] {
			return rank[a.cas] < rank[b.cas]
		}
		if a.site != b.site {
			return a.site == siteRelay
		}
		return a.stream && !b.stream
	})
	return keys
}

type reloadFigures struct {
	n         int
	mean, max time.Duration
	every     time.Duration
}

// report prints the classification table, the failure examples and the
// reload comparison.
func report(w io.Writer, res *results, cs []chaosCase, rf reloadFigures) int {
	fmt.Fprintf(w, "\nanswers by case (%.0fs of load; p50/max = request duration)\n", res.elapsed.Seconds())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hdr := []string{"site", "case", "mode", "n"}
	for c := range chaos.NumClasses {
		hdr = append(hdr, chaos.Class(c).String())
	}
	hdr = append(hdr, "wrong", "p50", "max", "statuses\t")
	fmt.Fprintln(tw, strings.Join(hdr, "\t"))
	var tot row
	for _, k := range res.sortedKeys() {
		rw := res.rows[k]
		cols := []string{rw.site, rw.cas, mode(rw.stream), strconv.Itoa(rw.n)}
		for c := range chaos.NumClasses {
			cols = append(cols, dash(rw.classes[c]))
			tot.classes[c] += rw.classes[c]
		}
		tot.n += rw.n
		tot.wrong += rw.wrong
		p50, mx := quantiles(rw.durations)
		cols = append(cols, dash(rw.wrong), fmtDur(p50), fmtDur(mx), statuses(rw.statuses)+"\t")
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	cols := []string{"total", "", "", strconv.Itoa(tot.n)}
	for c := range chaos.NumClasses {
		cols = append(cols, dash(tot.classes[c]))
	}
	cols = append(cols, dash(tot.wrong), "", "", "\t")
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	_ = tw.Flush()

	// One example per failing class and row, so each figure can be read.
	var ex []string
	for _, k := range res.sortedKeys() {
		rw := res.rows[k]
		for _, c := range []chaos.Class{chaos.Hang, chaos.Truncation, chaos.Malformed, chaos.Abort, chaos.ReloadFailure} {
			if rw.classes[c] > 0 {
				ex = append(ex, fmt.Sprintf("  %s %s %s: %s ×%d: %s", rw.site, rw.cas, mode(rw.stream), c, rw.classes[c], rw.examples[c]))
			}
		}
		if rw.wrong > 0 {
			ex = append(ex, fmt.Sprintf("  %s %s %s: wrong ×%d: %s", rw.site, rw.cas, mode(rw.stream), rw.wrong, rw.wrongWhy))
		}
	}
	if len(ex) > 0 {
		fmt.Fprintf(w, "\nwhat the non-answers were (first of each)\n%s\n", strings.Join(ex, "\n"))
	}

	// Reload comparison: the same healthy load through both.
	fmt.Fprintf(w, "\nreloads: %d (every %s; caddy.Load took %s on average, %s at most)\n", rf.n, rf.every, fmtDur(rf.mean), fmtDur(rf.max))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "healthy load via\trequests\tfailed before any response byte\tof them during a reload\tper reload\t5xx answers\tper reload\t")
	for _, site := range []string{siteRelay, siteProxy} {
		var n, pre, rel, five int
		for _, rw := range res.rows {
			if rw.site == site && rw.cas == "healthy" {
				n += rw.n
				pre += rw.preResp
				rel += rw.classes[chaos.ReloadFailure]
				five += rw.fiveXX
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%s\t\n", site, n, pre, rel, perReload(pre, rf.n), five, perReload(five, rf.n))
	}
	_ = tw.Flush()
	return 0
}

func perReload(n, reloads int) string {
	if reloads == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(n)/float64(reloads), 'f', 2, 64)
}

func dash(n int) string {
	if n == 0 {
		return "."
	}
	return strconv.Itoa(n)
}

func statuses(m map[int]int) string {
	var codes []int
	for c := range m {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d×%d", c, m[c]))
	}
	return strings.Join(parts, " ")
}

func quantiles(ds []time.Duration) (p50, mx time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)-1]
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	default:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	}
}

// settledSnapshot measures after a GC and after returning freed memory
// to the OS, so RSS compares like with like.
func settledSnapshot(pause time.Duration) chaos.Snapshot {
	time.Sleep(pause)
	runtime.GC()
	debug.FreeOSMemory()
	return chaos.Measure()
}

// waitForBaseline polls until goroutines and fds are back within the
// margins of base, or until limit; it returns the last snapshot.
func waitForBaseline(base chaos.Snapshot, limit time.Duration) (chaos.Snapshot, time.Duration) {
	start := time.Now()
	for {
		s := settledSnapshot(250 * time.Millisecond)
		if len(chaos.Leaks(base, s, leakMargins)) == 0 || time.Since(start) >= limit {
			return s, time.Since(start)
		}
	}
}

// printGoroutines prints the largest groups of identical goroutine
// stacks, to show what did not return.
func printGoroutines(w io.Writer, groups int) {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	fmt.Fprintf(w, "\nlargest goroutine groups (runtime/pprof, debug=1):\n")
	_, text, _ := strings.Cut(b.String(), "\n") // drop "goroutine profile: total N"
	blocks := strings.Split(text, "\n\n")       // one block per group, largest first
	for i, blk := range blocks {
		if i >= groups || strings.TrimSpace(blk) == "" {
			break
		}
		ls := strings.Split(strings.TrimSpace(blk), "\n")
		var keep []string
		for _, l := range ls {
			if strings.HasPrefix(l, "#") {
				f := strings.Fields(l)
				if len(f) >= 3 {
					keep = append(keep, "    "+f[2])
				}
			} else {
				keep = append(keep, "  "+strings.Fields(l)[0]+" goroutines:")
			}
			if len(keep) >= 9 {
				break
			}
		}
		fmt.Fprintln(w, strings.Join(keep, "\n"))
	}
}

func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }
