package ratelimit

import (
	"testing"
	"time"
)

func TestBucket(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	b := NewBucket(60, t0) // one a second
	for i := range 60 {
		if ok, _ := b.Take(1, t0); !ok {
			t.Fatalf("request %d of a full bucket of 60 refused", i+1)
		}
	}
	ok, wait := b.Take(1, t0)
	if ok || wait != time.Second {
		t.Fatalf("61st request: ok %v, wait %v; want refused, 1s", ok, wait)
	}
	if rem, reset := b.State(t0); rem != 0 || reset != time.Minute {
		t.Fatalf("empty bucket: remaining %d, reset %v; want 0, 1m", rem, reset)
	}
	if ok, _ := b.Take(1, t0.Add(time.Second)); !ok {
		t.Fatal("a second later, one request is refused")
	}
	// Debt: 30 more units than estimated, waited out at one a second.
	b.Adjust(30, t0.Add(time.Second))
	if ok, wait := b.Take(1, t0.Add(time.Second)); ok || wait != 31*time.Second {
		t.Fatalf("in debt: ok %v, wait %v; want refused, 31s", ok, wait)
	}
	// Giving back never overfills.
	b.Adjust(-1000, t0.Add(2*time.Second))
	if rem, reset := b.State(t0.Add(2 * time.Second)); rem != 60 || reset != 0 {
		t.Fatalf("after a refund: remaining %d, reset %v; want 60, 0", rem, reset)
	}
	// More than the limit at once: taken when full, then waited out.
	if ok, _ := b.Take(90, t0.Add(2*time.Second)); !ok {
		t.Fatal("a request above the limit refused on a full bucket")
	}
	if ok, wait := b.Take(1, t0.Add(2*time.Second)); ok || wait != 31*time.Second {
		t.Fatalf("after 90 of 60: ok %v, wait %v; want refused, 31s", ok, wait)
	}
	// A clock going back refills nothing.
	if ok, _ := b.Take(1, t0); ok {
		t.Fatal("a clock going back refilled the bucket")
	}
}

func TestDrainAndTaken(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	b := NewBucket(60, t0)
	b.Take(10, t0)
	b.Adjust(5, t0)
	b.Drain(40, t0) // another instance's 40
	if got := b.Taken(); got != 15 {
		t.Fatalf("taken %d, want 15 (a drain is not this instance's)", got)
	}
	if rem, _ := b.State(t0); rem != 5 {
		t.Fatalf("remaining %d after 15 taken and 40 drained of 60, want 5", rem)
	}
	b.Drain(30, t0)
	if ok, wait := b.Take(1, t0); ok || wait != 26*time.Second {
		t.Fatalf("in debt by 25: ok %v, wait %v; want refused, 26s", ok, wait)
	}
	b.Drain(-5, t0) // nothing
	if rem, _ := b.State(t0.Add(26 * time.Second)); rem != 1 {
		t.Fatalf("26s later: remaining %d, want 1", rem)
	}
}

// BenchmarkTake: the cost a limited key adds per request (a take and the
// headers' state).
func BenchmarkTake(b *testing.B) {
	t0 := time.Unix(1_800_000_000, 0)
	bk := NewBucket(1_000_000_000, t0)
	i := 0
	for b.Loop() {
		i++
		now := t0.Add(time.Duration(i))
		bk.Take(1, now)
		bk.State(now)
	}
}
