package llmrelay_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// heldUpstream answers every request with a stream that stays open until
// the test releases it: requests in flight, on demand.
type heldUpstream struct {
	*fakeUpstream
	release chan struct{}
	once    sync.Once
}

func newHeldUpstream(t *testing.T) *heldUpstream {
	h := &heldUpstream{release: make(chan struct{})}
	h.fakeUpstream = newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", chunk("held"))
		w.(http.Flusher).Flush()
		select {
		case <-h.release:
		case <-r.Context().Done():
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	t.Cleanup(h.free)
	return h
}

func (h *heldUpstream) free() { h.once.Do(func() { close(h.release) }) }

// holdStreams starts n streams through the relay for model and waits until
// the upstream has them all in flight. The returned channel gets each
// stream's body when it ends.
func holdStreams(t *testing.T, up *heldUpstream, model string, n int) chan string {
	t.Helper()
	before := len(up.requests())
	done := make(chan string, n)
	for range n {
		go func() {
			resp := post(t, `{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
			done <- readAll(t, resp)
		}()
	}
	waitFor(t, 10*time.Second, fmt.Sprintf("%d streams in flight", n), func() bool { return len(up.requests()) == before+n })
	return done
}

// TestCapacitySpillsInsteadOfQueueing is the case: a provider
// whose concurrency limit is 1, behind `max_concurrent 1`. Three parallel
// requests: the first takes the capped upstream, the two others go to the
// next target of the chain at once, not after the first.
func TestCapacitySpillsInsteadOfQueueing(t *testing.T) {
	const slow = 1500 * time.Millisecond
	capped := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		time.Sleep(slow)
		answerJSON(w, 200, okCompletion)
	})
	spare := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 200, okCompletion)
	})
	startRelay(t, fmt.Sprintf(`llm_relay {
		upstream capped %s {
			max_concurrent 1
		}
		upstream spare %s
		model cap-spill {
			to capped
			to spare
		}
	}`, capped.v1(), spare.v1()))

	var wg sync.WaitGroup
	took := make([]time.Duration, 3)
	served := make([]string, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i > 0 {
				// The first one in first, so it is the one on the capped upstream.
				waitFor(t, 5*time.Second, "the first request upstream", func() bool { return len(capped.requests()) == 1 })
			}
			start := time.Now()
			resp := post(t, `{"model":"cap-spill","messages":[{"role":"user","content":"hi"}]}`)
			readAll(t, resp)
			took[i], served[i] = time.Since(start), resp.Header.Get("X-Relay-Upstream")
			if resp.StatusCode != 200 {
				t.Errorf("request %d: %d", i+1, resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	if served[0] != "capped" || served[1] != "spare" || served[2] != "spare" {
		t.Errorf("served by %v; want capped, spare, spare", served)
	}
	for i := 1; i < 3; i++ {
		if took[i] > slow/2 {
			t.Errorf("request %d took %v: it waited for the capped upstream (%v) instead of spilling over", i+1, took[i], slow)
		}
	}
	if n := len(capped.requests()); n != 1 {
		t.Errorf("the capped upstream got %d requests, want 1", n)
	}
}

// TestCapacityStages: with a cap of 10 and the default stages, the 8th
// stream (7 in flight: 70 %) prefers the next target with room; with no
// other target, a request at 85 % or more is degraded one effort step; at
// 95 % the target takes no more, and the request is shed with 503
// overloaded and Retry-After. Each is counted, and the status view shows
// the occupancy.
func TestCapacityStages(t *testing.T) {
	held := newHeldUpstream(t)
	spare := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 200, okCompletion)
	})
	startRelay(t, fmt.Sprintf(`llm_relay {
		upstream held %s {
			max_concurrent 10
		}
		upstream spare %s
		model cap-spill2 {
			to held
			to spare
		}
		model cap-alone {
			to held
		}
	}`, held.v1(), spare.v1()))

	// 6 in flight (60 %): a request still goes to the first target.
	holdStreams(t, held, "cap-spill2", 6)
	holdStreams(t, held, "cap-spill2", 1)
	if n := len(spare.requests()); n != 0 {
		t.Fatalf("below spill_at, the spare got %d requests", n)
	}
	// 7 in flight (70 %): spill-over, though the target has room.
	resp := post(t, `{"model":"cap-spill2","messages":[{"role":"user","content":"hi"}]}`)
	readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Relay-Upstream") != "spare" {
		t.Fatalf("at 70 %%: %d from %q, want 200 from spare", resp.StatusCode, resp.Header.Get("X-Relay-Upstream"))
	}

	// 7 in flight: one more on the chain without a spare (70 %).
	holdStreams(t, held, "cap-alone", 1)
	// 8 in flight: a request with an effort is not degraded below 85 %.
	effortStream := `{"model":"cap-alone","stream":true,"reasoning_effort":"high","messages":[{"role":"user","content":"hi"}]}`
	go func() { readAll(t, post(t, effortStream)) }()
	waitFor(t, 5*time.Second, "9 in flight", func() bool { return len(held.requests()) == 9 })
	if e := held.requests()[8].body["reasoning_effort"]; e != "high" {
		t.Errorf("at 80 %%: reasoning_effort %v, want high (not degraded)", e)
	}
	// 9 in flight (90 %): degraded, one step down.
	go func() { readAll(t, post(t, effortStream)) }()
	waitFor(t, 5*time.Second, "10 in flight", func() bool { return len(held.requests()) == 10 })
	if e := held.requests()[9].body["reasoning_effort"]; e != "medium" {
		t.Errorf("at 90 %%: reasoning_effort %v, want medium (one step down from high)", e)
	}
	// 10 in flight (100 %): shed, nothing sent.
	resp = post(t, `{"model":"cap-alone","messages":[{"role":"user","content":"hi"}]}`)
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("at 100 %%: %d %s %v; want 503 with Retry-After 1", resp.StatusCode, body, resp.Header)
	}
	if e := decodeErr(t, body); e.Error.Code != "overloaded" || !strings.Contains(e.Error.Message, "max_concurrent 10") {
		t.Errorf("at 100 %%: %+v", e.Error)
	}
	if n := len(held.requests()); n != 10 {
		t.Errorf("the held upstream got %d requests, want 10", n)
	}

	// The status view: 10 of 10 in flight on the held target, in both chains.
	var st struct {
		Chains []struct {
			Alias   string `json:"alias"`
			Targets []struct {
				Upstream      string  `json:"upstream"`
				InFlight      int64   `json:"in_flight"`
				MaxConcurrent int64   `json:"max_concurrent"`
				Occupancy     float64 `json:"occupancy"`
			} `json:"targets"`
		} `json:"chains"`
	}
	if err := json.Unmarshal(getStatusRaw(t, adminStatusURL), &st); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, c := range st.Chains {
		if c.Alias == "cap-alone" || c.Alias == "cap-spill2" {
			seen++
			if tg := c.Targets[0]; tg.Upstream != "held" || tg.InFlight != 10 || tg.MaxConcurrent != 10 || tg.Occupancy != 1 {
				t.Errorf("%s: %+v, want 10 of 10 in flight", c.Alias, tg)
			}
		}
	}
	if seen != 2 {
		t.Errorf("status chains: %+v", st.Chains)
	}
	m := scrapeMetrics(t)
	for series, want := range map[string]float64{
		`llm_relay_capacity_events_total{alias="cap-spill2",event="spill",model="*",upstream="held"}`:  1,
		`llm_relay_capacity_events_total{alias="cap-alone",event="degrade",model="*",upstream="held"}`: 1,
		`llm_relay_capacity_events_total{alias="cap-alone",event="shed",model="*",upstream="held"}`:    1,
		`llm_relay_target_occupancy{alias="cap-alone",model="*",upstream="held"}`:                      1,
		`llm_relay_target_in_flight{alias="cap-alone",model="*",upstream="held"}`:                      10,
	} {
		if got := metricValue(t, m, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}

	// Streams count until their end: once they are over, room again.
	held.free()
	waitFor(t, 10*time.Second, "the held streams to end", func() bool {
		return strings.Contains(string(getStatusRaw(t, adminStatusURL)), `"max_concurrent": 10`) &&
			!strings.Contains(string(getStatusRaw(t, adminStatusURL)), `"in_flight": 1`)
	})
	resp = post(t, `{"model":"cap-alone","messages":[{"role":"user","content":"hi"}]}`)
	if body := readAll(t, resp); resp.StatusCode != 200 {
		t.Errorf("after the streams ended: %d %s", resp.StatusCode, body)
	}
}

// TestCapacityQueueAndDegradeEdit: a target's own max_concurrent, a
// degrade edit of the operator's, and queue_timeout: a request with no
// room waits for one and is served when a stream ends; an Anthropic
// client shed after the wait gets overloaded_error.
func TestCapacityQueueAndDegradeEdit(t *testing.T) {
	held := newHeldUpstream(t)
	startRelay(t, fmt.Sprintf(`llm_relay {
		upstream held %s
		model cap-queue {
			to held {
				max_concurrent 2
			}
		}
		capacity {
			spill_at 50%%
			degrade_at 50%%
			shed_at 100%%
			queue_timeout 700ms
			degrade {
				set max_tokens 64
				unset temperature
			}
		}
	}`, held.v1()))

	holdStreams(t, held, "cap-queue", 1)
	// 1 of 2 (50 %): degraded by the operator's edit.
	go func() {
		readAll(t, post(t, `{"model":"cap-queue","stream":true,"temperature":0.5,"messages":[{"role":"user","content":"hi"}]}`))
	}()
	waitFor(t, 5*time.Second, "2 in flight", func() bool { return len(held.requests()) == 2 })
	if b := held.requests()[1].body; b["max_tokens"] != float64(64) || b["temperature"] != nil {
		t.Errorf("degraded request: %v, want max_tokens 64 and no temperature", b)
	}

	// Full: an Anthropic client waits queue_timeout, then 503 overloaded_error.
	start := time.Now()
	resp := postPath(t, "/v1/messages", `{"model":"cap-queue","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
	body := readAll(t, resp)
	waited := time.Since(start)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `"overloaded_error"`) || resp.Header.Get("Retry-After") == "" {
		t.Errorf("full, Anthropic client: %d %s", resp.StatusCode, body)
	}
	if waited < 600*time.Millisecond {
		t.Errorf("shed after %v; want after the 700ms queue_timeout", waited)
	}

	// Full again: a request waits, and is served when a stream ends.
	type result struct {
		status int
		took   time.Duration
	}
	got := make(chan result)
	go func() {
		start := time.Now()
		resp := post(t, `{"model":"cap-queue","messages":[{"role":"user","content":"hi"}]}`)
		readAll(t, resp)
		got <- result{resp.StatusCode, time.Since(start)}
	}()
	time.Sleep(200 * time.Millisecond)
	held.free() // both streams end; the waiting request gets a slot
	r := <-got
	if r.status != 200 || r.took < 150*time.Millisecond {
		t.Errorf("queued request: %d after %v; want 200 after the streams ended (about 200ms)", r.status, r.took)
	}
	m := scrapeMetrics(t)
	if q := metricValue(t, m, `llm_relay_capacity_events_total{alias="cap-queue",event="queued",model="*",upstream="held"}`); q != 2 {
		t.Errorf("queued count %v, want 2", q)
	}
}

// TestCapacityAcrossReload: streams the old config serves keep counting
// after a reload: the new config's target is still full.
func TestCapacityAcrossReload(t *testing.T) {
	held := newHeldUpstream(t)
	cfg := func(extra string) string {
		return fmt.Sprintf(`llm_relay {
			upstream held %s {
				max_concurrent 2
			}
			model cap-reload {
				to held
			}
			%s
		}`, held.v1(), extra)
	}
	startRelay(t, cfg(""))
	holdStreams(t, held, "cap-reload", 2)
	startRelay(t, cfg("model other {\n\t\t\t\tto held\n\t\t\t}"))
	resp := post(t, `{"model":"cap-reload","messages":[{"role":"user","content":"hi"}]}`)
	if body := readAll(t, resp); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("after a reload, with the old config's 2 streams of 2 in flight: %d %s; want 503", resp.StatusCode, body)
	}
	held.free()
	waitFor(t, 10*time.Second, "room after the streams ended", func() bool {
		resp := post(t, `{"model":"cap-reload","messages":[{"role":"user","content":"hi"}]}`)
		readAll(t, resp)
		return resp.StatusCode == 200
	})
}
