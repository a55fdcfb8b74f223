package shadow

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Primary is what a copy's comparison knows of the primary's answer.
type Primary struct {
	Text string
	// ReasoningTokens of the primary's answer (from its usage, or
	// estimated from its reasoning text).
	ReasoningTokens int
	// ClusterRate is the primary stream's reasoning cluster rate as
	// received, when ClusterKnown.
	ClusterRate  float64
	ClusterKnown bool
	// OK: the primary answered (2xx); otherwise its reasoning is not
	// compared.
	OK bool
}

// Judge is what a shadow's verdict is judged by: the model's SLO, and the
// similarity under which a warning is due. Zero fields are not judged.
type Judge struct {
	TTFT        time.Duration // p90 of the window's successful copies must not exceed it
	Success     float64       // the window's share of successful copies must be at least it
	Floor       float64       // the shadow's mean reasoning over the primary's, on the same requests, must be at least it
	ClusterRate float64       // the shadow's mean reasoning cluster rate must not exceed it
	// Window is how many recent copies are judged (default 50, at most
	// 1024); MinSamples how many it takes to judge (default 10).
	Window, MinSamples int
	// WarnSimilarity: the window's mean similarity below it is a
	// crossing (0: never).
	WarnSimilarity float64
}

func (j Judge) withDefaults() Judge {
	if j.Window <= 0 {
		j.Window = 50
	}
	j.Window = min(j.Window, latencyRing)
	if j.MinSamples <= 0 {
		j.MinSamples = 10
	}
	return j
}

// Verdict is a shadow target's standing against the model's SLO over its
// recent copies.
type Verdict struct {
	// Verdict is "pass", "fail", or "pending" (fewer than MinSamples
	// copies, or nothing to judge).
	Verdict string `json:"verdict"`
	// Reason says why it fails, or what passed.
	Reason  string `json:"reason,omitempty"`
	Samples int    `json:"samples"` // copies in the window
	// The window's figures, side by side where there are two sides.
	SuccessRatio float64 `json:"success_ratio"`
	TTFTP90Ms    float64 `json:"ttft_p90_ms,omitzero"`
	Similarity   float64 `json:"similarity,omitzero"` // mean over the compared copies
	Compared     int     `json:"compared"`
	// Reasoning tokens per request, mean over the copies whose primary
	// also answered (Pairs of them).
	Pairs                  int     `json:"reasoning_pairs"`
	ShadowReasoningTokens  float64 `json:"shadow_reasoning_tokens"`
	PrimaryReasoningTokens float64 `json:"primary_reasoning_tokens"`
	// Reasoning cluster rates, mean over the copies where each side's
	// is known (0 = none known).
	ShadowClusterRate  float64 `json:"shadow_cluster_rate,omitzero"`
	PrimaryClusterRate float64 `json:"primary_cluster_rate,omitzero"`
	// SimilarityLow: the mean similarity is under Judge.WarnSimilarity
	// (with at least MinSamples compared).
	SimilarityLow bool `json:"similarity_low,omitempty"`
}

// copyRec is one copy in the verdict window.
type copyRec struct {
	ok             bool
	ttft           float64 // ms; 0 = none
	compared       bool
	sim            float64
	pair           bool // both sides' reasoning counted
	sReas, pReas   int
	sClus, pClus   float64
	sClusK, pClusK bool
}

// Crossing is a change of a shadow's verdict or similarity that deserves
// a log line: once per crossing, not per copy.
type Crossing struct {
	// What crossed: "verdict" or "similarity".
	What string
	// Bad: the verdict turned to fail, or the similarity fell below the
	// threshold; false: back to pass, or back above it.
	Bad     bool
	Verdict Verdict
}

