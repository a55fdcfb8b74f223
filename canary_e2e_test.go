package llmrelay_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/canary"
)

// TestCanaryStableSliceAndRollback: a 30% canary keyed by a header takes
// exactly the users whose bucket is below 30, the same user always on the
// same side; when the canary starts failing, failover hides it from the
// clients, its guard rolls it back, and it gets no more requests.
func TestCanaryStableSliceAndRollback(t *testing.T) {
	var failing atomic.Bool
	a := newFakeUpstream(t, okHandler)
	c := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			answerJSON(w, 503, `{"error":{"message":"canary broke","type":"server_error","code":null}}`)
			return
		}
		answerJSON(w, 200, okCompletion)
	})
	logFile := startRelay(t, fmt.Sprintf(`llm_relay {
		upstream a %s
		upstream c %s
		model chat {
			to a
			canary c 30 {
				key header X-User
				guard {
					error_rate 0.2
					ttft_p99 5s
					min_samples 5
					window 10
				}
			}
		}
	}`, a.v1(), c.v1()))

	const users = 200
	user := func(i int) string { return fmt.Sprintf("user-%03d@example.com", i) }
	inCanary := map[string]bool{}
	var canaryUsers []string
	for i := 0; i < users; i++ {
		u := user(i)
		if canary.Bucket(u) < 30 {
			inCanary[u] = true
			canaryUsers = append(canaryUsers, u)
		}
	}
	side := map[string]string{}
	for i := 0; i < users; i++ {
		u := user(i)
		up, att := servedBy(t, chatBody, "X-User", u)
		want := "a"
		if inCanary[u] {
			want = "c"
		}
		if up != want || att != "1" {
			t.Errorf("%s (bucket %.2f): served by %q after %s attempts, want %s at once", u, canary.Bucket(u), up, att, want)
		}
		side[u] = up
	}
	// Binomial(200, 0.3): mean 60, sd 6.5; 4 sd either way.
	if n := len(canaryUsers); n < 34 || n > 86 {
		t.Errorf("%d of %d users in the 30%% canary; want 60 ± 26", n, users)
	}
	if got := len(c.requests()); got != len(canaryUsers) {
		t.Errorf("the canary got %d requests, want %d (one per canary user)", got, len(canaryUsers))
	}
	// The same user lands on the same side every time.
	for i := 0; i < 40; i++ {
		u := user(i * 5)
		if up, _ := servedBy(t, chatBody, "X-User", u); up != side[u] {
			t.Errorf("%s: served by %q, earlier by %q", u, up, side[u])
		}
	}
	// Without the key the request stays on the chain.
	for i := 0; i < 5; i++ {
		if up, _ := servedBy(t, chatBody); up != "a" {
			t.Errorf("no X-User: served by %q, want a", up)
		}
	}
	doc := getRelayStatus(t)
	if len(doc.Canaries) != 1 || doc.Canaries[0].State != "active" || doc.Canaries[0].Share != 30 || doc.Canaries[0].TotalFailed != 0 {
		t.Fatalf("canaries: %+v; want one active at 30%%", doc.Canaries)
	}

	// The canary breaks. Its window holds 10 good samples: the third
	// failure makes the error rate 30% > 20% and rolls it back.
	failing.Store(true)
	before := len(c.requests())
	rolledAfter := 0
	for i := 0; i < 10 && rolledAfter == 0; i++ {
		resp := post(t, chatBody, "X-User", canaryUsers[i%len(canaryUsers)])
		body := readAll(t, resp)
		if resp.StatusCode != 200 || body != okCompletion || resp.Header.Get("X-Relay-Upstream") != "a" || resp.Header.Get("X-Relay-Attempts") != "2" {
			t.Errorf("failing canary: client got %d from %q after %s attempts: %s; want a's answer after the canary's failure",
				resp.StatusCode, resp.Header.Get("X-Relay-Upstream"), resp.Header.Get("X-Relay-Attempts"), body)
		}
		if getRelayStatus(t).Canaries[0].State == "rolled_back" {
			rolledAfter = i + 1
		}
	}
	if rolledAfter != 3 {
		t.Errorf("rolled back after %d failed canary requests, want 3 (error rate 3/10 > 0.2)", rolledAfter)
	}
	cs := getRelayStatus(t).Canaries[0]
	if cs.State != "rolled_back" || cs.Share != 0 || !strings.Contains(cs.RollbackReason, "error rate 30% > 20%") {
		t.Errorf("canary after rollback: %+v", cs)
	}
	mustLog(t, logFile, "warn", "canary rolled back", "canary", "c (*)", "reason", "error rate")

	// Rolled back: every user takes the chain, the canary gets nothing.
	after := len(c.requests())
	if after-before != rolledAfter {
		t.Errorf("the canary got %d requests while failing, want %d", after-before, rolledAfter)
	}
	for _, u := range canaryUsers[:min(20, len(canaryUsers))] {
		if up, att := servedBy(t, chatBody, "X-User", u); up != "a" || att != "1" {
			t.Errorf("%s after the rollback: served by %q after %s attempts, want a at once", u, up, att)
		}
	}
	if n := len(c.requests()); n != after {
		t.Errorf("the rolled-back canary got %d more requests", n-after)
	}
}

