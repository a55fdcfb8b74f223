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
	// Model is the model the step sends ("" = the client's): steps of one
	// model in different regions at adjacent ranks form one tier for a
	// hint (see [Order]).
	Model string

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
	model string
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
//  4. hint, for the usable class only, and only within a tier: a hint
//     never moves a target ahead of one of a lower rank in another tier,
//     so a chain's order of models (a Codex model, then Claude, then
//     DeepSeek) holds whatever the hint. A tier is a pool (the usable
//     targets of one rank), joined with the adjacent ranks' pools while
//     every member of them sends the same Model and has a Region: the
//     same model offered in several regions, one after the other in the
//     chain (see [Tiers]). Within a tier, [HintAuto] sorts by the
//     region's latency (the lowest known Latency of the tier's members in
//     that region; a member without a region is a region of its own),
//     then by Rank (an operator's order between two targets of one
//     region stays), then by the member's own Latency; unknown latencies
//     go last, and ties keep the order of rule 2. Any other non-empty
//     hint is a region code: the tier's members whose Region equals it
//     (case-insensitively) come first, then the others, each group in the
//     order of rule 2. A strict pin (only one region's targets) is the
//     caller's: it leaves the other regions out of cands (see
//     [ParseHint]).
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
		x := cand{rank: c.Rank, w: max(c.Weight, 1), reg: c.Region, model: c.Model}
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

	if hint != "" {
		for _, tier := range tiers(cs, usable) {
			if hint == HintAuto {
				byLatency(cs, tier)
			} else {
				byRegion(cs, tier, hint)
			}
		}
	}
	return out
}

// tiers splits idx, sorted by rank, into its tiers (rule 4 of [Order]).
func tiers(cs []cand, idx []int) [][]int {
	var out [][]int
	lo := 0           // the current tier's start
	regional := false // the current tier is one model's regions
	for k := 0; k < len(idx); {
		hi := k + 1
		for hi < len(idx) && cs[idx[hi]].rank == cs[idx[k]].rank {
			hi++
		}
		pool := regionsOf(cs, idx[k:hi], cs[idx[k]].model)
		if k > lo && !(regional && pool && cs[idx[k]].model == cs[idx[lo]].model) {
			out = append(out, idx[lo:k])
			lo = k
		}
		if k == lo {
			regional = pool
		}
		k = hi
	}
	if lo < len(idx) {
		out = append(out, idx[lo:])
	}
	return out
}

// regionsOf reports whether every member of pool sends model and has a
// region.
func regionsOf(cs []cand, pool []int, model string) bool {
	for _, i := range pool {
		if cs[i].reg == "" || cs[i].model != model {
			return false
		}
	}
	return true
}

// Tiers returns, for each candidate, the index of its tier among the
// usable targets when ordered by rank (rule 4 of [Order]; -1 for a target
// that is not usable at now). Two usable targets are in one tier when
// [Order] may put the higher-ranked one first for a hint.
func Tiers(cands []Candidate, now time.Time) []int {
	cs := make([]cand, len(cands))
	var usable []int
	out := make([]int, len(cands))
	for i, c := range cands {
		cs[i] = cand{rank: c.Rank, reg: c.Region, model: c.Model}
		if c.T != nil {
			cs[i].st, _, _ = c.T.view(now, c.SLO.WithDefaults())
		}
		out[i] = -1
		if cs[i].st == Healthy || cs[i].st == HalfOpen {
			usable = append(usable, i)
		}
	}
	slices.SortStableFunc(usable, func(a, b int) int { return cmp.Compare(cs[a].rank, cs[b].rank) })
	for t, tier := range tiers(cs, usable) {
		for _, i := range tier {
			out[i] = t
		}
	}
	return out
}

// byLatency sorts one tier for [HintAuto]: by its region's latency, then
// rank, then its own latency (unknown last).
func byLatency(cs []cand, tier []int) {
	regionLat := make(map[string]time.Duration)
	for _, i := range tier {
		if r := strings.ToLower(cs[i].reg); r != "" && cs[i].lat > 0 {
			if l, ok := regionLat[r]; !ok || cs[i].lat < l {
				regionLat[r] = cs[i].lat
			}
		}
	}
	of := func(i int) time.Duration {
		if cs[i].reg == "" {
			return cs[i].lat
		}
		return regionLat[strings.ToLower(cs[i].reg)]
	}
	slices.SortStableFunc(tier, func(a, b int) int {
		if c := cmpLatency(of(a), of(b)); c != 0 {
			return c
		}
		if c := cmp.Compare(cs[a].rank, cs[b].rank); c != 0 {
			return c
		}
		return cmpLatency(cs[a].lat, cs[b].lat)
	})
}

// cmpLatency orders latencies ascending, unknown (0) last.
func cmpLatency(a, b time.Duration) int {
	switch {
	case a == b:
		return 0
	case a == 0:
		return 1
	case b == 0:
		return -1
	}
	return cmp.Compare(a, b)
}

// byRegion puts a tier's members in region code first.
func byRegion(cs []cand, tier []int, code string) {
	slices.SortStableFunc(tier, func(a, b int) int {
		ma, mb := strings.EqualFold(cs[a].reg, code), strings.EqualFold(cs[b].reg, code)
		switch {
		case ma == mb:
			return 0
		case ma:
			return -1
		}
		return 1
	})
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
