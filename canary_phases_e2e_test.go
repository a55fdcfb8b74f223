package llmrelay_test

// Canary guards on the mean TTFT and on the reasoning cluster rate, and
// roll-outs by phases of their own lengths: with a real Caddy, the
// simulator (llm_simulator on this file's own port, 9093) and fake
// upstreams; across a reload, a restart on the same storage, and two
// relays sharing Redis.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/canary"
)

// phaseSimSite serves three simulators: /steady/ reasons at an even pace,
// /fast/ answers at once, /slow/ waits 300ms before its first byte.
const phaseSimSite = `http://127.0.0.1:9093 {
	handle_path /steady/* {
		llm_simulator {
			reasoning_tokens 20
			content_tokens 5
			reasoning_pattern steady 100
			content_pattern steady 0
		}
	}
	handle_path /fast/* {
		llm_simulator {
			reasoning_tokens 0
			content_tokens 3
			pattern steady 0
		}
	}
	handle_path /slow/* {
		llm_simulator {
			reasoning_tokens 0
			content_tokens 3
			pattern steady 0
			ttfb 300ms
		}
	}
}`

// rsCanaryPhase is a canary of the status JSON, with its roll-out.
type rsCanaryPhase struct {
	Name           string    `json:"name"`
	State          string    `json:"state"`
	Share          float64   `json:"share"`
	Step           int       `json:"step"`
	Since          time.Time `json:"since"`
	NextStepAt     time.Time `json:"next_step_at"`
	SamplesToStep  int       `json:"samples_to_step"`
	TTFTMeanMs     float64   `json:"ttft_mean_ms"`
	TTFTP99Ms      float64   `json:"ttft_p99_ms"`
	ClusterRate    *float64  `json:"cluster_rate"`
	ClusterSamples int       `json:"cluster_samples"`
	RollbackReason string    `json:"rollback_reason"`
	Phases         []struct {
		Share float64 `json:"share"`
		ForMs float64 `json:"for_ms"`
		For   string  `json:"for"`
	} `json:"phases"`
}

func canariesFrom(t *testing.T, raw []byte) map[string]rsCanaryPhase {
	t.Helper()
	var doc struct {
		Canaries []rsCanaryPhase `json:"canaries"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("decoding status: %v\n%s", err, raw)
	}
	m := map[string]rsCanaryPhase{}
	for _, c := range doc.Canaries {
		m[strings.SplitN(c.Name, " ", 2)[0]] = c
	}
	return m
}

// canaryStatus is the relay's canaries by alias.
func canaryStatus(t *testing.T) map[string]rsCanaryPhase {
	t.Helper()
	return canariesFrom(t, getStatusRaw(t, adminStatusURL))
}

// streamChat sends one streaming chat request for model and reads it to
// the end; it fails the test unless the answer is a 200.
func streamChat(t *testing.T, model string, header ...string) {
	t.Helper()
	resp := post(t, `{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"hi"}]}`, header...)
	body := readAll(t, resp)
	if resp.StatusCode != 200 || !strings.Contains(body, "[DONE]") {
		t.Fatalf("%s: status %d: %s", model, resp.StatusCode, body)
	}
}

// lateReasoner streams reasoning that crowds late, as a degraded provider
// does: two reasoning deltas, a pause, then twelve at once, then the
// answer. Its cluster rate as received is 12/14, about 0.86.
func lateReasoner(n int, w http.ResponseWriter, r *http.Request) {
	reason := `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":"step "},"finish_reason":null}]}`
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(d string) { fmt.Fprintf(w, "data: %s\n\n", d); fl.Flush() }
	send(reason)
	time.Sleep(10 * time.Millisecond)
	send(reason)
	time.Sleep(250 * time.Millisecond)
	for range 12 {
		send(reason)
	}
	send(chunk("answer"))
	send("[DONE]")
}

