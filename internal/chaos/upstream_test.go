package chaos

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// hit sends one request for behaviour b straight to the upstream (no
// relay) and classifies the answer with short client deadlines.
func hit(t *testing.T, srv *httptest.Server, b Behaviour, stream bool, lim Limits) (*Observation, Result) {
	t.Helper()
	path := "/v1/chat/completions"
	if b == Responses {
		path = "/v1/responses"
	}
	body := `{"model":"` + string(b) + `","stream":` + map[bool]string{true: "true", false: "false"}[stream] + `}`
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	o := Do(context.Background(), client, req, stream, lim)
	o.Responses = b == Responses
	return o, Classify(o)
}

var testLimits = Limits{FirstByte: 2 * time.Second, Idle: 300 * time.Millisecond, Total: 5 * time.Second, MaxBody: 1 << 20}

// TestUpstreamBehaviours: each behaviour, seen without a relay in
// between, is what it claims to be; the client deadlines catch the stalls.
func TestUpstreamBehaviours(t *testing.T) {
	start := time.Unix(1000, 0)
	up := NewUpstream(UpstreamParams{MaxStall: 10 * time.Second, RetryAfter: 7, StormPeriod: 4 * time.Second,
		Start: start, Now: func() time.Time { return start.Add(time.Second) }}) // inside a storm
	srv := httptest.NewServer(up)
	defer srv.Close()
	defer up.Close()

	tests := []struct {
		b      Behaviour
		stream bool
		want   Class
	}{
		{Healthy, true, Complete},
		{Healthy, false, Complete},
		{StallFirst, true, Hang},
		{StallFirst, false, Hang},
		{StallAfter, true, Hang},
		{StallAfter, false, Hang},
		{CROnly, true, Truncation},
		{CROnly, false, Complete},
		{CRTail, true, Abort},
		{NonSSE, true, Truncation},
		{NonSSE, false, Complete},
		{Redirect, true, Malformed},
		{Garbage, false, Abort},
		{Drop, true, Abort},
		{Drop, false, Abort},
		{EOFNoDone, true, Truncation},
		{RateLimited, false, ExplicitError},
		{Storm503, true, ExplicitError},
		{Responses, true, Complete},
		{Responses, false, Complete},
		{"no-such-behaviour", false, ExplicitError},
	}
	for _, tt := range tests {
		t.Run(string(tt.b)+"/"+mode(tt.stream), func(t *testing.T) {
			o, r := hit(t, srv, tt.b, tt.stream, testLimits)
			if r.Class != tt.want {
				t.Fatalf("got %v (%s), want %v; status %d, err %q", r.Class, r.Detail, tt.want, o.Status, o.ErrText)
			}
			switch tt.b {
			case Redirect:
				if o.Location != RedirectLocation {
					t.Errorf("Location %q", o.Location)
				}
			case RateLimited:
				if o.Status != 429 || o.RetryAfter != "7" {
					t.Errorf("status %d Retry-After %q", o.Status, o.RetryAfter)
				}
			case Garbage:
				if !o.PreResponseErr {
					t.Errorf("garbage: want a failure before any response")
				}
			}
		})
	}
	if n := up.Counts()[Healthy]; n != 2 {
		t.Errorf("Counts()[healthy] = %d, want 2", n)
	}
}

func mode(stream bool) string {
	if stream {
		return "stream"
	}
	return "non-stream"
}

// TestStallIsBounded: with nobody cancelling, a stall still ends at
// MaxStall (here the body then breaks: half of its Content-Length).
func TestStallIsBounded(t *testing.T) {
	up := NewUpstream(UpstreamParams{MaxStall: 100 * time.Millisecond})
	srv := httptest.NewServer(up)
	defer srv.Close()
	lim := testLimits
	lim.Idle = 3 * time.Second
	start := time.Now()
	_, r := hit(t, srv, StallAfter, false, lim)
	if r.Class != Abort {
		t.Fatalf("got %v (%s), want abort after MaxStall", r.Class, r.Detail)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %s, MaxStall is 100ms", d)
	}
}

