package llmrelay_test

// The canary guard's reasoning_floor: with a real Caddy and the simulator
// (llm_simulator on this file's own port, 9095).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/canary"
)

// floorSimSite serves two simulators that answer alike but reason
// 40 and 4 pieces.
const floorSimSite = `http://127.0.0.1:9095 {
	handle_path /deep/* {
		llm_simulator {
			reasoning_tokens 40
			content_tokens 3
			pattern steady 0
		}
	}
	handle_path /shallow/* {
		llm_simulator {
			reasoning_tokens 4
			content_tokens 3
			pattern steady 0
		}
	}
}`

// rsCanaryReasoning is a canary of the status JSON with its reasoning
// comparison.
type rsCanaryReasoning struct {
	State          string `json:"state"`
	RollbackReason string `json:"rollback_reason"`
	Reasoning      []struct {
		Effort        string   `json:"effort"`
		CanaryTokens  float64  `json:"canary_reasoning_tokens"`
		CanarySamples int      `json:"canary_samples"`
		StableTokens  float64  `json:"stable_reasoning_tokens"`
		StableSamples int      `json:"stable_samples"`
		Ratio         *float64 `json:"ratio"`
	} `json:"reasoning"`
	GuardReasoningFloor float64 `json:"guard_reasoning_floor"`
}

func canaryReasoningStatus(t *testing.T) map[string]rsCanaryReasoning {
	t.Helper()
	raw := getStatusRaw(t, adminStatusURL)
	var doc struct {
		Canaries []struct {
			Name string `json:"name"`
			rsCanaryReasoning
		} `json:"canaries"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("decoding status: %v\n%s", err, raw)
	}
	m := map[string]rsCanaryReasoning{}
	for _, c := range doc.Canaries {
		m[strings.SplitN(c.Name, " ", 2)[0]] = c.rsCanaryReasoning
	}
	return m
}

// TestCanaryReasoningFloorRollsBack: half the users (by header) go to
// the canary. A canary that reasons a tenth of what the stable target
// does is rolled back by guard reasoning_floor 0.5 once both sides have
// min_samples answers, with the figures in the reason and the status
// JSON; a canary that reasons as much stays.
func TestCanaryReasoningFloorRollsBack(t *testing.T) {
	guard := `key header X-User
				guard {
					reasoning_floor 0.5
					min_samples 3
					window 5
				}`
	startRelay(t, fmt.Sprintf(`llm_relay {
		upstream deep http://127.0.0.1:9095/deep/v1
		upstream deep2 http://127.0.0.1:9095/deep/v1
		upstream shallow http://127.0.0.1:9095/shallow/v1
		model shallowcanary {
			to deep
			canary shallow 50 {
				%s
			}
		}
		model deepcanary {
			to deep
			canary deep2 50 {
				%s
			}
		}
	}`, guard, guard), floorSimSite)
	canaryUser, stableUser := "", ""
	for i := 0; (canaryUser == "" || stableUser == "") && i < 1000; i++ {
		u := fmt.Sprintf("floor-user-%d", i)
		if canary.Bucket(u) < 50 {
			canaryUser = u
		} else {
			stableUser = u
		}
	}
	for i := range 5 {
		for _, m := range []string{"shallowcanary", "deepcanary"} {
			streamChat(t, m, "X-User", canaryUser)
			streamChat(t, m, "X-User", stableUser)
		}
		if st := canaryReasoningStatus(t)["shallowcanary"]; i < 2 && st.State != "active" {
			t.Fatalf("rolled back after %d answers a side (min_samples 3): %+v", i+1, st)
		}
	}
	st := canaryReasoningStatus(t)["shallowcanary"]
	if st.State != "rolled_back" || !strings.Contains(st.RollbackReason, "of the stable targets' at effort default") ||
		!strings.Contains(st.RollbackReason, "< floor 0.50") {
		t.Fatalf("shallow canary: %+v", st)
	}
	if len(st.Reasoning) != 1 || st.Reasoning[0].Ratio == nil || *st.Reasoning[0].Ratio >= 0.5 ||
		st.Reasoning[0].CanarySamples != 3 || st.Reasoning[0].StableSamples != 3 || st.Reasoning[0].StableTokens <= 0 || st.GuardReasoningFloor != 0.5 {
		t.Fatalf("shallow canary's reasoning: %+v", st.Reasoning)
	}
	deep := canaryReasoningStatus(t)["deepcanary"]
	if deep.State != "active" || len(deep.Reasoning) != 1 || deep.Reasoning[0].Ratio == nil || *deep.Reasoning[0].Ratio < 0.9 || deep.Reasoning[0].CanarySamples != 5 {
		t.Errorf("deep canary: %+v; want it kept, reasoning as much as the stable target", deep)
	}
	// The status page shows the comparison next to the other figures.
	page := getStatusPage(t)
	if !strings.Contains(page, "reasoning vs stable") || !strings.Contains(page, "default: ") {
		t.Errorf("status page lacks the reasoning comparison")
	}
}

// getStatusPage GETs the admin status as a browser would: the HTML page.
func getStatusPage(t *testing.T) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, adminStatusURL, nil)
	req.Header.Set("Accept", "text/html")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page := readAll(t, resp)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("status page: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return page
}
