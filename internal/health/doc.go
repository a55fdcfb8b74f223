// Package health keeps the passive and active health of upstream targets
// (one step of a model's failover chain: an upstream plus a model) and
// orders a request's chain by it.
//
// The relay calls [Target.Record] after every attempt and [Target.Probe]
// after every active health check, and asks [Order] in which order to try
// a request's chain. Everything takes explicit times (no clock inside), so
// tests run on made-up timelines. A [Target] is safe for concurrent use:
// one mutex each, held for well under a microsecond.
//
// # States
//
//   - [Healthy]: usable, meets its SLO (or the SLO is not judged yet).
//   - [Degraded]: usable but its window breaks the tier's [SLO]; tried
//     after every usable target. Computed from the window on every read,
//     so it ends as soon as the window meets the SLO again. [Target.Flag]
//     also makes a target Degraded for a reason judged outside the window
//     (the relay's reasoning health), until the caller clears it.
//   - [Ejected]: [Policy.FailuresToEject] consecutive failures (attempts
//     or probes), or a success ratio below half of SLO.Success over the
//     window: cooling down for [Policy.BaseCooldown].
//   - [HalfOpen]: the cooldown is over; [Target.ClaimTrial] admits one
//     trial request. Its success (or a good probe) makes the target
//     healthy again and resets the cooldown; its failure ejects it again
//     for twice the previous cooldown, up to [Policy.MaxCooldown].
//
// # Decisions
//
//   - The SLO judges the p90 of time to first token (nearest rank, over
//     the successful samples with a TTFT), not p99: a 50-sample window
//     makes p99 just its maximum, one outlier.
//   - Samples older than [SLO.MaxAge] (default 10 minutes) do not count,
//     so a target that stopped getting traffic while degraded (because it
//     was degraded) is not kept degraded forever by a stale window: once
//     fewer than MinSamples recent samples remain, it is not judged.
//   - Samples are not cleared on ejection or recovery: a recovered target
//     whose window still breaks the SLO is Degraded until good samples
//     replace the bad ones or these age out.
//   - Degraded has no hysteresis (it is computed from the window under
//     the asking tier's SLO, so one Target may serve tiers with different
//     SLOs): a window sitting right at the bound may flip at consecutive
//     samples, each flip a [Change].
//   - Latency is an EWMA (alpha 0.2) of the TTFT of successful attempts and
//     the RTT of good probes. In [Order], a pool member of unknown latency
//     counts as the mean of the pool's known latencies (0 if none is
//     known), so a new member competes on equal terms instead of being
//     starved or flooded.
//   - A region hint ([HintAuto] or a region code) reorders only within a
//     tier (a pool, or one model's regions at adjacent ranks; see
//     [Order] and [Tiers]), never across ranks: a client's hint must not
//     put a cheaper model ahead of the one the operator ranked first.
//     Keeping to one region ([Hint.Strict]) is the caller's: it leaves
//     the other regions' targets out of the candidates.
//
// The package has no Caddy imports.
package health
