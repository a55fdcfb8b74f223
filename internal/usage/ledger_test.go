package usage

import (
	"math"
	"reflect"
	"sync"
	"testing"
	"time"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func thresholds(alerts []Alert) []int {
	var out []int
	for _, a := range alerts {
		out = append(out, a.Threshold)
	}
	return out
}

func TestPeriodStart(t *testing.T) {
	paris := time.FixedZone("UTC+2", 2*3600)
	for _, tc := range []struct {
		p           Period
		t           time.Time
		start, next string
	}{
		{Day, at("2025-03-14T23:59:59Z"), "2025-03-14T00:00:00Z", "2025-03-15T00:00:00Z"},
		{Day, at("2025-03-15T00:00:00Z"), "2025-03-15T00:00:00Z", "2025-03-16T00:00:00Z"},
		{Day, time.Date(2025, 3, 15, 1, 0, 0, 0, paris), "2025-03-14T00:00:00Z", "2025-03-15T00:00:00Z"}, // 23:00 UTC the day before
		{Day, at("2024-12-31T12:00:00Z"), "2024-12-31T00:00:00Z", "2025-01-01T00:00:00Z"},
		{Month, at("2025-01-31T23:59:59Z"), "2025-01-01T00:00:00Z", "2025-02-01T00:00:00Z"},
		{Month, at("2025-02-01T00:00:00Z"), "2025-02-01T00:00:00Z", "2025-03-01T00:00:00Z"},
		{Month, at("2024-02-29T10:00:00Z"), "2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"},
		{Month, at("2024-12-31T10:00:00Z"), "2024-12-01T00:00:00Z", "2025-01-01T00:00:00Z"},
	} {
		if got := tc.p.Start(tc.t); !got.Equal(at(tc.start)) || got.Location() != time.UTC {
			t.Errorf("%v.Start(%v) = %v, want %s UTC", tc.p, tc.t, got, tc.start)
		}
		if got := tc.p.Next(tc.t); !got.Equal(at(tc.next)) {
			t.Errorf("%v.Next(%v) = %v, want %s", tc.p, tc.t, got, tc.next)
		}
	}
	for s, want := range map[string]Period{"day": Day, "Daily": Day, "month": Month, "MONTHLY": Month} {
		if p, err := ParsePeriod(s); err != nil || p != want {
			t.Errorf("ParsePeriod(%q) = %v, %v", s, p, err)
		}
	}
	if _, err := ParsePeriod("week"); err == nil {
		t.Error("ParsePeriod(week) succeeded")
	}
	if Day.String() != "day" || Month.String() != "month" || Month.Adjective() != "monthly" {
		t.Error("period names")
	}
	if s := (Budget{Limit: 50}).String(); s != "$50.00 daily" {
		t.Errorf("Budget.String = %q", s)
	}
}

func TestLedgerDayRollover(t *testing.T) {
	l := NewLedger()
	l.SetBudget("k", Budget{Limit: 10, Period: Day})
	t0 := at("2025-03-14T10:00:00Z")
	if got := thresholds(l.Add("k", 6, Usage{Prompt: 100, Completion: 10}, t0)); !reflect.DeepEqual(got, []int{50}) {
		t.Fatalf("alerts %v, want [50]", got)
	}
	if got := thresholds(l.Add("k", 4, Usage{Prompt: 100}, t0.Add(time.Hour))); !reflect.DeepEqual(got, []int{80, 100}) {
		t.Fatalf("alerts %v, want [80 100]", got)
	}
	if ok, rem := l.Allow("k", at("2025-03-14T23:59:59.999Z")); ok || rem != 0 {
		t.Fatalf("Allow at the limit = %v, %v; want false, 0", ok, rem)
	}
	// A clock going back does not roll the period back.
	if ok, _ := l.Allow("k", at("2025-03-13T12:00:00Z")); ok {
		t.Fatal("Allow with an earlier clock = true")
	}
	// 00:00 UTC: a new day.
	t1 := at("2025-03-15T00:00:00Z")
	if ok, rem := l.Allow("k", t1); !ok || rem != 10 {
		t.Fatalf("Allow on the next day = %v, %v; want true, 10", ok, rem)
	}
	ks, _ := l.Spend("k", t1)
	if ks.Spent != 0 || ks.ThisPeriod.Requests != 0 || ks.AllTime.Requests != 2 || ks.AllTime.Cost != 10 || ks.AllTime.Prompt != 200 {
		t.Fatalf("after rollover: %+v", ks)
	}
	if !ks.Start.Equal(t1) || !ks.End.Equal(at("2025-03-16T00:00:00Z")) {
		t.Fatalf("period %v..%v", ks.Start, ks.End)
	}
	// The alerts re-arm with the new period.
	if got := thresholds(l.Add("k", 5, Usage{}, t1)); !reflect.DeepEqual(got, []int{50}) {
		t.Fatalf("alerts on the new day %v, want [50]", got)
	}
	if ks.ThisMonth.Cost != 10 || ks.Today.Cost != 0 {
		t.Fatalf("month %v, today %v", ks.ThisMonth.Cost, ks.Today.Cost)
	}
}

func TestLedgerMonthRollover(t *testing.T) {
	l := NewLedger()
	l.SetBudget("k", Budget{Limit: 100, Period: Month})
	l.Add("k", 30, Usage{Completion: 1}, at("2025-01-01T00:00:00Z"))
	l.Add("k", 30, Usage{Completion: 1}, at("2025-01-15T12:00:00Z"))
	if got := thresholds(l.Add("k", 40, Usage{Completion: 1}, at("2025-01-31T23:59:59Z"))); !reflect.DeepEqual(got, []int{80, 100}) {
		t.Fatalf("alerts %v, want [80 100]", got)
	}
	ks, _ := l.Spend("k", at("2025-01-31T23:59:59Z"))
	if ks.Spent != 100 || !ks.Blocked || ks.Remaining != 0 || ks.ThisPeriod.Completion != 3 || ks.Today.Cost != 40 {
		t.Fatalf("end of January: %+v", ks)
	}
	// Jan 31 23:59 in UTC-5 is Feb 1 04:59 UTC: February.
	ny := time.FixedZone("UTC-5", -5*3600)
	if ok, rem := l.Allow("k", time.Date(2025, 1, 31, 23, 59, 0, 0, ny)); !ok || rem != 100 {
		t.Fatalf("Allow on Feb 1 UTC = %v, %v", ok, rem)
	}
	ks, _ = l.Spend("k", at("2025-02-01T05:00:00Z"))
	if ks.Spent != 0 || !ks.Start.Equal(at("2025-02-01T00:00:00Z")) || !ks.End.Equal(at("2025-03-01T00:00:00Z")) || ks.AllTime.Cost != 100 {
		t.Fatalf("February: %+v", ks)
	}
	// Leap year: Feb 29 is still February, Mar 1 is not.
	l.SetBudget("leap", Budget{Limit: 1, Period: Month})
	l.Add("leap", 1, Usage{}, at("2024-02-29T23:00:00Z"))
	if ok, _ := l.Allow("leap", at("2024-02-29T23:59:59Z")); ok {
		t.Fatal("Feb 29: allowed")
	}
	if ok, _ := l.Allow("leap", at("2024-03-01T00:00:00Z")); !ok {
		t.Fatal("Mar 1: blocked")
	}
}

func TestLedgerAlertsOnce(t *testing.T) {
	l := NewLedger()
	l.SetBudget("team-a", Budget{Limit: 50})
	now := at("2025-06-01T08:00:00Z")
	var all []int
	for range 100 { // $1 at a time, to $100
		all = append(all, thresholds(l.Add("team-a", 1, Usage{}, now))...)
		now = now.Add(time.Minute)
	}
	if !reflect.DeepEqual(all, []int{50, 80, 100}) {
		t.Fatalf("alerts %v, want [50 80 100] once each", all)
	}
	// Exactly at a threshold alerts; all three in one addition, in order.
	l.SetBudget("b", Budget{Limit: 10})
	alerts := l.Add("b", 12.5, Usage{}, now)
	if got := thresholds(alerts); !reflect.DeepEqual(got, []int{50, 80, 100}) {
		t.Fatalf("alerts %v", got)
	}
	want := Alert{Key: "b", Threshold: 80, Spent: 12.5, Limit: 10, Period: "day", At: now}
	if alerts[1] != want {
		t.Fatalf("alert %+v, want %+v", alerts[1], want)
	}
	l.SetBudget("c", Budget{Limit: 10})
	if got := thresholds(l.Add("c", 5, Usage{}, now)); !reflect.DeepEqual(got, []int{50}) {
		t.Fatalf("exactly 50%%: %v", got)
	}
	if got := thresholds(l.Add("c", 0, Usage{}, now)); got != nil {
		t.Fatalf("again: %v", got)
	}
	// No budget, no alerts.
	if got := l.Add("free", 1e6, Usage{}, now); got != nil {
		t.Fatalf("no budget: %v", got)
	}
}

func TestAlertString(t *testing.T) {
	a := Alert{Key: "team-a", Threshold: 80, Spent: 40.1234, Limit: 50, Period: "day"}
	if got, want := a.String(), `key "team-a" has spent $40.12 of its $50.00 daily budget (80%)`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	a = Alert{Key: "b", Threshold: 100, Spent: 1234.5, Limit: 1000, Period: "month"}
	if got, want := a.String(), `key "b" has spent $1,234.50 of its $1,000.00 monthly budget (100%)`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestLedgerAllowExactLimit(t *testing.T) {
	l := NewLedger()
	l.SetBudget("k", Budget{Limit: 1})
	now := at("2025-03-14T10:00:00Z")
	// Ten additions of $0.1 (not exact in binary) reach $1 exactly.
	for i := range 10 {
		if ok, _ := l.Allow("k", now); !ok {
			t.Fatalf("blocked after %d additions", i)
		}
		l.Add("k", 0.1, Usage{}, now)
	}
	if ok, rem := l.Allow("k", now); ok || rem != 0 {
		t.Fatalf("at the limit: %v, %v", ok, rem)
	}
	l.SetBudget("j", Budget{Limit: 1})
	l.Add("j", 0.999999999, Usage{}, now)
	if ok, rem := l.Allow("j", now); !ok || math.Abs(rem-1e-9) > 1e-15 {
		t.Fatalf("a nano-dollar under: %v, %v", ok, rem)
	}
	// Unknown keys and keys with no budget are allowed.
	if ok, rem := l.Allow("nobody", now); !ok || !math.IsInf(rem, 1) {
		t.Fatalf("unknown: %v, %v", ok, rem)
	}
	l.Add("free", 5, Usage{}, now)
	if ok, rem := l.Allow("free", now); !ok || !math.IsInf(rem, 1) {
		t.Fatalf("no budget: %v, %v", ok, rem)
	}
	// Negative, NaN and zero costs add nothing.
	l.Add("j", -5, Usage{}, now)
	l.Add("j", math.NaN(), Usage{}, now)
	if ks, _ := l.Spend("j", now); ks.Spent != 0.999999999 || ks.ThisPeriod.Requests != 3 {
		t.Fatalf("after bad costs: %+v", ks)
	}
}

func TestLedgerSetBudget(t *testing.T) {
	l := NewLedger()
	now := at("2025-03-14T10:00:00Z")
	l.SetBudget("k", Budget{Limit: 100})
	if got := thresholds(l.Add("k", 60, Usage{}, now)); !reflect.DeepEqual(got, []int{50}) {
		t.Fatalf("alerts %v", got)
	}
	// Lowering the budget keeps the spend: now over 80% and at 100%.
	l.SetBudget("k", Budget{Limit: 60})
	if ok, _ := l.Allow("k", now); ok {
		t.Fatal("allowed over the lowered budget")
	}
	if got := thresholds(l.Add("k", 0, Usage{}, now)); !reflect.DeepEqual(got, []int{80, 100}) {
		t.Fatalf("alerts after lowering %v, want [80 100]", got)
	}
	// Raising it re-arms the thresholds no longer reached.
	l.SetBudget("k", Budget{Limit: 200})
	if ok, rem := l.Allow("k", now); !ok || rem != 140 {
		t.Fatalf("after raising: %v, %v", ok, rem)
	}
	if got := thresholds(l.Add("k", 40, Usage{}, now)); !reflect.DeepEqual(got, []int{50}) {
		t.Fatalf("alerts after raising %v, want [50]", got)
	}
	// Setting the same budget again changes nothing.
	l.SetBudget("k", Budget{Limit: 200})
	if got := thresholds(l.Add("k", 0, Usage{}, now)); got != nil {
		t.Fatalf("alerts after the same budget %v", got)
	}
	// Day to month: the month's spend so far counts.
	l.Add("k", 10, Usage{}, at("2025-03-15T10:00:00Z")) // new day: day spend 10, month 110
	l.SetBudget("k", Budget{Limit: 120, Period: Month})
	ks, _ := l.Spend("k", at("2025-03-15T10:00:00Z"))
	if ks.Spent != 110 || ks.Remaining != 10 || !ks.Start.Equal(at("2025-03-01T00:00:00Z")) {
		t.Fatalf("monthly: %+v", ks)
	}
	// Removing the budget.
	l.SetBudget("k", Budget{})
	if ok, rem := l.Allow("k", now); !ok || !math.IsInf(rem, 1) {
		t.Fatalf("no budget: %v, %v", ok, rem)
	}
	l.SetBudget("neg", Budget{Limit: -1, Period: 7})
	if ks, _ := l.Spend("neg", now); ks.Budget != (Budget{}) {
		t.Fatalf("bad budget kept: %+v", ks.Budget)
	}
}

func TestLedgerSnapshot(t *testing.T) {
	l := NewLedger()
	now := at("2025-03-14T10:00:00Z")
	l.SetBudget("b", Budget{Limit: 10, Period: Month})
	l.SetBudget("a", Budget{Limit: 5})
	l.Add("b", 1.5, Usage{Prompt: 10, Completion: 20, Reasoning: 5, Cached: 4}, now)
	l.Add("b", 0.5, Usage{Prompt: 1, Completion: 2, Estimated: true}, now)
	l.Add("c", 3, Usage{}, now)
	snap := l.Snapshot(now)
	if len(snap) != 3 || snap[0].Key != "a" || snap[1].Key != "b" || snap[2].Key != "c" {
		t.Fatalf("keys %+v", snap)
	}
	b := snap[1]
	want := Totals{Cost: 2, Requests: 2, Estimated: 1, Prompt: 11, Completion: 22, Reasoning: 5, Cached: 4}
	if b.ThisPeriod != want || b.AllTime != want || b.Today != want || b.ThisMonth != want {
		t.Fatalf("b: %+v", b)
	}
	if b.Spent != 2 || b.Remaining != 8 || b.Blocked || b.Budget != (Budget{Limit: 10, Period: Month}) {
		t.Fatalf("b: %+v", b)
	}
	if a := snap[0]; a.Spent != 0 || a.Remaining != 5 || !a.Start.Equal(at("2025-03-14T00:00:00Z")) {
		t.Fatalf("a: %+v", a)
	}
	if c := snap[2]; c.Spent != 3 || !math.IsInf(c.Remaining, 1) {
		t.Fatalf("c: %+v", c)
	}
	// Snapshot rolls over too.
	snap = l.Snapshot(at("2025-04-01T00:00:00Z"))
	if snap[1].Spent != 0 || snap[1].AllTime.Cost != 2 {
		t.Fatalf("April: %+v", snap[1])
	}
	if _, ok := l.Spend("nobody", now); ok {
		t.Fatal("Spend of an unknown key")
	}
}

// TestLedgerConcurrent adds from 16 goroutines (run with -race): the totals
// are exact, and each threshold alerts exactly once.
func TestLedgerConcurrent(t *testing.T) {
	l := NewLedger()
	const (
		workers = 16
		adds    = 1000
		cost    = 0.000123 // not exact in binary
	)
	l.SetBudget("shared", Budget{Limit: workers * adds * cost})
	now := at("2025-03-14T10:00:00Z")
	var wg sync.WaitGroup
	alerts := make(chan Alert, 100)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range adds {
				for _, a := range l.Add("shared", cost, Usage{Prompt: 2, Completion: 1}, now) {
					alerts <- a
				}
				l.Add("own", cost, Usage{Prompt: 1}, now)
				l.Allow("shared", now)
				if i%100 == 0 {
					l.Snapshot(now)
					l.SetBudget("own", Budget{Limit: float64(w)})
				}
			}
		}()
	}
	wg.Wait()
	close(alerts)
	var got []int
	for a := range alerts {
		got = append(got, a.Threshold)
	}
	if len(got) != 3 {
		t.Errorf("alerts %v, want 50, 80 and 100 once each", got)
	}
	ks, _ := l.Spend("shared", now)
	if want := int64(workers * adds); ks.ThisPeriod.Requests != want || ks.ThisPeriod.Prompt != 2*want || ks.ThisPeriod.Completion != want {
		t.Errorf("counts %+v", ks.ThisPeriod)
	}
	if want := float64(toNano(cost)*workers*adds) / 1e9; ks.Spent != want {
		t.Errorf("spent %v, want exactly %v", ks.Spent, want)
	}
	if ok, _ := l.Allow("shared", now); ok {
		t.Error("allowed at the limit")
	}
	if ks, _ := l.Spend("own", now); ks.AllTime.Requests != workers*adds {
		t.Errorf("own: %+v", ks.AllTime)
	}
}
