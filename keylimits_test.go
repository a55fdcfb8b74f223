package llmrelay

import (
	"net/http"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/ratelimit"
)

// headerSink is a ResponseWriter that keeps only headers.
type headerSink http.Header

func (h headerSink) Header() http.Header       { return http.Header(h) }
func (headerSink) Write(b []byte) (int, error) { return len(b), nil }
func (headerSink) WriteHeader(int)             {}

// BenchmarkKeyLimits: what a key with rpm and tpm adds to a request: both
// takes, their headers, and the tokens settled at the end (the issue's
// bound: 1 µs).
func BenchmarkKeyLimits(b *testing.B) {
	t0 := time.Now()
	kl := &keyLimits{requests: ratelimit.NewBucket(1_000_000_000, t0), tokens: ratelimit.NewBucket(1_000_000_000, t0)}
	w := headerSink(http.Header{})
	for b.Loop() {
		now := time.Now()
		if kl.takeRequest(w, "team", now) != nil || kl.takeTokens(w, "team", 100, now) != nil {
			b.Fatal("refused")
		}
		kl.settleTokens(100, 120, now)
	}
}
