package health

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// oslo is the SLO of the order tests: one sample is judged, and a TTFT
// above a second degrades.
var oslo = SLO{TTFT: time.Second, MinSamples: 1}

// mk returns a target in state st at now (with oslo and the default
// Policy); lat is its latency (Healthy, HalfOpen: 0 = unknown), or for
// Ejected how long its cooldown has left.
func mk(name string, st Status, lat time.Duration, now time.Time) *Target {
	tg := NewTarget(name, 0)
	switch st {
	case Healthy:
		if lat > 0 {
			tg.Probe(now.Add(-time.Minute), lat, true, oslo, Policy{})
		}
	case Degraded:
		tg.Record(okAt(now.Add(-time.Minute), max(lat, 2*time.Second)), oslo, Policy{})
	case Ejected:
		at := now.Add(lat - DefaultBaseCooldown)
		for range DefaultFailuresToEject {
			tg.Record(badAt(at), oslo, Policy{})
		}
	case HalfOpen:
		for range DefaultFailuresToEject {
			tg.Record(badAt(now.Add(-time.Hour)), oslo, Policy{})
		}
		if lat > 0 {
			tg.Probe(now.Add(-time.Hour), lat, true, oslo, Policy{})
		}
	}
	if got := tg.Status(now, oslo); got != st {
		panic(fmt.Sprintf("mk %s: %s", st, got))
	}
	return tg
}

func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

func TestOrderClasses(t *testing.T) {
	now := t0
	cands := []Candidate{
		{T: mk("e5", Ejected, 5*time.Second, now), SLO: oslo, Rank: 0},
		{T: mk("d", Degraded, 0, now), SLO: oslo, Rank: 0},
		{T: mk("h", Healthy, 0, now), SLO: oslo, Rank: 2},
		{T: mk("ho", HalfOpen, 0, now), SLO: oslo, Rank: 1},
		{T: mk("e2", Ejected, 2*time.Second, now), SLO: oslo, Rank: 3},
		{T: nil, Rank: 4},
	}
	for _, hint := range []string{"", "auto", "us"} {
		if got, want := Order(cands, now, hint, seeded(1)), []int{3, 2, 5, 1, 4, 0}; !slices.Equal(got, want) {
			t.Errorf("hint %q: %v, want %v", hint, got, want)
		}
	}
	// Order reports the status it judged each candidate by.
	for i, want := range []Status{Ejected, Degraded, Healthy, HalfOpen, Ejected, Healthy} {
		if cands[i].Status != want {
			t.Errorf("cands[%d].Status = %s, want %s", i, cands[i].Status, want)
		}
	}
	if got := Order(nil, now, "", nil); got == nil || len(got) != 0 {
		t.Errorf("Order(nil) = %#v", got)
	}
}

// Latency climbing past the SLO degrades the first target, which loses
// first place to the next rank; fast samples bring it back.
func TestOrderDegradedLosesFirstPlace(t *testing.T) {
	c := newClock()
	slo := SLO{TTFT: 800 * time.Millisecond, Window: 20, MinSamples: 10}
	a, b := NewTarget("a", 0), NewTarget("b", 0)
	cands := []Candidate{{T: a, SLO: slo, Rank: 0}, {T: b, SLO: slo, Rank: 1}}
	for range 20 {
		a.Record(okAt(c.tick(time.Second), 300*time.Millisecond), slo, Policy{})
		b.Record(okAt(c.now, 600*time.Millisecond), slo, Policy{})
	}
	rnd := seeded(2)
	if got := Order(cands, c.now, "", rnd); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("start: %v", got)
	}
	degradedAt := -1
	for i := range 30 {
		ttft := 300*time.Millisecond + time.Duration(i)*50*time.Millisecond
		ch := a.Record(okAt(c.tick(time.Second), ttft), slo, Policy{})
		b.Record(okAt(c.now, 600*time.Millisecond), slo, Policy{})
		got := Order(cands, c.now, "", rnd)
		if ch != nil {
			wantChange(t, ch, Healthy, Degraded, "> slo 800ms")
			degradedAt = i
			if !slices.Equal(got, []int{1, 0}) {
				t.Fatalf("degraded a still first: %v", got)
			}
			break
		}
		if !slices.Equal(got, []int{0, 1}) {
			t.Fatalf("sample %d (ttft %s): %v before a degraded", i, ttft, got)
		}
	}
	// The p90 of 20 breaks when 3 samples exceed 800ms: 850, 900, 950ms.
	if degradedAt != 13 {
		t.Fatalf("degraded at sample %d, want 13", degradedAt)
	}
	recovered := false
	for range 20 {
		ch := a.Record(okAt(c.tick(time.Second), 200*time.Millisecond), slo, Policy{})
		got := Order(cands, c.now, "", rnd)
		if ch != nil {
			wantChange(t, ch, Degraded, Healthy, "<= slo 800ms")
			recovered = true
			if !slices.Equal(got, []int{0, 1}) {
				t.Fatalf("recovered a not first: %v", got)
			}
			break
		}
		if !slices.Equal(got, []int{1, 0}) {
			t.Fatalf("degraded a first: %v", got)
		}
	}
	if !recovered {
		t.Fatal("a never recovered")
	}
}