// TestCanaryClusterRateRollsBack: a canary whose reasoning crowds late
// (cluster rate about 0.86 as received) is rolled back by guard
// cluster_rate 0.7 once min_samples streams with reasoning arrived; a
// canary reasoning at an even pace (about 0.5), same guard, stays.
//
// The simulator's `reasoning_pattern clustered` is not the late one: its
// bursts are periodic, and periodic bursts score about 0.5 too (the
// figure measures reasoning crowding late, not bursts; see
// internal/pace TestClustersOnTraces). So the clustering canary here is a
// fake upstream that sends its reasoning late.
func TestCanaryClusterRateRollsBack(t *testing.T) {
	late := newFakeUpstream(t, lateReasoner)
	guard := `guard {
					cluster_rate 0.7
					min_samples 3
					window 5
				}`
	startRelay(t, fmt.Sprintf(`llm_relay {
		upstream sim http://127.0.0.1:9093/steady/v1
		upstream late %s
		model latecanary {
			to sim
			canary late 100 {
				%s
			}
		}
		model evencanary {
			to sim
			canary sim 100 {
				%s
			}
		}
	}`, late.v1(), guard, guard), phaseSimSite)
	for i := range 2 {
		streamChat(t, "latecanary")
		streamChat(t, "evencanary")
		if st := canaryStatus(t)["latecanary"]; st.State != "promoted" || st.ClusterSamples != i+1 {
			t.Fatalf("after %d late streams (below min_samples): %+v", i+1, st)
		}
	}
	if st := canaryStatus(t)["latecanary"]; st.ClusterRate == nil || *st.ClusterRate < 0.75 {
		t.Fatalf("late canary's cluster rate: %+v", st)
	}
	streamChat(t, "latecanary")
	st := canaryStatus(t)["latecanary"]
	if st.State != "rolled_back" || st.Share != 0 || !strings.Contains(st.RollbackReason, "reasoning cluster rate 0.") || !strings.Contains(st.RollbackReason, "> 0.700") {
		t.Fatalf("after the third late stream: %+v", st)
	}
	n := len(late.requests())
	streamChat(t, "latecanary")
	if len(late.requests()) != n {
		t.Errorf("the rolled-back canary got a request")
	}
	for range 4 {
		streamChat(t, "evencanary")
	}
	even := canaryStatus(t)["evencanary"]
	if even.State != "promoted" || even.ClusterSamples < 5 || even.ClusterRate == nil || *even.ClusterRate > 0.7 {
		rate := -1.0
		if even.ClusterRate != nil {
			rate = *even.ClusterRate
		}
		t.Errorf("the even canary: %+v, cluster rate %.3f; want it kept, its cluster rate about 0.5", even, rate)
	}
}

// TestCanaryTTFTMeanRollsBack: a canary that is slower on every request
// (300ms to its first byte) but never slow enough for its p99 guard (5s)
// is rolled back by guard ttft_mean 150ms; the same canary with the p99
// guard alone stays.
func TestCanaryTTFTMeanRollsBack(t *testing.T) {
	startRelay(t, `llm_relay {
		upstream fast http://127.0.0.1:9093/fast/v1
		upstream slow http://127.0.0.1:9093/slow/v1
		model meanguard {
			to fast
			canary slow 100 {
				guard {
					ttft_mean 150ms
					ttft_p99 5s
					min_samples 3
					window 5
				}
			}
		}
		model p99guard {
			to fast
			canary slow 100 {
				guard {
					ttft_p99 5s
					min_samples 3
					window 5
				}
			}
		}
	}`, phaseSimSite)
	for i := range 5 {
		streamChat(t, "meanguard")
		streamChat(t, "p99guard")
		st := canaryStatus(t)["meanguard"]
		if i < 2 && st.State != "promoted" {
			t.Fatalf("rolled back on %d samples (min_samples 3): %+v", i+1, st)
		}
	}
	st := canaryStatus(t)["meanguard"]
	if st.State != "rolled_back" || !strings.Contains(st.RollbackReason, "ttft mean ") || !strings.Contains(st.RollbackReason, "> 150ms") || strings.Contains(st.RollbackReason, "ttft p99") {
		t.Fatalf("mean guard: %+v", st)
	}
	p99 := canaryStatus(t)["p99guard"]
	if p99.State != "promoted" || p99.TTFTMeanMs < 250 || p99.TTFTP99Ms > 5000 {
		t.Errorf("p99 guard alone: %+v; want it kept, mean TTFT about 300ms", p99)
	}
}

// phasedRelay is a canary rolled out 10% for 1s, 50% for 2s, then 100%.
func phasedRelay(extra string) string {
	return `llm_relay {
		upstream fast http://127.0.0.1:9093/fast/v1
		upstream next http://127.0.0.1:9093/fast/v1
		model phased {
			to fast
			canary next {
				key header X-User
				guard {
					error_rate 0.5
					min_samples 2
					window 10
				}
				promote 10% for 1s, 50% for 2s, 100%
			}
		}
		` + extra + `
	}`
}

// usersBelow returns n users whose bucket is below pct.
func usersBelow(pct float64, n int) []string {
	var us []string
	for i := 0; len(us) < n && i < 10000; i++ {
		if u := fmt.Sprintf("phase-user-%d", i); canary.Bucket(u) < pct {
			us = append(us, u)
		}
	}
	return us
}

