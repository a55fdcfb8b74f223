package sharedstate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/canary"
	"github.com/llmrelay/caddy-llm-relay/internal/health"
)

// MaxSkew is how far another instance's clock may be from this one's
// before what it wrote is not taken at its word. Clocks under NTP agree
// within milliseconds; 5 s leaves room for a VM that just resumed or a
// clock still converging, and is well under what the relay's shared
// times measure (the 10 s after which an instance's requests in flight
// stop counting, a cooldown of 10 s or more): a clock further off than
// that would decide those on its own, so it is named and its times are
// not trusted.
const MaxSkew = 5 * time.Second

// MaxSpendNano is the most one instance's spend on one key in one period
// may be (nano-dollars: a billion dollars). It is far beyond any real
// budget, and a thousand of them still add up within an int64.
const MaxSpendNano = 1_000_000_000 * 1_000_000_000

// ParseSpend reads an instance's spend (nano-dollars, a decimal integer).
func ParseSpend(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil:
		return 0, errors.New("not a whole number of nano-dollars: skipped")
	case n < 0:
		return 0, fmt.Errorf("spend %d is negative: skipped", n)
	case n > MaxSpendNano:
		return 0, fmt.Errorf("spend %d is more than a billion dollars: skipped", n)
	}
	return n, nil
}

// AddSpend adds b to a, saturating instead of overflowing.
func AddSpend(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}

// Figures are an instance's key limit counters: requests and tokens
// taken (counters that only grow while the instance runs), its requests
// in flight, and when it wrote them, by its clock.
type Figures struct {
	Requests, Tokens, InFlight int64
	At                         time.Time
	// Since is when the counters started (zero: not said, as relays
	// before it wrote them). A reader that sees an instance for the first
	// time drains what it counted when that was less than a minute ago:
	// those requests are still in the window of the limits.
	Since time.Time
}

// String is the field's value: "requests tokens in-flight unix-millis",
// then " since-unix-millis" when Since is set.
func (f Figures) String() string {
	if f.Since.IsZero() {
		return fmt.Sprintf("%d %d %d %d", f.Requests, f.Tokens, f.InFlight, f.At.UnixMilli())
	}
	return fmt.Sprintf("%d %d %d %d %d", f.Requests, f.Tokens, f.InFlight, f.At.UnixMilli(), f.Since.UnixMilli())
}

// Recent reports whether the counters started less than window before
// now: all they counted is then within a window of that length.
func (f Figures) Recent(now time.Time, window time.Duration) bool {
	return !f.Since.IsZero() && now.Sub(f.Since) < window
}

// ParseFigures reads a key limits field. Every figure must be a decimal
// integer a relay can write: counters and requests in flight are never
// negative, and the time is after 2020.
func ParseFigures(v string) (Figures, error) {
	parts := strings.Split(v, " ")
	if len(parts) != 4 && len(parts) != 5 {
		return Figures{}, errors.New("not four numbers (requests, tokens, in flight, time) and a start: skipped")
	}
	var n [5]int64
	for i, p := range parts {
		x, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return Figures{}, errors.New("not four whole numbers (requests, tokens, in flight, time) and a start: skipped")
		}
		n[i] = x
	}
	var since time.Time
	if len(parts) == 5 {
		if n[4] < minUnixMilli || n[4] > maxUnixMilli {
			return Figures{}, errors.New("a start before 2020 or after 9999: skipped")
		}
		since = time.UnixMilli(n[4])
	}
	switch {
	case n[0] < 0 || n[1] < 0:
		return Figures{}, fmt.Errorf("negative counters (%d requests, %d tokens taken): skipped", n[0], n[1])
	case n[2] < 0:
		return Figures{}, fmt.Errorf("%d requests in flight: negative, skipped", n[2])
	case n[3] < minUnixMilli || n[3] > maxUnixMilli:
		return Figures{}, errors.New("a time before 2020 or after 9999: skipped")
	}
	return Figures{Requests: n[0], Tokens: n[1], InFlight: n[2], At: time.UnixMilli(n[3]), Since: since}, nil
}

var (
	minUnixMilli = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	maxUnixMilli = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).UnixMilli()
)

// Drain is how much of a limit to drain for a counter that went from
// last to now: what it grew, at most one limit's worth (a full bucket;
// no instance takes more between two reads of a sync interval, and a
// counter that jumps further holds the key shut for a minute at most).
// A counter that went down (the instance restarted) drains nothing.
func Drain(last, now int64, limit int) int64 {
	if now <= last {
		return 0
	}
	return min(now-last, int64(limit))
}

// CheckCanary checks a canary's roll-out as another instance shared it,
// and returns it as this instance may adopt it. The state must be one a
// canary has and the step not negative (a step past this instance's
// steps is a config the two do not share, which Adopt ignores). A start
// of the step ahead of this clock is brought back to now, so a step
// shared by an instance whose clock runs ahead does not hold the next
// one back here; more than MaxSkew ahead it is also named (a rollback is
// still obeyed: it is the safe side).
func CheckCanary(p canary.Persisted, now time.Time) (canary.Persisted, string, error) {
	switch p.State {
	case canary.StateActive, canary.StateRolledBack, canary.StatePromoted:
	default:
		return p, "", fmt.Errorf("canary state %.32q unknown: skipped", p.State)
	}
	if p.Step < 0 {
		return p, "", fmt.Errorf("canary step %d negative: skipped", p.Step)
	}
	note := ""
	if p.Since.After(now) {
		if p.Since.Sub(now) > MaxSkew {
			note = fmt.Sprintf("written by a clock more than %s ahead of this instance's: its step's start is taken as now", MaxSkew)
		}
		p.Since = now
	}
	return p, note, nil
}

// CheckEjection checks an ejection as another instance shared it: its
// cooldown must be one a target has (0 to maxCooldown), and its end no
// further than that cooldown (plus MaxSkew) from now. An end further
// ahead was written by a clock running ahead, or by no relay: adopted,
// it would eject the target for as long.
func CheckEjection(e health.Ejection, now time.Time, maxCooldown time.Duration) error {
	switch {
	case e.Cooldown < 0 || e.Cooldown > maxCooldown:
		return fmt.Errorf("cooldown %s outside 0 to %s: skipped", e.Cooldown, maxCooldown)
	case e.Until.Sub(now) > e.Cooldown+MaxSkew:
		return fmt.Errorf("ends more than its cooldown (%s) and %s from now: written by a clock running ahead, or not by a relay; skipped", e.Cooldown, MaxSkew)
	}
	return nil
}

// IsInstanceID reports whether s is a Caddy instance ID (a UUID), or the
// "unknown" of an instance without one.
func IsInstanceID(s string) bool {
	if s == "unknown" {
		return true
	}
	if len(s) != 36 {
		return false
	}
	for i, c := range []byte(s) {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
