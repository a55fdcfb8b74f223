package llmrelay_test

// End-to-end tests of reasoning health (docs/reasoning-health.md): a
// target whose reasoning falls under its baseline, or comes in clusters,
// is degraded like an SLO miss, shown with the reason on /status, counted
// in llm_relay_reasoning_degradations_total, and recovers by its recheck
// (the half-open trial). The upstreams are llm_simulator handlers on
// :9092; a request's X-Sim-Reasoning-Tokens header makes them reason less.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// reasoningSimSite runs two simulators, /a/ and /b/, 40 reasoning tokens
// each as fast as they go, and /steady/, paced (for a cluster rate).
const reasoningSimSite = `http://127.0.0.1:9092 {
	handle /a/* {
		llm_simulator {
			seed 3
			reasoning_tokens 40
			content_tokens 10
			pattern steady 0
		}
	}
	handle /b/* {
		llm_simulator {
			seed 4
			reasoning_tokens 40
			content_tokens 10
			pattern steady 0
		}
	}
	handle /thin/* {
		llm_simulator {
			seed 6
			reasoning_tokens 4
			content_tokens 10
			pattern steady 0
		}
	}
	handle /steady/* {
		llm_simulator {
			seed 5
			reasoning_tokens 30
			content_tokens 5
			pattern steady 400
		}
	}
}`

const reasoningChatBody = `{"model":"chat","stream":true,"reasoning_effort":"high","messages":[{"role":"user","content":"think"}]}`

