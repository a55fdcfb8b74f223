package chaos

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Snapshot is the process's resource use at one moment.
type Snapshot struct {
	Goroutines int
	FDs        int
	RSSKiB     int64
}

func (s Snapshot) String() string {
	return fmt.Sprintf("goroutines %5d   open fds %5d   RSS %7.1f MiB", s.Goroutines, s.FDs, float64(s.RSSKiB)/1024)
}

// Max is the element-wise maximum of two snapshots.
func (s Snapshot) Max(o Snapshot) Snapshot {
	return Snapshot{max(s.Goroutines, o.Goroutines), max(s.FDs, o.FDs), max(s.RSSKiB, o.RSSKiB)}
}

// Measure reads this process's goroutines, open fds (/proc/self/fd) and
// RSS (/proc/self/status VmRSS). Where /proc is missing, fds and RSS are
// -1.
func Measure() Snapshot {
	s := Snapshot{Goroutines: runtime.NumGoroutine(), FDs: -1, RSSKiB: -1}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		s.FDs = len(ents) - 1 // the directory's own fd, open while reading it
	}
	if f, err := os.Open("/proc/self/status"); err == nil {
		if kib, err := ParseVmRSS(bufio.NewScanner(f)); err == nil {
			s.RSSKiB = kib
		}
		_ = f.Close()
	}
	return s
}

// ParseVmRSS returns the VmRSS line's value in KiB from a
// /proc/<pid>/status text.
func ParseVmRSS(sc *bufio.Scanner) (int64, error) {
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmRSS line %q", sc.Text())
		}
		return strconv.ParseInt(fields[0], 10, 64)
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no VmRSS line")
}

// Margins say how far above the baseline "back to baseline" may be.
type Margins struct {
	Goroutines int
	FDs        int
	// RSSRatio: after may be at most baseline·RSSRatio (the Go heap and
	// the runtime keep some memory after a load; a leak keeps growing).
	RSSRatio float64
}

// Leaks lists what is not back to the baseline, in words; nil when
// everything is.
func Leaks(base, after Snapshot, m Margins) []string {
	var out []string
	if d := after.Goroutines - base.Goroutines; d > m.Goroutines {
		out = append(out, fmt.Sprintf("goroutines: %d after vs %d at baseline (+%d, margin %d)", after.Goroutines, base.Goroutines, d, m.Goroutines))
	}
	if base.FDs >= 0 && after.FDs >= 0 {
		if d := after.FDs - base.FDs; d > m.FDs {
			out = append(out, fmt.Sprintf("open fds: %d after vs %d at baseline (+%d, margin %d)", after.FDs, base.FDs, d, m.FDs))
		}
	}
	if base.RSSKiB > 0 && after.RSSKiB > 0 && m.RSSRatio > 0 {
		if limit := int64(float64(base.RSSKiB) * m.RSSRatio); after.RSSKiB > limit {
			out = append(out, fmt.Sprintf("RSS: %.1f MiB after vs %.1f MiB at baseline (limit %.1f MiB = ×%.2f)",
				float64(after.RSSKiB)/1024, float64(base.RSSKiB)/1024, float64(limit)/1024, m.RSSRatio))
		}
	}
	return out
}
