package llmrelay

import (
	"net/http"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
)

// BenchmarkObserveRequest is the metrics cost of one streamed request with
// two attempts: the per-request counters and histograms, and two attempt
// counters.
func BenchmarkObserveRequest(b *testing.B) {
	up := &upstreamRuntime{name: "sim"}
	t := &target{up: up}
	ok := &attemptResult{resp: &http.Response{StatusCode: 200}}
	bad := &attemptResult{}
	rl := &requestLog{start: time.Now(), alias: "chat", upstream: "sim", status: 200, attempts: 2,
		mode: "pace", smooth: &pace.Stats{}, ttfb: 300 * time.Millisecond}
	rl.smooth.EventsOut = 40
	b.ReportAllocs()
	for b.Loop() {
		observeAttempt(t, bad)
		observeAttempt(t, ok)
		observeRequest(rl)
	}
}