func TestOrderRegionHint(t *testing.T) {
	now := t0
	cands := []Candidate{
		{T: mk("0", Healthy, 0, now), Rank: 0, Region: "eu", SLO: oslo},
		{T: mk("1", Healthy, 0, now), Rank: 1, Region: "us", SLO: oslo},
		{T: mk("2", HalfOpen, 0, now), Rank: 2, Region: "us", SLO: oslo},
		{T: mk("3", Degraded, 0, now), Rank: 0, Region: "us", SLO: oslo},
		{T: mk("4", Healthy, 0, now), Rank: 3, SLO: oslo},
		{T: mk("5", Ejected, time.Second, now), Rank: 0, Region: "us", SLO: oslo},
	}
	for _, tc := range []struct {
		hint string
		want []int
	}{
		{"", []int{0, 1, 2, 4, 3, 5}},
		{"us", []int{1, 2, 0, 4, 3, 5}},
		{"EU", []int{0, 1, 2, 4, 3, 5}},
		{"xx", []int{0, 1, 2, 4, 3, 5}},
	} {
		if got := Order(cands, now, tc.hint, seeded(3)); !slices.Equal(got, tc.want) {
			t.Errorf("hint %q: %v, want %v", tc.hint, got, tc.want)
		}
	}
}

func TestOrderAuto(t *testing.T) {
	now := t0
	ms := time.Millisecond
	cands := []Candidate{
		{T: mk("0", Healthy, 500*ms, now), Rank: 0, SLO: oslo},
		{T: mk("1", Healthy, 100*ms, now), Rank: 1, SLO: oslo},
		{T: mk("2", Healthy, 0, now), Rank: 2, SLO: oslo},
		{T: mk("3", HalfOpen, 300*ms, now), Rank: 3, SLO: oslo},
		{T: mk("4", Degraded, 0, now), Rank: 0, SLO: oslo},
		{T: mk("5", Healthy, 0, now), Rank: 1, SLO: oslo},
		{T: mk("6", Ejected, time.Second, now), Rank: 0, SLO: oslo},
	}
	// Latency orders each rank's pool, never the ranks: the 100ms target
	// of rank 1 does not pass the 500ms one of rank 0.
	if got, want := Order(cands, now, HintAuto, seeded(4)), []int{0, 1, 5, 2, 3, 4, 6}; !slices.Equal(got, want) {
		t.Errorf("auto: %v, want %v", got, want)
	}
}

// The mixed chain: a Codex model, then Claude, then DeepSeek, each
// faster than the one before, in regions of their own. auto and a region
// hint keep the chain's order of models; within Codex's pool the faster
// region goes first.
func TestOrderAutoMixedChain(t *testing.T) {
	now := t0
	ms := time.Millisecond
	cands := []Candidate{
		{T: mk("codex-fra", Healthy, 900*ms, now), Rank: 1, Region: "fra", Model: "gpt-5-codex", SLO: oslo},
		{T: mk("claude-nrt", Healthy, 300*ms, now), Rank: 2, Region: "nrt", Model: "claude-sonnet-4-5", SLO: oslo},
		{T: mk("deepseek-nrt", Healthy, 50*ms, now), Rank: 3, Region: "nrt", Model: "deepseek-chat", SLO: oslo},
		{T: mk("codex-sin", Healthy, 400*ms, now), Rank: 1, Region: "sin", Model: "gpt-5-codex", SLO: oslo},
	}
	for _, tc := range []struct {
		hint string
		want []int
	}{
		{HintAuto, []int{3, 0, 1, 2}},
		{"nrt", nil}, // Codex has no nrt target: its pool stays as the draw made it
		{"fra", []int{0, 3, 1, 2}},
		{"sin", []int{3, 0, 1, 2}},
	} {
		for seed := range uint64(20) {
			got := Order(cands, now, tc.hint, seeded(seed))
			if tc.want == nil {
				if !slices.Equal(got[2:], []int{1, 2}) || got[0] == 1 || got[0] == 2 {
					t.Fatalf("hint %q: %v: Claude or DeepSeek before Codex", tc.hint, got)
				}
				continue
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("hint %q seed %d: %v, want %v", tc.hint, seed, got, tc.want)
			}
		}
	}
}