// TestCloseEndsStalls: Close releases a running stall at once.
func TestCloseEndsStalls(t *testing.T) {
	up := NewUpstream(UpstreamParams{MaxStall: time.Minute})
	srv := httptest.NewServer(up)
	defer srv.Close()
	time.AfterFunc(100*time.Millisecond, up.Close)
	lim := testLimits
	lim.Idle = 3 * time.Second
	start := time.Now()
	_, r := hit(t, srv, StallFirst, true, lim)
	if r.Class != Truncation { // the stream ends cleanly after its comment
		t.Fatalf("got %v (%s)", r.Class, r.Detail)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %s after Close", d)
	}
}

// TestHeartbeatsDoNotCountAsActivity: a stream that sends only comments
// after its first event hangs by the client's idle deadline.
func TestHeartbeatsDoNotCountAsActivity(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {}\n\n"))
		for range 50 {
			_, _ = w.Write([]byte(": keep-alive\n\n"))
			_ = http.NewResponseController(w).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
	start := time.Now()
	o := Do(context.Background(), srv.Client(), req, true, Limits{FirstByte: time.Second, Idle: 200 * time.Millisecond, Total: 5 * time.Second, MaxBody: 1024})
	if r := Classify(o); r.Class != Hang {
		t.Fatalf("got %v (%s), want a hang despite heartbeats", r.Class, r.Detail)
	}
	if d := time.Since(start); d > 900*time.Millisecond {
		t.Fatalf("hang found after %s; idle deadline 200ms", d)
	}
}

func TestStormActive(t *testing.T) {
	start := time.Unix(0, 0)
	for _, tt := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {1999 * time.Millisecond, true}, {2 * time.Second, false}, {3999 * time.Millisecond, false}, {4 * time.Second, true}} {
		if got := StormActive(start.Add(tt.at), start, 4*time.Second); got != tt.want {
			t.Errorf("at %s: %v, want %v", tt.at, got, tt.want)
		}
	}
	if StormActive(start, start, 0) {
		t.Error("a zero period has no storm")
	}
}

func TestGarbageBytes(t *testing.T) {
	a, b := GarbageBytes(7, 64), GarbageBytes(7, 64)
	if !bytes.Equal(a, b) || len(a) != 64 || a[0] == 'H' {
		t.Fatalf("garbage not deterministic or looks like HTTP: %q", a)
	}
	if bytes.Equal(a, GarbageBytes(8, 64)) {
		t.Fatal("the seed does not change the garbage")
	}
}

func TestParseVmRSS(t *testing.T) {
	status := "Name:\trelaychaos\nVmPeak:\t 100 kB\nVmRSS:\t   57344 kB\nThreads:\t9\n"
	kib, err := ParseVmRSS(bufio.NewScanner(strings.NewReader(status)))
	if err != nil || kib != 57344 {
		t.Fatalf("got %d, %v", kib, err)
	}
	if _, err := ParseVmRSS(bufio.NewScanner(strings.NewReader("Name: x\n"))); err == nil {
		t.Fatal("no VmRSS line: want an error")
	}
	if _, err := ParseVmRSS(bufio.NewScanner(strings.NewReader("VmRSS: 12 MB\n"))); err == nil {
		t.Fatal("unexpected unit: want an error")
	}
	if s := Measure(); s.Goroutines < 1 {
		t.Fatalf("Measure: %+v", s)
	}
}

func TestLeaks(t *testing.T) {
	m := Margins{Goroutines: 10, FDs: 5, RSSRatio: 2}
	base := Snapshot{Goroutines: 20, FDs: 10, RSSKiB: 50000}
	if l := Leaks(base, Snapshot{Goroutines: 30, FDs: 15, RSSKiB: 100000}, m); l != nil {
		t.Fatalf("within margins: %v", l)
	}
	l := Leaks(base, Snapshot{Goroutines: 31, FDs: 16, RSSKiB: 100001}, m)
	if len(l) != 3 {
		t.Fatalf("want goroutines, fds and RSS reported, got %v", l)
	}
	if l := Leaks(Snapshot{Goroutines: 1, FDs: -1, RSSKiB: -1}, Snapshot{Goroutines: 1, FDs: 100, RSSKiB: 1 << 30}, m); l != nil {
		t.Fatalf("unknown baseline fds/RSS must not count: %v", l)
	}
}