// streamServedBy posts a streamed chat request, reads it whole and returns
// the upstream that answered.
func streamServedBy(t *testing.T, body string, header ...string) string {
	t.Helper()
	resp := post(t, body, header...)
	b := readAll(t, resp)
	if resp.StatusCode != http.StatusOK || !strings.Contains(b, "[DONE]") {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return resp.Header.Get("X-Relay-Upstream")
}

// TestReasoningFloorDegradesAndRecovers: a baseline of 40 reasoning
// tokens at effort high, then answers of 4: the target is degraded after
// a few, /status and the log say why, the metric counts it, the next
// requests go to b (but for the recheck), and a recheck that reasons as
// before recovers it.
func TestReasoningFloorDegradesAndRecovers(t *testing.T) {
	logFile := startRelay(t, `llm_relay {
		upstream a http://127.0.0.1:9092/a/v1
		upstream b http://127.0.0.1:9092/b/v1
		model chat {
			to a
			to b
			slo {
				reasoning_floor 0.5
			}
		}
	}`, reasoningSimSite)
	before := scrapeMetrics(t)

	for i := range 30 { // 25 fill the baseline's 20 and the recent 5
		if up := streamServedBy(t, reasoningChatBody); up != "a" {
			t.Fatalf("baseline request %d served by %q, want a", i, up)
		}
	}
	st := mustTarget(t, getRelayStatus(t), "a")
	if st.Status != "healthy" {
		t.Fatalf("a after its baseline: %+v", st)
	}
	low := []string{"X-Sim-Reasoning-Tokens", "4"}
	degradedAfter := 0
	for i := 1; i <= 8 && degradedAfter == 0; i++ {
		if up := streamServedBy(t, reasoningChatBody, low...); up != "a" {
			t.Fatalf("low request %d served by %q before a was degraded", i, up)
		}
		if mustTarget(t, getRelayStatus(t), "a").Status == "degraded" {
			degradedAfter = i
		}
	}
	// The recent mean of 5 falls under half of 40 at the third answer of 4.
	if degradedAfter != 3 {
		t.Fatalf("a degraded after %d low answers, want 3", degradedAfter)
	}
	st = mustTarget(t, getRelayStatus(t), "a")
	if !strings.Contains(st.Reason, "reasoning 46% of baseline (40 → 18 tokens, effort high)") {
		t.Errorf("reason = %q", st.Reason)
	}
	var doc struct {
		Targets []struct {
			Upstream  string `json:"upstream"`
			Reasoning struct {
				Signal  string `json:"signal"`
				Efforts []struct {
					Effort         string  `json:"effort"`
					BaselineTokens float64 `json:"baseline_tokens"`
					RecentTokens   float64 `json:"recent_tokens"`
				} `json:"efforts"`
			} `json:"reasoning"`
		} `json:"targets"`
	}
	raw := getStatusRaw(t, adminStatusURL)
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if r := doc.Targets[0].Reasoning; doc.Targets[0].Upstream != "a" || r.Signal != "reasoning_floor" || len(r.Efforts) != 1 ||
		r.Efforts[0].Effort != "high" || r.Efforts[0].BaselineTokens != 40 || r.Efforts[0].RecentTokens != 18 {
		t.Errorf("status JSON's reasoning of a = %+v\n%s", r, raw)
	}
	mustLog(t, logFile, "warn", "target degraded", "target", "a (*)", "reason", "of baseline (40 → 18 tokens, effort high)")
	series := `llm_relay_reasoning_degradations_total{model="*",signal="reasoning_floor",upstream="a"}`
	if got, was := metricValue(t, scrapeMetrics(t), series), metricValue(t, before, series); got != was+1 {
		t.Errorf("%s = %v, was %v; want one more", series, got, was)
	}

	// Degraded: b first, but for at most one recheck a second.
	start := time.Now()
	toA := 0
	for range 8 {
		if streamServedBy(t, reasoningChatBody, low...) == "a" {
			toA++
		}
	}
	if allowed := 1 + int(time.Since(start)/time.Second); toA > allowed {
		t.Errorf("a served %d of 8 requests in %s while degraded; rechecks allow %d", toA, time.Since(start), allowed)
	}
	if mustTarget(t, getRelayStatus(t), "a").Status != "degraded" {
		t.Fatal("a recovered on rechecks that reasoned 4 tokens")
	}

	// The recheck that reasons as before is the trial that recovers a.
	recovered := false
	for i := 0; i < 5 && !recovered; i++ { // bounded: ~6 s
		time.Sleep(1100 * time.Millisecond)
		if up := streamServedBy(t, reasoningChatBody); up != "a" {
			t.Errorf("recheck %d served by %q, want a", i, up)
		}
		recovered = mustTarget(t, getRelayStatus(t), "a").Status == "healthy"
	}
	if !recovered {
		t.Fatalf("a not healthy after good rechecks: %+v", mustTarget(t, getRelayStatus(t), "a"))
	}
	mustLog(t, logFile, "info", "target healthy", "target", "a (*)", "reason", "trial reasoned 40 tokens (baseline 40, effort high)")
	for range 3 {
		if up := streamServedBy(t, reasoningChatBody); up != "a" {
			t.Errorf("after recovery served by %q, want a", up)
		}
	}
}

// TestReasoningClusterRateDegrades: streams whose reasoning cluster rate
// (about 0.5 for an even pace) is above the slo's cluster_rate 0.2
// degrade their target after the recent window of 5.
func TestReasoningClusterRateDegrades(t *testing.T) {
	logFile := startRelay(t, `llm_relay {
		upstream s http://127.0.0.1:9092/steady/v1
		upstream b http://127.0.0.1:9092/b/v1
		model chat {
			to s
			to b
			slo {
				cluster_rate 0.2
			}
		}
	}`, reasoningSimSite)
	for i := 1; i <= 5; i++ {
		if up := streamServedBy(t, reasoningChatBody); up != "s" {
			t.Fatalf("request %d served by %q, want s", i, up)
		}
		if st := mustTarget(t, getRelayStatus(t), "s").Status; (st == "degraded") != (i == 5) {
			t.Fatalf("after %d streams s is %s; want degraded at the fifth", i, st)
		}
	}
	st := mustTarget(t, getRelayStatus(t), "s")
	if !strings.HasPrefix(st.Reason, "reasoning cluster rate 0.") || !strings.Contains(st.Reason, " > 0.20") {
		t.Errorf("reason = %q", st.Reason)
	}
	mustLog(t, logFile, "warn", "target degraded", "target", "s (*)", "reason", "reasoning cluster rate")
	if m := scrapeMetrics(t); metricValue(t, m, `llm_relay_reasoning_degradations_total{model="*",signal="cluster_rate",upstream="s"}`) < 1 {
		t.Errorf("no cluster_rate degradation counted")
	}
	// The recheck goes to s first (and fails its trial); then b.
	ups := []string{streamServedBy(t, reasoningChatBody), streamServedBy(t, reasoningChatBody)}
	if fmt.Sprint(ups) != "[s b]" {
		t.Errorf("after the degradation served by %v, want [s b] (the recheck, then b)", ups)
	}
}

// TestReasoningDegradationEndsWhenReloadDropsTheFloor: a reload whose SLO
// no longer has reasoning_floor does not keep a target degraded by it;
// a reload that keeps it (with another model that judges nothing using
// the same target) keeps it degraded.
func TestReasoningDegradationEndsWhenReloadDropsTheFloor(t *testing.T) {
	cfg := func(slo, other string) string {
		return `llm_relay {
		upstream a http://127.0.0.1:9092/a/v1
		upstream b http://127.0.0.1:9092/b/v1
		model chat {
			to a
			to b
			` + slo + `
		}
		` + other + `
	}`
	}
	floor := "slo {\n\t\t\t\treasoning_floor 0.5\n\t\t\t}"
	startRelay(t, cfg(floor, ""), reasoningSimSite)
	for range 30 {
		streamServedBy(t, reasoningChatBody)
	}
	for range 3 {
		streamServedBy(t, reasoningChatBody, "X-Sim-Reasoning-Tokens", "4")
	}
	if st := mustTarget(t, getRelayStatus(t), "a"); st.Status != "degraded" {
		t.Fatalf("a is %s, want degraded", st.Status)
	}
	// Another model on the same target, judging nothing, answered by a:
	// a stays degraded for chat.
	startRelay(t, cfg(floor, "model plain {\n\t\t\tto a\n\t\t}"), reasoningSimSite)
	if up := streamServedBy(t, strings.Replace(reasoningChatBody, `"chat"`, `"plain"`, 1)); up != "a" {
		t.Fatalf("plain served by %q", up)
	}
	for _, tg := range getRelayStatus(t).Targets {
		if tg.Upstream == "a" && tg.Status != "degraded" {
			t.Fatalf("a is %s for %v after an answer to a model that judges no reasoning, want degraded", tg.Status, tg.Aliases)
		}
	}
	logFile := startRelay(t, cfg("", ""), reasoningSimSite)
	if st := mustTarget(t, getRelayStatus(t), "a"); st.Status != "healthy" {
		t.Fatalf("after a reload without reasoning_floor, a is %s (%s)", st.Status, st.Reason)
	}
	mustLog(t, logFile, "info", "target healthy", "target", "a (*)", "reason", "the slo no longer judges reasoning")
}
