package health

import (
	"fmt"
	"time"
)

// Snapshot is a target's health at one instant, ready for JSON: durations
// are [Duration] strings ("850ms", "1.2s"); zero durations and times are
// omitted.
type Snapshot struct {
	Name   string `json:"name"`
	Status string `json:"status"` // Status.String()
	// Samples counted by the SLO: the last SLO.Window not older than
	// SLO.MaxAge.
	Samples int `json:"samples"`
	// SuccessRatio of the counted samples; 0 when Samples is 0.
	SuccessRatio float64 `json:"success_ratio"`
	// TTFTP50 and TTFTP90 over the counted successful samples with a TTFT
	// (nearest rank).
	TTFTP50     Duration `json:"ttft_p50,omitzero"`
	TTFTP90     Duration `json:"ttft_p90,omitzero"`
	LatencyEWMA Duration `json:"latency_ewma,omitzero"` // Target.Latency
	// ProbeRTT is the last good health probe's round trip (targets of an
	// upstream with a health_check).
	ProbeRTT            Duration `json:"probe_rtt,omitzero"`
	ConsecutiveFailures int      `json:"consecutive_failures"`
	Ejections           int      `json:"ejections"` // so far, failed trials included
	// CooldownUntil is the end of the current cooldown (Ejected, HalfOpen).
	CooldownUntil time.Time `json:"cooldown_until,omitzero"`
	// Cooldown is the current cooldown's length (Ejected, HalfOpen).
	Cooldown Duration `json:"cooldown,omitzero"`
	// Since is when the status last changed (as reported by Record, Probe
	// or Check; a cooldown's end if nobody reported it yet); omitted when
	// the target has been Healthy since it was made.
	Since time.Time `json:"since,omitzero"`
	// Reason says why the status is not Healthy: "3 consecutive failures",
	// "ttft p90 1.2s > slo 800ms", "success 0.62 < slo 0.90".
	Reason string `json:"reason,omitempty"`
}

// Snapshot returns the target's health at now under slo.
func (t *Target) Snapshot(now time.Time, slo SLO) Snapshot {
	slo = slo.WithDefaults()
	t.mu.Lock()
	defer t.mu.Unlock()

	st := t.statusLocked(now, slo)
	w := t.window(now, slo, true)
	p50, p90 := t.percentiles(w.ttfts)
	s := Snapshot{
		Name:                t.name,
		Status:              st.String(),
		Samples:             w.n,
		SuccessRatio:        w.ratio(),
		TTFTP50:             Duration(p50),
		TTFTP90:             Duration(p90),
		LatencyEWMA:         Duration(t.ewma),
		ProbeRTT:            Duration(t.probeRTT),
		ConsecutiveFailures: t.consec,
		Ejections:           t.ejections,
		Since:               t.since,
	}
	if st != t.reported {
		s.Since = t.observedSince(st, now)
	}
	if t.ejected {
		s.CooldownUntil = t.until
		s.Cooldown = Duration(t.cooldown)
	}
	switch st {
	case Degraded:
		s.Reason = t.breakReason(now, slo)
	case Ejected:
		s.Reason = t.ejectReason
	case HalfOpen:
		s.Reason = fmt.Sprintf("cooldown %s over (ejected: %s)", fmtDur(t.cooldown), t.ejectReason)
	}
	return s
}
