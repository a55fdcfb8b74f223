package llmrelay

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/llmrelay/caddy-llm-relay/internal/health"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/reasoninghealth"
	"github.com/llmrelay/caddy-llm-relay/internal/shadow"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// Shadow verdicts (issue 29, section 4): each shadow is judged over its
// recent copies against its model's SLO (ttft, success, and the
// reasoning: its reasoning tokens against the primary's on the same
// requests, and its cluster rate), shown side by side with the primary's
// on the status page and in metrics, and logged once per crossing
// (docs/routing.md#shadow-verdicts).

// shadowJudge is a shadow's judge: the model's resolved SLO (its window
// and min_samples count copies), reasoning SLO and warn_similarity.
func shadowJudge(slo health.SLO, c reasoninghealth.Config, s *Shadow) shadow.Judge {
	j := shadow.Judge{TTFT: slo.TTFT, Success: slo.Success, Floor: c.Floor, ClusterRate: c.ClusterRate,
		Window: slo.Window, MinSamples: slo.MinSamples}
	if s != nil {
		j.WarnSimilarity = s.WarnSimilarity
	}
	return j
}

// shadowPrimary is the client's answer as a shadow's comparison gets it.
type shadowPrimary struct {
	body         []byte  // the captured answer
	ok           bool    // 2xx and not broken
	cluster      float64 // the stream's reasoning cluster rate as received
	clusterKnown bool
	// reasoning is the answer's reasoning tokens as the relay read them
	// from the upstream (reasoningKnown), which the client's copy may not
	// show: the relay drops the usage chunk it asked for itself.
	reasoning      int
	reasoningKnown bool
}

// shadowPrimary is the request's answer for its shadow's comparison.
func (req *requestState) shadowPrimary(cw *captureWriter) shadowPrimary {
	p := shadowPrimary{body: bytes.Clone(cw.buf.Bytes()),
		ok: req.status/100 == 2 && req.streamError == "" && req.status != statusClientClosed}
	if s := req.smooth; s != nil && s.Cluster.Known {
		p.cluster, p.clusterKnown = s.Cluster.In, true
	}
	if s := req.smooth; s != nil {
		// A stream: the upstream's usage, else what the relay read.
		u, ok := usage.ParseUsage(s.Usage)
		p.reasoning = u.Reasoning
		if p.reasoning == 0 {
			p.reasoning = req.upstreamReasoning
		}
		if p.reasoning == 0 && req.reasoningRunes > 0 {
			p.reasoning = (req.reasoningRunes + 3) / 4 // as withReasoning estimates
		}
		p.reasoningKnown = ok || p.reasoning > 0
	}
	return p
}

// read reads the primary's answer, in the client's dialect d, for the
// comparison: its text only when the copy succeeded (as before), its
// reasoning tokens (usage, else estimated from its reasoning text) when
// the primary answered.
func (pa shadowPrimary) read(stream bool, d dialect, copyOK bool) shadow.Primary {
	a := readAnswer(bytes.NewReader(pa.body), stream, d, func() {})
	p := shadow.Primary{OK: pa.ok, ReasoningTokens: a.reasoning, ClusterRate: pa.cluster, ClusterKnown: pa.clusterKnown}
	if pa.reasoningKnown {
		p.ReasoningTokens = pa.reasoning
	}
	if copyOK {
		p.Text = a.text
	}
	return p
}

