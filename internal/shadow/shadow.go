// Package shadow sends background copies of requests ("shadows") to a
// second target and compares their answers with the primary's.
//
//   - [Sample] decides whether a request is copied.
//   - [Runner] runs the copies with bounded concurrency: a copy that finds
//     no free slot is dropped and counted, never queued, so shadows can
//     neither pile up nor slow the primary path.
//   - [Runner.Record] keeps the outcome figures and the comparison with the
//     primary answer ([Similarity] and the length ratio), in bounded memory.
//
// The package reads no clock and has no Caddy imports. All methods of
// Runner are safe for concurrent use.
package shadow

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Sample reports whether a request is copied, with probability percent/100:
// percent <= 0 never, percent >= 100 always, otherwise rnd.Float64()*100 <
// percent. rnd is the caller's fast generator (a *rand.Rand is not safe for
// concurrent use: keep one per goroutine or lock it); nil uses math/rand/v2's
// global generator, which is safe for concurrent use. Random rather than
// key-hashed on purpose: a shadow is a sample of traffic, and a key hash
// would copy the same users over and over.
func Sample(percent float64, rnd *rand.Rand) bool {
	if !(percent > 0) { // also NaN
		return false
	}
	if percent >= 100 {
		return true
	}
	if rnd == nil {
		return rand.Float64()*100 < percent
	}
	return rnd.Float64()*100 < percent
}

// Result is the outcome of one shadow copy.
type Result struct {
	OK               bool
	Status           int // HTTP status of the shadow's answer, 0 if none
	TTFT             time.Duration
	Duration         time.Duration
	CompletionTokens int
	ReasoningTokens  int
	Text             string // the shadow's answer text, capped by the caller
	Err              string
	// ClusterRate is the shadow stream's reasoning cluster rate, when
	// ClusterKnown (see [Primary]).
	ClusterRate  float64
	ClusterKnown bool
}

// Stats are a Runner's figures. Counters are since NewRunner; the
// percentiles (nearest rank) are over the last 1024 successful copies, so
// memory stays bounded.
type Stats struct {
	MaxConcurrent int   `json:"max_concurrent"`
	Sent          int64 `json:"sent"`    // copies started by Go
	Dropped       int64 `json:"dropped"` // copies Go found no slot for
	Running       int64 `json:"running"`
	// Comparing counts copies done calling that still wait to compare
	// their answer with the primary's (see [Runner.GoThen]); they hold
	// no max_concurrent slot.
	Comparing int64 `json:"comparing,omitempty"`
	Panics    int64 `json:"panics,omitempty"` // copies whose function panicked (recovered)
	OK        int64 `json:"ok"`               // Record with Result.OK
	Failed    int64 `json:"failed"`           // Record without Result.OK
	// LastError is the Err (or "status N") of the last failed copy.
	LastError string `json:"last_error,omitempty"`
	// Latency of successful copies (TTFT only when > 0), milliseconds.
	TTFTp50Ms     float64 `json:"ttft_p50_ms"`
	TTFTp95Ms     float64 `json:"ttft_p95_ms"`
	DurationP50Ms float64 `json:"duration_p50_ms"`
	DurationP95Ms float64 `json:"duration_p95_ms"`
	// Compared counts the successful copies compared with a non-empty
	// primary answer; the means are over those.
	Compared        int64   `json:"compared"`
	MeanLengthRatio float64 `json:"mean_length_ratio"` // shadow runes / primary runes
	MeanSimilarity  float64 `json:"mean_similarity"`   // Similarity, 0..1
	// Token counts reported by successful copies.
	CompletionTokens int64 `json:"completion_tokens"`
	ReasoningTokens  int64 `json:"reasoning_tokens"`
}

// latencyRing is how many recent latencies the percentiles cover.
const latencyRing = 1024

// maxErrLen caps Stats.LastError.
const maxErrLen = 256

// Runner runs shadow copies in the background with bounded concurrency.
// Make it with NewRunner.
type Runner struct {
	max     int64
	running atomic.Int64
	compare atomic.Int64 // copies in their then step
	sent    atomic.Int64
	dropped atomic.Int64
	panics  atomic.Int64

	idleMu sync.Mutex
	idle   *sync.Cond // broadcast when running+compare drops to 0

	mu         sync.Mutex
	ok, failed int64
	lastErr    string
	ttft, dur  ring
	compared   int64
	sumRatio   float64
	sumSim     float64
	compTok    int64
	reasTok    int64

	// The verdict window (verdict.go): the last latencyRing copies.
	recent      []copyRec
	recentNext  int
	lastVerdict string // the last verdict judged other than pending
	simLow      bool   // the similarity was last reported low
}

// NewRunner returns a Runner that runs at most maxConcurrent copies at once
// (values below 1 mean 1).
func NewRunner(maxConcurrent int) *Runner {
	r := &Runner{max: int64(max(maxConcurrent, 1))}
	r.idle = sync.NewCond(&r.idleMu)
	return r
}

