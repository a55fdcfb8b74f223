package llmrelay_test

// End-to-end test of shadow verdicts (docs/routing.md#shadow-verdicts):
// the reasoning of primary and shadow side by side, a verdict against the
// model's SLO, on /status and in metrics, and one WARN line per crossing.

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// shadowVerdictDoc is the part of the status JSON the test reads.
type shadowVerdictDoc struct {
	Shadows []struct {
		Alias    string `json:"alias"`
		Upstream string `json:"upstream"`
		Stats    struct {
			OK int64 `json:"ok"`
		} `json:"stats"`
		Verdict struct {
			Verdict                string  `json:"verdict"`
			Reason                 string  `json:"reason"`
			Samples                int     `json:"samples"`
			Pairs                  int     `json:"reasoning_pairs"`
			ShadowReasoningTokens  float64 `json:"shadow_reasoning_tokens"`
			PrimaryReasoningTokens float64 `json:"primary_reasoning_tokens"`
			Similarity             float64 `json:"similarity"`
			SimilarityLow          bool    `json:"similarity_low"`
		} `json:"verdict"`
	} `json:"shadows"`
}

func getShadowVerdicts(t *testing.T) shadowVerdictDoc {
	t.Helper()
	var d shadowVerdictDoc
	if err := json.Unmarshal(getStatusRaw(t, adminStatusURL), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestShadowVerdictReasoningFloor: the primary reasons 40 tokens, its
// shadow 4; after min_samples copies the shadow's verdict is fail for the
// model's reasoning_floor, with both sides' figures on /status and in
// metrics, one WARN "shadow verdict fail" and one WARN "shadow similarity
// low" (the two simulators' texts differ), however many copies follow.
func TestShadowVerdictReasoningFloor(t *testing.T) {
	logFile := startRelay(t, `llm_relay {
		upstream a http://127.0.0.1:9092/a/v1
		upstream thin http://127.0.0.1:9092/thin/v1
		model chat {
			to a
			shadow thin 100 {
				warn_similarity 0.9
			}
			slo {
				reasoning_floor 0.5
				window 10
				min_samples 4
			}
		}
	}`, reasoningSimSite)

	for i := 1; i <= 8; i++ {
		if up := streamServedBy(t, reasoningChatBody); up != "a" {
			t.Fatalf("request %d served by %q", i, up)
		}
		waitFor(t, 10*time.Second, "the shadow copy", func() bool {
			d := getShadowVerdicts(t)
			return len(d.Shadows) == 1 && d.Shadows[0].Verdict.Samples == i
		})
		v := getShadowVerdicts(t).Shadows[0].Verdict
		if want := map[bool]string{true: "pending", false: "fail"}[i < 4]; v.Verdict != want {
			t.Fatalf("after %d copies the verdict is %q (%s), want %s", i, v.Verdict, v.Reason, want)
		}
	}
	v := getShadowVerdicts(t).Shadows[0].Verdict
	if v.Pairs != 8 || v.PrimaryReasoningTokens != 40 || v.ShadowReasoningTokens != 4 {
		t.Errorf("reasoning side by side: %+v", v)
	}
	if want := "reasoning 10% of the primary's (40 → 4 tokens) < floor 0.50"; v.Reason != want {
		t.Errorf("reason = %q, want %q", v.Reason, want)
	}
	if !v.SimilarityLow || v.Similarity >= 0.9 {
		t.Errorf("similarity %v low %v; the two simulators' texts differ", v.Similarity, v.SimilarityLow)
	}

	m := scrapeMetrics(t)
	for series, want := range map[string]float64{
		`llm_relay_shadow_verdict{alias="chat",upstream="thin",verdict="fail"}`:          1,
		`llm_relay_shadow_verdict{alias="chat",upstream="thin",verdict="pass"}`:          0,
		`llm_relay_shadow_reasoning_tokens{alias="chat",side="primary",upstream="thin"}`: 40,
		`llm_relay_shadow_reasoning_tokens{alias="chat",side="shadow",upstream="thin"}`:  4,
	} {
		if !strings.Contains(m, series+" ") {
			t.Errorf("metrics lack %s", series)
		} else if got := metricValue(t, m, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}

	entries := logEntries(t, logFile)
	count := func(msg string) (n int) {
		for _, e := range entries {
			if e.str("level") == "warn" && e.str("msg") == msg {
				n++
			}
		}
		return n
	}
	if n := count("shadow verdict fail"); n != 1 {
		t.Errorf("%d WARN lines \"shadow verdict fail\", want 1 (once per crossing)", n)
	}
	if n := count("shadow similarity low"); n != 1 {
		t.Errorf("%d WARN lines \"shadow similarity low\", want 1", n)
	}
	mustLog(t, logFile, "warn", "shadow verdict fail", "alias", "chat", "upstream", "thin", "reason", "reasoning 10% of the primary's")
}
