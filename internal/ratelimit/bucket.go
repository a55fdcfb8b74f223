// Package ratelimit holds the per-key limits' arithmetic: a token bucket
// per minute (requests or tokens), with the figures OpenAI's rate-limit
// headers carry. It reads no clock: every time comes in as a parameter.
// It has no Caddy imports.
package ratelimit

import (
	"math"
	"sync"
	"time"
)

// Bucket allows Limit units a minute: it holds at most Limit, starts full,
// and refills continuously at Limit a minute. A Bucket is safe for
// concurrent use.
type Bucket struct {
	limit float64 // units a minute, also the capacity
	rate  float64 // units a nanosecond

	mu     sync.Mutex
	tokens float64 // may go negative: a debt (Adjust), paid back by the refill
	last   time.Time
	taken  float64 // units taken here (Take, Adjust), ever: what a fleet's other instances drain
	start  time.Time
}

// NewBucket returns a full bucket of limit units a minute (limit > 0).
func NewBucket(limit int, now time.Time) *Bucket {
	l := float64(max(limit, 1))
	return &Bucket{limit: l, rate: l / float64(time.Minute), tokens: l, last: now, start: now}
}

// Since is when the bucket was made: Taken counts from then.
func (b *Bucket) Since() time.Time { return b.start }

// Limit returns the units a minute.
func (b *Bucket) Limit() int { return int(b.limit) }

// refill brings tokens up to now (b.mu held). A clock that goes back
// refills nothing.
func (b *Bucket) refill(now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = math.Min(b.limit, b.tokens+float64(d)*b.rate)
		b.last = now
	}
}

// Take takes n units at now if the bucket holds them. When it does not,
// it takes nothing and returns how long until it will (at most a minute
// for n <= Limit; n above Limit is taken once the bucket is full).
func (b *Bucket) Take(n int, now time.Time) (ok bool, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	need := math.Min(float64(n), b.limit)
	if b.tokens >= need {
		b.tokens -= float64(n)
		b.taken += float64(n)
		return true, 0
	}
	return false, time.Duration(math.Ceil((need - b.tokens) / b.rate))
}

// Adjust takes n more units (or gives -n back) at now, without checking:
// for what is known only afterwards, such as a request's real token count
// against its estimate. The bucket may go into debt, which later requests
// wait out; it never holds more than Limit.
func (b *Bucket) Adjust(n int, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	b.tokens = math.Min(b.limit, b.tokens-float64(n))
	b.taken += float64(n)
}

// Drain takes n units (n > 0) that other instances of a fleet took from
// the same limit, so the fleet as a whole keeps to it. Like Adjust it may
// put the bucket in debt; unlike it, the units are not counted in Taken.
func (b *Bucket) Drain(n int64, now time.Time) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	b.tokens -= float64(n)
}

// Taken returns the units taken here since the bucket was made (Take and
// Adjust, not Drain): a counter the fleet's other instances read, and
// drain by what it grew.
func (b *Bucket) Taken() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int64(math.Round(b.taken))
}

// State returns what the headers say at now: the units left (0 in debt)
// and how long until the bucket is full again.
func (b *Bucket) State(now time.Time) (remaining int, reset time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	return int(math.Max(0, math.Floor(b.tokens))), time.Duration(math.Ceil((b.limit - b.tokens) / b.rate))
}
