package chaos

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// The fleet cases: two relay instances share their key limits through a
// real redis-server while something else writes under the relay's
// prefix (another application, an older layout, a clock that runs
// ahead). Each case plants its keys and values, then the suite checks
// that a key's max_concurrent and rpm still hold across the two and are
// not held shut. Here are the plants, as Redis commands, and the
// arithmetic of the checks; cmd/relaychaos runs them.

// RedisCase is one fleet case.
type RedisCase struct {
	Name  string
	About string
	// Plant is what is written before the checks; Then, once both
	// instances have read what Plant wrote, is written next (a counter
	// that moves). Both are Redis commands, each an argument list.
	Plant, Then func(k RedisKeys, now time.Time) [][]any
}

// RedisKeys are what a case's plants name: the prefix, the key name
// with max_concurrent (Conc) and the one with rpm (RPM) whose limits are
// checked, and another key name with limits (Other) and the UTC day, for
// keys of the wrong type.
type RedisKeys struct {
	Prefix, Conc, RPM, Other, Day string
}

func (k RedisKeys) limits(name string) string { return k.Prefix + "limits:" + name }

// limitsValue is a key limits field as the relay writes it: requests and
// tokens taken, requests in flight, the time in Unix milliseconds.
func limitsValue(req, tok, inFlight int64, at time.Time) string {
	return fmt.Sprintf("%d %d %d %d", req, tok, inFlight, at.UnixMilli())
}

// RedisCases are the fleet cases, in the order they run.
func RedisCases() []RedisCase {
	return []RedisCase{
		{Name: "redis-wrongtype", About: "keys of the wrong type under the prefix (canary roll-outs, ejections, spend, another key's limits)",
			Plant: func(k RedisKeys, now time.Time) [][]any {
				spend := k.Prefix + "spend:" + k.RPM + ":day:" + k.Day
				return [][]any{
					{"DEL", k.Prefix + "canary", k.Prefix + "eject", spend, k.limits(k.Other)},
					{"SET", k.Prefix + "canary", "x"}, // another application's
					{"RPUSH", k.Prefix + "eject", "x"},
					{"SET", spend, "12"}, // an older layout's
					{"SADD", k.limits(k.Other), "x"},
				}
			}},
		{Name: "redis-negative", About: "a negative count of requests in flight, and a requests counter that is negative, then jumps",
			Plant: func(k RedisKeys, now time.Time) [][]any {
				return [][]any{
					{"HSET", k.limits(k.Conc), "ghost", limitsValue(0, 0, -10, now)},
					{"HSET", k.limits(k.RPM), "ghost", limitsValue(-1_000_000_000, 0, 0, now)},
				}
			},
			Then: func(k RedisKeys, now time.Time) [][]any {
				return [][]any{{"HSET", k.limits(k.RPM), "ghost", limitsValue(0, 0, 0, now)}}
			}},
		{Name: "redis-future", About: "requests in flight written by a clock an hour ahead (an instance gone since)",
			Plant: func(k RedisKeys, now time.Time) [][]any {
				return [][]any{{"HSET", k.limits(k.Conc), "ahead", limitsValue(0, 0, 3, now.Add(time.Hour))}}
			}},
	}
}

// CheckConcurrency judges a key's max_concurrent across the fleet: with
// held requests in flight on one instance (and seen by the other), the
// other admits exactly limit-held of tries: more breaks the limit, fewer
// holds the key shut. It returns why not, or "".
func CheckConcurrency(limit, held, tries, admitted int) string {
	want := min(max(limit-held, 0), tries)
	switch {
	case admitted > want:
		return fmt.Sprintf("max_concurrent %d broken: %d in flight on A, B admitted %d of %d (want %d)", limit, held, admitted, tries, want)
	case admitted < want:
		return fmt.Sprintf("max_concurrent %d held shut: %d in flight on A, B admitted %d of %d (want %d)", limit, held, admitted, tries, want)
	}
	return ""
}

// RPMRange is how many requests B may admit under a key's rpm once it
// has seen the a that A took, elapsed after A's first: what the bucket
// held less a, plus what it refilled meanwhile (and one for rounding).
func RPMRange(rpm, a int, elapsed time.Duration) (lo, hi int) {
	refill := int(math.Ceil(elapsed.Minutes() * float64(rpm)))
	return max(rpm-a-1, 0), min(rpm, rpm-a+refill+1)
}

// CheckRPM judges a key's rpm across the fleet: A took a of its tries
// (all of them, as a < rpm), then B admitted b, elapsed after A's
// first request. It returns why not, or "".
func CheckRPM(rpm, tries, a, b int, elapsed time.Duration) string {
	if a != tries {
		return "rpm " + strconv.Itoa(rpm) + " held shut: A admitted " + strconv.Itoa(a) + " of its first " + strconv.Itoa(tries)
	}
	lo, hi := RPMRange(rpm, a, elapsed)
	switch {
	case b > hi:
		return fmt.Sprintf("rpm %d broken: A took %d, then B admitted %d (at most %d in %s)", rpm, a, b, hi, elapsed.Round(time.Millisecond))
	case b < lo:
		return fmt.Sprintf("rpm %d held shut: A took %d, then B admitted %d (at least %d)", rpm, a, b, lo)
	}
	return ""
}
