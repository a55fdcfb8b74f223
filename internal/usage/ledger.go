package usage

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"
	"sync"
	"time"
)

// Period is a budget's calendar period, in UTC: a Day budget rolls over at
// 00:00 UTC, a Month budget at 00:00 UTC on the 1st.
type Period int

const (
	Day Period = iota
	Month
	numPeriods
)

// String is "day" or "month".
func (p Period) String() string {
	if p == Month {
		return "month"
	}
	return "day"
}

// Adjective is "daily" or "monthly".
func (p Period) Adjective() string {
	if p == Month {
		return "monthly"
	}
	return "daily"
}

// ParsePeriod reads "day" or "daily", "month" or "monthly" (any case).
func ParsePeriod(s string) (Period, error) {
	switch strings.ToLower(s) {
	case "day", "daily":
		return Day, nil
	case "month", "monthly":
		return Month, nil
	}
	return Day, fmt.Errorf("unknown budget period %q (want day or month)", s)
}

// Start is the start of the period that contains t, in UTC.
func (p Period) Start(t time.Time) time.Time {
	t = t.UTC()
	y, m, d := t.Date()
	if p == Month {
		d = 1
	}
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// Next is the start of the period after the one that contains t, in UTC.
func (p Period) Next(t time.Time) time.Time {
	if p == Month {
		return p.Start(t).AddDate(0, 1, 0)
	}
	return p.Start(t).AddDate(0, 0, 1)
}

// Budget is a key's spending limit in USD per Period; Limit 0 means none.
type Budget struct {
	Limit  float64
	Period Period
}

// String is e.g. "$50.00 daily", or "none".
func (b Budget) String() string {
	if b.Limit <= 0 {
		return "none"
	}
	return FormatUSD(b.Limit) + " " + b.Period.Adjective()
}

// Thresholds are the budget percentages that raise an Alert.
var Thresholds = [...]int{50, 80, 100}

// Alert says that a key's spend crossed a threshold of its budget. Each
// threshold alerts at most once per key per period.
type Alert struct {
	Key       string
	Threshold int // 50, 80 or 100 (percent)
	Spent     float64
	Limit     float64
	Period    string // "day" or "month"
	At        time.Time
}

// String is e.g. `key "team-a" has spent $40.12 of its $50.00 daily budget (80%)`.
func (a Alert) String() string {
	adj := a.Period
	switch a.Period {
	case "day":
		adj = "daily"
	case "month":
		adj = "monthly"
	}
	return fmt.Sprintf("key %q has spent %s of its %s %s budget (%d%%)",
		a.Key, FormatUSD(a.Spent), FormatUSD(a.Limit), adj, a.Threshold)
}

// Totals are a key's counts over some time.
type Totals struct {
	Cost       float64 // USD
	Requests   int64
	Estimated  int64 // requests whose usage was estimated (Usage.Estimated)
	Prompt     int64
	Completion int64 // reasoning included
	Reasoning  int64
	Cached     int64
}

// KeySpend is a key's state at a time (see Ledger.Snapshot).
type KeySpend struct {
	Key    string
	Budget Budget
	// Start and End bound the key's current period (Budget.Period, Day for
	// a key with no budget), in UTC: Start <= now < End.
	Start, End time.Time
	// Spent is this period's cost: ThisPeriod.Cost, plus Others.
	Spent float64
	// Others is what the other instances of a fleet spent in this period,
	// as last read from the shared state (0 without one).
	Others float64
	// Remaining is Limit - Spent, at least 0; +Inf with no budget.
	Remaining float64
	// Blocked is set once Spent >= Limit (Allow is false).
	Blocked bool
	// ThisPeriod counts since Start; AllTime since the ledger's start.
	ThisPeriod, AllTime Totals
	// Today and ThisMonth count the current UTC day and month, whatever
	// the budget's period.
	Today, ThisMonth Totals
}

// Ledger keeps per-key spend and token counts in UTC calendar periods, and
// enforces budgets. Spend is kept in whole nano-dollars, so sums are exact
// and do not depend on the order of the additions. Periods roll over
// lazily, when a key is next touched (Add, Allow, Spend, Snapshot) in a new
// one. A Ledger is safe for concurrent use: a map lock taken for reading,
// and a lock per key.
type Ledger struct {
	mu   sync.RWMutex
	keys map[string]*account
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{keys: map[string]*account{}}
}

type account struct {
	mu      sync.Mutex
	budget  Budget
	limit   int64 // nano-USD, 0 = none
	alerted uint8 // bit i: Thresholds[i] alerted in the budget's current period
	win     [numPeriods]window
	total   counters
	others  [numPeriods]remote // the rest of the fleet's spend (SetOthers)
	// reasoning is the key's reasoning token budget (reasoning.go).
	reasoning reasoningAccount
}

// remote is what the other instances of a fleet spent in one period, as
// last read from the shared state.
type remote struct {
	start time.Time
	nano  int64
}

// spent is the period's spend: this instance's own and, when it is for
// the same period, the rest of the fleet's.
func (a *account) spent(p Period) int64 {
	n := a.win[p].c.nano
	if o := a.others[p]; !o.start.IsZero() && o.start.Equal(a.win[p].start) {
		n += o.nano
	}
	return n
}

// window counts one calendar period (the current day, the current month).
type window struct {
	start time.Time // zero before the first touch
	c     counters
}

type counters struct {
	nano                                  int64
	requests, estimated                   int64
	prompt, completion, reasoning, cached int64
}

func (c *counters) add(nano int64, u Usage) {
	c.nano += nano
	c.requests++
	if u.Estimated {
		c.estimated++
	}
	c.prompt += int64(u.Prompt)
	c.completion += int64(u.Completion)
	c.reasoning += int64(u.Reasoning)
	c.cached += int64(u.Cached)
}

func (c counters) totals() Totals {
	return Totals{
		Cost:       float64(c.nano) / 1e9,
		Requests:   c.requests,
		Estimated:  c.estimated,
		Prompt:     c.prompt,
		Completion: c.completion,
		Reasoning:  c.reasoning,
		Cached:     c.cached,
	}
}

// toNano converts USD to nano-USD; NaN and negative amounts are 0, and
// amounts past a billion dollars are capped there.
func toNano(usd float64) int64 {
	if !(usd > 0) {
		return 0
	}
	if usd > 1e9 {
		usd = 1e9
	}
	return int64(math.Round(usd * 1e9))
}

// roll starts the windows' new periods if now is in one. A clock that
// goes back never rolls a window back.
func (a *account) roll(now time.Time) {
	for p := range a.win {
		w := &a.win[p]
		if start := Period(p).Start(now); start.After(w.start) {
			if !w.start.IsZero() && Period(p) == a.budget.Period {
				a.alerted = 0
			}
			w.start = start
			w.c = counters{}
		}
	}
}

// reached reports whether spent is at least pct % of limit (exactly, in
// 128 bits).
func reached(spent, limit int64, pct int) bool {
	hs, ls := bits.Mul64(uint64(spent), 100)
	hl, ll := bits.Mul64(uint64(limit), uint64(pct))
	return hs > hl || hs == hl && ls >= ll
}

func (l *Ledger) get(key string) *account {
	l.mu.RLock()
	a := l.keys[key]
	l.mu.RUnlock()
	return a
}

func (l *Ledger) getOrCreate(key string) *account {
	if a := l.get(key); a != nil {
		return a
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.keys[key]
	if a == nil {
		a = &account{}
		l.keys[key] = a
	}
	return a
}

// SetBudget sets key's budget (Budget{} for none); call it for every
// configured key at provision, also on config reloads. Spend and counts
// are kept, so a changed budget applies to the current period's spend so
// far (the ledger counts the current day and month whatever the budget's
// period). Thresholds already alerted in the period stay alerted only if
// the spend still reaches them under the new budget, so raising a budget
// re-arms its alerts and lowering one alerts at the next Add. A negative
// or NaN Limit is none; a Period other than Month is Day.
func (l *Ledger) SetBudget(key string, b Budget) {
	if !(b.Limit > 0) {
		b.Limit = 0
	}
	if b.Period != Month {
		b.Period = Day
	}
	a := l.getOrCreate(key)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.budget == b {
		return
	}
	a.budget, a.limit = b, toNano(b.Limit)
	spent := a.spent(b.Period)
	for i, th := range Thresholds {
		if a.limit == 0 || !reached(spent, a.limit, th) {
			a.alerted &^= 1 << i
		}
	}
}

// Allow reports whether key may make a request at now: false once its
// spend in the current period is at least its limit, until the period
// rolls over. remaining is the limit less the spend (at least 0), +Inf for
// a key with no budget (or none known to the ledger).
func (l *Ledger) Allow(key string, now time.Time) (ok bool, remaining float64) {
	a := l.get(key)
	if a == nil {
		return true, math.Inf(1)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.roll(now)
	if a.limit == 0 {
		return true, math.Inf(1)
	}
	spent := a.spent(a.budget.Period)
	return spent < a.limit, float64(max(a.limit-spent, 0)) / 1e9
}

// Add records a request of key at now: its cost in USD (negative or NaN
// counts as 0) and its usage. It returns the alerts that this addition
// raised, in threshold order: every threshold of the budget that the
// period's spend reached and that had not alerted yet in the period (so
// an addition that crosses several returns them all). Most calls return
// nil.
func (l *Ledger) Add(key string, cost float64, u Usage, now time.Time) []Alert {
	nano := toNano(cost)
	a := l.getOrCreate(key)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.roll(now)
	for p := range a.win {
		a.win[p].c.add(nano, u)
	}
	a.total.add(nano, u)
	return a.alerts(key, now)
}

// alerts raises the alerts the period's spend reached that had not
// alerted yet (a.mu held).
func (a *account) alerts(key string, now time.Time) []Alert {
	if a.limit == 0 || a.alerted == 1<<len(Thresholds)-1 {
		return nil
	}
	spent := a.spent(a.budget.Period)
	var alerts []Alert
	for i, th := range Thresholds {
		if a.alerted&(1<<i) != 0 || !reached(spent, a.limit, th) {
			continue
		}
		a.alerted |= 1 << i
		alerts = append(alerts, Alert{
			Key:       key,
			Threshold: th,
			Spent:     float64(spent) / 1e9,
			Limit:     a.budget.Limit,
			Period:    a.budget.Period.String(),
			At:        now,
		})
	}
	return alerts
}

// Spend returns key's state at now, and whether the ledger knows the key.
func (l *Ledger) Spend(key string, now time.Time) (KeySpend, bool) {
	a := l.get(key)
	if a == nil {
		return KeySpend{}, false
	}
	return a.snapshot(key, now), true
}

// Snapshot returns every key's state at now, sorted by key.
func (l *Ledger) Snapshot(now time.Time) []KeySpend {
	l.mu.RLock()
	names := make([]string, 0, len(l.keys))
	accts := make(map[string]*account, len(l.keys))
	for k, a := range l.keys {
		names = append(names, k)
		accts[k] = a
	}
	l.mu.RUnlock()
	sort.Strings(names)
	out := make([]KeySpend, len(names))
	for i, k := range names {
		out[i] = accts[k].snapshot(k, now)
	}
	return out
}

func (a *account) snapshot(key string, now time.Time) KeySpend {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.roll(now)
	w := a.win[a.budget.Period]
	spent := a.spent(a.budget.Period)
	ks := KeySpend{
		Key:        key,
		Budget:     a.budget,
		Start:      w.start,
		End:        a.budget.Period.Next(w.start),
		Spent:      float64(spent) / 1e9,
		Others:     float64(spent-w.c.nano) / 1e9,
		Remaining:  math.Inf(1),
		ThisPeriod: w.c.totals(),
		AllTime:    a.total.totals(),
		Today:      a.win[Day].c.totals(),
		ThisMonth:  a.win[Month].c.totals(),
	}
	if a.limit > 0 {
		ks.Remaining = float64(max(a.limit-spent, 0)) / 1e9
		ks.Blocked = spent >= a.limit
	}
	return ks
}
