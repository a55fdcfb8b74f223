package llmrelay

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmrelay/caddy-llm-relay/internal/health"
)

// The relay's Prometheus metrics. They are process-wide, so counts carry
// over config reloads, and registered into each config's registry (Caddy
// makes one per load and serves it on the admin /metrics). Every label
// value comes from the config (aliases, upstream names, key names, fixed
// outcome words), never from a client's model name or a key token, so the
// series stay bounded.
var (
	metricRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llm_relay", Name: "requests_total",
		Help: "Requests to relay, by model alias (\"none\" if rejected before routing), the upstream that answered (\"none\" if none) and outcome. The model list (GET /v1/models) is not counted.",
	}, []string{"alias", "upstream", "outcome"})
	metricAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llm_relay", Name: "attempts_total",
		Help: "Upstream attempts, by upstream and result (ok, failed, passed_through, client_closed).",
	}, []string{"upstream", "result"})
	metricFailovers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llm_relay", Name: "failovers_total",
		Help: "Requests that needed more than one attempt, by model alias.",
	}, []string{"alias"})
	metricTTFT = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "llm_relay", Name: "time_to_first_token_seconds",
		Help:    "Time from the request to the commit point (first data event of a stream, first byte otherwise), by upstream.",
		Buckets: []float64{.05, .1, .25, .5, 1, 2, 4, 8, 16, 32, 64},
	}, []string{"upstream"})
	metricDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "llm_relay", Name: "request_duration_seconds",
		Help:    "Whole request duration, by model alias.",
		Buckets: []float64{.1, .25, .5, 1, 2, 5, 10, 20, 40, 80, 160, 320},
	}, []string{"alias"})
	metricOutputGap = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "llm_relay", Name: "stream_output_gap_p99_seconds",
		Help:    "Per stream, the p99 gap between events sent to the client, by smoothing mode.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"mode"})
	metricAddedLag = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "llm_relay", Name: "stream_added_lag_p99_seconds",
		Help:    "Per stream, the p99 delay the re-pacer added to text, by smoothing mode.",
		Buckets: []float64{.001, .01, .05, .1, .2, .4, .8, 1.6, 3.2},
	}, []string{"mode"})
	metricTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llm_relay", Name: "tokens_total",
		Help: "Tokens by key name, model alias and kind (prompt, completion, reasoning, cached, cache_write; cached and cache_write are parts of prompt).",
	}, []string{"key", "alias", "kind"})
	metricCost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llm_relay", Name: "cost_usd_total",
		Help: "Cost in US dollars by key name (from the price table).",
	}, []string{"key"})

	metricCluster = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "llm_relay", Name: "reasoning_cluster_rate",
		Help:    "Per stream with reasoning, the share of the reasoning in the late half of its phase, as received from the upstream (side in) and as sent to the client (side out), by smoothing mode: about 0.7-0.8 clustered, 0.5 even.",
		Buckets: []float64{.3, .4, .45, .5, .55, .6, .65, .7, .75, .8, .9},
	}, []string{"mode", "side"})
	metricCapacity = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llm_relay", Name: "capacity_events_total",
		Help: "What the capacity stages did, by model alias, target (upstream and model sent) and event: spill (a request went to another target: this one was at spill_at), degrade (a request to it got the degrade edit), queued (a request waited for room, counted on the target it would have gone to), shed (503 overloaded).",
	}, []string{"alias", "upstream", "model", "event"})
	metricHandoffs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llm_relay", Name: "handoffs_total",
		Help: "Requests to hand-off aliases, by model alias and outcome: handed_off (reasoned on a reason target, answered on a to target), no_reasoning (the reasoning chain failed; answered without reasoning, on_reason_failure answer), reason_failed (the reasoning chain failed; on_reason_failure error), answer_failed (the answer chain failed).",
	}, []string{"alias", "outcome"})
	metricHandoffGap = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "llm_relay", Name: "handoff_gap_seconds",
		Help:    "The relay's own time from a hand-off point (the reasoning's end) to the answer leg's request written to its upstream.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .05, .25, 1},
	})
	metricReasoningDegraded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llm_relay", Name: "reasoning_degradations_total",
		Help: "Times a target (upstream and model sent) was degraded by its reasoning, by signal: reasoning_floor (recent reasoning tokens under the slo's share of its baseline) or cluster_rate (recent reasoning cluster rate above the slo's).",
	}, []string{"upstream", "model", "signal"})
	metricStateErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "llm_relay", Name: "shared_state_errors_total",
		Help: "Round trips to the shared state (state redis) that failed; the relay served from its local view meanwhile.",
	})
)

// metricContinuations counts streams continued after their commit point
// (continuation.go).
var metricContinuations = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "llm_relay", Name: "continuations_total",
	Help: "Streams that broke after the commit point and were continued on another target, by model alias, the upstream that continued, and where the break fell (reasoning, answer, tool_call).",
}, []string{"alias", "upstream", "where"})

