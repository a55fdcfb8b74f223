package llmrelay

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
)

// The status page's recent history: the last streams, each with its
// timeline of event arrivals and emissions (what the re-pacer did to it),
// and the last requests that needed more than one attempt. Both are
// process-wide rings of fixed size, so their memory is bounded: at most
// recentKept streams of at most pace.MaxMarks marks each.

// recentKept is how many streams and failovers the status keeps.
const recentKept = 50

// streamView is one recent stream, as the status shows it.
type streamView struct {
	At       time.Time `json:"at"` // when the request started
	Key      string    `json:"key"`
	Alias    string    `json:"alias"`
	Upstream string    `json:"upstream"`
	Model    string    `json:"model"`
	Mode     string    `json:"mode"` // off, pace or split-reasoning
	// EventsIn and EventsOut are the events received and sent (the log
	// line's events_in and events_out); Heartbeats the keep-alives sent.
	EventsIn   int `json:"events_in"`
	EventsOut  int `json:"events_out"`
	Heartbeats int `json:"heartbeats"`
	// The smoothness figures, as in the log line: the delivery-rate CV of
	// the input and the output, the p99 gap between output events, the
	// p99 lag the relay added to text, and the tail (last output minus
	// last input), in milliseconds.
	RateCVIn  float64 `json:"rate_cv_in"`
	RateCVOut float64 `json:"rate_cv_out"`
	GapP99MS  float64 `json:"gap_p99_ms"`
	LagP99MS  float64 `json:"lag_p99_ms"`
	TailMS    float64 `json:"tail_ms"`
	// ReasoningClusterIn and Out are the share of the reasoning in the
	// late half of its phase, as received and as sent (absent with too
	// little reasoning): about 0.7-0.8 clustered, 0.5 even.
	ReasoningClusterIn  *float64 `json:"reasoning_cluster_in,omitempty"`
	ReasoningClusterOut *float64 `json:"reasoning_cluster_out,omitempty"`
	// Handoff is a hand-off alias's legs (absent on other aliases);
	// Upstream and Model are then the answer leg's.
	Handoff *handoffView `json:"handoff,omitempty"`
	// Marks are the timeline: [milliseconds since the first event, side
	// (0 in from the upstream, 1 out to the client), lane (0 other, 1
	// reasoning, 2 answer, 3 heartbeat)] per event, at most 4,096.
	Marks   [][3]float64 `json:"marks"`
	Dropped int          `json:"marks_dropped,omitempty"` // marks past the bound
}

// failoverView is one recent request that needed more than one attempt.
type failoverView struct {
	At       time.Time        `json:"at"`
	Key      string           `json:"key"`
	Alias    string           `json:"alias"`
	Status   int              `json:"status"`
	Attempts []attemptOutcome `json:"attempts"`
}

// attemptOutcome is one attempt (or skip) of a request, in order.
type attemptOutcome struct {
	Target  string  `json:"target"` // upstream (model)
	Outcome string  `json:"outcome"`
	AtMS    float64 `json:"at_ms"` // since the request started
}

// ring is a fixed-size ring of the last values added.
type ring[T any] struct {
	mu   sync.Mutex
	buf  []T
	next int
	full bool
}

// add puts v in the ring and returns the value it replaced (the zero
// value while the ring is filling).
func (r *ring[T]) add(v T) (evicted T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.buf == nil {
		r.buf = make([]T, recentKept)
	}
	evicted = r.buf[r.next]
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
	return evicted
}

// each calls f with every value, the newest first, under the ring's lock:
// a value f sees is not evicted (and its parts not recycled) meanwhile.
func (r *ring[T]) each(f func(T)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.next
	if r.full {
		n = len(r.buf)
	}
	for i := 1; i <= n; i++ {
		f(r.buf[(r.next-i+len(r.buf))%len(r.buf)])
	}
}

// recentStream is a kept stream: its figures, and its timeline, turned
// into marks only when the status is read (a stream pays for appending
// its marks, nothing more).
type recentStream struct {
	view streamView
	tl   *pace.Timeline
}

var (
	recentStreams   ring[*recentStream]
	recentFailovers ring[failoverView]
)

// markSlices recycles the marks of streams that left the ring.
var markSlices = sync.Pool{New: func() any { s := make([]pace.Mark, 0, 128); return &s }}

// newTimeline is a stream's timeline, with a recycled slice for its marks.
func newTimeline() *pace.Timeline {
	return &pace.Timeline{Marks: (*markSlices.Get().(*[]pace.Mark))[:0]}
}

// recordStream keeps a finished stream's timeline and figures.
func recordStream(rec *requestLog, tl *pace.Timeline, st *pace.Stats) {
	r := st.Report
	v := streamView{At: rec.start, Key: rec.key, Alias: rec.alias, Upstream: rec.upstream, Model: rec.model,
		Mode: rec.mode, EventsIn: r.EventsIn, EventsOut: r.EventsOut,
		RateCVIn: r.InRateCV, RateCVOut: r.OutRateCV, GapP99MS: ms(r.OutGap.P99), LagP99MS: ms(r.Lag.P99),
		TailMS: ms(r.TailFlush), Dropped: tl.Dropped}
	if c := st.Cluster; c.Known {
		v.ReasoningClusterIn, v.ReasoningClusterOut = &c.In, &c.Out
	}
	if h := rec.handoff; h != nil {
		v.Handoff = h.view()
		if h.answerUpstream != "" {
			v.Upstream, v.Model = h.answerUpstream, h.answerModel
		}
	}
	if old := recentStreams.add(&recentStream{view: v, tl: tl}); old != nil && cap(old.tl.Marks) <= 2*pace.MaxMarks {
		marks := old.tl.Marks[:0]
		markSlices.Put(&marks)
	}
}

// recentStreamViews returns the kept streams, the newest first, with
// their marks.
func recentStreamViews() []streamView {
	out := []streamView{}
	recentStreams.each(func(k *recentStream) {
		v := k.view
		v.Marks = make([][3]float64, len(k.tl.Marks))
		for j, m := range k.tl.Marks {
			side := 0.0
			if m.Out {
				side = 1
			}
			if m.Lane == pace.LaneHeartbeat {
				v.Heartbeats++
			}
			v.Marks[j] = [3]float64{float64(m.At.Microseconds()) / 1000, side, float64(m.Lane)}
		}
		out = append(out, v)
	})
	return out
}

// recentFailoverViews returns the kept failovers, the newest first.
func recentFailoverViews() []failoverView {
	out := []failoverView{}
	recentFailovers.each(func(f failoverView) { out = append(out, f) })
	return out
}

// recordFailover keeps a request that needed more than one attempt.
func recordFailover(rl *requestLog) {
	if len(rl.outcomes) == 0 {
		return
	}
	v := failoverView{At: rl.start, Key: rl.key, Alias: rl.alias, Status: rl.status}
	for i, o := range rl.outcomes {
		target, outcome := o, ""
		if j := strings.Index(o, "): "); j >= 0 { // a note is "upstream (model): outcome"
			target, outcome = o[:j+1], o[j+3:]
		}
		v.Attempts = append(v.Attempts, attemptOutcome{Target: target, Outcome: outcome, AtMS: ms(rl.outcomeAt[i])})
	}
	if rl.upstream != "" {
		v.Attempts = append(v.Attempts, attemptOutcome{Target: rl.upstream + " (" + rl.model + ")",
			Outcome: "answered " + strconv.Itoa(rl.status), AtMS: ms(rl.ttfb)})
	}
	recentFailovers.add(v)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
