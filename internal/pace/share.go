package pace

import (
	"math"
	"time"
)

// share divides the contested ticks of a split-reasoning stream between
// its two lanes by Config.SplitRatio, the reasoning lane's share.
//
// A tick is contested when both lanes have text queued ahead of the first
// barrier. Without a share, such a tick sends a piece of each lane (two
// emissions); with one, a single lane sends its rate piece and the other
// only the text due before the next tick, so that over a long run the
// reasoning lane sends about SplitRatio of the rate pieces: 0.35, about a
// third. Ticks where one lane has nothing queued are not contested: that
// lane's tick goes to the other, whatever the ratio.
//
// The delay bounds win over the ratio: a lane's text due before the next
// tick (its max delay, or the reasoning drain once the answer started) is
// sent at that tick whether the lane won it or not, so a ratio never
// makes a lane break its bound; at 0 the reasoning waits while the answer
// has text and goes out when it falls due (or when the answer lane is
// empty), at 1 the reverse. A lane that wins a tick but whose rate gives
// it nothing to send hands the tick to the other (the tick is not
// wasted), and the share stays owed to it.
//
// The scheduler is a deficit counter in fixed point (error diffusion, as
// Bresenham draws a line): acc is the reasoning lane's owed share of an
// emission, in 1/shareScale units; each rate piece the answer sends adds
// the ratio, each one the reasoning sends adds the ratio less one whole.
// After n contested ticks the reasoning has sent within one of ratio×n.
type share struct {
	reasoning int64 // the reasoning lane's share, in 1/shareScale units
	acc       int64 // in [0, shareScale)
}

const shareScale = 1 << 20

// newShare returns the share for a ratio in [0, 1]; values outside are
// clamped and NaN counts as 0.5 (the relay refuses them before).
func newShare(ratio float64) share {
	if math.IsNaN(ratio) {
		ratio = 0.5
	}
	r := int64(math.Round(min(max(ratio, 0), 1) * shareScale))
	// acc starts half way, so the rounding error stays within half an
	// emission either side (0.5: answer, then reasoning, alternately).
	return share{reasoning: r, acc: shareScale / 2}
}

// next is the lane that sends the rate piece of the next contested tick.
func (s *share) next() uint8 {
	if s.acc+s.reasoning >= shareScale {
		return laneReasoning
	}
	return laneAnswer
}

// took records which lane sent the rate piece of a contested tick. A lane
// that took a tick next did not give (it had nothing to send) leaves the
// other owed at most one emission: the counter is kept in its range.
func (s *share) took(ln uint8) {
	s.acc += s.reasoning
	if ln == laneReasoning {
		s.acc -= shareScale
	}
	s.acc = min(max(s.acc, 0), shareScale-1)
}

// tickShared is tick for a split-reasoning stream with a share (first:
// the lane of the oldest text): the lane the share picks sends its due
// text and its rate piece, the other its due text only; when neither lane
// is queued ahead of the first barrier, or only one is, it is an ordinary
// tick.
func (p *Pacer) tickShared(first uint8, now, horizon time.Time) {
	if !p.queuedAhead(1 - first) {
		p.serve(first, now, horizon, false)
		return
	}
	win := p.share.next()
	lose := 1 - win
	if !p.serve(win, now, horizon, false) {
		// Nothing of its rate this tick: the other lane's turn, and the
		// winner stays owed.
		win, lose = lose, win
		if !p.serve(win, now, horizon, false) {
			return
		}
	} else {
		p.serve(lose, now, horizon, true)
	}
	p.share.took(win)
	p.lanes[win].yielded = 0
	p.lanes[lose].yielded++
}

// queuedAhead reports whether lane ln has text not yet sent ahead of the
// first barrier.
func (p *Pacer) queuedAhead(ln uint8) bool {
	for i := p.head; i < len(p.items) && p.items[i].text; i++ {
		if it := &p.items[i]; it.lane == ln && !it.sent && it.runes > 0 {
			return true
		}
	}
	return false
}
