package shadow

import (
	"strings"
	"testing"
	"time"
)

func okCopy(reasoning int, ttft time.Duration) Result {
	return Result{OK: true, Status: 200, TTFT: ttft, Duration: ttft, Text: "the answer is forty two", ReasoningTokens: reasoning}
}

func primaryOf(reasoning int) Primary {
	return Primary{OK: true, Text: "the answer is forty two", ReasoningTokens: reasoning}
}

func TestVerdictPendingThenPass(t *testing.T) {
	r := NewRunner(1)
	j := Judge{TTFT: time.Second, Success: 0.9, Floor: 0.5, MinSamples: 5}
	for i := range 4 {
		if c := r.RecordWith(okCopy(900, 100*time.Millisecond), primaryOf(1000), j); c != nil {
			t.Fatalf("copy %d: crossings %+v", i, c)
		}
	}
	if v := r.Verdict(j); v.Verdict != "pending" || v.Samples != 4 {
		t.Fatalf("verdict = %+v, want pending", v)
	}
	if c := r.RecordWith(okCopy(900, 100*time.Millisecond), primaryOf(1000), j); c != nil {
		t.Fatalf("a first pass is no crossing: %+v", c)
	}
	v := r.Verdict(j)
	if v.Verdict != "pass" || v.ShadowReasoningTokens != 900 || v.PrimaryReasoningTokens != 1000 || v.Pairs != 5 || v.Similarity != 1 {
		t.Fatalf("verdict = %+v", v)
	}
	if want := "success 1.00; ttft p90 100ms; reasoning 90% of the primary's (1,000 → 900 tokens)"; v.Reason != want {
		t.Errorf("reason = %q, want %q", v.Reason, want)
	}
}

func TestVerdictFailsOncePerCrossing(t *testing.T) {
	r := NewRunner(1)
	j := Judge{Floor: 0.5, Window: 5, MinSamples: 5}
	for range 5 {
		r.RecordWith(okCopy(1000, 0), primaryOf(1000), j)
	}
	var crossings []Crossing
	for range 10 { // the window fills with copies that reason a tenth
		crossings = append(crossings, r.RecordWith(okCopy(100, 0), primaryOf(1000), j)...)
	}
	if len(crossings) != 1 || !crossings[0].Bad || crossings[0].What != "verdict" {
		t.Fatalf("crossings = %+v, want one to fail", crossings)
	}
	if !strings.Contains(crossings[0].Verdict.Reason, "of the primary's (1,000 → ") || !strings.Contains(crossings[0].Verdict.Reason, "< floor 0.50") {
		t.Errorf("reason = %q", crossings[0].Verdict.Reason)
	}
	crossings = nil
	for range 10 {
		crossings = append(crossings, r.RecordWith(okCopy(1000, 0), primaryOf(1000), j)...)
	}
	if len(crossings) != 1 || crossings[0].Bad {
		t.Fatalf("crossings = %+v, want one back to pass", crossings)
	}
}

func TestVerdictTTFTAndSuccess(t *testing.T) {
	r := NewRunner(1)
	j := Judge{TTFT: 200 * time.Millisecond, Success: 0.8, MinSamples: 5}
	for range 4 {
		r.RecordWith(okCopy(0, 500*time.Millisecond), primaryOf(0), j)
	}
	r.RecordWith(Result{Err: "boom"}, primaryOf(0), j)
	r.RecordWith(Result{Status: 500}, primaryOf(0), j)
	v := r.Verdict(j)
	if v.Verdict != "fail" || v.Reason != "success 0.67 < slo 0.80; ttft p90 500ms > slo 200ms" {
		t.Fatalf("verdict = %+v", v)
	}
	// No reasoning on either side: the floor is not judged.
	if strings.Contains(v.Reason, "reasoning") {
		t.Errorf("reason judges reasoning: %q", v.Reason)
	}
}

func TestSimilarityCrossing(t *testing.T) {
	r := NewRunner(1)
	j := Judge{WarnSimilarity: 0.6, MinSamples: 3, Window: 3}
	same := Primary{OK: true, Text: "alpha beta gamma delta"}
	other := Primary{OK: true, Text: "entirely unrelated words here"}
	res := Result{OK: true, Text: "alpha beta gamma delta"}
	var got []Crossing
	for range 3 {
		got = append(got, r.RecordWith(res, same, j)...)
	}
	if len(got) != 0 {
		t.Fatalf("similar answers crossed: %+v", got)
	}
	for range 5 {
		got = append(got, r.RecordWith(res, other, j)...)
	}
	if len(got) != 1 || got[0].What != "similarity" || !got[0].Bad || got[0].Verdict.Similarity >= 0.6 {
		t.Fatalf("crossings = %+v, want one low similarity", got)
	}
	// The verdict stays pending: the slo judges nothing here.
	if v := r.Verdict(j); v.Verdict != "pending" || !v.SimilarityLow {
		t.Fatalf("verdict = %+v", v)
	}
}

func TestVerdictClusterSideBySide(t *testing.T) {
	r := NewRunner(1)
	j := Judge{ClusterRate: 0.8, MinSamples: 2}
	res := okCopy(50, 0)
	res.ClusterRate, res.ClusterKnown = 0.9, true
	p := primaryOf(60)
	p.ClusterRate, p.ClusterKnown = 0.5, true
	r.RecordWith(res, p, j)
	r.RecordWith(res, p, j)
	v := r.Verdict(j)
	if v.ShadowClusterRate != 0.9 || v.PrimaryClusterRate != 0.5 || v.Verdict != "fail" || v.Reason != "reasoning cluster rate 0.90 > 0.80" {
		t.Fatalf("verdict = %+v", v)
	}
}

func TestVerdictWindowWraps(t *testing.T) {
	r := NewRunner(1)
	j := Judge{Success: 0.5, Window: 10, MinSamples: 10}
	for range latencyRing + 5 {
		r.RecordWith(Result{Err: "x"}, Primary{}, j)
	}
	for range 10 {
		r.RecordWith(okCopy(0, 0), Primary{}, j)
	}
	if v := r.Verdict(j); v.Verdict != "pass" || v.SuccessRatio != 1 {
		t.Fatalf("after the ring wrapped, verdict = %+v", v)
	}
}
