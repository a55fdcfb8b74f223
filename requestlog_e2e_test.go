package llmrelay_test

// The request's placeholders and access log fields, through a real Caddy.

import (
	"net/http"
	"strings"
	"testing"
)

// TestPlaceholdersReachTheAccessLog: {http.llm_relay.*} resolve after the
// relay has answered (log_append reads them then), for a relayed request
// and for one the relay refused, and a server with an access log gets the
// llm_upstream and llm_attempts fields.
func TestPlaceholdersReachTheAccessLog(t *testing.T) {
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 200, okCompletion)
	})
	accessLog := t.TempDir() + "/access.log"
	startRelay(t, `log {
		output file `+accessLog+`
	}
	route {
		log_append p_upstream {http.llm_relay.upstream}
		log_append p_model {http.llm_relay.model}
		log_append p_attempts {http.llm_relay.attempts}
		log_append p_key {http.llm_relay.key}
		log_append p_error {http.llm_relay.error}
		llm_relay {
			key sk-placeholder-test team-p
			upstream u `+up.v1()+`
			model m {
				to u m-upstream
			}
		}
	}`)
	resp := post(t, `{"model":"m","messages":[]}`, "Authorization", "Bearer sk-placeholder-test")
	readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	resp = post(t, `{"model":"nope","messages":[]}`, "Authorization", "Bearer sk-placeholder-test")
	readAll(t, resp)
	if resp.StatusCode != 404 {
		t.Fatalf("unknown model: status %d", resp.StatusCode)
	}
	waitFor(t, 5e9, "2 access log lines", func() bool {
		return strings.Count(readLog(t, accessLog), `"handled request"`) >= 2
	})
	lines := strings.Split(strings.TrimSpace(readLog(t, accessLog)), "\n")
	mustContain(t, lines[0], `"p_upstream":"u"`, `"p_model":"m-upstream"`, `"p_attempts":1`, `"p_key":"team-p"`, `"p_error":""`,
		`"llm_upstream":"u"`, `"llm_attempts":1`)
	mustContain(t, lines[1], `"p_key":"team-p"`, `"p_error":"model_not_found"`, `"p_attempts":0`)
}