// countContinuation counts one continuation.
func countContinuation(alias, upstream, where string) {
	metricContinuations.WithLabelValues(alias, upstream, where).Inc()
}

// metricResume counts what resumable streams did (resume.go).
var metricResume = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "llm_relay", Name: "resume_total",
	Help: "Resumable streams, by what happened: journaled (a stream's journal started), resumed (a client resumed from a cursor), reattached (a retry joined a stream instead of generating again), background (a background response started), detached (a stream's last client went away while it ran), detach_expired (no client came back within detach: cancelled), cancelled (cancelled by a client's request).",
}, []string{"kind"})

var (
	descJournals = prometheus.NewDesc("llm_relay_resume_journals",
		"Stream journals this instance holds (state local) or produced and still holds open (state redis), and of them those still running.",
		[]string{"state"}, nil)
	descJournalBytes = prometheus.NewDesc("llm_relay_resume_journal_bytes",
		"Bytes of events in the journals this instance holds.", nil, nil)
	descJournalDropped = prometheus.NewDesc("llm_relay_resume_journals_dropped_total",
		"Journals dropped before their ttl (evicted: max_streams) or never started (refused: full of running streams).",
		[]string{"why"}, nil)
)

var collectors = []prometheus.Collector{metricResume, metricContinuations, metricRequests, metricAttempts, metricFailovers, metricTTFT,
	metricDuration, metricOutputGap, metricAddedLag, metricTokens, metricCost, metricCluster, metricCapacity, metricStateErrors, metricHandoffs, metricHandoffGap, metricReasoningDegraded, stateCollector{}, shadowCollector{}}

// countHandoff counts one hand-off alias request's outcome.
func countHandoff(alias, outcome string) { metricHandoffs.WithLabelValues(alias, outcome).Inc() }

// registerMetrics adds the relay's collectors to a config's registry; a
// second relay handler in the same config finds them there already.
func registerMetrics(reg *prometheus.Registry) error {
	if reg == nil {
		return nil
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			if _, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); !ok {
				return err
			}
		}
	}
	return nil
}

// stateCollector exports gauges computed at scrape time from the live
// relays: upstream health, canary share, key budget remaining.
type stateCollector struct{}

var (
	descHealth = prometheus.NewDesc("llm_relay_target_healthy",
		"1 if the target (upstream and model sent; \"*\" for the client's model unchanged) is healthy, 0.5 if degraded or recovering (half-open), 0 if ejected.",
		[]string{"upstream", "model"}, nil)
	descCanary = prometheus.NewDesc("llm_relay_canary_share_percent",
		"The share of requests a canary currently gets (0 after a rollback).",
		[]string{"alias", "upstream"}, nil)
	descBudget = prometheus.NewDesc("llm_relay_budget_remaining_usd",
		"What a key may still spend in its current budget period.",
		[]string{"key"}, nil)
	descOccupancy = prometheus.NewDesc("llm_relay_target_occupancy",
		"For a target with a max_concurrent (its upstream's or its own), its requests in flight over the fuller cap (0-1), by model alias and target.",
		[]string{"alias", "upstream", "model"}, nil)
	descInFlight = prometheus.NewDesc("llm_relay_target_in_flight",
		"For a target with a max_concurrent, the requests in flight on its fuller cap, by model alias and target.",
		[]string{"alias", "upstream", "model"}, nil)
	descSharedState = prometheus.NewDesc("llm_relay_shared_state_up",
		"1 if the shared state (state redis) answered its last round trip, 0 if not; absent without one.",
		[]string{"redis"}, nil)
)

func (stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descHealth
	ch <- descCanary
	ch <- descBudget
	ch <- descSharedState
	ch <- descOccupancy
	ch <- descInFlight
	ch <- descJournals
	ch <- descJournalBytes
	ch <- descJournalDropped
}