// One model in several regions at adjacent ranks is one tier: auto picks
// its fastest region even at a later rank, keeps the operator's order
// within a region, and never moves the next model ahead.
func TestOrderAutoRegionsOfOneModel(t *testing.T) {
	now := t0
	ms := time.Millisecond
	cands := []Candidate{
		{T: mk("codex-fra", Healthy, 400*ms, now), Rank: 1, Region: "fra", Model: "codex", SLO: oslo},
		{T: mk("codex-nrt", Healthy, 80*ms, now), Rank: 2, Region: "nrt", Model: "codex", SLO: oslo},
		{T: mk("codex-nrt-backup", Healthy, 0, now), Rank: 3, Region: "NRT", Model: "codex", SLO: oslo},
		{T: mk("claude-nrt", Healthy, 10*ms, now), Rank: 4, Region: "nrt", Model: "claude", SLO: oslo},
		{T: mk("codex-kix", Healthy, 20*ms, now), Rank: 5, Region: "kix", Model: "codex", SLO: oslo},
	}
	for _, tc := range []struct {
		hint string
		want []int
	}{
		{"", []int{0, 1, 2, 3, 4}},
		{HintAuto, []int{1, 2, 0, 3, 4}},
		{"nrt", []int{1, 2, 0, 3, 4}},
		{"fra", []int{0, 1, 2, 3, 4}},
		{"kix", []int{0, 1, 2, 3, 4}}, // codex-kix is in a tier of its own, after Claude
	} {
		if got := Order(cands, now, tc.hint, seeded(9)); !slices.Equal(got, tc.want) {
			t.Errorf("hint %q: %v, want %v", tc.hint, got, tc.want)
		}
	}
	if got, want := Tiers(cands, now), []int{0, 0, 0, 1, 2}; !slices.Equal(got, want) {
		t.Errorf("Tiers = %v, want %v", got, want)
	}
	// A target without a region, or of another model, ends the tier.
	cands[1].Region = ""
	if got, want := Tiers(cands, now), []int{0, 1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("Tiers without a region = %v, want %v", got, want)
	}
	if got := Order(cands, now, HintAuto, seeded(9)); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Errorf("auto without a region: %v", got)
	}
}

// firsts counts how often each index comes first in n orders.
func firsts(cands []Candidate, n int, rnd *rand.Rand) []float64 {
	counts := make([]float64, len(cands))
	for range n {
		counts[Order(cands, t0, "", rnd)[0]]++
	}
	for i := range counts {
		counts[i] /= float64(n)
	}
	return counts
}

func near(got, want []float64, tol float64) bool {
	for i := range got {
		if got[i] < want[i]-tol || got[i] > want[i]+tol {
			return false
		}
	}
	return true
}

// The power of two choices: a member is first when it is the faster of the
// first pair drawn. Of 4 equal-weight members with distinct latencies, the
// fastest is in 3 of the 6 pairs, the slowest wins none.
func TestP2CPrefersFaster(t *testing.T) {
	ms := time.Millisecond
	var cands []Candidate
	for _, l := range []time.Duration{300 * ms, 100 * ms, 400 * ms, 200 * ms} {
		cands = append(cands, Candidate{T: mk(l.String(), Healthy, l, t0), SLO: oslo})
	}
	got := firsts(cands, 20000, seeded(5))
	if want := []float64{1. / 6, 3. / 6, 0, 2. / 6}; !near(got, want, 0.02) {
		t.Fatalf("first place %v, want about %v", got, want)
	}
	// Whatever the draw, the slowest is never ahead of the fastest when
	// both are in a 2-pool.
	two := []Candidate{cands[2], cands[1]}
	for range 1000 {
		if o := Order(two, t0, "", seeded(6)); o[0] != 1 {
			t.Fatalf("2-pool: %v", o)
		}
	}
}

