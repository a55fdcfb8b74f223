package health

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// HintAuto is the [Order] hint that sorts the usable targets by latency.
const HintAuto = "auto"

// Two pool members' latencies are a tie, settled by the weighted draw,
// when the slower is at most LatencyTolerance slower than the faster, or at
// most LatencySlack slower (whichever is larger). See [Order].
const (
	LatencyTolerance = 0.25
	LatencySlack     = 20 * time.Millisecond
)

// Candidate is one step of a request's chain, for [Order].
type Candidate struct {
	T      *Target // nil counts as Healthy with unknown latency
	SLO    SLO     // the step's tier
	Rank   int     // chain position tier: lower first; equal ranks form a pool
	Weight int     // within a pool (<= 0: 1)
	Region string  // "" = none

	// Status is set by Order: the status it judged the target by, so a
	// caller need not judge it again.
	Status Status
}

// cand is a Candidate as Order sees it.
type cand struct {
	st    Status
	lat   time.Duration // EWMA; 0 = unknown
	eff   time.Duration // lat, or the pool's mean when unknown
	until time.Time
	rank  int
	w     int
	reg   string
}

// Order returns the indexes of cands in the order to try them; every index
// appears exactly once (nothing is dropped: when every target is out, the
// least bad is still first).
//
//  1. Classes: usable (Healthy, or HalfOpen: the caller claims the trial
//     with [Target.ClaimTrial], and skips or defers the target when it
//     gets false) first, then Degraded, then Ejected.
//  2. Usable and Degraded targets go by Rank; a pool of equal rank is
//     ordered by the power of two choices: repeatedly draw two distinct
//     remaining members with probability proportional to Weight; the one
//     with the lower Latency goes next, unless the two are a tie (within
//     [LatencyTolerance] or [LatencySlack]), when the first drawn does. A
//     member of unknown latency counts as the mean of the pool's known
//     latencies (0 if none is known). So a clearly faster member wins
//     every draw it is in, while members of similar latency share first
//     place in proportion to their weights.
//  3. Ejected targets go by the end of their cooldown, soonest first (then
//     by Rank).
//  4. hint, for the usable class only: [HintAuto] sorts it by Latency
//     ascending (unknown last; ties keep the order of rule 2); any other
//     non-empty hint is a region code: usable targets whose Region equals
//     it (case-insensitively) come first, then the others, each group in
//     the order of rule 2.
//
// Order sets each candidate's Status, so cands must not be shared with a
// concurrent call. rnd may be nil (the global source is used then); a
// *rand.Rand is not safe for concurrent use, so share one only under a
// lock.
func Order(cands []Candidate, now time.Time, hint string, rnd *rand.Rand) []int {
	n := len(cands)
	cs := make([]cand, n)
	out := make([]int, n)
	// out is filled class by class: usable from the front, then degraded,
	// then ejected, each partitioned in place.
	nu, nd := 0, 0
	for i, c := range cands {
		x := cand{rank: c.Rank, w: max(c.Weight, 1), reg: c.Region}
		if c.T != nil {
			x.st, x.lat, x.until = c.T.view(now, c.SLO.WithDefaults())
		}
		cs[i] = x
		cands[i].Status = x.st
		switch x.st {
		case Healthy, HalfOpen:
			nu++
		case Degraded:
			nd++
		}
	}
	iu, id, ie := 0, nu, nu+nd
	for i := range cs {
		switch cs[i].st {
		case Healthy, HalfOpen:
			out[iu] = i
			iu++
		case Degraded:
			out[id] = i
			id++
		default:
			out[ie] = i
			ie++
		}
	}
	usable, degraded, ejected := out[:nu], out[nu:nu+nd], out[nu+nd:]

	byRank(cs, usable, rnd)
	byRank(cs, degraded, rnd)
	slices.SortStableFunc(ejected, func(a, b int) int {
		if c := cs[a].until.Compare(cs[b].until); c != 0 {
			return c
		}
		return cmp.Compare(cs[a].rank, cs[b].rank)
	})

	switch {
	case hint == "":
	case hint == HintAuto:
		slices.SortStableFunc(usable, func(a, b int) int {
			la, lb := cs[a].lat, cs[b].lat
			switch {
			case la == lb:
				return 0
			case la == 0:
				return 1
			case lb == 0:
				return -1
			}
			return cmp.Compare(la, lb)
		})
	default:
		slices.SortStableFunc(usable, func(a, b int) int {
			ma, mb := strings.EqualFold(cs[a].reg, hint), strings.EqualFold(cs[b].reg, hint)
			switch {
			case ma == mb:
				return 0
			case ma:
				return -1
			}
			return 1
		})
	}
	return out
}

// byRank sorts idx by rank and orders each pool of equal rank by the power
// of two choices.
func byRank(cs []cand, idx []int, rnd *rand.Rand) {
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(cs[a].rank, cs[b].rank) })
	for lo := 0; lo < len(idx); {
		hi := lo + 1
		for hi < len(idx) && cs[idx[hi]].rank == cs[idx[lo]].rank {
			hi++
		}
		if hi-lo > 1 {
			p2c(cs, idx[lo:hi], rnd)
		}
		lo = hi
	}
}

// p2c orders one pool in place.
func p2c(cs []cand, pool []int, rnd *rand.Rand) {
	var sum time.Duration
	known, total := 0, 0
	for _, i := range pool {
		if cs[i].lat > 0 {
			sum += cs[i].lat
			known++
		}
		total += cs[i].w
	}
	var mean time.Duration
	if known > 0 {
		mean = sum / time.Duration(known)
	}
	for _, i := range pool {
		cs[i].eff = cs[i].lat
		if cs[i].eff == 0 {
			cs[i].eff = mean
		}
	}
	for pos := 0; pos < len(pool)-1; pos++ {
		rem := pool[pos:]
		a := draw(cs, rem, total, -1, rnd)
		b := draw(cs, rem, total-cs[rem[a]].w, a, rnd)
		win := a
		if fa, fb := cs[rem[a]].eff, cs[rem[b]].eff; fb < fa && !tie(fb, fa) {
			win = b
		}
		total -= cs[rem[win]].w
		rem[0], rem[win] = rem[win], rem[0]
	}
}

// draw picks a position of rem other than skip, with probability
// proportional to weight; total is the weight of the candidates.
func draw(cs []cand, rem []int, total, skip int, rnd *rand.Rand) int {
	var r int
	if rnd != nil {
		r = rnd.IntN(total)
	} else {
		r = rand.IntN(total)
	}
	last := -1
	for k, i := range rem {
		if k == skip {
			continue
		}
		last = k
		if r -= cs[i].w; r < 0 {
			return k
		}
	}
	return last // not reached
}

// tie reports whether slow is within the tolerance of fast (fast <= slow).
func tie(fast, slow time.Duration) bool {
	d := slow - fast
	return d <= LatencySlack || float64(d) <= LatencyTolerance*float64(fast)
}
