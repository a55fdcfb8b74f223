package llmrelay_test

import (
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// kenobiAnswer answers a chat request with the same text, streamed or not
// as the request asks.
func kenobiAnswer(w http.ResponseWriter, stream bool) {
	if stream {
		streamEvents(w, 0, chunk("Hello there, "), chunk("general Kenobi."), "[DONE]")
		return
	}
	answerJSON(w, 200, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, general Kenobi."},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":6,"total_tokens":9}}`)
}

// answerAsAsked is a fake upstream handler answering kenobiAnswer, streamed
// when the recorded body asks for it.
func answerAsAsked(f **fakeUpstream) func(n int, w http.ResponseWriter, r *http.Request) {
	return func(n int, w http.ResponseWriter, r *http.Request) {
		stream, _ := (*f).requests()[n-1].body["stream"].(bool)
		kenobiAnswer(w, stream)
	}
}

// TestShadowCopiesEveryRequest: a 100% shadow gets one copy of each
// request, with the client's messages and the shadow's model; the client
// gets the primary's answer; the status counts the copies and compares
// the answers (identical here: similarity 1).
func TestShadowCopiesEveryRequest(t *testing.T) {
	var p, s *fakeUpstream
	p = newFakeUpstream(t, answerAsAsked(&p))
	s = newFakeUpstream(t, answerAsAsked(&s))
	startRelay(t, fmt.Sprintf(`llm_relay {
		upstream p %s
		upstream s %s {
			api_key sk-shadow
		}
		model chat {
			to p
			shadow s shadow-model 100 {
				max_concurrent 2
			}
		}
	}`, p.v1(), s.v1()))

	const n = 6
	for i := 0; i < n; i++ {
		stream := i%2 == 1
		body := fmt.Sprintf(`{"model":"chat","stream":%t,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"question %d"}]}`, stream, i)
		resp := post(t, body, "X-Region-Hint", "eu")
		got := readAll(t, resp)
		if resp.StatusCode != 200 || resp.Header.Get("X-Relay-Upstream") != "p" {
			t.Fatalf("request %d: status %d from %q: %s", i, resp.StatusCode, resp.Header.Get("X-Relay-Upstream"), got)
		}
		if stream {
			if d := sseDatas(got); len(d) != 3 || d[0] != chunk("Hello there, ") {
				t.Errorf("request %d: client stream %q", i, d)
			}
		}
		// One at a time: each copy is settled before the next request, so
		// max_concurrent never drops one.
		waitFor(t, 5*time.Second, "the shadow copy", func() bool {
			doc := getRelayStatus(t)
			return len(doc.Shadows) == 1 && doc.Shadows[0].Stats.OK+doc.Shadows[0].Stats.Failed == int64(i+1)
		})
	}

	preqs, sreqs := p.requests(), s.requests()
	if len(preqs) != n || len(sreqs) != n {
		t.Fatalf("primary got %d, shadow %d requests; want %d each", len(preqs), len(sreqs), n)
	}
	for i := range sreqs {
		pr, sr := preqs[i], sreqs[i]
		if sr.body["model"] != "shadow-model" || pr.body["model"] != "chat" {
			t.Errorf("copy %d: shadow got model %v, primary %v", i, sr.body["model"], pr.body["model"])
		}
		if !reflect.DeepEqual(sr.body["messages"], pr.body["messages"]) || !reflect.DeepEqual(sr.body["stream"], pr.body["stream"]) {
			t.Errorf("copy %d: shadow body %v differs from primary body %v", i, sr.body, pr.body)
		}
		if sr.path != "/v1/chat/completions" || sr.header.Get("Authorization") != "Bearer sk-shadow" {
			t.Errorf("copy %d: path %s Authorization %q", i, sr.path, sr.header.Get("Authorization"))
		}
		if v := sr.header.Values("X-Region-Hint"); len(v) > 0 {
			t.Errorf("copy %d carried X-Region-Hint %q", i, v)
		}
	}
	sh := getRelayStatus(t).Shadows[0]
	st := sh.Stats
	if sh.Alias != "chat" || sh.Upstream != "s" || sh.Model != "shadow-model" || sh.Percent != 100 {
		t.Errorf("shadow: %+v", sh)
	}
	if st.Sent != n || st.OK != n || st.Failed != 0 || st.Dropped != 0 || st.Running != 0 || st.MaxConcurrent != 2 {
		t.Errorf("shadow stats %+v; want %d sent and ok, none failed, dropped or running", st, n)
	}
	if st.Compared != n || st.MeanSimilarity != 1 || st.MeanLengthRat != 1 {
		t.Errorf("shadow comparison: %d compared, similarity %v, length ratio %v; want %d, 1, 1", st.Compared, st.MeanSimilarity, st.MeanLengthRat, n)
	}
}

// TestShadowOverloadNeverDelaysClients: a shadow that hangs holds its
// max_concurrent slots; further copies are dropped, never queued, and the
// clients are answered at once.
func TestShadowOverloadNeverDelaysClients(t *testing.T) {
	release := make(chan struct{})
	var inFlight, maxInFlight atomic.Int64
	p := newFakeUpstream(t, okHandler)
	s := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		cur := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if cur <= m || maxInFlight.CompareAndSwap(m, cur) {
				break
			}
		}
		select {
		case <-release:
		case <-r.Context().Done():
		case <-time.After(30 * time.Second): // bound, should the test fail before releasing
		}
		answerJSON(w, 200, okCompletion)
	})
	var once sync.Once
	releaseAll := func() { once.Do(func() { close(release) }) }
	t.Cleanup(releaseAll) // runs before the fake servers close
	startRelay(t, fmt.Sprintf(`llm_relay {
		upstream p %s
		upstream s %s
		model chat {
			to p
			shadow s 100 {
				max_concurrent 2
			}
		}
	}`, p.v1(), s.v1()))

	const n = 10
	start := time.Now()
	for i := 0; i < n; i++ {
		t0 := time.Now()
		resp := post(t, chatBody)
		body := readAll(t, resp)
		if resp.StatusCode != 200 || body != okCompletion {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
		if took := time.Since(t0); took > 2*time.Second {
			t.Errorf("request %d took %s with the shadow hanging", i, took)
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("%d requests took %s with the shadow hanging", n, took)
	}
	waitFor(t, 5*time.Second, "two copies at the shadow", func() bool { return inFlight.Load() == 2 })
	st := getRelayStatus(t).Shadows[0].Stats
	if st.Sent != 2 || st.Dropped != n-2 || st.Running != 2 {
		t.Errorf("while hanging: %+v; want 2 sent and running, %d dropped", st, n-2)
	}
	if m := maxInFlight.Load(); m > 2 {
		t.Errorf("the shadow had %d copies in flight; max_concurrent is 2", m)
	}

	releaseAll()
	waitFor(t, 5*time.Second, "the released copies to finish", func() bool {
		st := getRelayStatus(t).Shadows[0].Stats
		return st.Running == 0 && st.OK == 2
	})
	// Slots are free again: the next copy is sent.
	servedBy(t, chatBody)
	waitFor(t, 5*time.Second, "a new copy", func() bool { return len(s.requests()) == 3 })
	if got := len(s.requests()); got != 3 {
		t.Errorf("shadow got %d requests", got)
	}
	if d := getRelayStatus(t).Shadows[0].Stats.Dropped; d != n-2 {
		t.Errorf("dropped %d after the release, want still %d", d, n-2)
	}
}
