package sim

import (
	"testing"
	"time"
)

// streamTimes streams cfg and returns when the request was sent and the
// arrival times of the token deltas (events between the role chunk and
// the finish chunk).
func streamTimes(t *testing.T, cfg Config) (sent time.Time, at []time.Time) {
	t.Helper()
	_, ts := startServer(t, cfg)
	sent = time.Now()
	events, err := readEvents(mustPost(t, ts, streamBody).Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events[1 : len(events)-2] {
		at = append(at, ev.at)
	}
	return sent, at
}

func TestClusteredPattern(t *testing.T) {
	p := Pattern{Kind: Clustered, Burst: 20, Pause: 50 * time.Millisecond, BurstSpread: 2 * time.Millisecond}
	_, at := streamTimes(t, Config{ReasoningTokens: new(60), ContentTokens: new(0), ReasoningPattern: p})
	long, short := 0, 0
	for i := 1; i < len(at); i++ {
		switch gap := at[i].Sub(at[i-1]); {
		case gap >= 40*time.Millisecond:
			long++
		case gap < 10*time.Millisecond:
			short++
		}
	}
	// 3 bursts: 2 pauses and 57 gaps within bursts. Loose bounds for a
	// loaded machine.
	if long < 1 || long > 4 || short < 45 {
		t.Errorf("%d long gaps, %d short gaps of %d", long, short, len(at)-1)
	}
}

func TestSteadyPattern(t *testing.T) {
	p := Pattern{Kind: Steady, Rate: 200} // 5ms per token
	sent, at := streamTimes(t, Config{ReasoningTokens: new(10), ContentTokens: new(10), ReasoningPattern: p, ContentPattern: p})
	// The server cannot send the last token before 20 intervals have
	// passed; client-side arrival times of earlier tokens are too noisy
	// on a loaded machine to bound more tightly.
	if d := at[len(at)-1].Sub(sent); d < 100*time.Millisecond || d > time.Second {
		t.Errorf("20 tokens at 200/s took %v, want about 100ms", d)
	}
}

func TestTTFB(t *testing.T) {
	_, ts := startServer(t, Config{TTFB: 60 * time.Millisecond, ContentPattern: fast, ReasoningPattern: fast})
	start := time.Now()
	resp := mustPost(t, ts, streamBody)
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Errorf("headers after %v, want >= 60ms", d)
	}
	resp.Body.Close()
}

func TestCancelDuringPacedStream(t *testing.T) {
	slow := Pattern{Kind: Steady, Rate: 5}
	_, ts := startServer(t, Config{ReasoningPattern: slow, ContentPattern: slow})
	resp := mustPost(t, ts, streamBody)
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil { // role chunk
		t.Fatal(err)
	}
	resp.Body.Close() // client goes away mid-stream
	// startServer's cleanup checks that the handler returned promptly.
}
