package llmrelay

import (
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/canary"
)

// judgeCanaryReasoning feeds a finished request's answer to its route's
// canary guard reasoning_floor (issue 29, section 3: the reasoning signals
// gate canaries): the canary's answers against the stable targets' at the
// same effort (internal/canary/reasoning.go). The answers that count are
// those reasoning health counts (judgeReasoning): complete 2xx answers at
// the effort the request stated, with usage, not a hand-off; but whatever
// the targets' SLO says, since the guard is the canary's own.
func judgeCanaryReasoning(req *requestState) {
	c := req.canary
	t := req.target
	if c == nil || t == nil { // RecordReasoning returns at once without a floor
		return
	}
	if req.handoff != nil || req.usage == nil || req.degraded ||
		req.status < 200 || req.status >= 300 || req.streamError != "" || req.idleTimeout || req.budgetHits > 0 {
		return
	}
	c.logEvent(c.c.RecordReasoning(canary.ReasoningSample{At: time.Now(), Effort: req.effortKey,
		Tokens: req.usage.Reasoning, Canary: t == c.target}))
}
