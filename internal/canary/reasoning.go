package canary

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// The reasoning floor (Guard.ReasoningFloor): a canary whose answers
// reason less than the stable targets' answers to the same kind of
// request is degraded the way a provider under load degrades, with HTTP
// 200 (issue 29, section 3); the guard rolls it back.
//
// Every complete answer of the canary's route is fed to
// [Canary.RecordReasoning], marked canary or stable, with the reasoning
// effort the request stated: answers are compared at the same effort
// only, since "high" reasons several times as much as "low" and the
// canary's bucket (one client, one user) need not send the same mix as
// everybody else. Per effort, the canary side keeps its last
// Guard.Window answers and the stable side its last Guard.Window answers;
// the stable answers older than the canary window's oldest are left out,
// so both means cover the same period. An effort is judged once both
// sides hold Guard.MinSamples answers (so judged) and the stable mean is
// above 0 (a model that does not reason is never judged on it). The
// guard breaks when, at any judged effort, the canary's mean is below
// ReasoningFloor × the stable mean.

// maxEfforts bounds the efforts a canary keeps windows for: the caller
// maps what clients send to a few labels; anything past the bound is not
// recorded.
const maxEfforts = 16

// ReasoningSample is one complete answer of the canary's route.
type ReasoningSample struct {
	At     time.Time
	Effort string // the reasoning effort the request stated, as a label
	Tokens int    // reasoning tokens of the answer
	Canary bool   // the canary target answered; false: a stable target of the chain did
}

// tokenRing holds the last answers of one side at one effort, oldest
// first from start().
type tokenRing struct {
	at      []time.Time
	tok     []int
	head, n int
}

func newTokenRing(size int) *tokenRing {
	return &tokenRing{at: make([]time.Time, size), tok: make([]int, size)}
}

func (r *tokenRing) add(at time.Time, tok int) {
	r.at[r.head], r.tok[r.head] = at, tok
	r.head = (r.head + 1) % len(r.at)
	r.n = min(r.n+1, len(r.at))
}

func (r *tokenRing) start() int { return (r.head - r.n + len(r.at)) % len(r.at) }

// oldest is the time of the ring's oldest answer (zero when empty).
func (r *tokenRing) oldest() time.Time {
	if r.n == 0 {
		return time.Time{}
	}
	return r.at[r.start()]
}

// since sums the answers at or after t (all of them for a zero t).
func (r *tokenRing) since(t time.Time) (n int, sum int64) {
	for i, s := 0, r.start(); i < r.n; i++ {
		k := (s + i) % len(r.at)
		if !r.at[k].Before(t) {
			n++
			sum += int64(r.tok[k])
		}
	}
	return n, sum
}

// effortWindows are one effort's two sides and their last comparison.
type effortWindows struct {
	canary, stable *tokenRing
	view           ReasoningView
	broken         string // why this effort breaks the floor; "" holds
}

// ReasoningView is one effort's comparison, for the status view: the mean
// reasoning tokens per answer of the canary's window and of the stable
// targets' answers over the same period.
type ReasoningView struct {
	Effort        string  `json:"effort"`
	CanaryTokens  float64 `json:"canary_reasoning_tokens"`
	CanarySamples int     `json:"canary_samples"`
	StableTokens  float64 `json:"stable_reasoning_tokens"`
	StableSamples int     `json:"stable_samples"`
	// Ratio is CanaryTokens / StableTokens, when both sides hold
	// min_samples answers and the stable side reasons (nil otherwise:
	// not judged).
	Ratio *float64 `json:"ratio,omitempty"`
}

// RecordReasoning feeds one complete answer of the canary's route: the
// canary's or a stable target's. It returns the rollback event when the
// comparison at this answer's effort breaks the guard's reasoning floor,
// nil otherwise. It does nothing when the guard has no reasoning floor,
// for a negative token count, after a rollback, and for an effort beyond
// the first 16 seen.
func (c *Canary) RecordReasoning(s ReasoningSample) *Event {
	if c.guard.ReasoningFloor <= 0 || s.Tokens < 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == StateRolledBack {
		return nil
	}
	w := c.efforts[s.Effort]
	if w == nil {
		if len(c.efforts) >= maxEfforts {
			return nil
		}
		if c.efforts == nil {
			c.efforts = map[string]*effortWindows{}
		}
		w = &effortWindows{canary: newTokenRing(c.guard.Window), stable: newTokenRing(c.guard.Window)}
		c.efforts[s.Effort] = w
	}
	if s.Canary {
		w.canary.add(s.At, s.Tokens)
	} else {
		w.stable.add(s.At, s.Tokens)
	}
	w.compare(s.Effort, c.guard)
	if j := c.judge(); j.broken {
		return c.rollback(s.At, j)
	}
	return nil
}

// compare recomputes the effort's view and verdict.
func (w *effortWindows) compare(effort string, g Guard) {
	cn, csum := w.canary.since(time.Time{})
	sn, ssum := w.stable.since(w.canary.oldest())
	v := ReasoningView{Effort: effort, CanarySamples: cn, StableSamples: sn}
	if cn > 0 {
		v.CanaryTokens = float64(csum) / float64(cn)
	}
	if sn > 0 {
		v.StableTokens = float64(ssum) / float64(sn)
	}
	w.view, w.broken = v, ""
	if cn < g.MinSamples || sn < g.MinSamples || v.StableTokens <= 0 {
		return
	}
	r := v.CanaryTokens / v.StableTokens
	w.view.Ratio = &r
	if r < g.ReasoningFloor {
		w.broken = fmt.Sprintf("reasoning %d%% of the stable targets' at effort %s (%s → %s tokens per answer; the canary's last %d answers against the stable targets' %d over the same period) < floor %.2f",
			int(math.Floor(100*r)), effort, fmtTokens(v.StableTokens), fmtTokens(v.CanaryTokens), cn, sn, g.ReasoningFloor)
	}
}

// reasoningBreaks is why the reasoning floor breaks, one per effort in
// effort order; nil when it holds. c.mu held.
func (c *Canary) reasoningBreaks() []string {
	var why []string
	for _, e := range c.effortOrder() {
		if b := c.efforts[e].broken; b != "" {
			why = append(why, b)
		}
	}
	return why
}

func (c *Canary) effortOrder() []string {
	es := make([]string, 0, len(c.efforts))
	for e := range c.efforts {
		es = append(es, e)
	}
	slices.Sort(es)
	return es
}

// reasoningViews are the comparisons for Snapshot, in effort order. c.mu held.
func (c *Canary) reasoningViews() []ReasoningView {
	if len(c.efforts) == 0 {
		return nil
	}
	vs := make([]ReasoningView, 0, len(c.efforts))
	for _, e := range c.effortOrder() {
		v := c.efforts[e].view
		if v.Ratio != nil {
			r := *v.Ratio
			v.Ratio = &r
		}
		vs = append(vs, v)
	}
	return vs
}

func fmtTokens(f float64) string { return fmt.Sprintf("%.0f", f) }
