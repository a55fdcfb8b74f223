package reasoninghealth

import (
	"testing"
	"time"
)

// FuzzTracker drives a tracker with arbitrary samples and configs: it
// never panics, keeps its efforts bounded, and says why whenever it is
// degraded.
func FuzzTracker(f *testing.F) {
	f.Add([]byte{10, 200, 3, 1, 0, 50, 90, 2, 4})
	f.Add([]byte{255, 0, 255, 0, 7, 7, 7, 7, 7, 7, 7})
	f.Fuzz(func(t *testing.T, b []byte) {
		tr := NewTracker()
		efforts := []string{"", "low", "high", "x"}
		for i := 0; i+2 < len(b); i += 3 {
			c := Config{Floor: float64(b[i]%11) / 10, ClusterRate: float64(b[i+1]%11) / 10}
			s := Sample{At: time.Unix(int64(i), 0), Effort: efforts[int(b[i+2])%len(efforts)],
				Reasoning: int(b[i+1]) * int(b[i+2]), Cluster: float64(b[i]) / 255, ClusterKnown: b[i]&1 == 1}
			ch := tr.Add(s, c)
			d, sig, why := tr.Degraded()
			if (why != "") != d || (sig != "") != d {
				t.Fatalf("degraded %v with signal %q reason %q", d, sig, why)
			}
			if ch != nil && ch.Degraded != d {
				t.Fatalf("change %+v but Degraded() = %v", ch, d)
			}
		}
		s := tr.Snapshot()
		if len(s.Efforts) > maxEfforts {
			t.Fatalf("%d efforts", len(s.Efforts))
		}
		for _, e := range s.Efforts {
			if e.BaselineTokens < 0 || e.RecentSamples > RecentWindow || e.RecentEarlyStops > e.RecentSamples {
				t.Fatalf("effort %+v", e)
			}
		}
	})
}
