package pace

import "time"

// Timeline records when a stream's events arrived from the upstream and
// when the client was sent its own, per lane: the picture of what the
// re-pacer did, for the status page. It is bounded: past MaxMarks marks
// the rest are counted in Dropped, not kept. A Timeline belongs to one
// stream; Run writes it under the stream's lock and the caller reads it
// after Run returns.
type Timeline struct {
	Start   time.Time // the first mark's time
	Marks   []Mark
	Dropped int
}

// MaxMarks bounds a Timeline (16 bytes a mark: 64 KiB at most).
const MaxMarks = 4096

// Mark is one event on one side of the relay.
type Mark struct {
	At    time.Duration // since Start
	Runes uint32        // the text it carried (reasoning or answer), in runes
	Out   bool          // sent to the client; false: arrived from the upstream
	Lane  MarkLane
}

// MarkLane is what an event carried.
type MarkLane uint8

const (
	LaneOther     MarkLane = iota // no text: a role, a tool call, usage, the end
	LaneReasoning                 // reasoning text
	LaneAnswer                    // answer text
	LaneHeartbeat                 // a keep-alive comment the relay sent (Out only)
)

func (l MarkLane) String() string {
	switch l {
	case LaneReasoning:
		return "reasoning"
	case LaneAnswer:
		return "answer"
	case LaneHeartbeat:
		return "heartbeat"
	}
	return "other"
}

// add records a mark at now; a nil Timeline records nothing.
func (t *Timeline) add(now time.Time, out bool, lane MarkLane, runes int) {
	if t == nil {
		return
	}
	if t.Start.IsZero() {
		t.Start = now
	}
	if len(t.Marks) >= MaxMarks {
		t.Dropped++
		return
	}
	t.Marks = append(t.Marks, Mark{At: max(now.Sub(t.Start), 0), Runes: uint32(max(runes, 0)), Out: out, Lane: lane})
}

// Count returns the marks on one side (out: sent to the client).
func (t *Timeline) Count(out bool) int {
	n := 0
	for _, m := range t.Marks {
		if m.Out == out && m.Lane != LaneHeartbeat {
			n++
		}
	}
	return n
}

// chunkLane is the lane of a classified chunk.
func chunkLane(c *Chunk) MarkLane {
	switch {
	case c.ReasoningRunes > 0:
		return LaneReasoning
	case c.AnswerRunes > 0:
		return LaneAnswer
	}
	return LaneOther
}

// ClusterRate is the share of a stream's reasoning text (in runes, for
// tokens) in the late half of its reasoning phase, on one side (out: as
// sent to the client; else as received): the phase runs from the first
// reasoning event to the last, and the late half is after its midpoint.
// Reasoning that clusters towards the end, as reasoning models send it,
// scores about 0.7-0.8; an even flow about 0.5. ok is false without two
// reasoning events apart in time.
func (t *Timeline) ClusterRate(out bool) (rate float64, ok bool) {
	side := 0
	if out {
		side = 1
	}
	c := t.clusterRates()
	return c[side].rate, c[side].ok
}

// sideRate is one side's cluster rate.
type sideRate struct {
	rate float64
	ok   bool
}

// clusterRates computes both sides' ClusterRate in two passes over the
// marks: one for each side's reasoning phase, one for its late half.
func (t *Timeline) clusterRates() (r [2]sideRate) {
	var first, last [2]time.Duration
	var n [2]int
	for _, m := range t.Marks {
		if m.Lane != LaneReasoning || m.Runes == 0 {
			continue
		}
		s := 0
		if m.Out {
			s = 1
		}
		if n[s] == 0 {
			first[s] = m.At
		}
		last[s] = m.At
		n[s]++
	}
	var mid [2]time.Duration
	for s := range 2 {
		mid[s] = first[s] + (last[s]-first[s])/2
	}
	var late, all [2]float64
	for _, m := range t.Marks {
		if m.Lane != LaneReasoning {
			continue
		}
		s := 0
		if m.Out {
			s = 1
		}
		all[s] += float64(m.Runes)
		if m.At > mid[s] {
			late[s] += float64(m.Runes)
		}
	}
	for s := range 2 {
		if n[s] >= 2 && last[s] > first[s] {
			r[s] = sideRate{rate: late[s] / all[s], ok: true}
		}
	}
	return r
}

// Clusters are a stream's reasoning cluster rates (ClusterRate): as
// received (In) and as sent (Out); Known is false when the stream had too
// little reasoning to say on either side, InKnown when it had too little
// as received (reasoning hidden from the client has no Out side).
type Clusters struct {
	In, Out float64
	Known   bool
	InKnown bool
}

// Clusters returns both sides' ClusterRate.
func (t *Timeline) Clusters() Clusters {
	c := t.clusterRates()
	return Clusters{In: c[0].rate, Out: c[1].rate, Known: c[0].ok && c[1].ok, InKnown: c[0].ok}
}