// Go runs f in a new goroutine if fewer than maxConcurrent copies are
// running, and returns true; otherwise it returns false at once and counts
// the copy as dropped. It never blocks. A panic in f is recovered and
// counted (a shadow must not take the server down).
func (r *Runner) Go(f func()) bool {
	return r.GoThen(func() func() { f(); return nil })
}

// GoThen is [Runner.Go] for a copy in two steps: call runs holding a
// max_concurrent slot; the func it returns (if not nil) then runs on the
// same goroutine after the slot is released, counted in Stats.Comparing
// and waited for by Wait. So a copy that waits for the primary's answer to
// compare with does not keep other copies out, and is still accounted for.
func (r *Runner) GoThen(call func() (then func())) bool {
	for {
		n := r.running.Load()
		if n >= r.max {
			r.dropped.Add(1)
			return false
		}
		if r.running.CompareAndSwap(n, n+1) {
			break
		}
	}
	r.sent.Add(1)
	go func() {
		slot := true
		defer func() {
			if recover() != nil {
				r.panics.Add(1)
			}
			if slot {
				r.done(&r.running)
			} else {
				r.done(&r.compare)
			}
		}()
		then := call()
		if then == nil {
			return
		}
		// Count the then step before releasing the slot, so Wait never
		// sees both at 0 in between.
		r.compare.Add(1)
		slot = false
		r.done(&r.running)
		then()
	}()
	return true
}

// done decrements one of the two counts and wakes Wait when both are 0.
func (r *Runner) done(n *atomic.Int64) {
	if n.Add(-1) == 0 && r.running.Load()+r.compare.Load() == 0 {
		r.idleMu.Lock()
		r.idle.Broadcast()
		r.idleMu.Unlock()
	}
}

// Wait blocks until no copy runs, in either step. Copies started while it
// waits are waited for too (it returns at a moment when none runs).
func (r *Runner) Wait() {
	r.idleMu.Lock()
	for r.running.Load()+r.compare.Load() > 0 {
		r.idle.Wait()
	}
	r.idleMu.Unlock()
}

// Record records the outcome of one copy and, for a successful copy with a
// non-empty primaryText, compares the answers: length ratio (runes of
// res.Text / runes of primaryText, arithmetic mean) and Similarity. A
// primary without text (e.g. only tool calls, or a failed primary) is passed
// as "" and skips the comparison. Both texts should be capped alike by the
// caller (e.g. to the same byte budget): the ratio is of what is passed.
func (r *Runner) Record(res Result, primaryText string) { r.record(res, primaryText) }

// record is Record; it returns the similarity it computed (0 when it
// compared nothing).
func (r *Runner) record(res Result, primaryText string) (sim float64) {
	var ratio float64
	compare := res.OK && primaryText != ""
	if compare {
		ratio = float64(utf8.RuneCountInString(res.Text)) / float64(utf8.RuneCountInString(primaryText))
		sim = Similarity(res.Text, primaryText)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !res.OK {
		r.failed++
		e := res.Err
		if e == "" && res.Status != 0 {
			e = "status " + strconv.Itoa(res.Status)
		}
		if e != "" {
			r.lastErr = capString(e, maxErrLen)
		}
		return 0
	}
	r.ok++
	if res.TTFT > 0 {
		r.ttft.add(ms(res.TTFT))
	}
	r.dur.add(ms(res.Duration))
	r.compTok += int64(max(res.CompletionTokens, 0))
	r.reasTok += int64(max(res.ReasoningTokens, 0))
	if compare {
		r.compared++
		r.sumRatio += ratio
		r.sumSim += sim
	}
	return sim
}

// Stats returns the current figures.
func (r *Runner) Stats() Stats {
	s := Stats{
		MaxConcurrent: int(r.max),
		Sent:          r.sent.Load(),
		Dropped:       r.dropped.Load(),
		Running:       r.running.Load(),
		Comparing:     r.compare.Load(),
		Panics:        r.panics.Load(),
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s.OK, s.Failed, s.LastError = r.ok, r.failed, r.lastErr
	s.TTFTp50Ms, s.TTFTp95Ms = r.ttft.percentiles(0.50, 0.95)
	s.DurationP50Ms, s.DurationP95Ms = r.dur.percentiles(0.50, 0.95)
	s.Compared = r.compared
	if r.compared > 0 {
		s.MeanLengthRatio = r.sumRatio / float64(r.compared)
		s.MeanSimilarity = r.sumSim / float64(r.compared)
	}
	s.CompletionTokens, s.ReasoningTokens = r.compTok, r.reasTok
	return s
}

// ring keeps the last latencyRing values.
type ring struct {
	v    []float64
	next int
}

func (g *ring) add(x float64) {
	if len(g.v) < latencyRing {
		g.v = append(g.v, x)
		return
	}
	g.v[g.next] = x
	g.next = (g.next + 1) % latencyRing
}

// percentiles returns nearest-rank percentiles p, q (in (0, 1]); 0 when
// empty.
func (g *ring) percentiles(p, q float64) (float64, float64) {
	if len(g.v) == 0 {
		return 0, 0
	}
	s := slices.Clone(g.v)
	slices.Sort(s)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return rank(p), rank(q)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func capString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
