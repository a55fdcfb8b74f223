package llmrelay_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// connCounter is an httptest upstream that counts the connections it
// accepted and how many are open.
type connCounter struct {
	*httptest.Server
	mu       sync.Mutex
	accepted int
	open     map[net.Conn]bool
}

func newConnCounter(t *testing.T, h http.HandlerFunc) *connCounter {
	t.Helper()
	c := &connCounter{open: map[net.Conn]bool{}}
	c.Server = httptest.NewUnstartedServer(h)
	c.Config.ConnState = func(conn net.Conn, st http.ConnState) {
		c.mu.Lock()
		defer c.mu.Unlock()
		switch st {
		case http.StateNew:
			c.accepted++
			c.open[conn] = true
		case http.StateClosed, http.StateHijacked:
			delete(c.open, conn)
		}
	}
	c.Start()
	t.Cleanup(c.Close)
	return c
}

func (c *connCounter) counts() (accepted, open int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.accepted, len(c.open)
}

// shadowGoroutines counts the goroutines running a shadow copy.
func shadowGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return bytes.Count(buf, []byte("(*Relay).startShadow"))
}

const shadowRelay = `llm_relay {
		upstream p %s
		upstream s %s
		model chat {
			to p
			shadow s 100
		}
		%s
	}`

// TestShadowCancelledWhenConfigUnloaded: a shadow copy to a slow target
// belongs to its config: when a reload replaces the config, the copy is
// cancelled (the shadow target sees its request context end) and its
// goroutine ends, instead of living on for up to 5 minutes.
func TestShadowCancelledWhenConfigUnloaded(t *testing.T) {
	p := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) { kenobiAnswer(w, false) })
	var cancelled atomic.Bool
	release := make(chan struct{})
	defer close(release)
	s := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			cancelled.Store(true)
		case <-release:
		}
	})
	base := shadowGoroutines()
	startRelay(t, fmt.Sprintf(shadowRelay, p.v1(), s.v1(), ""))
	resp := post(t, `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`)
	if got := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
	waitFor(t, 5*time.Second, "the shadow copy to reach s", func() bool { return len(s.requests()) == 1 })
	if n := shadowGoroutines(); n != base+1 {
		t.Fatalf("%d shadow goroutines while the copy runs, want %d", n, base+1)
	}

	startRelay(t, fmt.Sprintf(shadowRelay, p.v1(), s.v1(), "max_body 1MiB")) // a reload
	waitFor(t, 5*time.Second, "s to see the copy cancelled", cancelled.Load)
	waitFor(t, 5*time.Second, "the shadow goroutine to end", func() bool { return shadowGoroutines() == base })
}

// TestReloadClosesIdleUpstreamConnections: after a reload the replaced
// config's idle connections to its upstreams are closed at once, and the
// connections its in-flight requests still use keep working until those
// requests end, then are closed too, not left idle for the transport's 2
// minutes. The hard case: a request of the old config that fails over
// after the reload dials anew on the old transport, which undoes the
// transport's "close newly idle connections" of the cleanup.
func TestReloadClosesIdleUpstreamConnections(t *testing.T) {
	reloaded := make(chan struct{})
	var slow atomic.Int32
	up := newConnCounter(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Header.Get("X-Test") == "slow" && slow.Add(1) == 1 {
			<-reloaded // held across the reload, then a failure: the relay fails over
			answerJSON(w, 503, `{"error":{"message":"busy"}}`)
			return
		}
		streamEvents(w, 50*time.Millisecond, chunk("a"), chunk("b"), "[DONE]")
	})
	cfg := `llm_relay {
		upstream u %s
		model m {
			to u
		}
		failover {
			attempts 2
			backoff 1ms 1ms
		}
		%s
	}`
	startRelay(t, fmt.Sprintf(cfg, up.URL+"/v1", ""))
	const body = `{"model":"m","stream":true,"messages":[]}`
	done := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, relayBase+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("X-Test", "slow")
		resp, err := httpClient.Do(req)
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- string(b)
	}()
	waitFor(t, 5*time.Second, "the slow request to reach the upstream", func() bool { return slow.Load() == 1 })
	readAll(t, post(t, body)) // meanwhile, a second connection, left idle
	if _, o := up.counts(); o != 2 {
		t.Fatalf("%d upstream connections open, want 2 (one held, one idle)", o)
	}

	startRelay(t, fmt.Sprintf(cfg, up.URL+"/v1", "max_body 1MiB")) // a reload
	waitFor(t, 5*time.Second, "the idle connection to close", func() bool { _, o := up.counts(); return o == 1 })
	close(reloaded)
	got := <-done
	if !strings.Contains(got, "data: [DONE]") || strings.Count(got, "chat.completion.chunk") != 2 {
		t.Fatalf("the request in flight across the reload broke: %q", got)
	}
	waitFor(t, 5*time.Second, "the old config's connections to close after its last request", func() bool {
		_, o := up.counts()
		return o == 0
	})
}
