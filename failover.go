package llmrelay

// This file holds the failover decisions as plain Go: which outcomes are
// retryable, how long to back off before revisiting a target, how to read
// Retry-After, and which target the next attempt goes to. It imports nothing
// from Caddy so it can be tested alone; attempt.go, chain.go and serve.go do the HTTP.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Defaults of the failover block.
const (
	defaultBackoffBase      = 100 * time.Millisecond
	defaultBackoffMax       = 2 * time.Second
	defaultFirstByteTimeout = 30 * time.Second
	defaultTryDuration      = 60 * time.Second
	defaultStreamIdle       = 5 * time.Minute
)

// defaultFailoverOn is the failover trigger list used when `on` is not set.
var defaultFailoverOn = []string{"connect", "timeout", "429", "5xx"}

// failureClass names what went wrong with one attempt, in the words the
// `failover { on ... }` list uses.
type failureClass string

const (
	classConnect failureClass = "connect" // dial/TLS/transport failure before any response
	classTimeout failureClass = "timeout" // first_byte_timeout elapsed
	classStatus  failureClass = "status"  // upstream answered with a non-2xx status
	classStream  failureClass = "stream"  // a 200 stream that ended or errored before any data
)

// triggerSet is the parsed `on` list: which failures move to the next attempt.
type triggerSet struct {
	connect, timeout bool
	classes          [6]bool // index 1..5: "1xx".."5xx"
	codes            map[int]bool
}

// parseTriggers parses the `on` list. Words: connect, timeout, Nxx (a status
// class) or an exact status code.
func parseTriggers(words []string) (triggerSet, error) {
	var t triggerSet
	for _, w := range words {
		switch {
		case w == "connect":
			t.connect = true
		case w == "timeout":
			t.timeout = true
		case len(w) == 3 && w[0] >= '1' && w[0] <= '5' && strings.EqualFold(w[1:], "xx"):
			t.classes[w[0]-'0'] = true
		default:
			code, err := strconv.Atoi(w)
			if err != nil || code < 100 || code > 599 {
				return t, fmt.Errorf("unknown failover trigger %q: use connect, timeout, a status class like 5xx, or a status code like 429", w)
			}
			if t.codes == nil {
				t.codes = make(map[int]bool)
			}
			t.codes[code] = true
		}
	}
	return t, nil
}

// retryable reports whether a failure of the given class (and status, for
// classStatus) should move on to the next attempt. A 200 stream that dies
// before its first data event is always retryable: nothing was sent yet, and
// passing an empty stream through would only hide the failure.
func (t triggerSet) retryable(class failureClass, status int) bool {
	switch class {
	case classConnect:
		return t.connect
	case classTimeout:
		return t.timeout
	case classStream:
		return true
	case classStatus:
		if t.codes[status] {
			return true
		}
		if c := status / 100; c >= 1 && c <= 5 {
			return t.classes[c]
		}
	}
	return false
}

// backoffPolicy is the full-jitter exponential backoff used before a target
// is visited again by the same request (the first visit never waits).
type backoffPolicy struct {
	base, max time.Duration
}

// delay returns the wait before the visit-th visit of a target (visit 1 is
// the first revisit): a uniform random duration in [0, min(max, base*2^(visit-1))].
func (b backoffPolicy) delay(visit int, rng *rand.Rand) time.Duration {
	if visit <= 0 || b.base <= 0 {
		return 0
	}
	ceil := b.base
	for i := 1; i < visit && ceil < b.max; i++ {
		ceil *= 2
	}
	if b.max > 0 && ceil > b.max {
		ceil = b.max
	}
	if rng == nil {
		return time.Duration(rand.Int64N(int64(ceil) + 1))
	}
	return time.Duration(rng.Int64N(int64(ceil) + 1))
}

