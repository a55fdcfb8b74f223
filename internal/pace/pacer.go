package pace

import (
	"bytes"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/jsonobj"
	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
	"github.com/llmrelay/caddy-llm-relay/internal/smoothness"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// Pacer is the re-pacing scheduler for one stream. Push feeds it upstream
// blocks, End says the upstream is finished, and Next returns the bytes to
// write at a given time and when to call it again. All times come from the
// caller: the Pacer has no clock and starts no goroutines. It is not safe
// for concurrent use.
type Pacer struct {
	cfg       Config
	tickEvery time.Duration // spacing of paced emissions; see tickInterval
	lanes     [2]lane       // laneAnswer, laneReasoning

	items []item // the FIFO: items[head:] are queued
	head  int
	tight int    // items[:tight] already had their deadline tightened
	arena []byte // bytes of queued items; item spans index into it

	nextTick time.Time // earliest next paced emission
	urgent   bool      // tick at once: a delta arrived on time to an idle lane
	lastText time.Time // when text last went out

	// Buffers reused across calls: scratch and strip on the Push side,
	// out and text on the Next side.
	scratch, strip, stripEv []byte
	out, text               []byte
	ev                      pendingEvent

	rec          *smoothness.Recorder
	bufs         *buffers    // where the buffers above go back on Release
	hiding       bool        // reasoning is being dropped: HideReasoning, or a truncating budget ran out
	reasoning    BudgetCount // the reasoning budget's count
	passThrough  bool        // a Chat stream sent as it came: ClassifyCount suffices, and pass
	passed       bool        // out holds what pass sent since the last Next
	answerSeen   bool        // answer text has been queued
	overBudget   bool        // the reasoning budget ran out (failover or error)
	usage        []byte
	usageStd     bool // usage holds a standard (top-level) usage object, not a provider's
	toolRunes    int  // tool call argument runes (Chat), for the usage estimate
	visibleRunes int  // answer and reasoning runes read (OutputRunes)
	reasonRunes  int  // reasoning runes read, for the usage estimate
	hiddenRunes  int  // reasoning runes hidden by HideReasoning
	dropComments int  // upstream comments not forwarded
	eventsOut    int
	tl           *Timeline // Config.Timeline: marks of arrivals and emissions, or nil
	lastLane     MarkLane  // the lane of the last event pushed (pass sends that event)
	share        *share    // Config.SplitRatio's division of contested ticks (ModeSplit), or nil
	msg          msgState  // FormatMessages only
	rsp          rspState  // FormatResponses only
}

const (
	laneAnswer    = 0
	laneReasoning = 1

	// reasoningHold is how many gaps the reasoning lane's backlog lasts
	// in split-reasoning mode (the answer lane's: untilNext): a reserve
	// that lets reasoning bridge the pause many models leave before they
	// answer (1.2 s after clusters 600 ms apart, in the trace set), where
	// a lane that held 80 % of its bound, as it once did, dumped a second
	// of reasoning when the answer came straight after it.
	reasoningHold = 1.6

	// onTime is, in thirds of a tick interval, how long after the last
	// text a delta arriving to an idle lane goes at once (see pushText).
	onTime = 2

	// freshPiece is the size (in runes) of the first piece sent when a
	// lane wakes from idle: a typical delta fits, so a stream that is
	// already smooth passes through unchanged.
	freshPiece = 16
)

// span is a byte range of the Pacer's arena.
type span struct{ off, end int }

func (s span) len() int { return s.end - s.off }

// item is one queued upstream event: a text delta that may be split or
// merged, or a barrier that is sent whole, in its turn.
type item struct {
	text     bool
	kind     Kind // barriers: KindOther, KindDone, KindError, KindComment
	lane     uint8
	arrival  time.Time
	deadline time.Time // text: when its last rune must have left

	raw      span // the event as received (always stored first)
	pre, suf span // text: the JSON around the text value
	body     span // text: the decoded text; body.off advances as it is sent
	runes    int  // text: runes not yet sent; barriers: visible runes carried
	whole    bool // text: nothing of it sent yet
	sent     bool // text: all of it sent, ahead of an item of the other lane
	thought  bool // text: reasoning (whatever lane it is paced on), for the Timeline

	// Responses: where the sequence number is in raw, and (text) in pre
	// or suf; the event type of a text item.
	rawSeq seqRef
	seq    seqRef
	seqIn  uint8
	rtyp   rspType
}

// pendingEvent is the output event being assembled from merged pieces.
type pendingEvent struct {
	open     bool
	lane     uint8
	thought  bool // reasoning text (pendingEvent.lane is where it is paced)
	pre, suf span
	raw      span // the sole piece's raw event, when it is a whole item
	pieces   int
	whole    bool // the sole piece is a whole item
	runes    int

	// Responses: as in item, of the first piece (seq, seqIn, rtyp) and
	// of the sole piece (rawSeq).
	rawSeq seqRef
	seq    seqRef
	seqIn  uint8
	rtyp   rspType
}

// NewPacer returns a Pacer for one stream.
func NewPacer(cfg Config) *Pacer {
	cfg = cfg.withDefaults()
	p := &Pacer{cfg: cfg, tickEvery: tickInterval(cfg.MinInterval), rec: smoothness.New(), hiding: cfg.HideReasoning, tl: cfg.Timeline}
	b := pacerBuffers.Get().(*buffers)
	p.items, p.arena = b.items[:0], b.arena[:0]
	p.scratch, p.strip, p.stripEv, p.out, p.text = b.scratch[:0], b.strip[:0], b.stripEv[:0], b.out[:0], b.text[:0]
	*b = buffers{} // the Pacer has them now; b goes back with them on Release
	p.bufs = b
	answer := cfg.MaxDelay
	reasoning := cfg.MaxDelay
	if cfg.Mode == ModeSplit {
		reasoning = cfg.ReasoningMaxDelay
	}
	p.lanes[laneAnswer] = newLane(answer, p.tickEvery)
	p.lanes[laneReasoning] = newLane(reasoning, p.tickEvery)
	if cfg.Mode == ModeSplit {
		p.lanes[laneReasoning].hold = reasoningHold
		if cfg.SplitRatio != nil {
			s := newShare(*cfg.SplitRatio)
			p.share = &s
		}
	}
	p.msg.dropIdx, p.msg.thinkIdx = -1, -1
	p.reasoning = BudgetCount{Limit: cfg.ReasoningBudget, Action: cfg.BudgetAction}
	// A Chat stream sent as it came needs no chunk's text, only its
	// kind and size (see ClassifyCount).
	p.passThrough = cfg.Format == FormatChat && cfg.Mode == ModeOff && !cfg.HideReasoning && cfg.ReasoningBudget <= 0
	p.rsp.renumber = cfg.Format == FormatResponses &&
		(cfg.Mode != ModeOff || cfg.HideReasoning || cfg.ReasoningBudget > 0)
	return p
}

// tickInterval is the spacing of paced emissions: min_interval, stretched
// so that a whole number of ticks fits in 100 ms (30 ms becomes 33.3 ms).
// With 30 ms ticks, successive 100 ms stretches would carry 4, 3, 3, 4 …
// emissions, an unevenness of ±15 % that a reader (or any windowed rate
// measure) sees even when every emission is the same size.
func tickInterval(minInterval time.Duration) time.Duration {
	const frame = 100 * time.Millisecond
	if minInterval >= frame || minInterval <= 0 {
		return minInterval
	}
	return frame / (frame / minInterval)
}

// Push queues one upstream block received at now and returns its kind.
func (p *Pacer) Push(ev *sse.Event, now time.Time) Kind {
	var c Chunk
	if p.passThrough {
		c, p.scratch = ClassifyCount(ev, p.scratch[:0])
	} else {
		c, p.scratch = ClassifyFormat(p.cfg.Format, ev, p.scratch[:0])
	}
	visible := c.AnswerRunes + c.ReasoningRunes
	p.reasonRunes += c.ReasoningRunes
	p.visibleRunes += visible
	if c.Kind != KindComment {
		// Judge the silence after this event by its own lane's bound.
		if c.Kind == KindText && c.Channel == ChanReasoning {
			p.rec.SetMaxDelay(p.lanes[laneReasoning].maxDelay)
		} else {
			p.rec.SetMaxDelay(p.lanes[laneAnswer].maxDelay)
		}
		p.rec.Input(now, visible)
		p.lastLane = chunkLane(&c)
		p.tl.add(now, false, p.lastLane, visible)
	}
	switch p.reasoning.Count(&c, p.answerSeen) {
	case BudgetEnd:
		p.overBudget = true
		p.hiding = true // nothing more of it goes out while the stream ends
	case BudgetLeaveOut:
		p.hiding = true
	}
	if c.AnswerRunes > 0 {
		p.answerSeen = true
	}
	switch p.cfg.Format {
	case FormatMessages:
		return p.pushMessages(ev, &c, now)
	case FormatResponses:
		return p.pushResponses(ev, &c, now)
	}
	if c.Kind == KindOther {
		// Tool calls are output the text counts do not see: a stream
		// with no usage is estimated from both.
		p.toolRunes += usage.ToolArgumentRunes(ev.Data)
	}
	if c.Kind == KindOther && hasUsageObject(ev.Data) && p.readUsage(ev.Data) {
		return c.Kind // the usage-only chunk, which the client did not ask for
	}
	switch {
	case p.hiding && c.ReasoningRunes > 0:
		p.pushHidden(ev, &c, now)
		return c.Kind
	case p.cfg.Mode == ModeOff:
		if p.passThrough && p.head == len(p.items) {
			p.pass(c.Kind, ev.Raw, visible, now)
			return c.Kind
		}
		p.pushBarrier(c.Kind, ev.Raw, visible, now)
		return c.Kind
	case c.Kind == KindComment && !bytes.HasPrefix(ev.Raw, relayComment):
		// Paced streams send their own heartbeats; an upstream keep-alive
		// carries nothing for the client. The relay's own comments (a
		// continuation's seam, `: relay-continued ...`) go out in their
		// place, as barriers.
		p.dropComments++
		return c.Kind
	case c.Kind == KindText:
		p.pushText(&c, ev.Raw, now)
		return c.Kind
	}
	p.pushBarrier(c.Kind, ev.Raw, visible, now)
	return c.Kind
}

// relayComment starts the comments the relay itself writes into a
// stream, which pacing keeps (see push).
var relayComment = []byte(": relay-")

// hasUsageObject is a cheap test for a usage object (not `"usage":null`,
// which OpenAI puts in every chunk once usage is requested), so the JSON
// is decoded only for the one chunk that carries it.
func hasUsageObject(data []byte) bool {
	return jsonscan.MayHaveMember(data, `"usage"`, '{')
}

// readUsage keeps the usage object of a chunk, and reports whether the
// chunk is a usage-only chunk to drop. It reads the chunk as
// encoding/json would decode it into {choices []json.RawMessage; usage
// json.RawMessage} (keys matched without case, the last one winning),
// from the top-level members alone. A chunk without a standard usage
// object may carry a provider's own (usage.ProviderUsage: Groq's
// x_groq.usage, Moonshot's usage in the choice): it is kept until a
// standard one comes, and the chunk, which has choices, is never dropped.
func (p *Pacer) readUsage(data []byte) (drop bool) {
	members, err := jsonobj.Split(data)
	if err != nil {
		return false
	}
	var u, choices []byte
	for _, m := range members {
		switch {
		case strings.EqualFold(m.Key, "usage"):
			u = m.Value
		case strings.EqualFold(m.Key, "choices"):
			choices = m.Value
		}
	}
	none, ok := emptyArray(choices)
	if !ok {
		return false
	}
	if len(u) == 0 || string(u) == "null" {
		if pu, found := usage.ProviderUsage(data); found && !p.usageStd {
			p.usage = append(p.usage[:0], pu...)
		}
		return false
	}
	p.usage = append(p.usage[:0], u...)
	p.usageStd = true
	return p.cfg.DropUsage && none
}

// emptyArray reports whether v (a JSON value, or nil for none) decodes to
// an empty []json.RawMessage; ok is false when it does not decode into one
// at all (not an array, not null).
func emptyArray(v []byte) (empty, ok bool) {
	if len(v) == 0 || string(v) == "null" {
		return true, true
	}
	if v[0] != '[' {
		return false, false
	}
	return jsonscan.SkipWS(v, 1) == len(v)-1, true
}

// OverBudget reports whether the reasoning budget ran out with the error
// or failover action: the stream must end.
func (p *Pacer) OverBudget() bool { return p.overBudget }

// pushHidden queues an event that carries reasoning text to hide: a pure
// reasoning delta is dropped; anything else is sent without its reasoning
// fields.
func (p *Pacer) pushHidden(ev *sse.Event, c *Chunk, now time.Time) {
	if c.Kind == KindText && !c.HasRole {
		p.hiddenRunes += c.ReasoningRunes
		return
	}
	stripped, removed, ok := StripReasoning(p.strip[:0], ev.Data)
	if !ok {
		p.pushBarrier(c.Kind, ev.Raw, c.AnswerRunes+c.ReasoningRunes, now)
		return
	}
	p.strip = stripped
	p.hiddenRunes += removed
	p.stripEv = sse.AppendData(p.stripEv[:0], stripped)
	p.pushBarrier(c.Kind, p.stripEv, c.AnswerRunes, now)
}

func (p *Pacer) pushText(c *Chunk, raw []byte, now time.Time) {
	ln := uint8(laneAnswer)
	if c.Channel == ChanReasoning && p.cfg.Mode == ModeSplit {
		ln = laneReasoning
	}
	switched := p.cfg.Mode == ModeSplit && ln == laneAnswer && p.lanes[laneReasoning].backlog > 0
	// The answer's first text, in the same burst as the reasoning's last
	// (see holdStart).
	midBurst := switched && p.lanes[ln].last.IsZero() && now.Sub(p.lanes[laneReasoning].last) < p.tickEvery
	if switched {
		// The answer starts: queued reasoning must finish within
		// ReasoningDrain, at a steady rate, rather than at once (a
		// reader would see a dump of reasoning text, the very thing
		// pacing is for) or at its own pace (a reasoning pane
		// would still be moving a second after the answer began). The
		// answer does not wait for it: tick serves both lanes.
		drain := now.Add(p.cfg.ReasoningDrain)
		for i := p.head; i < len(p.items); i++ {
			if it := &p.items[i]; it.text && it.lane == laneReasoning && it.deadline.After(drain) {
				it.deadline = drain
			}
		}
		lag := max(p.cfg.ReasoningDrain-p.tickEvery, p.tickEvery)
		p.lanes[laneReasoning].hurry(lag.Seconds())
	}
	if p.cfg.Mode == ModeSplit && ln == laneAnswer {
		p.lanes[laneAnswer].inherit(&p.lanes[laneReasoning])
	}
	if l := &p.lanes[ln]; l.backlog == 0 && now.Sub(p.lastText) >= onTime*p.tickEvery/3 {
		// Nothing of this lane is queued and the last text went out
		// long enough ago: the upstream is already as smooth as the
		// ticks would make it, so this delta goes now rather than at
		// the next grid tick. Waiting would merge deltas that arrive
		// a little faster than the interval (30 ms apart against
		// 33 ms ticks) two by two and leave a double gap after each
		// pair: less even than the upstream.
		p.urgent = true
	}
	it := item{text: true, kind: KindText, lane: ln, arrival: now, whole: true, thought: c.Channel == ChanReasoning}
	it.deadline = now.Add(p.lanes[ln].maxDelay)
	it.raw = p.store(raw)
	it.pre = p.store(c.Prefix)
	it.suf = p.store(c.Suffix)
	it.body = p.store(c.Text)
	it.runes = utf8.RuneCount(c.Text)
	p.items = append(p.items, it)
	p.lanes[ln].arrive(now, it.runes)
	if l := &p.lanes[ln]; ln == laneAnswer && l.inherited && (midBurst || !l.heldUntil.IsZero()) {
		p.holdStart(now)
	}
	p.meetDeadlines(ln, &p.items[len(p.items)-1], now)
}

// holdStart paces the answer lane's first cluster when the switch from
// reasoning to answer fell inside a burst (its first answer text came
// less than a tick after the reasoning's last, with reasoning still
// queued; split-reasoning): at the rate the stream had, which the lane
// inherited (lane.inherit), starting late enough that the cluster lasts
// until the next one is due. Such a cluster is the rest of a burst, a
// few tokens it may be; spread over a whole gap, as steadyRate spreads a
// backlog, they trickled out at a fraction of the answer's rate and the
// next burst jumped to the full rate: the answer crawled for 300 ms,
// then ran, with a gap over 250 ms among its first words (the trace
// reasoning-answer-250ms: -76 % rate CV on the answer where the other
// traces reach -90 %). Held back, it starts at its pace and keeps it.
// The reader is not left waiting, since the queued reasoning drains
// meanwhile: the hold ends by the time that drain does (ReasoningDrain)
// and well within MaxDelay. A cluster that lasts the gap at that rate
// is not held (the later reads of a burst may lift a hold its first
// read set); the next cluster, a barrier or the end ends a hold
// (lane.measure, lane.hurry).
func (p *Pacer) holdStart(now time.Time) {
	l := &p.lanes[laneAnswer]
	rate := catchUp * l.inRate
	l.rate = max(l.rate, rate)
	last := min(time.Duration(l.hold*l.gap*float64(time.Second)), p.cfg.ReasoningDrain, l.maxDelay-2*p.tickEvery)
	drain := time.Duration(float64(l.backlog) / l.rate * float64(time.Second))
	held := !l.heldUntil.IsZero()
	l.heldUntil = l.clusterAt.Add(last - drain)
	if !l.heldUntil.After(now) {
		l.heldUntil = time.Time{}
		if held && l.fresh {
			// The burst's later reads made it large enough: it
			// starts at once, as it would have.
			p.urgent = true
		}
	}
}

// meetDeadlines raises a lane's drain rate to a constant rate at which
// its queued text leaves before its deadlines (less one tick, for the
// tick that sends it): the rate the oldest item needs, and the rate the
// whole backlog needs by the newest item's deadline. Deadlines grow along
// the queue and so does the text before them, so these two bind in
// practice; the tick sends anything due in full regardless. A rate that
// follows the input's average can fall behind a burst larger than usual;
// this catches up evenly instead of leaving the rest to the deadline,
// which would send it all at once. newest is the item just queued.
func (p *Pacer) meetDeadlines(ln uint8, newest *item, now time.Time) {
	l := &p.lanes[ln]
	need := func(runes int, deadline time.Time) float64 {
		left := max(deadline.Sub(now)-p.tickEvery, p.tickEvery)
		return float64(runes) / left.Seconds()
	}
	rate := need(l.backlog, newest.deadline)
	for i := p.head; i < len(p.items); i++ {
		if it := &p.items[i]; it.text && it.lane == ln && it.runes > 0 {
			rate = max(rate, need(it.runes, it.deadline))
			break
		}
	}
	l.rate = max(l.rate, rate)
}

func (p *Pacer) pushBarrier(kind Kind, raw []byte, visible int, now time.Time) {
	p.tighten(now)
	p.items = append(p.items, item{kind: kind, arrival: now, raw: p.store(raw), runes: visible})
}

// pass sends raw as it came, with nothing queued before it: what
// pushBarrier and a Next at the same time would send and record, without
// the queue (the bytes go straight to the next Next's output).
func (p *Pacer) pass(kind Kind, raw []byte, visible int, now time.Time) {
	if !p.passed {
		p.out, p.passed = p.out[:0], true
	}
	p.out = append(p.out, raw...)
	if kind != KindComment {
		p.rec.Output(now, visible)
		p.eventsOut++
		p.tl.add(now, true, p.lastLane, visible)
		if visible > 0 {
			p.rec.Lag(0, visible)
		}
	}
}

// End records that the upstream is finished (or broken) at now: the
// backlog drains within Flush.
func (p *Pacer) End(now time.Time) { p.tighten(now) }

// tighten makes all queued text due within Flush of now, and speeds up
// the lanes to match, because something that must not wait (a barrier,
// the end) is behind it.
func (p *Pacer) tighten(now time.Time) {
	if p.tight < p.head {
		p.tight = p.head
	}
	limit := now.Add(p.cfg.Flush)
	any := false
	for i := p.tight; i < len(p.items); i++ {
		if it := &p.items[i]; it.text && it.deadline.After(limit) {
			it.deadline = limit
			any = true
		}
	}
	p.tight = len(p.items)
	if !any {
		return
	}
	lag := p.cfg.Flush - p.tickEvery
	if lag < p.tickEvery {
		lag = p.tickEvery
	}
	for i := range p.lanes {
		p.lanes[i].hurry(lag.Seconds())
	}
}

// Next returns what to write at now, and when to call Next again (zero:
// not until the next Push or End). The returned slice is valid until the
// next call to Next.
func (p *Pacer) Next(now time.Time) (out []byte, wake time.Time) {
	if !p.passed {
		p.out = p.out[:0]
	}
	p.passed = false
	p.sendBarriers(now)
	if p.head < len(p.items) {
		h := &p.items[p.head]
		if p.urgent || !now.Before(p.nextTick) || !now.Before(h.deadline) {
			p.tick(now)
			p.sendBarriers(now)
		}
	}
	p.compact()
	if p.head < len(p.items) {
		wake = p.nextTick
		if d := p.items[p.head].deadline; d.Before(wake) {
			wake = d
		}
	}
	return p.out, wake
}

// Due is the earliest time at or after now at which Next would send
// something, or the zero time when nothing is queued: at once for a
// barrier at the head of the queue or an urgent tick, else the next tick
// or the head's deadline, whichever comes first (Next's own conditions).
// A writer that already waits for an earlier or equal time need not be
// woken for what was just pushed.
func (p *Pacer) Due(now time.Time) time.Time {
	if p.head == len(p.items) {
		return time.Time{}
	}
	h := &p.items[p.head]
	if !h.text || p.urgent {
		return now
	}
	due := p.nextTick
	if h.deadline.Before(due) {
		due = h.deadline
	}
	if due.Before(now) {
		return now
	}
	return due
}

// tick sends one paced emission: each lane's text due before the next
// tick in full, then one piece sized by the lane's drain rate; the lane of
// the oldest text first. In split-reasoning mode the lanes are served
// side by side, so the answer flows while reasoning queued before it
// drains (see pushText); text behind a barrier waits for the barrier.
func (p *Pacer) tick(now time.Time) {
	p.urgent = false
	horizon := now.Add(p.tickEvery)
	for i := range p.lanes {
		p.stretchFirst(uint8(i), now)
		p.lanes[i].accrue(now)
	}
	if p.head < len(p.items) && p.items[p.head].text {
		first := p.items[p.head].lane
		if p.share != nil {
			p.tickShared(first, now, horizon)
		} else {
			p.serve(first, now, horizon, false)
			if p.cfg.Mode == ModeSplit {
				p.serve(1-first, now, horizon, false)
			}
		}
	}
	p.closeEvent(now)
	for p.head < len(p.items) && p.items[p.head].sent {
		p.pop()
	}
	p.nextTick = p.nextGridTick(now)
}

// serve sends lane ln's part of a tick from the text ahead of the first
// barrier: its text due before the next tick, then, unless dueOnly, a
// piece its rate allows. It reports whether it sent such a piece.
func (p *Pacer) serve(ln uint8, now, horizon time.Time, dueOnly bool) (paced bool) {
	budget := -1 // not known until the first item that is not due
	for i := p.head; i < len(p.items) && p.items[i].text; i++ {
		it := &p.items[i]
		if it.lane != ln || it.sent {
			continue
		}
		nb, nr := it.body.len(), it.runes
		if it.deadline.After(horizon) { // and so are the lane's later ones
			if dueOnly {
				return false
			}
			if budget < 0 {
				budget = p.budget(ln, it, now)
			}
			if budget <= 0 {
				return paced
			}
			nb, nr = cutPoint(p.arena[it.body.off:it.body.end], it.runes, budget)
			budget -= nr
			paced = true
		}
		p.sendPiece(it, nb, nr, now)
		if it.runes > 0 {
			return paced
		}
		it.sent = true
	}
	return paced
}

// budget is the runes lane ln may send this tick, it being its first
// item not yet due.
func (p *Pacer) budget(ln uint8, it *item, now time.Time) int {
	l := &p.lanes[ln]
	switch {
	case now.Before(l.heldUntil):
		// Nothing accrues while held: the first piece is a tick's
		// worth.
		l.credit, l.accrued = 0, now
		return 0
	case l.fresh:
		// The first delta after a pause leaves at once, whole unless it
		// is large.
		b := max(1, int(l.credit))
		if it.whole && it.runes <= freshPiece {
			b = max(b, it.runes)
		}
		return b
	case l.credit >= 0:
		return max(1, int(l.credit))
	}
	return 0
}

// nextGridTick is when the tick after one at now is due. Ticks keep to
// a fixed grid while a backlog lasts: a tick that ran late (a real timer
// fires a little after its time, more on a loaded machine) does not push
// the ones after it back. Counting from now instead, every late wake-up
// would stretch the spacing, the ticks would drift against any 100 ms
// window, and every so often a window would get one emission fewer: the
// unevenness that real timers showed and the virtual clock did not. A
// tick before its grid time (a deadline or a barrier pulled it in), or
// one more than a whole interval late (the lane was idle), starts a new
// grid whose first tick is a third of an interval after now.
//
// Why a third: the interval divides 100 ms (see tickInterval), so a grid
// through now would put every third tick exactly 100 ms, 200 ms … after
// the emission that started it, on the edge of any 100 ms window counted
// from there, as a reader's eye or the rate CV counts. A real timer
// fires late by a little, at random, so such ticks fall now on one side
// of the edge and now on the other, and a window gets two emissions where
// its neighbour gets four: the virtual clock, where timers are exact,
// never sees it. A third of an interval later, the grid's ticks sit two
// thirds of an interval before the edges, so a timer may be that late
// (22 ms at the default 30 ms) before a tick changes window.
func (p *Pacer) nextGridTick(now time.Time) time.Time {
	if due := p.nextTick; !due.IsZero() && !now.Before(due) && now.Sub(due) < p.tickEvery {
		return due.Add(p.tickEvery)
	}
	return now.Add(p.tickEvery / 3)
}

// stretchFirst paces a lane's first cluster, while the cadence is not
// known yet, on a falling rate: at each tick, the rate at which what is
// left would drain linearly down to nothing at the oldest text's deadline
// (less a tick), which is twice the even rate. The first moments of the
// stream go out at the pace a short cadence would need, and as time
// passes without a second cluster the pace falls towards what a long
// cadence needs, instead of betting on one cadence and being wrong by a
// factor of two for the other.
func (p *Pacer) stretchFirst(ln uint8, now time.Time) {
	l := &p.lanes[ln]
	if !l.guessed || l.backlog == 0 {
		return
	}
	for i := p.head; i < len(p.items); i++ {
		it := &p.items[i]
		if !it.text || it.lane != ln || it.runes == 0 {
			continue
		}
		// On the reasoning lane, whose bound is far longer, aim at
		// twice the answer lane's bound instead: cadences of a few
		// hundred milliseconds are the common ones (a 1.5 s decay gave
		// a 300 ms cadence a third of its rate), and what a longer one
		// leaves is spread to the deadline once this end is near.
		end := it.deadline
		if short := it.arrival.Add(p.lanes[laneAnswer].maxDelay * 2); short.Before(end) && short.Sub(now) > 2*p.tickEvery {
			end = short
		}
		if left := end.Sub(now) - p.tickEvery; left > p.tickEvery {
			l.rate = 2 * float64(l.backlog) / left.Seconds()
		}
		return
	}
}

// sendPiece adds the next nb bytes (nr runes) of a text item to the
// output event, merging with the previous piece when both share the same
// JSON envelope.
func (p *Pacer) sendPiece(it *item, nb, nr int, now time.Time) {
	ev := &p.ev
	if ev.open && (ev.lane != it.lane || !p.sameEnvelope(ev, it)) {
		p.closeEvent(now)
	}
	if !ev.open {
		*ev = pendingEvent{open: true, lane: it.lane, thought: it.thought, pre: it.pre, suf: it.suf, seq: it.seq, seqIn: it.seqIn, rtyp: it.rtyp}
		p.text = p.text[:0]
	}
	ev.pieces++
	ev.whole = it.whole && nb == it.body.len()
	ev.raw = it.raw
	ev.rawSeq = it.rawSeq
	ev.runes += nr
	p.text = append(p.text, p.arena[it.body.off:it.body.off+nb]...)
	it.body.off += nb
	it.runes -= nr
	it.whole = false
	p.lanes[it.lane].spend(nr)
	p.rec.Lag(now.Sub(it.arrival), nr)
}

func (p *Pacer) sameEnvelope(ev *pendingEvent, it *item) bool {
	if p.cfg.Format == FormatResponses {
		return p.rspSameEnvelope(ev, it)
	}
	a := p.arena
	return bytes.Equal(a[ev.pre.off:ev.pre.end], a[it.pre.off:it.pre.end]) &&
		bytes.Equal(a[ev.suf.off:ev.suf.end], a[it.suf.off:it.suf.end])
}

// closeEvent writes the assembled event: the upstream's exact bytes when
// it is one whole item, else the envelope around the merged text.
func (p *Pacer) closeEvent(now time.Time) {
	ev := &p.ev
	if !ev.open {
		return
	}
	a := p.arena
	switch {
	case ev.pieces == 1 && ev.whole:
		p.out = p.appendRenumbered(p.out, a[ev.raw.off:ev.raw.end], ev.rawSeq)
	case p.cfg.Format == FormatResponses:
		p.out = p.appendResponsesText(p.out, ev)
	default:
		if p.cfg.Format == FormatMessages {
			p.out = append(p.out, blockDeltaLine...)
		}
		p.out = AppendTextEventParts(p.out, a[ev.pre.off:ev.pre.end], p.text, a[ev.suf.off:ev.suf.end])
	}
	p.rec.Output(now, ev.runes)
	p.eventsOut++
	lane := LaneAnswer
	if ev.thought {
		lane = LaneReasoning
	}
	p.tl.add(now, true, lane, ev.runes)
	if ev.runes > 0 {
		p.lastText = now
	}
	ev.open = false
}

// sendBarriers sends the non-text items at the head of the queue.
func (p *Pacer) sendBarriers(now time.Time) {
	for p.head < len(p.items) && !p.items[p.head].text {
		it := &p.items[p.head]
		p.out = p.appendRenumbered(p.out, p.arena[it.raw.off:it.raw.end], it.rawSeq)
		if it.kind != KindComment {
			p.rec.Output(now, it.runes)
			p.eventsOut++
			p.tl.add(now, true, LaneOther, 0)
			if it.runes > 0 {
				p.rec.Lag(now.Sub(it.arrival), it.runes)
			}
		}
		p.pop()
	}
}

// pop removes the head item.
func (p *Pacer) pop() { p.head++ }

// store copies b into the arena.
func (p *Pacer) store(b []byte) span {
	s := span{off: len(p.arena)}
	p.arena = append(p.arena, b...)
	s.end = len(p.arena)
	return s
}

// compact frees the space of sent items: all of it when the queue is
// empty (the usual case between bursts), else when most of the arena is
// dead.
func (p *Pacer) compact() {
	if p.head == len(p.items) {
		p.items, p.head, p.tight, p.arena = p.items[:0], 0, 0, p.arena[:0]
		return
	}
	base := p.items[p.head].raw.off
	if base < 64<<10 || base < len(p.arena)/2 {
		return
	}
	n := copy(p.arena, p.arena[base:])
	p.arena = p.arena[:n]
	live := copy(p.items, p.items[p.head:])
	p.items = p.items[:live]
	p.tight = max(0, p.tight-p.head)
	p.head = 0
	for i := range p.items {
		it := &p.items[i]
		for _, s := range []*span{&it.raw, &it.pre, &it.suf, &it.body} {
			s.off -= base
			s.end -= base
		}
	}
}

// Held is the number of bytes queued: the stream stops reading the
// upstream while it is above Config.QueueBytes.
func (p *Pacer) Held() int {
	if p.head == len(p.items) {
		return 0
	}
	return len(p.arena) - p.items[p.head].raw.off
}

// Empty reports whether nothing is queued.
func (p *Pacer) Empty() bool { return p.head == len(p.items) }

// Release hands the Pacer's recorder and buffers back for the next
// NewPacer, once its stream is over and its Stats read. The Pacer must not
// be used after; a second Release does nothing.
func (p *Pacer) Release() {
	if p.rec != nil {
		p.rec.Release()
		p.rec = nil
	}
	b := p.bufs
	p.bufs = nil
	if b == nil || cap(p.arena) > maxKeptArena || cap(p.items) > maxKeptItems {
		return // released twice, or a huge burst's buffers: not kept
	}
	b.items, b.arena = p.items, p.arena
	b.scratch, b.strip, b.stripEv, b.out, b.text = p.scratch, p.strip, p.stripEv, p.out, p.text
	pacerBuffers.Put(b)
	p.items, p.arena, p.scratch, p.strip, p.stripEv, p.out, p.text = nil, nil, nil, nil, nil, nil, nil
}

// buffers are a released Pacer's growable buffers, for the next NewPacer:
// a paced stream fills its arena and item queue by doubling, which costs
// an allocation and a copy per doubling and as much again in collection,
// per stream.
type buffers struct {
	items                               []item
	arena, scratch, strip, stripEv, out []byte
	text                                []byte
}

var pacerBuffers = sync.Pool{New: func() any { return new(buffers) }}

// The largest buffers a released Pacer gives back.
const (
	maxKeptArena = 256 << 10
	maxKeptItems = 4096
)

// OutputRunes is the output read so far, as a usage estimate counts it:
// answer, reasoning and (Chat) tool call argument runes.
func (p *Pacer) OutputRunes() int { return p.visibleRunes + p.toolRunes }

// Stats returns the stream's smoothness figures so far.
func (p *Pacer) Stats() Stats {
	return Stats{
		Report:         p.rec.Report(),
		HiddenRunes:    p.hiddenRunes,
		DroppedComment: p.dropComments,
		ToolRunes:      p.toolRunes,
		ReasoningRunes: p.reasonRunes,
		Usage:          p.usage,
	}
}

// Stats are a stream's smoothness figures and counters.
type Stats struct {
	smoothness.Report
	HiddenRunes    int // reasoning runes not sent (reasoning hide, or a truncating budget)
	DroppedComment int // upstream comments not forwarded
	// ToolRunes counts the runes of a Chat stream's tool call arguments
	// (usage.ToolArgumentRunes), which RunesOut does not: the usage
	// estimate of a stream whose upstream reported none counts both.
	ToolRunes int
	// ReasoningRunes counts the reasoning read from the upstream, sent,
	// hidden or left out by a budget alike: the usage estimate of an
	// upstream that does not count its reasoning tokens rests on it.
	ReasoningRunes int
	// Usage is the upstream's usage object, if it sent one. Messages: one
	// object in Anthropic's member names, message_start's usage overlaid
	// by message_delta's non-null members.
	Usage []byte
	// Cluster is the reasoning cluster rate in and out (Timeline.Clusters),
	// when the stream had a Timeline.
	Cluster Clusters
}