// Weights share first place when latencies are alike (unknown, or within
// the tolerance): the first member drawn wins a tie.
func TestWeightsHonoured(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name    string
		lats    []time.Duration
		weights []int
		want    []float64
	}{
		{"unknown 3:1", []time.Duration{0, 0}, []int{3, 1}, []float64{.75, .25}},
		{"unknown 1:2:3", []time.Duration{0, 0, 0}, []int{1, 2, 3}, []float64{1. / 6, 2. / 6, 3. / 6}},
		{"alike 1:2:3", []time.Duration{1000 * ms, 1200 * ms, 1100 * ms}, []int{1, 2, 3}, []float64{1. / 6, 2. / 6, 3. / 6}},
		{"equal 1:1:1:1", []time.Duration{500 * ms, 500 * ms, 500 * ms, 500 * ms}, []int{0, 1, -1, 1}, []float64{.25, .25, .25, .25}},
		{"slack 9:1", []time.Duration{30 * ms, 15 * ms}, []int{9, 1}, []float64{.9, .1}},
		// A clearly faster member wins a 2-pool whatever the weights.
		{"faster 1:9", []time.Duration{500 * ms, 2000 * ms}, []int{1, 9}, []float64{1, 0}},
		// Unknown latency counts as the pool's mean (300ms here): it
		// beats the 500ms member, loses to the 100ms one.
		{"unknown is mean", []time.Duration{100 * ms, 0, 500 * ms}, []int{1, 1, 1}, []float64{2. / 3, 1. / 3, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cands []Candidate
			for i, l := range tc.lats {
				cands = append(cands, Candidate{T: mk(fmt.Sprint(i), Healthy, l, t0), SLO: oslo, Rank: 7, Weight: tc.weights[i]})
			}
			if got := firsts(cands, 20000, seeded(7)); !near(got, tc.want, 0.02) {
				t.Fatalf("first place %v, want about %v", got, tc.want)
			}
		})
	}
}

// The global source is used when rnd is nil.
func TestOrderNilRand(t *testing.T) {
	cands := []Candidate{{Weight: 1}, {Weight: 1}}
	seen := map[int]bool{}
	for range 1000 {
		seen[Order(cands, t0, "", nil)[0]] = true
	}
	if len(seen) != 2 {
		t.Fatalf("first places %v", seen)
	}
}

// sameTier is the reference for tiers: usable p and q are in one tier
// when their ranks are equal, or every usable candidate of a rank between
// theirs (both included) has a region and sends p's model.
func sameTier(cands []Candidate, usable []bool, p, q int) bool {
	lo, hi := min(cands[p].Rank, cands[q].Rank), max(cands[p].Rank, cands[q].Rank)
	if lo == hi {
		return true
	}
	for i, c := range cands {
		if usable[i] && c.Rank >= lo && c.Rank <= hi && (c.Region == "" || c.Model != cands[p].Model) {
			return false
		}
	}
	return true
}