// parseRetryAfter reads a Retry-After header value, either delay-seconds or
// an HTTP date, relative to now. It returns 0 when the value is absent or
// malformed.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// chainCursor walks a failover chain for one request: slot i goes to target
// i mod len(chain), remembering per target how often it was tried and until
// when a Retry-After keeps it out.
type chainCursor struct {
	n         int // chain length
	slots     int // total attempt slots (the `attempts` setting)
	next      int // next slot
	visits    []int
	notBefore []time.Time
	out       []bool // targets never to be tried again in the request (exclude)
	nOut      int    // how many are out
}

func newChainCursor(chainLen, attempts int) *chainCursor {
	if attempts <= 0 {
		attempts = chainLen
	}
	return &chainCursor{
		n:         chainLen,
		slots:     attempts,
		visits:    make([]int, chainLen),
		notBefore: make([]time.Time, chainLen),
		out:       make([]bool, chainLen),
	}
}

// step is one decision of the cursor: try target idx after waiting wait, or
// skip it (skip reason set) because its Retry-After outlasts the deadline.
type step struct {
	idx  int
	wait time.Duration
	skip string
}

// nextStep returns the decision for the next slot, or ok=false when the
// slots are used up. deadline is when try_duration runs out.
func (c *chainCursor) nextStep(now, deadline time.Time, b backoffPolicy, rng *rand.Rand) (s step, ok bool) {
	if c.next >= c.slots || c.nOut == c.n {
		return step{}, false
	}
	idx := c.next % c.n
	for c.out[idx] {
		// Passed over without using a slot: a target that is out cannot
		// take the request, and the chain's attempts are for the others.
		// Some target is not out, so this ends within one round.
		c.next++
		c.slots++
		idx = c.next % c.n
	}
	c.next++
	s.idx = idx
	if v := c.visits[idx]; v > 0 {
		s.wait = b.delay(v, rng)
	}
	if nb := c.notBefore[idx]; nb.After(now) {
		if nb.After(deadline) {
			s.skip = fmt.Sprintf("skipped: Retry-After until %s", nb.UTC().Format(time.RFC3339))
			return s, true
		}
		if w := nb.Sub(now); w > s.wait {
			s.wait = w
		}
	}
	if now.Add(s.wait).After(deadline) {
		s.skip = "skipped: backoff would outlast try_duration"
	}
	return s, true
}

// hasNext reports whether the cursor has a slot left for some target.
func (c *chainCursor) hasNext() bool { return c.next < c.slots && c.nOut < c.n }

// exclude keeps target idx out of the rest of the request (it is out of
// quota, or cannot serve the request at all): it is passed over, and its
// turns go to the other targets.
func (c *chainCursor) exclude(idx int) {
	if !c.out[idx] {
		c.out[idx] = true
		c.nOut++
	}
}

// unuse gives back the slot of a step that made no attempt (a recovering
// target skipped while its one trial request is in flight, a target that
// cannot serve the request).
func (c *chainCursor) unuse() { c.slots++ }

// tried records that target idx was attempted; retryAfter > 0 keeps it out
// until now+retryAfter.
func (c *chainCursor) tried(idx int, now time.Time, retryAfter time.Duration) {
	c.visits[idx]++
	if retryAfter > 0 {
		c.notBefore[idx] = now.Add(retryAfter)
	}
}

// Errors that end an attempt before the commit point. They are causes of the
// attempt's context, so errors.Is tells them apart from a client cancel.
var (
	errFirstByteTimeout = errors.New("first_byte_timeout elapsed")
	errTryDuration      = errors.New("try_duration elapsed")
	errStreamIdle       = errors.New("stream_idle_timeout elapsed")
)

// soonest returns how long until the first target kept out by a
// Retry-After may be tried again, 0 if none is.
func (c *chainCursor) soonest(now time.Time) time.Duration {
	var d time.Duration
	for _, nb := range c.notBefore {
		if w := nb.Sub(now); w > 0 && (d == 0 || w < d) {
			d = w
		}
	}
	return d
}
