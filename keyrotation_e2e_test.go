package llmrelay_test

import (
	"net/http"
	"testing"
)

// TestKeyRotationSharesBudget: two tokens of one name are one principal:
// one budget, one spend. The budget ($3 a day, $2 a request) blocks the
// third request, whichever token it comes with.
func TestKeyRotationSharesBudget(t *testing.T) {
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 200, okCompletion) // 1 prompt + 1 completion token
	})
	startRelay(t, `llm_relay {
		key sk-rot-old rotating-team budget 3 per day
		key sk-rot-new rotating-team
		upstream u `+up.v1()+`
		model m {
			to u
		}
		price m {
			input 1000000
			output 1000000
		}
	}`)
	body := `{"model":"m","messages":[]}`
	for i, tok := range []string{"sk-rot-old", "sk-rot-new"} {
		resp := post(t, body, "Authorization", "Bearer "+tok)
		if got := readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d: %s", i+1, resp.StatusCode, got)
		}
	}
	for _, tok := range []string{"sk-rot-new", "sk-rot-old"} {
		resp := post(t, body, "Authorization", "Bearer "+tok)
		got := readAll(t, resp)
		if resp.StatusCode != 429 || decodeErr(t, got).Error.Code != "budget_exceeded" {
			t.Errorf("%s after $4 of a $3 budget: status %d: %s", tok, resp.StatusCode, got)
		}
	}
	if n := len(up.requests()); n != 2 {
		t.Errorf("upstream got %d requests, want 2", n)
	}
}
