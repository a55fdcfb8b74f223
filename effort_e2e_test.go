package llmrelay_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestEffortForms: the client's effort is recognised as reasoning_effort
// or reasoning.effort; the relay writes its own in the client's form, or
// in the endpoint's, and never adds the second form.
func TestEffortForms(t *testing.T) {
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 200, okCompletion)
	})
	startRelay(t, `llm_relay {
		upstream u `+up.v1()+`
		model keep {
			to u
			adaptive_effort {
				else low
			}
		}
		model over {
			to u
			adaptive_effort {
				else low
				client_effort override
			}
		}
	}`)
	cases := []struct {
		name, path, model, extra string
		flat, nested             any // nil: absent
	}{
		{"keep: nested client effort", "chat/completions", "keep", `,"reasoning":{"effort":"high"}`, nil, "high"},
		{"keep: flat client effort", "chat/completions", "keep", `,"reasoning_effort":"high"`, "high", nil},
		{"keep: none on chat", "chat/completions", "keep", ``, "low", nil},
		{"keep: none on responses", "responses", "keep", ``, nil, "low"},
		{"keep: none on legacy completions", "completions", "keep", ``, "low", nil},
		{"override: nested client effort", "chat/completions", "over", `,"reasoning":{"effort":"high","summary":"auto"}`, nil, "low"},
		{"override: flat client effort", "responses", "over", `,"reasoning_effort":"high"`, "low", nil},
		{"override: none on responses, reasoning without effort", "responses", "over", `,"reasoning":{"summary":"auto"}`, nil, "low"},
	}
	for _, c := range cases {
		req, err := http.NewRequest(http.MethodPost, relayBase+"/v1/"+c.path,
			strings.NewReader(`{"model":"`+c.model+`","messages":[{"role":"user","content":"hi"}]`+c.extra+`}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("%s: status %d: %s", c.name, resp.StatusCode, got)
		}
	}
	seen := up.requests()
	if len(seen) != len(cases) {
		t.Fatalf("upstream got %d requests, want %d", len(seen), len(cases))
	}
	for i, c := range cases {
		b := seen[i].body
		var nested any
		if r, ok := b["reasoning"].(map[string]any); ok {
			nested = r["effort"]
			if strings.Contains(c.extra, "summary") && r["summary"] != "auto" {
				t.Errorf("%s: the client's other reasoning fields were lost: %v", c.name, r)
			}
		}
		if b["reasoning_effort"] != c.flat || nested != c.nested {
			t.Errorf("%s: upstream got reasoning_effort %v, reasoning.effort %v; want %v, %v",
				c.name, b["reasoning_effort"], nested, c.flat, c.nested)
		}
	}
}
