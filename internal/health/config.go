package health

import (
	"fmt"
	"time"
)

// Defaults applied by [SLO.WithDefaults] and [Policy.WithDefaults].
const (
	DefaultWindow          = 50               // SLO.Window and NewTarget's window
	DefaultMinSamples      = 10               // SLO.MinSamples
	DefaultMaxAge          = 10 * time.Minute // SLO.MaxAge
	DefaultFailuresToEject = 3                // Policy.FailuresToEject
	DefaultBaseCooldown    = 10 * time.Second // Policy.BaseCooldown
	DefaultMaxCooldown     = 5 * time.Minute  // Policy.MaxCooldown
	MinTrialTimeout        = 60 * time.Second // lower bound of the default Policy.TrialTimeout
)

// SLO is a tier's service level: a target whose window breaks it is
// [Degraded]. The zero value judges nothing (a target is then only ever
// Healthy, Ejected or HalfOpen).
type SLO struct {
	// TTFT bounds the window's p90 time to first token, over its successful
	// samples that have a TTFT: the target breaks the SLO when that p90 is
	// above TTFT. 0 = not judged.
	TTFT time.Duration
	// Success bounds the window's success ratio: the target breaks the SLO
	// when the ratio is below Success, and is ejected when it falls below
	// Success/2. 0 = not judged.
	Success float64
	// Window is how many of the most recent samples are judged (default
	// 50), at most the window the Target was made with.
	Window int
	// MinSamples: below this many counted samples the SLO is not judged
	// (default 10).
	MinSamples int
	// MaxAge: samples older than this (relative to the time of the
	// question) do not count (default 10 minutes; negative = no limit).
	MaxAge time.Duration
}

// WithDefaults returns s with its zero fields set to their defaults.
func (s SLO) WithDefaults() SLO {
	if s.Window <= 0 {
		s.Window = DefaultWindow
	}
	if s.MinSamples <= 0 {
		s.MinSamples = DefaultMinSamples
	}
	if s.MaxAge == 0 {
		s.MaxAge = DefaultMaxAge
	}
	return s
}

// Policy governs ejection.
type Policy struct {
	// FailuresToEject consecutive failures eject a target (default 3;
	// negative = never on consecutive failures).
	FailuresToEject int
	// BaseCooldown is the first cooldown (default 10 s); it doubles for
	// each failed trial.
	BaseCooldown time.Duration
	// MaxCooldown caps the cooldown (default 5 min; at least BaseCooldown).
	MaxCooldown time.Duration
	// TrialTimeout: a half-open trial claimed by [Target.ClaimTrial] with
	// no Record (or probe) after this long is taken as abandoned, and the
	// trial may be claimed again (default max(60 s, 2×BaseCooldown)).
	TrialTimeout time.Duration
}

// WithDefaults returns p with its zero fields set to their defaults.
func (p Policy) WithDefaults() Policy {
	if p.FailuresToEject == 0 {
		p.FailuresToEject = DefaultFailuresToEject
	}
	if p.BaseCooldown <= 0 {
		p.BaseCooldown = DefaultBaseCooldown
	}
	if p.MaxCooldown <= 0 {
		p.MaxCooldown = DefaultMaxCooldown
	}
	if p.MaxCooldown < p.BaseCooldown {
		p.MaxCooldown = p.BaseCooldown
	}
	if p.TrialTimeout <= 0 {
		p.TrialTimeout = max(MinTrialTimeout, 2*p.BaseCooldown)
	}
	return p
}

// Status is a target's health as seen at one instant.
type Status uint8

const (
	// Healthy targets are tried first, by rank.
	Healthy Status = iota
	// Degraded targets break their SLO: tried after every usable target.
	Degraded
	// Ejected targets are cooling down: tried last.
	Ejected
	// HalfOpen targets have ended their cooldown: one trial request may go
	// (see [Target.ClaimTrial]). [Order] counts them as usable.
	HalfOpen
)

// String returns "healthy", "degraded", "ejected" or "half-open".
func (s Status) String() string {
	switch s {
	case Healthy:
		return "healthy"
	case Degraded:
		return "degraded"
	case Ejected:
		return "ejected"
	case HalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// MarshalText encodes the status as its String.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Usable reports whether s is Healthy or HalfOpen.
func (s Status) Usable() bool { return s == Healthy || s == HalfOpen }

// Duration is a time.Duration that encodes (JSON, text) as a string such as
// "850ms" or "1.2s": rounded to the millisecond, or to the microsecond
// below one millisecond. It decodes any time.ParseDuration string.
type Duration time.Duration

// String formats d rounded as described on [Duration].
func (d Duration) String() string { return fmtDur(time.Duration(d)) }

// MarshalText encodes d as its String.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText decodes a time.ParseDuration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// fmtDur rounds d to the millisecond (microsecond below 1 ms) for humans.
func fmtDur(d time.Duration) string {
	a := d
	if a < 0 {
		a = -a
	}
	if a >= time.Millisecond {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Microsecond).String()
}