// RecordWith is [Runner.Record] with the primary's reasoning, which also
// enters the verdict window; it judges the window under j and returns
// the crossings this copy caused (nil: none).
func (r *Runner) RecordWith(res Result, p Primary, j Judge) []Crossing {
	sim := r.record(res, p.Text)
	j = j.withDefaults()
	rec := copyRec{ok: res.OK}
	if res.OK {
		if res.TTFT > 0 {
			rec.ttft = ms(res.TTFT)
		}
		if p.Text != "" {
			rec.compared = true
			rec.sim = sim
		}
		if p.OK {
			rec.pair = true
			rec.sReas, rec.pReas = max(res.ReasoningTokens, 0), max(p.ReasoningTokens, 0)
			rec.sClus, rec.sClusK = res.ClusterRate, res.ClusterKnown
			rec.pClus, rec.pClusK = p.ClusterRate, p.ClusterKnown
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.recent) < latencyRing {
		r.recent = append(r.recent, rec)
	} else {
		r.recent[r.recentNext] = rec
		r.recentNext = (r.recentNext + 1) % latencyRing
	}
	v := r.verdictLocked(j)
	var out []Crossing
	if v.Verdict != "pending" && v.Verdict != r.lastVerdict && (v.Verdict == "fail" || r.lastVerdict == "fail") {
		out = append(out, Crossing{What: "verdict", Bad: v.Verdict == "fail", Verdict: v})
	}
	if v.Verdict != "pending" {
		r.lastVerdict = v.Verdict
	}
	if j.WarnSimilarity > 0 && v.Compared >= j.MinSamples && v.SimilarityLow != r.simLow {
		r.simLow = v.SimilarityLow
		out = append(out, Crossing{What: "similarity", Bad: v.SimilarityLow, Verdict: v})
	}
	return out
}

// Verdict judges the runner's recent copies under j.
func (r *Runner) Verdict(j Judge) Verdict {
	j = j.withDefaults()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.verdictLocked(j)
}

// verdictLocked judges the last j.Window copies.
func (r *Runner) verdictLocked(j Judge) Verdict {
	n := min(len(r.recent), j.Window)
	var v Verdict
	var ttfts []float64
	var sumSim float64
	var sS, sP, nS, nP int
	var cS, cP float64
	var ok int
	for k := range n {
		// The newest n, whatever the ring's rotation.
		i := (r.recentNext - 1 - k + 2*latencyRing) % latencyRing
		if len(r.recent) < latencyRing {
			i = len(r.recent) - 1 - k
		}
		c := r.recent[i]
		if !c.ok {
			continue
		}
		ok++
		if c.ttft > 0 {
			ttfts = append(ttfts, c.ttft)
		}
		if c.compared {
			v.Compared++
			sumSim += c.sim
		}
		if c.pair {
			v.Pairs++
			sS += c.sReas
			sP += c.pReas
			if c.sClusK {
				nS++
				cS += c.sClus
			}
			if c.pClusK {
				nP++
				cP += c.pClus
			}
		}
	}
	v.Samples = n
	if n > 0 {
		v.SuccessRatio = float64(ok) / float64(n)
	}
	if len(ttfts) > 0 {
		slices.Sort(ttfts)
		v.TTFTP90Ms = ttfts[int(math.Ceil(0.9*float64(len(ttfts))))-1]
	}
	if v.Compared > 0 {
		v.Similarity = sumSim / float64(v.Compared)
		v.SimilarityLow = j.WarnSimilarity > 0 && v.Compared >= j.MinSamples && v.Similarity < j.WarnSimilarity
	}
	if v.Pairs > 0 {
		v.ShadowReasoningTokens = float64(sS) / float64(v.Pairs)
		v.PrimaryReasoningTokens = float64(sP) / float64(v.Pairs)
	}
	if nS > 0 {
		v.ShadowClusterRate = cS / float64(nS)
	}
	if nP > 0 {
		v.PrimaryClusterRate = cP / float64(nP)
	}

	v.Verdict = "pending"
	if n < j.MinSamples {
		v.Reason = fmt.Sprintf("%d copies < %d: not judged yet", n, j.MinSamples)
		return v
	}
	var fails, passes []string
	if j.Success > 0 {
		if v.SuccessRatio < j.Success {
			fails = append(fails, fmt.Sprintf("success %.2f < slo %.2f", v.SuccessRatio, j.Success))
		} else {
			passes = append(passes, fmt.Sprintf("success %.2f", v.SuccessRatio))
		}
	}
	if j.TTFT > 0 && len(ttfts) > 0 {
		lim := ms(j.TTFT)
		if v.TTFTP90Ms > lim {
			fails = append(fails, fmt.Sprintf("ttft p90 %s > slo %s", fmtMs(v.TTFTP90Ms), fmtMs(lim)))
		} else {
			passes = append(passes, fmt.Sprintf("ttft p90 %s", fmtMs(v.TTFTP90Ms)))
		}
	}
	if j.Floor > 0 && v.Pairs >= j.MinSamples && v.PrimaryReasoningTokens > 0 {
		share := v.ShadowReasoningTokens / v.PrimaryReasoningTokens
		what := fmt.Sprintf("reasoning %d%% of the primary's (%s → %s tokens)", int(math.Round(100*share)),
			thousands(v.PrimaryReasoningTokens), thousands(v.ShadowReasoningTokens))
		if share < j.Floor {
			fails = append(fails, what+fmt.Sprintf(" < floor %.2f", j.Floor))
		} else {
			passes = append(passes, what)
		}
	}
	if j.ClusterRate > 0 && nS >= j.MinSamples {
		if v.ShadowClusterRate > j.ClusterRate {
			fails = append(fails, fmt.Sprintf("reasoning cluster rate %.2f > %.2f", v.ShadowClusterRate, j.ClusterRate))
		} else {
			passes = append(passes, fmt.Sprintf("reasoning cluster rate %.2f", v.ShadowClusterRate))
		}
	}
	switch {
	case len(fails) > 0:
		v.Verdict, v.Reason = "fail", strings.Join(fails, "; ")
	case len(passes) > 0:
		v.Verdict, v.Reason = "pass", strings.Join(passes, "; ")
	default:
		v.Reason = "the slo judges nothing a shadow shows"
	}
	return v
}

// fmtMs formats milliseconds as a duration rounded to the millisecond.
func fmtMs(f float64) string {
	return (time.Duration(f * float64(time.Millisecond))).Round(time.Millisecond).String()
}

// thousands formats a count rounded to an integer with thousands
// separators: 1210.4 → "1,210".
func thousands(f float64) string {
	s := strconv.FormatInt(int64(math.Round(f)), 10)
	var out []byte
	for i := range len(s) {
		if i > 0 && s[i-1] != '-' && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}