// TestCanaryPhasesAdvance: each phase lasts its own duration (and
// min_samples attempts), shows in the status JSON with when it ends, and
// a reload with the same canary keeps the phase and its end.
func TestCanaryPhasesAdvance(t *testing.T) {
	startRelay(t, phasedRelay(""), phaseSimSite)
	st := canaryStatus(t)["phased"]
	if st.State != "active" || st.Share != 10 || st.Step != 0 || len(st.Phases) != 3 || st.Phases[0].For != "1s" || st.Phases[1].For != "2s" || st.Phases[2].For != "" {
		t.Fatalf("at the start: %+v", st)
	}
	if !st.NextStepAt.Equal(st.Since.Add(time.Second)) || st.SamplesToStep != 2 {
		t.Fatalf("first phase ends at %v (since %v), samples to step %d", st.NextStepAt, st.Since, st.SamplesToStep)
	}
	start := st.Since
	for _, u := range usersBelow(10, 2) {
		streamChat(t, "phased", "X-User", u)
	}
	// Promotion is checked on requests: send one every 100ms.
	waitFor(t, 10*time.Second, "the second phase", func() bool {
		streamChat(t, "phased", "X-User", "someone")
		return canaryStatus(t)["phased"].Step == 1
	})
	st = canaryStatus(t)["phased"]
	if st.Share != 50 || st.Since.Sub(start) < time.Second || !st.NextStepAt.Equal(st.Since.Add(2*time.Second)) {
		t.Fatalf("second phase: %+v; want 50%%, begun at least 1s after %v, ending 2s after it began", st, start)
	}

	// A reload with the same canary: the same phase, the same end.
	startRelay(t, phasedRelay("model other {\n\t\t\tto fast\n\t\t}"), phaseSimSite)
	if re := canaryStatus(t)["phased"]; re.Step != 1 || !re.Since.Equal(st.Since) || !re.NextStepAt.Equal(st.NextStepAt) {
		t.Fatalf("after a reload: %+v; want phase 2 ending at %v", re, st.NextStepAt)
	}
	for _, u := range usersBelow(50, 2) {
		streamChat(t, "phased", "X-User", u)
	}
	waitFor(t, 15*time.Second, "the last phase", func() bool {
		streamChat(t, "phased", "X-User", "someone")
		return canaryStatus(t)["phased"].Step == 2
	})
	last := canaryStatus(t)["phased"]
	if last.State != "promoted" || last.Share != 100 || last.Since.Sub(st.Since) < 2*time.Second || !last.NextStepAt.IsZero() {
		t.Fatalf("last phase: %+v", last)
	}
}

// longPhased is a canary whose first phase lasts an hour, with the
// relay's status on /status.
func longPhased(state string) string {
	return `llm_relay {
		upstream fast http://127.0.0.1:9093/fast/v1
		model phased {
			to fast
			canary fast {
				promote 10% for 1h, 100%
			}
		}
		` + state + `
	}
	handle /status {
		llm_relay_status
	}`
}

func procCanary(t *testing.T, p *relayProc) rsCanaryPhase {
	t.Helper()
	return canariesFrom(t, []byte(p.statusBody(t)))["phased"]
}

// TestCanaryPhaseSurvivesRestart: a new Caddy on the same storage keeps
// the phase's start, so the phase ends when it would have (before, a
// restart started the first phase's clock again).
func TestCanaryPhaseSurvivesRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a")
	a := startRelayProc(t, dir, longPhased(""))
	first := procCanary(t, a)
	if first.Step != 0 || first.NextStepAt.IsZero() {
		t.Fatalf("at the start: %+v", first)
	}
	time.Sleep(1500 * time.Millisecond) // saved once a second, and at the stop
	a.stop(t)
	b := startRelayProc(t, dir, longPhased(""))
	again := procCanary(t, b)
	if !again.Since.Equal(first.Since) || !again.NextStepAt.Equal(first.NextStepAt) {
		t.Fatalf("after the restart: phase since %v, ends %v; want %v and %v", again.Since, again.NextStepAt, first.Since, first.NextStepAt)
	}
}

// TestCanaryPhaseSharedByFleet: two relays on one Redis share the phase:
// the one started later takes the first one's start, so the phase ends at
// the same time on both.
func TestCanaryPhaseSharedByFleet(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "redis.sock")
	startRedis(t, sock)
	state := "state redis unix:" + sock + " {\n\t\t\tsync_interval 250ms\n\t\t}"
	a := startRelayProc(t, filepath.Join(t.TempDir(), "a"), longPhased(state))
	first := procCanary(t, a)
	time.Sleep(1200 * time.Millisecond) // B's own start would be later
	b := startRelayProc(t, filepath.Join(t.TempDir(), "b"), longPhased(state))
	waitFor(t, 10*time.Second, "B taking A's phase start", func() bool {
		return procCanary(t, b).Since.Equal(first.Since)
	})
	if bs := procCanary(t, b); !bs.NextStepAt.Equal(first.NextStepAt) {
		t.Errorf("B's phase ends %v, A's %v", bs.NextStepAt, first.NextStepAt)
	}
	if as := procCanary(t, a); !as.Since.Equal(first.Since) {
		t.Errorf("A's phase start moved: %v, was %v", as.Since, first.Since)
	}
}