// markReasoning adds a chunk's reasoning (Chat Completions) to tl, as
// received at at, for the shadow stream's cluster rate.
func markReasoning(tl *pace.Timeline, data []byte, at time.Duration) {
	if len(tl.Marks) >= pace.MaxMarks || !bytes.Contains(data, []byte(`"reasoning`)) {
		return
	}
	var c struct {
		Choices []struct {
			Delta struct {
				ReasoningContent *string `json:"reasoning_content"`
				Reasoning        *string `json:"reasoning"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal(data, &c) != nil || len(c.Choices) == 0 {
		return
	}
	n := 0
	for _, s := range []*string{c.Choices[0].Delta.ReasoningContent, c.Choices[0].Delta.Reasoning} {
		if s != nil {
			n += utf8.RuneCountInString(*s)
		}
	}
	if n > 0 {
		tl.Marks = append(tl.Marks, pace.Mark{At: at, Runes: uint32(n), Lane: pace.LaneReasoning})
	}
}

// logShadowCrossings logs a shadow's crossings: a verdict turned to fail
// or a similarity fallen below warn_similarity as WARN, their return as
// INFO.
func (h *Relay) logShadowCrossings(sr *shadowRuntime, cs []shadow.Crossing) {
	for _, c := range cs {
		v := c.Verdict
		fields := []zap.Field{zap.String("alias", sr.alias), zap.String("upstream", sr.target.up.name),
			zap.String("model", modelLabel(sr.target.model)), zap.String("verdict", v.Verdict), zap.String("reason", v.Reason),
			zap.Float64("similarity", round3(v.Similarity)), zap.Int("samples", v.Samples),
			zap.Float64("shadow_reasoning_tokens", v.ShadowReasoningTokens), zap.Float64("primary_reasoning_tokens", v.PrimaryReasoningTokens)}
		switch {
		case c.What == "verdict" && c.Bad:
			h.logger.Warn("shadow verdict fail", fields...)
		case c.What == "verdict":
			h.logger.Info("shadow verdict pass", fields...)
		case c.Bad:
			h.logger.Warn("shadow similarity low", append(fields, zap.Float64("warn_similarity", sr.judge.WarnSimilarity))...)
		default:
			h.logger.Info("shadow similarity recovered", append(fields, zap.Float64("warn_similarity", sr.judge.WarnSimilarity))...)
		}
	}
}

// shadowCollector exports each shadow's verdict and its reasoning beside
// the primary's at scrape time. Labels: the alias and the shadow's
// upstream (from the config), the verdict and the side (fixed words).
type shadowCollector struct{}

var (
	descShadowVerdict = prometheus.NewDesc("llm_relay_shadow_verdict",
		"1 for a shadow's current verdict against its model's SLO over its recent copies (pass, fail, pending), 0 for the others.",
		[]string{"alias", "upstream", "verdict"}, nil)
	descShadowReasoning = prometheus.NewDesc("llm_relay_shadow_reasoning_tokens",
		"Mean reasoning tokens per request over a shadow's recent copies whose primary also answered, by side (primary, shadow).",
		[]string{"alias", "upstream", "side"}, nil)
	descShadowCluster = prometheus.NewDesc("llm_relay_shadow_reasoning_cluster_rate",
		"Mean reasoning cluster rate over a shadow's recent copies where it is known, by side (primary, shadow); absent when unknown.",
		[]string{"alias", "upstream", "side"}, nil)
	descShadowSimilarity = prometheus.NewDesc("llm_relay_shadow_similarity",
		"Mean similarity of a shadow's recent answers to the primary's (0-1); absent before any comparison.",
		[]string{"alias", "upstream"}, nil)
)

func (shadowCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descShadowVerdict
	ch <- descShadowReasoning
	ch <- descShadowCluster
	ch <- descShadowSimilarity
}

// Collect takes each shadow runner once, under the oldest config that
// lists it, as stateCollector does.
func (shadowCollector) Collect(ch chan<- prometheus.Metric) {
	type view struct {
		alias, upstream string
		v               shadow.Verdict
	}
	var views []view
	func() {
		liveRelays.Lock()
		defer liveRelays.Unlock()
		relays := slices.Collect(maps.Keys(liveRelays.m))
		slices.SortFunc(relays, func(a, b *Relay) int { return a.provisioned.Compare(b.provisioned) })
		seen := map[*shadow.Runner]bool{}
		for _, h := range relays {
			for _, rt := range h.routesInOrder() {
				if s := rt.shadow; s != nil && !seen[s.runner] {
					seen[s.runner] = true
					views = append(views, view{rt.alias, s.target.up.name, s.runner.Verdict(s.judge)})
				}
			}
		}
	}()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, w := range views {
		for _, verdict := range []string{"pass", "fail", "pending"} {
			v := 0.0
			if w.v.Verdict == verdict {
				v = 1
			}
			gauge(descShadowVerdict, v, w.alias, w.upstream, verdict)
		}
		if w.v.Pairs > 0 {
			gauge(descShadowReasoning, w.v.PrimaryReasoningTokens, w.alias, w.upstream, "primary")
			gauge(descShadowReasoning, w.v.ShadowReasoningTokens, w.alias, w.upstream, "shadow")
		}
		if w.v.PrimaryClusterRate > 0 {
			gauge(descShadowCluster, w.v.PrimaryClusterRate, w.alias, w.upstream, "primary")
		}
		if w.v.ShadowClusterRate > 0 {
			gauge(descShadowCluster, w.v.ShadowClusterRate, w.alias, w.upstream, "shadow")
		}
		if w.v.Compared > 0 {
			gauge(descShadowSimilarity, w.v.Similarity, w.alias, w.upstream)
		}
	}
}
