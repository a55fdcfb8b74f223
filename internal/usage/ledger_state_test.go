package usage

import (
	"encoding/json"
	"testing"
	"time"
)

func TestLedgerExportRestore(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	a := NewLedger()
	a.SetBudget("team", Budget{Limit: 1, Period: Month})
	a.Add("team", 0.6, Usage{Prompt: 10, Completion: 5}, now)
	a.Add("other", 0.25, Usage{Prompt: 1}, now)

	raw, err := json.Marshal(a.Export(now))
	if err != nil {
		t.Fatal(err)
	}
	var saved []KeyState
	if err := json.Unmarshal(raw, &saved); err != nil {
		t.Fatal(err)
	}

	b := NewLedger()
	b.Restore(saved, now.Add(time.Hour))
	b.SetBudget("team", Budget{Limit: 1, Period: Month})
	ks, _ := b.Spend("team", now.Add(time.Hour))
	if ks.Spent != 0.6 || ks.ThisPeriod.Requests != 1 || ks.AllTime.Prompt != 10 {
		t.Fatalf("restored team: %+v", ks)
	}
	// The 50 % alert was raised before the restart: not again.
	if al := b.Add("team", 0.1, Usage{}, now.Add(time.Hour)); len(al) != 0 {
		t.Fatalf("alerts after restore: %v", al)
	}
	if al := b.Add("team", 0.2, Usage{}, now.Add(time.Hour)); len(al) != 1 || al[0].Threshold != 80 {
		t.Fatalf("80%% alert after restore: %v", al)
	}

	// The next day: the day window starts afresh, the month's is kept.
	c := NewLedger()
	c.Restore(saved, now.Add(24*time.Hour))
	ks, _ = c.Spend("other", now.Add(24*time.Hour))
	if ks.Today.Cost != 0 || ks.ThisMonth.Cost != 0.25 || ks.AllTime.Cost != 0.25 {
		t.Fatalf("restored a day later: %+v", ks)
	}
}

func TestLedgerOthersCountTowardsBudget(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	l := NewLedger()
	l.SetBudget("k", Budget{Limit: 1, Period: Day})
	l.Add("k", 0.4, Usage{}, now)
	// The fleet's spend crosses 50 and 80 % with no request here.
	if al := l.SetOthers("k", Day, Day.Start(now), 500_000_000, now); len(al) != 2 || al[0].Threshold != 50 || al[1].Threshold != 80 {
		t.Fatalf("alerts from the fleet's spend: %v", al)
	}
	if ok, rem := l.Allow("k", now); !ok || rem < 0.0999 || rem > 0.1001 {
		t.Fatalf("Allow = %v, %v; want true, 0.10", ok, rem)
	}
	if al := l.Add("k", 0.1, Usage{}, now); len(al) != 1 || al[0].Threshold != 100 {
		t.Fatalf("alerts at the fleet's 100%%: %v", al)
	}
	if ok, _ := l.Allow("k", now); ok {
		t.Fatal("the fleet's spend reached the budget; still allowed")
	}
	own, _ := l.Own("k", now)
	if own.Day.NanoUSD != 500_000_000 {
		t.Fatalf("own spend %d, want only this instance's 0.5 USD", own.Day.NanoUSD)
	}
	// Others of an earlier period do not count.
	l.SetOthers("k", Day, Day.Start(now).AddDate(0, 0, -1), 5e9, now)
	if ok, _ := l.Allow("k", now); !ok {
		t.Fatal("yesterday's fleet spend blocks today")
	}
	// RaiseOwn only raises, only in the current period.
	if l.RaiseOwn("k", Day, Day.Start(now), 100, now) {
		t.Fatal("RaiseOwn lowered the own spend")
	}
	if !l.RaiseOwn("k", Day, Day.Start(now), 700_000_000, now) {
		t.Fatal("RaiseOwn did not raise")
	}
	if own, _ := l.Own("k", now); own.Day.NanoUSD != 700_000_000 {
		t.Fatalf("own after RaiseOwn = %d", own.Day.NanoUSD)
	}
}

// FuzzRestore: a saved state comes from storage, where anything may have
// happened to it. Whatever decodes is restored without a panic, and the
// ledger's figures stay sane: no negative spend, a budget check that
// answers, an export that encodes.
func FuzzRestore(f *testing.F) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	l := NewLedger()
	l.SetBudget("team", Budget{Limit: 1, Period: Month})
	l.Add("team", 0.6, Usage{Prompt: 10}, now)
	good, _ := json.Marshal(l.Export(now))
	f.Add(good)
	f.Add([]byte(`[{"key":"k","day":{"start":"2026-12-04T00:00:00Z","nano_usd":-5},"alerted":[50,80,7],"alerted_period":"week"}]`))
	f.Add([]byte(`[{"key":"","total":{"nano_usd":9223372036854775807}}]`))
	f.Add([]byte(`[{"key":"big","day":{"start":"2026-12-04T00:00:00Z","nano_usd":9223372036854775807}}]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var states []KeyState
		if json.Unmarshal(raw, &states) != nil {
			return
		}
		l := NewLedger()
		l.Restore(states, now)
		for _, ks := range states {
			l.SetBudget(ks.Key, Budget{Limit: 0.5, Period: Day})
			l.Allow(ks.Key, now)
			l.Add(ks.Key, 0.1, Usage{}, now)
		}
		for _, ks := range l.Snapshot(now) {
			if ks.Spent < 0 || ks.Remaining < 0 {
				t.Fatalf("restored %s: spent %v, remaining %v", ks.Key, ks.Spent, ks.Remaining)
			}
		}
		if _, err := json.Marshal(l.Export(now)); err != nil {
			t.Fatal(err)
		}
	})
}
