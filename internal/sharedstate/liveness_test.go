package sharedstate

import (
	"strings"
	"testing"
	"time"
)

func TestObserve(t *testing.T) {
	now := time.Unix(1_780_000_000, 0)
	const stale, lag = 10 * time.Second, 2 * time.Second
	fig := func(inFlight int64, at time.Time) (string, Figures) {
		f := Figures{InFlight: inFlight, At: at}
		return f.String(), f
	}

	// A live instance: counted; gone quiet, not after stale.
	raw, f := fig(2, now.Add(-300*time.Millisecond))
	p, note := Observe(Peer{}, false, raw, f, now, stale, lag)
	if note != "" || !p.Live(now, stale) || p.InFlight(3) != 2 {
		t.Fatalf("a live instance at first sight: %+v, %q", p, note)
	}
	if p2, _ := Observe(p, true, raw, f, now.Add(stale), stale, lag); p2.Live(now.Add(stale), stale) {
		t.Errorf("figures unchanged for %s still count", stale)
	}

	// Gone before this instance started: not counted.
	raw, f = fig(3, now.Add(-time.Minute))
	if p, _ := Observe(Peer{}, false, raw, f, now, stale, lag); p.Live(now, stale) {
		t.Errorf("figures a minute old at first sight count")
	}

	// Written an hour ahead and never changed: not counted, named.
	raw, f = fig(3, now.Add(time.Hour))
	p, note = Observe(Peer{}, false, raw, f, now, stale, lag)
	if p.Live(now, stale) || !strings.Contains(note, "ahead") {
		t.Errorf("an hour ahead at first sight: live %v, %q", p.Live(now, stale), note)
	}
	p, note = Observe(p, true, raw, f, now.Add(time.Second), stale, lag)
	if p.Live(now.Add(time.Second), stale) || note == "" {
		t.Errorf("an hour ahead, unchanged: live %v, %q", p.Live(now.Add(time.Second), stale), note)
	}
	// ...an instance alive with that clock: counted while it changes,
	// still named.
	raw, f = fig(3, now.Add(time.Hour+time.Second))
	later := now.Add(2 * time.Second)
	p, note = Observe(p, true, raw, f, later, stale, lag)
	if !p.Live(later, stale) || note == "" {
		t.Errorf("an hour ahead, changing: live %v, %q", p.Live(later, stale), note)
	}
	if p, _ = Observe(p, true, raw, f, later.Add(stale), stale, lag); p.Live(later.Add(stale), stale) {
		t.Errorf("an hour ahead, then silent for %s: still counts", stale)
	}

	// A clock a minute behind, alive: counted once it changes, named.
	raw, f = fig(1, now.Add(-time.Minute))
	p, _ = Observe(Peer{}, false, raw, f, now, stale, lag)
	raw, f = fig(1, now.Add(-time.Minute+250*time.Millisecond))
	p, note = Observe(p, true, raw, f, now.Add(250*time.Millisecond), stale, lag)
	if !p.Live(now.Add(250*time.Millisecond), stale) || !strings.Contains(note, "behind") {
		t.Errorf("a minute behind, changing: live %v, %q", p.Live(now, stale), note)
	}

	// A second ahead: within MaxSkew, counted, not named.
	raw, f = fig(1, now.Add(time.Second))
	if p, note := Observe(Peer{}, false, raw, f, now, stale, lag); !p.Live(now, stale) || note != "" {
		t.Errorf("a second ahead: live %v, %q", p.Live(now, stale), note)
	}

	// More in flight than the cap: the cap is full, no more.
	if n := (Peer{Figures: Figures{InFlight: 50}}).InFlight(3); n != 3 {
		t.Errorf("InFlight over the cap: %d", n)
	}
}
