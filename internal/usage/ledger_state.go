package usage

import (
	"slices"
	"sort"
	"time"
)

// Counts are counters as they are saved: a Totals with the cost in whole
// nano-dollars, so a saved and restored ledger sums exactly.
type Counts struct {
	NanoUSD    int64 `json:"nano_usd"`
	Requests   int64 `json:"requests"`
	Estimated  int64 `json:"estimated,omitempty"`
	Prompt     int64 `json:"prompt"`
	Completion int64 `json:"completion"`
	Reasoning  int64 `json:"reasoning,omitempty"`
	Cached     int64 `json:"cached,omitempty"`
}

func (c counters) counts() Counts {
	return Counts{NanoUSD: c.nano, Requests: c.requests, Estimated: c.estimated, Prompt: c.prompt,
		Completion: c.completion, Reasoning: c.reasoning, Cached: c.cached}
}

// maxRestoredNano caps a restored spend (a billion dollars), far from
// where later additions could overflow.
const maxRestoredNano = 1e18

func (c Counts) counters() counters {
	return counters{nano: min(max(c.NanoUSD, 0), maxRestoredNano), requests: c.Requests, estimated: c.Estimated, prompt: c.Prompt,
		completion: c.Completion, reasoning: c.Reasoning, cached: c.Cached}
}

// WindowState is one period's counts and the period's start (UTC).
type WindowState struct {
	Start time.Time `json:"start"`
	Counts
}

// KeyState is one key's own spend as a restart keeps it: this instance's
// counts in the current day and month, its all-time totals, and the
// budget alerts already raised in the budget's current period (Alerted,
// thresholds in percent, for the AlertedPeriod that starts at
// AlertedStart).
// What other instances spent is not in it: that is the shared state's.
type KeyState struct {
	Key           string      `json:"key"`
	Day           WindowState `json:"day"`
	Month         WindowState `json:"month"`
	Total         Counts      `json:"total"`
	Alerted       []int       `json:"alerted,omitempty"`
	AlertedPeriod string      `json:"alerted_period,omitempty"` // "day" or "month"
	AlertedStart  time.Time   `json:"alerted_start,omitzero"`
}

// Export returns every key's own state at now, sorted by key.
func (l *Ledger) Export(now time.Time) []KeyState {
	l.mu.RLock()
	names := make([]string, 0, len(l.keys))
	for k := range l.keys {
		names = append(names, k)
	}
	l.mu.RUnlock()
	sort.Strings(names)
	out := make([]KeyState, 0, len(names))
	for _, k := range names {
		if ks, ok := l.Own(k, now); ok {
			out = append(out, ks)
		}
	}
	return out
}

// Own returns key's own state at now, and whether the ledger knows it.
func (l *Ledger) Own(key string, now time.Time) (KeyState, bool) {
	a := l.get(key)
	if a == nil {
		return KeyState{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.roll(now)
	ks := KeyState{
		Key:   key,
		Day:   WindowState{Start: a.win[Day].start, Counts: a.win[Day].c.counts()},
		Month: WindowState{Start: a.win[Month].start, Counts: a.win[Month].c.counts()},
		Total: a.total.counts(),
	}
	for i, th := range Thresholds {
		if a.alerted&(1<<i) != 0 {
			ks.Alerted = append(ks.Alerted, th)
		}
	}
	if ks.Alerted != nil {
		ks.AlertedPeriod, ks.AlertedStart = a.budget.Period.String(), a.win[a.budget.Period].start
	}
	return ks, true
}

// Restore puts saved states back, at now: for each key, the windows that
// are still the current day and month (an older one is over and starts
// afresh), the all-time totals, and the alerts of a budget period that is
// still current. It replaces what the ledger holds for those keys' own
// counts, and keeps their budgets. Call it before the ledger counts
// anything, at start.
func (l *Ledger) Restore(states []KeyState, now time.Time) {
	for _, ks := range states {
		if ks.Key == "" {
			continue
		}
		a := l.getOrCreate(ks.Key)
		a.mu.Lock()
		a.roll(now)
		for p, w := range [numPeriods]WindowState{Day: ks.Day, Month: ks.Month} {
			if w.Start.Equal(a.win[p].start) {
				a.win[p].c = w.Counts.counters()
			}
		}
		a.total = ks.Total.counters()
		a.alerted = 0
		if ap, err := ParsePeriod(ks.AlertedPeriod); err == nil && ks.AlertedStart.Equal(a.win[ap].start) {
			for i, th := range Thresholds {
				if slices.Contains(ks.Alerted, th) {
					a.alerted |= 1 << i
				}
			}
		}
		a.mu.Unlock()
	}
}

// SetOthers sets what the rest of a fleet spent in key's period p that
// starts at start (nano-dollars, the sum of the other instances' own
// spend, from the shared state). Budgets and snapshots count it with the
// key's own spend while start is the current period at now. It returns
// the alerts that the fleet's spend now reaches and that had not alerted
// here yet, as Add does: the fleet's spend may cross a threshold without
// any request on this instance.
func (l *Ledger) SetOthers(key string, p Period, start time.Time, nano int64, now time.Time) []Alert {
	if p < 0 || p >= numPeriods {
		return nil
	}
	a := l.getOrCreate(key)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.roll(now)
	a.others[p] = remote{start: start.UTC(), nano: max(nano, 0)}
	if p != a.budget.Period {
		return nil
	}
	return a.alerts(key, now)
}

// RaiseOwn raises key's own spend in period p that starts at start to at
// least nano (nano-dollars), when that period is the current one at now:
// for an instance that finds more of its own spend in the shared state
// than it kept itself (its local state lost, its identity kept). It
// reports whether it raised anything.
func (l *Ledger) RaiseOwn(key string, p Period, start time.Time, nano int64, now time.Time) bool {
	if p < 0 || p >= numPeriods {
		return false
	}
	a := l.getOrCreate(key)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.roll(now)
	w := &a.win[p]
	if !w.start.Equal(start) || w.c.nano >= nano {
		return false
	}
	w.c.nano = nano
	return true
}