// Property: over random chains in random states, Order returns a
// permutation, classes in order (usable, degraded, ejected), ejected by
// cooldown end, degraded by rank, and the usable class by rank except
// within a tier, whatever the hint: a lower-ranked (later) usable target
// never comes before a higher-ranked usable one of another tier. Within a
// tier, auto sorts by region latency, rank, latency, and a region code
// puts its region first.
func TestOrderProperty(t *testing.T) {
	rnd := seeded(8)
	now := t0
	states := []Status{Healthy, Healthy, Healthy, HalfOpen, Degraded, Ejected}
	hints := []string{"", "", HintAuto, HintAuto, "us", "EU", "xx"}
	regions := []string{"", "us", "eu", "us", "eu"}
	models := []string{"", "a", "a", "b"}
	class := func(s Status) int {
		switch s {
		case Healthy, HalfOpen:
			return 0
		case Degraded:
			return 1
		}
		return 2
	}
	for iter := range 5000 {
		n := rnd.IntN(13)
		cands := make([]Candidate, n)
		sts := make([]Status, n)
		lats := make([]time.Duration, n)
		untils := make([]time.Time, n)
		usable := make([]bool, n)
		for i := range cands {
			st := states[rnd.IntN(len(states))]
			var lat time.Duration
			switch st {
			case Ejected:
				lat = time.Duration(1+rnd.IntN(9)) * time.Second
			case Healthy, HalfOpen:
				lat = time.Duration(rnd.IntN(4)) * 100 * time.Millisecond
			}
			var tg *Target
			if rnd.IntN(20) > 0 {
				tg = mk(fmt.Sprint(i), st, lat, now)
				lats[i] = tg.Latency()
				untils[i] = tg.Snapshot(now, oslo).CooldownUntil
			} else {
				st = Healthy
			}
			sts[i] = st
			usable[i] = class(st) == 0
			cands[i] = Candidate{T: tg, SLO: oslo, Rank: rnd.IntN(5), Weight: rnd.IntN(4) - 1,
				Region: regions[rnd.IntN(len(regions))], Model: models[rnd.IntN(len(models))]}
		}
		hint := hints[rnd.IntN(len(hints))]
		got := Order(cands, now, hint, rnd)
		fail := func(why string) {
			t.Fatalf("iter %d hint %q: %s\norder %v\nstates %v\ncands %+v", iter, hint, why, got, sts, cands)
		}
		if len(got) != n {
			fail("length")
		}
		seen := make([]bool, n)
		for _, i := range got {
			if i < 0 || i >= n || seen[i] {
				fail("not a permutation")
			}
			seen[i] = true
		}
		tiers := Tiers(cands, now)
		for p := range n {
			for q := range n {
				if usable[p] && usable[q] && (tiers[p] == tiers[q]) != sameTier(cands, usable, p, q) {
					fail(fmt.Sprintf("Tiers puts %d and %d in tiers %d and %d", p, q, tiers[p], tiers[q]))
				}
			}
		}
		// region latency, as auto sorts a tier by it
		regionLat := func(i int) time.Duration {
			if cands[i].Region == "" {
				return lats[i]
			}
			var best time.Duration
			for j := range n {
				if usable[j] && tiers[j] == tiers[i] && strings.EqualFold(cands[j].Region, cands[i].Region) && lats[j] > 0 && (best == 0 || lats[j] < best) {
					best = lats[j]
				}
			}
			return best
		}
		after := func(a, b time.Duration) bool { return a == 0 && b != 0 || a != 0 && b != 0 && a > b } // a sorts after b
		for k := 1; k < n; k++ {
			p, q := got[k-1], got[k]
			cp, cq := class(sts[p]), class(sts[q])
			switch {
			case cp > cq:
				fail("classes out of order")
			case cp < cq:
				continue
			case cp == 2:
				if untils[p].After(untils[q]) || untils[p].Equal(untils[q]) && cands[p].Rank > cands[q].Rank {
					fail("ejected out of order")
				}
			case cp == 1:
				if cands[p].Rank > cands[q].Rank {
					fail("degraded ranks out of order")
				}
			}
		}
		// The usable class, every pair: no later rank before an earlier
		// one of another tier, whatever the hint.
		for a := range n {
			for b := a + 1; b < n; b++ {
				p, q := got[a], got[b]
				if !usable[p] || !usable[q] {
					continue
				}
				if cands[p].Rank > cands[q].Rank && tiers[p] != tiers[q] {
					fail(fmt.Sprintf("%d (rank %d) before %d (rank %d) of another tier", p, cands[p].Rank, q, cands[q].Rank))
				}
				if tiers[p] != tiers[q] {
					continue
				}
				switch hint {
				case "", "xx":
					if cands[p].Rank > cands[q].Rank {
						fail("ranks out of order without a hint")
					}
				case HintAuto:
					rp, rq := regionLat(p), regionLat(q)
					if after(rp, rq) || rp == rq && (cands[p].Rank > cands[q].Rank || cands[p].Rank == cands[q].Rank && after(lats[p], lats[q])) {
						fail("auto out of order")
					}
				default:
					mp, mq := strings.EqualFold(cands[p].Region, hint), strings.EqualFold(cands[q].Region, hint)
					if !mp && mq || mp == mq && cands[p].Rank > cands[q].Rank {
						fail("region out of order")
					}
				}
			}
		}
	}
}