// Collect reads the gauges at scrape time in a walk of its own over the
// live relays: the status view (buildStatus) builds far more than these
// figures (snapshots, shadows, formatted spend). Where several relays list
// the same target or canary (a reload in progress, two sites), the oldest
// config's first listing is the gauge, as it is the status view's first.
func (stateCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	keys := map[string]bool{} // the configured key names
	func() {
		liveRelays.Lock()
		defer liveRelays.Unlock()
		relays := slices.Collect(maps.Keys(liveRelays.m))
		slices.SortFunc(relays, func(a, b *Relay) int { return a.provisioned.Compare(b.provisioned) })
		// A target shared by models with different SLOs may be degraded
		// for one and healthy for another: its first listing's SLO counts.
		seenTarget := map[[2]string]bool{}
		gaugeHealth := func(t *target) {
			k := [2]string{t.up.name, modelLabel(t.model)}
			if seenTarget[k] {
				return
			}
			seenTarget[k] = true
			v := 1.0
			switch t.health.Status(now, t.slo) {
			case health.Degraded, health.HalfOpen:
				v = 0.5
			case health.Ejected:
				v = 0
			}
			ch <- prometheus.MustNewConstMetric(descHealth, prometheus.GaugeValue, v, k[0], k[1])
		}
		seenCanary := map[[2]string]bool{}
		for _, h := range relays {
			for i, k := range h.Keys {
				keys[cmp.Or(k.Name, defaultKeyName(i))] = true
			}
			if h.keys.open() {
				keys["anonymous"] = true
			}
			for _, rt := range h.routesInOrder() {
				for _, t := range rt.targets {
					gaugeHealth(t)
				}
				c := rt.canary
				if c == nil {
					continue
				}
				gaugeHealth(c.target)
				if k := [2]string{rt.alias, c.target.up.name}; !seenCanary[k] {
					seenCanary[k] = true
					ch <- prometheus.MustNewConstMetric(descCanary, prometheus.GaugeValue, c.c.Share(), k[0], k[1])
				}
			}
		}
		// The shared state is the newest config's, as in the status view.
		if n := len(relays); n > 0 && relays[n-1].fleet != nil {
			f := relays[n-1].fleet
			v := 1.0
			if f.down.Load() {
				v = 0
			}
			ch <- prometheus.MustNewConstMetric(descSharedState, prometheus.GaugeValue, v, f.name)
		}
		if n := len(relays); n > 0 && relays[n-1].resume != nil {
			st := relays[n-1].resume.store.Stats(now)
			ch <- prometheus.MustNewConstMetric(descJournals, prometheus.GaugeValue, float64(st.Streams-st.Running), "ended")
			ch <- prometheus.MustNewConstMetric(descJournals, prometheus.GaugeValue, float64(st.Running), "running")
			ch <- prometheus.MustNewConstMetric(descJournalBytes, prometheus.GaugeValue, float64(st.Bytes))
			ch <- prometheus.MustNewConstMetric(descJournalDropped, prometheus.CounterValue, float64(st.Evicted), "evicted")
			ch <- prometheus.MustNewConstMetric(descJournalDropped, prometheus.CounterValue, float64(st.Refused), "refused")
		}
	}()
	for _, o := range occupancies() {
		ch <- prometheus.MustNewConstMetric(descOccupancy, prometheus.GaugeValue, o.occupancy, o.alias, o.upstream, o.model)
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(o.inFlight), o.alias, o.upstream, o.model)
	}
	for name := range keys { // configured keys only
		if k, ok := ledger.Spend(name, now); ok && k.Budget.Limit > 0 {
			ch <- prometheus.MustNewConstMetric(descBudget, prometheus.GaugeValue, k.Remaining, name)
		}
	}
}

// observeRequest records a finished request's metrics. The model list
// relays nothing and is not counted; the relay's rejections are, under
// alias "none" when they come before routing.
func observeRequest(rl *requestLog) {
	if rl.modelList {
		return
	}
	alias, upstream := rl.alias, rl.upstream
	if alias == "" {
		alias = "none" // rejected before routing; the client's model name is not a label
	}
	if upstream == "" {
		upstream = "none"
	}
	metricRequests.WithLabelValues(alias, upstream, outcomeOf(rl)).Inc()
	if rl.attempts > 1 {
		metricFailovers.WithLabelValues(alias).Inc()
	}
	if rl.upstream != "" {
		metricTTFT.WithLabelValues(rl.upstream).Observe(rl.ttfb.Seconds())
	}
	if rl.alias != "" {
		metricDuration.WithLabelValues(alias).Observe(time.Since(rl.start).Seconds())
	}
	if s := rl.smooth; s != nil && s.EventsOut > 1 {
		metricOutputGap.WithLabelValues(rl.mode).Observe(s.OutGap.P99.Seconds())
		metricAddedLag.WithLabelValues(rl.mode).Observe(s.Lag.P99.Seconds())
	}
	if s := rl.smooth; s != nil && s.Cluster.Known {
		metricCluster.WithLabelValues(rl.mode, "in").Observe(s.Cluster.In)
		metricCluster.WithLabelValues(rl.mode, "out").Observe(s.Cluster.Out)
	}
}

// outcomeOf classifies a finished request in a few fixed words.
func outcomeOf(rl *requestLog) string {
	switch {
	case rl.status == statusClientClosed:
		return "client_closed"
	case rl.idleTimeout:
		return "idle_timeout"
	case rl.streamError != "":
		return "stream_error"
	case len(rl.continued) > 0:
		return "continued"
	case rl.status >= 500:
		return "upstream_error"
	case rl.status == 429:
		return "rate_limited"
	case rl.status >= 400:
		return "client_error"
	case rl.status == 0:
		return "none"
	}
	return "ok"
}

// observeAttempt records one upstream attempt.
func observeAttempt(t *target, res *attemptResult) {
	result := "failed"
	switch {
	case res.clientGone:
		result = "client_closed"
	case res.resp != nil && res.resp.StatusCode < 300:
		result = "ok"
	case res.resp != nil:
		result = "passed_through"
	}
	metricAttempts.WithLabelValues(t.up.name, result).Inc()
}
