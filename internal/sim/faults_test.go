package sim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"
)

const wantErrorEvent = `{"error":{"message":"simulated upstream error","type":"server_error","code":"simulated"}}`

func TestFaultStatus(t *testing.T) {
	s, ts := startServer(t, Config{Faults: []Fault{{Kind: FaultStatus, Status: 429, RetryAfter: "2"}}})
	resp := mustPost(t, ts, streamBody)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	var e apiError
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	if e.Error.Type != "rate_limit_error" || e.Error.Code != "rate_limit_exceeded" || e.Error.Message == "" {
		t.Errorf("error body %+v", e)
	}
	if s.Requests() != 1 {
		t.Errorf("Requests() = %d", s.Requests())
	}

	_, ts = startServer(t, Config{Faults: []Fault{{Kind: FaultStatus, Status: 503}}})
	resp = mustPost(t, ts, streamBody)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

func TestFaultStallEndsWhenClientCancels(t *testing.T) {
	_, ts := startServer(t, Config{Faults: []Fault{{Kind: FaultStall}}})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	resp, err := post(t, ctx, ts, streamBody)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("stall answered with status %d", resp.StatusCode)
	}
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Errorf("err %v after %v", err, time.Since(start))
	}
	// startServer's cleanup checks that the stalled handler returned.
}

func TestFaultStallEndsOnClose(t *testing.T) {
	s, ts := startServer(t, Config{Faults: []Fault{{Kind: FaultStall}}})
	errc := make(chan error, 1)
	go func() {
		resp, err := post(t, t.Context(), ts, streamBody)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	for s.Requests() == 0 {
		time.Sleep(time.Millisecond)
	}
	s.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Error("stalled request got a response after Close")
		}
	case <-time.After(time.Second):
		t.Fatal("stall did not end on Close")
	}
}

func TestFaultStallEndsOnShutdown(t *testing.T) {
	s, ts := startServer(t, Config{Faults: []Fault{{Kind: FaultStall}}})
	errc := make(chan error, 1)
	go func() {
		resp, err := post(t, t.Context(), ts, streamBody)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	for { // wait until the request is stalled and watching its server
		if _, ok := s.watched.Load(ts.Config); ok {
			break
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := ts.Config.Shutdown(ctx); err != nil {
		t.Fatalf("graceful shutdown waited for the stalled request: %v", err)
	}
	if err := <-errc; err == nil {
		t.Error("stalled request got a response")
	}
}

func TestFaultDrop(t *testing.T) {
	for _, after := range []int{0, 3} {
		cfg := Config{ReasoningPattern: fast, ContentPattern: fast, Faults: []Fault{{Kind: FaultDrop, After: after}}}
		_, ts := startServer(t, cfg)
		resp := mustPost(t, ts, streamBody)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		events, err := readEvents(resp.Body)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("after %d: read error %v, want unexpected EOF", after, err)
		}
		if len(events) != after {
			t.Errorf("after %d: got %d events before the drop", after, len(events))
		}
		for _, ev := range events {
			if ev.data == "[DONE]" {
				t.Error("[DONE] before drop")
			}
		}
	}

	_, ts := startServer(t, Config{Faults: []Fault{{Kind: FaultDrop}}})
	resp, err := post(t, t.Context(), ts, `{"model":"m"}`)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("non-stream drop answered %d", resp.StatusCode)
	}
}

func TestFaultError(t *testing.T) {
	cfg := Config{ReasoningPattern: fast, ContentPattern: fast, Faults: []Fault{{Kind: FaultError, After: 4}}}
	_, ts := startServer(t, cfg)
	events, err := readEvents(mustPost(t, ts, streamBody).Body)
	if err != nil {
		t.Fatalf("stream should end cleanly: %v", err)
	}
	if len(events) != 5 || events[4].data != wantErrorEvent {
		t.Fatalf("got %d events, last %q", len(events), events[len(events)-1].data)
	}
	r, _ := Texts(cfg)
	if c := decodeChunk(t, events[3].data); *c.Choices[0].Delta.ReasoningContent != r[2] {
		t.Errorf("event 4 is not the third reasoning delta: %s", events[3].data)
	}

	// After beyond the last delta: the error replaces the finish chunk.
	cfg = Config{ReasoningTokens: new(2), ContentTokens: new(2), ReasoningPattern: fast, ContentPattern: fast,
		Faults: []Fault{{Kind: FaultError, After: 1000}}}
	_, ts = startServer(t, cfg)
	events, err = readEvents(mustPost(t, ts, streamBody).Body)
	if err != nil || len(events) != 6 || events[5].data != wantErrorEvent {
		t.Fatalf("got %d events (%v)", len(events), err)
	}

	resp := mustPost(t, ts, `{"model":"m"}`)
	var e apiError
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != 500 || e.Error.Code != "simulated" {
		t.Errorf("non-stream error: %d %+v %v", resp.StatusCode, e, err)
	}
}

// outcomes sends n sequential non-streaming requests and returns their
// statuses.
func outcomes(t *testing.T, cfg Config, n int) []int {
	_, ts := startServer(t, cfg)
	var got []int
	for range n {
		resp := mustPost(t, ts, `{"model":"m"}`)
		io.Copy(io.Discard, resp.Body)
		got = append(got, resp.StatusCode)
	}
	return got
}

func TestFaultRateDeterministic(t *testing.T) {
	cfg := Config{Seed: 42, ReasoningTokens: new(1), ContentTokens: new(1),
		Faults: []Fault{{Kind: FaultStatus, Status: 503, Rate: 0.3}, {Kind: FaultStatus, Status: 429, Rate: 0.5}}}
	a, b := outcomes(t, cfg, 50), outcomes(t, cfg, 50)
	count := map[int]int{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, request %d: %d vs %d", i+1, a[i], b[i])
		}
		count[a[i]]++
	}
	t.Logf("seed 42 outcomes over 50 requests: %v", count)
	// 503 with p=0.3, 429 with p=0.7*0.5=0.35, 200 otherwise.
	if count[503] < 8 || count[503] > 22 || count[429] < 9 || count[429] > 25 || count[200] < 8 {
		t.Errorf("outcome counts %v out of 50", count)
	}
	cfg.Seed = 43
	c := outcomes(t, cfg, 50)
	same := 0
	for i := range a {
		if a[i] == c[i] {
			same++
		}
	}
	if same == len(a) {
		t.Error("seeds 42 and 43 gave the same outcomes")
	}
}

func TestPickFaultRate(t *testing.T) {
	s, err := New(Config{Faults: []Fault{{Kind: FaultStall, Rate: 0.3}}})
	if err != nil {
		t.Fatal(err)
	}
	hits := 0
	const n = 20000
	for i := range uint64(n) {
		if s.pickFault(i+1) != nil {
			hits++
		}
	}
	if p := float64(hits) / n; p < 0.28 || p > 0.32 {
		t.Errorf("rate 0.3 hit %.3f of requests", p)
	}
}

func TestFaultsInOrder(t *testing.T) {
	cfg := Config{Faults: []Fault{{Kind: FaultStatus, Status: 502}, {Kind: FaultStall}}}
	for _, st := range outcomes(t, cfg, 3) {
		if st != 502 {
			t.Errorf("status %d, want the first fault's 502", st)
		}
	}
}