// TestCanaryRollbackSurvivesReload: a reload with the same canary keeps it
// rolled back; changing the canary's definition (its key source, or its
// share) starts a fresh one, which is how an operator re-enables it.
//
// The key-source step fails at the time of writing: compileCanaryShadow
// (canary.go) keys the canary pool by alias, target, steps, guard
// and promote interval but not by c.Key, although internal/canary's doc
// lists the key source as part of a canary's identity, so a canary whose
// key changed keeps the old state (still rolled back).
func TestCanaryRollbackSurvivesReload(t *testing.T) {
	a := newFakeUpstream(t, okHandler)
	c := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) { answerJSON(w, 503, `{}`) })
	block := func(key string, pct int, extra string) string {
		return fmt.Sprintf(`llm_relay {
		upstream a %s
		upstream c %s
		model chat {
			to a
			canary c %d {
				key %s
				guard {
					error_rate 0.2
					min_samples 2
					window 2
				}
			}
		}
		%s
	}`, a.v1(), c.v1(), pct, key, extra)
	}
	state := func() rsCanary {
		t.Helper()
		cs := getRelayStatus(t).Canaries
		if len(cs) != 1 {
			t.Fatalf("canaries: %+v", cs)
		}
		return cs[0]
	}
	// Users in the canary for both 30 and 50 percent.
	var users []string
	for i := 0; len(users) < 4 && i < 1000; i++ {
		if u := fmt.Sprintf("reload-user-%d", i); canary.Bucket(u) < 30 {
			users = append(users, u)
		}
	}
	startRelay(t, block("header X-User", 50, ""))
	for _, u := range users[:2] {
		if up, att := servedBy(t, chatBody, "X-User", u); up != "a" || att != "2" {
			t.Errorf("%s: served by %q after %s attempts, want a after the canary failed", u, up, att)
		}
	}
	if st := state(); st.State != "rolled_back" {
		t.Fatalf("after 2 of 2 canary attempts failed: %+v", st)
	}

	startRelay(t, block("header X-User", 50, "model other {\n\t\t\tto a\n\t\t}"))
	if st := state(); st.State != "rolled_back" {
		t.Errorf("a reload with the same canary re-enabled it: %+v", st)
	}
	n := len(c.requests())
	servedBy(t, chatBody, "X-User", users[2])
	if len(c.requests()) != n {
		t.Errorf("the rolled-back canary got a request after the reload")
	}

	startRelay(t, block("header X-Tenant", 50, ""))
	if st := state(); st.State != "active" || st.Share != 50 {
		t.Errorf("the canary's key changed to another header: %+v; want a fresh canary, active at 50%%", st)
	}

	startRelay(t, block("header X-User", 30, ""))
	if st := state(); st.State != "active" || st.Share != 30 {
		t.Errorf("the canary's share changed: %+v; want a fresh canary, active at 30%%", st)
	}
	n = len(c.requests())
	if up, _ := servedBy(t, chatBody, "X-User", users[3]); up != "a" || len(c.requests()) != n+1 {
		t.Errorf("the fresh canary did not get %s's request first", users[3])
	}
}
