package llmrelay

import (
	"go.uber.org/zap/zapcore"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/smoothness"
)

// smoothFields renders a stream's smoothness figures as one object of the
// request's log line: what the upstream sent against what the client got.
type smoothFields struct{ s *pace.Stats }

func (f smoothFields) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	s := f.s
	enc.AddInt("events_in", s.EventsIn)
	enc.AddInt("events_out", s.EventsOut)
	addDist(enc, "in_gap", s.InGap)
	addDist(enc, "out_gap", s.OutGap)
	enc.AddFloat64("in_rate_cv", round3(s.InRateCV))
	enc.AddFloat64("out_rate_cv", round3(s.OutRateCV))
	// The share of 100 ms windows in which the text grew: what a
	// person watching the stream notices.
	enc.AddFloat64("in_steady", round3(s.InSteady))
	enc.AddFloat64("out_steady", round3(s.OutSteady))
	enc.AddInt("stalls", s.Stalls)
	addDist(enc, "lag", s.Lag)
	enc.AddDuration("tail_flush", s.TailFlush)
	if s.HiddenRunes > 0 {
		enc.AddInt("hidden_reasoning_chars", s.HiddenRunes)
	}
	if c := s.Cluster; c.Known {
		// The share of the reasoning in the late half of its phase:
		// about 0.7-0.8 clustered, 0.5 even.
		enc.AddFloat64("reasoning_cluster_in", round3(c.In))
		enc.AddFloat64("reasoning_cluster_out", round3(c.Out))
	}
	return nil
}

func addDist(enc zapcore.ObjectEncoder, name string, d smoothness.Dist) {
	enc.AddDuration(name+"_p50", d.P50)
	enc.AddDuration(name+"_p99", d.P99)
	enc.AddDuration(name+"_max", d.Max)
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }
