package llmrelay

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/handoff"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/splice"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// Continuation after the commit point (docs/continuation.md): with
// `failover { after_commit continue }`, a stream that breaks after the
// relay committed it to the client is continued by the next target of
// the chain, spliced into the same client stream.
//
// Today's path stays as it is: the committed stream's events (in the
// client's dialect) go through a continuer, a pace.Source that hands each
// one to a splice.Recorder before the pacer gets it. The Recorder holds
// back the tail from the first tool call (or the answer's finish) to the
// end event, so a break never sends half a tool call. At a break the
// continuer asks the rest of the chain (the same cursor: order, attempts,
// backoff and health) to continue the answer (handoff.Continue makes the
// body: the answer so far as a prefill, or with an instruction), and
// reads that target's stream through the Seam's Splicer and the same
// Recorder, inside one Next: the pacer, and so the client, sees one
// stream, with heartbeats while the next target is asked.

// The values of failover's after_commit and continue_reasoning.
const (
	afterCommitContinue = "continue"
	afterCommitError    = "error"
	continueMark        = "mark"
	continueHide        = "hide"
)

// checkContinuation checks after_commit and continue_reasoning.
func (f *Failover) checkContinuation() error {
	if f == nil {
		return nil
	}
	switch f.AfterCommit {
	case "", afterCommitContinue, afterCommitError:
	default:
		return fmt.Errorf("after_commit %q is not known; use continue (the next target continues a broken stream, the default) or error (the stream ends with an in-band error)", f.AfterCommit)
	}
	switch f.ContinueReasoning {
	case "", continueMark, continueHide:
	default:
		return fmt.Errorf("continue_reasoning %q is not known; use mark (a separator on the reasoning lane, then the new reasoning; the default) or hide (none of the new reasoning)", f.ContinueReasoning)
	}
	return nil
}

// checkModelLevel checks a model block's failover: only the continuation
// settings belong there (the rest is the relay's).
func (f *Failover) checkModelLevel() error {
	if f == nil {
		return nil
	}
	if len(f.On) > 0 || f.Attempts != 0 || f.BackoffBase != 0 || f.BackoffMax != 0 || f.FirstByteTimeout != 0 ||
		f.TryDuration != 0 || f.StreamIdleTimeout != 0 {
		return errors.New("a model's failover block takes only after_commit and continue_reasoning; move the other settings to the relay-level failover block")
	}
	return f.checkContinuation()
}

// checkContinueWith checks an upstream's continue_with.
func checkContinueWith(s string) error {
	if _, ok := handoff.ParseHow(s); s != "" && !ok {
		return fmt.Errorf("continue_with %q is not known; use prefill (a trailing assistant turn), prefix (DeepSeek's and Mistral's prefix: true), continue_final_message (vLLM, SGLang) or instruct (an instruction to continue)", s)
	}
	return nil
}

// continuePolicy is a route's after_commit, compiled.
type continuePolicy struct {
	off       bool // after_commit error
	reasoning splice.ReasoningRestart
}

// resolveContinue merges the relay's and a model's failover blocks
// (checked at load).
func resolveContinue(relay, model *Failover) continuePolicy {
	var p continuePolicy
	for _, f := range []*Failover{relay, model} {
		if f == nil {
			continue
		}
		switch f.AfterCommit {
		case afterCommitError:
			p.off = true
		case afterCommitContinue:
			p.off = false
		}
		switch f.ContinueReasoning {
		case continueHide:
			p.reasoning = splice.Hide
		case continueMark:
			p.reasoning = splice.Mark
		}
	}
	return p
}

// continueHow is how target t is asked to continue an answer: its
// upstream's continue_with, else prefill for Anthropic, which continues a
// trailing assistant turn, and an instruction for the others (OpenAI's
// APIs answer a trailing assistant turn anew). A target that refused a
// prefill (a 400 naming it: Claude 4.6 and later) gets the instruction.
func continueHow(t *target) handoff.How {
	if how, ok := handoff.ParseHow(t.up.continueWith); ok {
		if how != handoff.Instruct && t.noPrefill != nil && t.noPrefill.Load() {
			return handoff.Instruct
		}
		return how
	}
	if t.up.api == apiAnthropic && (t.noPrefill == nil || !t.noPrefill.Load()) {
		return handoff.PrefillTurn
	}
	return handoff.Instruct
}

// spliceDialect is the splice package's name for a client dialect; ok is
// false for an endpoint whose streams are not continued (the legacy
// completions, anything the relay passes through unread).
func spliceDialect(ep endpoint) (splice.Dialect, bool) {
	if !ep.understood() || !ep.conversation() || ep.kind == kindCompletions {
		return 0, false
	}
	switch ep.dialect {
	case dialectMessages:
		return splice.Messages, true
	case dialectResponses:
		return splice.Responses, true
	}
	return splice.Chat, true
}

// maxJournal bounds what a Recorder keeps of one stream (the answer's
// text, the items a Responses stream completed): a longer stream is not
// continued, as without after_commit continue.
const maxJournal = 8 << 20

// continuation is one splice, for the log line, metrics and status page.
type continuation struct {
	from, to     string // "upstream (model)"
	fromUpstream string
	toUpstream   string
	atToken      int    // the tokens the client had been handed (estimated)
	where        string // reasoning, answer or tool_call: where the break fell
	why          string
	afterMS      float64 // since the request's start
}

// setContinuedHeader marks a whole answer assembled from a continued
// stream, as the seam's SSE comment marks a stream: one entry per
// continuation, `upstream=<name>; from=<name>; at_token=<n>; where=<w>`,
// comma-separated.
func setContinuedHeader(hdr http.Header, cs []continuation) {
	if len(cs) == 0 {
		return
	}
	var b strings.Builder
	for i, ct := range cs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("upstream=" + ct.toUpstream + "; from=" + ct.fromUpstream + "; at_token=" + strconv.Itoa(ct.atToken) + "; where=" + ct.where)
	}
	hdr.Set("X-Relay-Continued", b.String())
}

// continuer is the source of a committed stream that may be continued.
type continuer struct {
	c   *chainRun
	rec splice.Recorder
	d   splice.Dialect
	hd  handoff.Dialect

	t     *target
	res   *attemptResult
	cur   atomic.Pointer[attemptResult] // res, for abort (the pacer's goroutine)
	src   pace.Source
	first []sse.Event // the continuation's pre-content events, read before src
	fi    int
	spl   splice.Splicer

	queue []sse.Event
	qi    int
	own   []sse.Event // clones of the spliced events (queue points here)
	ended bool        // the end event went by
	// gaveUp: a break found no target to continue it; the stream goes on
	// (to its error) as without continuation.
	gaveUp bool

	hook     func() // the pacer's per-read hook
	callEach bool   // src cannot take the hook: call it before each read

	release func() // the continuing target's max_concurrent slot
	earlier usage.Usage
	handed  int // OutputTokens at the last seam
	conts   []continuation
}

// newContinuer wraps a committed stream, or returns nil when the request
// is not continued: after_commit error, an endpoint whose streams are not
// continued, a hand-off alias (its legs are their own chains).
func (c *chainRun) newContinuer(t *target, res *attemptResult) *continuer {
	if c == nil || c.rt.cont.off || c.rt.handoff != nil || c.leg != nil {
		return nil
	}
	d, ok := spliceDialect(c.req.ep)
	if !ok || !c.cur.hasNext() {
		// Nothing to continue on (a chain of one target, or its attempts
		// used up): the stream pays nothing for continuation.
		return nil
	}
	k := &continuer{c: c, rec: splice.NewRecorder(d, maxJournal), d: d, hd: handoffDialect(c.req.ep.dialect), t: t, res: res, src: res.events}
	k.cur.Store(res)
	return k
}

// passFirst hands the attempt's pre-commit events to the Recorder: they
// are the stream's first, for the pacer.
func (k *continuer) passFirst(first []sse.Event) []sse.Event {
	out := make([]sse.Event, 0, len(first))
	for _, ev := range first {
		// No clone: the first events are the attempt's own copies, and
		// so is anything a recorder releases.
		out = append(out, k.rec.Pass(ev)...)
	}
	return out
}

// abort ends the attempt being read (the client went away), so that a
// read waiting for it returns.
func (k *continuer) abort() {
	if res := k.cur.Load(); res != nil {
		res.finish()
	}
}

// BeforeRead takes the pacer's per-read hook (see handoffSource.BeforeRead).
func (k *continuer) BeforeRead(f func()) {
	k.hook = f
	k.callEach = !sse.ForwardBeforeRead(k.src, f)
}

func (k *continuer) read() (sse.Event, error) {
	if k.fi < len(k.first) {
		ev := k.first[k.fi]
		k.fi++
		return ev, nil
	}
	if k.callEach && k.hook != nil {
		k.hook()
	}
	return k.src.Next()
}

// Next is the pacer's read: the stream's next event, whatever target it
// now comes from.
func (k *continuer) Next() (sse.Event, error) {
	for {
		if k.qi < len(k.queue) {
			ev := k.queue[k.qi]
			k.qi++
			return ev, nil
		}
		k.queue, k.qi = nil, 0
		if k.gaveUp {
			return k.src.Next() // no target continued: the rest as without continuation
		}
		ev, err := k.read()
		if k.ended {
			return ev, err // after the end event: whatever follows, as without continuation
		}
		var why string
		switch {
		case err == io.EOF:
			why = "stream ended before it was complete"
		case err != nil:
			if _, ok := errors.AsType[*chat.UnreadableError](err); ok {
				return ev, err // another target's answer would meet the same translation rules
			}
			why = logDetail(&publicError{msg: "stream broke", cause: err})
			if errors.Is(k.res.cause(), errStreamIdle) {
				why = "stream idle for stream_idle_timeout " + k.c.h.streamIdle.String()
			}
		case ev.Unterminated:
			why = "stream ended in the middle of an event"
		case ev.HasData && isErrorEvent(&ev):
			e := upstreamErrorOf(ev.Data)
			if !continuable(e) {
				// The upstream's own verdict on the request: the
				// client's, and what follows it, as without continuation.
				k.gaveUp = true
				break
			}
			why = "error event after data: " + errorEventCode(ev.Data)
		}
		if why == "" {
			k.pass(ev)
			if k.isEnd(&ev) { // a method, not a func value: ev stays on the stack
				k.ended = true
			}
			continue
		}
		// continueStream closes the attempt and releases its reader, into
		// whose buffer ev points (the buffer goes back to a pool, for the
		// continuation's reader or another request's): the event handed
		// to the pacer when no target continues must be a copy.
		ev = ev.Clone()
		if k.c.r.Context().Err() != nil || !k.continueStream(why) {
			// The pacer ends the stream as without continuation: the
			// broken attempt is still open, read on as before.
			k.gaveUp = true
			return ev, err
		}
	}
}

// pass hands one event of the stream to the Recorder (through the
// Splicer once the stream was continued); queue gets what goes out.
func (k *continuer) pass(ev sse.Event) {
	if k.spl == nil {
		k.queue = k.rec.Pass(ev) // valid until the next Pass: the queue is drained first
		return
	}
	k.own = k.own[:0]
	for _, s := range k.spl.Next(ev) {
		for _, o := range k.rec.Pass(s) {
			k.own = append(k.own, o.Clone())
		}
	}
	k.queue = k.own
}

// continuable reports whether an in-band error is one another target may
// do better on: a server error or overload (upstreamErrorOf gives them a
// 5xx: 502 unless the error says otherwise, 529 for Anthropic's
// overloaded_error), a rate limit, or one the relay cannot read. A 4xx
// (the request itself) ends the stream as before.
func continuable(e *apiError) bool {
	return e == nil || e.Status >= 500 || e.Status == http.StatusTooManyRequests
}

// continueStream is the break: the next target of the chain is asked to
// continue. It reports whether one does (the continuer reads it now).
func (k *continuer) continueStream(why string) bool {
	c := k.c
	if !c.cur.hasNext() {
		return false // nothing left to ask: the break ends the stream as before
	}
	if k.rec.Overflow() {
		c.req.note(k.t, why+" after commit: not continued (the stream outgrew what the relay keeps to continue it)")
		return false
	}
	brokeAt := time.Now()
	seam := k.rec.Seam()
	where := "answer"
	switch {
	case seam.InToolCall:
		// Inside a tool call (which may follow reasoning with no text:
		// the next target then starts over, reasoning included); a
		// finish held for its end event is no tool call.
		where = "tool_call"
	case seam.InReasoning:
		where = "reasoning"
	}
	answer := seam.Answer
	if seam.InReasoning {
		answer = "" // the next target starts over
	}
	bodies := map[handoff.How]*requestBody{}
	var bodyErr error
	bodyFor := func(t *target) *requestBody {
		how := continueHow(t)
		if b, ok := bodies[how]; ok {
			return b
		}
		raw, err := handoff.Continue(k.hd, c.body.raw, answer, how)
		var b *requestBody
		if err == nil {
			b, err = c.legBody(raw)
		}
		if err != nil {
			bodyErr = err
			return c.body
		}
		if answer != "" && (how == handoff.Prefix || how == handoff.ContinueFinal) {
			b.mark = how.Mark
		}
		bodies[how] = b
		return b
	}
	leg := c.continuationLeg(bodyFor).runLeg()
	for leg.res != nil && k.refusedPrefill(leg, bodyFor) {
		leg = c.continuationLeg(bodyFor).runLeg() // each refusal marks one target: this ends
	}
	if bodyErr != nil {
		c.req.noteText("the continuation's request could not be made: " + bodyErr.Error())
	}
	if leg.res == nil || leg.res.events == nil {
		if leg.res != nil {
			leg.done() // an error status passed through: not a stream to splice
		}
		c.req.note(k.t, why+" after commit at token "+strconv.Itoa(seam.OutputTokens)+" (in the "+where+"): no target continued it")
		return false
	}
	// A target continues: the broken attempt is closed (its upstream
	// stops, and so does what it bills), counted against its target's
	// health, and its output added to what the client is told it used.
	c.h.recordBroken(k.t, c.req.start)
	c.req.note(k.t, why+" after commit at token "+strconv.Itoa(seam.OutputTokens)+" (in the "+where+"): continued on "+leg.t.up.name)
	k.earlier.Prompt += usage.EstimatePrompt(c.body.raw)
	k.earlier.Completion += max(seam.OutputTokens-k.handed, 0)
	k.earlier.Estimated = true
	k.handed = seam.OutputTokens
	k.closeAttempt()
	from, fromUp := k.conts0(), k.t.up.name
	k.res, k.t, k.src = leg.res, leg.t, leg.res.events
	k.cur.Store(leg.res)
	k.first, k.fi = leg.res.first, 0
	k.release, leg.release = leg.release, nil
	if k.hook != nil {
		k.callEach = !sse.ForwardBeforeRead(k.src, k.hook)
	}
	opts := splice.Options{Reasoning: c.rt.cont.reasoning, Earlier: k.earlier}
	opts.Comment = "relay-continued upstream=" + leg.t.up.name + " model=" + c.req.modelFor(leg.t) +
		" at_token=" + strconv.Itoa(seam.OutputTokens) + " where=" + where
	k.spl = seam.Splicer(opts)
	c.req.usageEstimated = true
	k.conts = append(k.conts, continuation{
		from: from, fromUpstream: fromUp, to: leg.t.up.name + " (" + c.req.modelFor(leg.t) + ")", toUpstream: leg.t.up.name,
		atToken: seam.OutputTokens, where: where, why: why, afterMS: ms(brokeAt.Sub(c.req.start)),
	})
	c.req.continued = k.conts
	countContinuation(c.rt.alias, leg.t.up.name, where)
	// The log line and metrics name the target that ended the answer;
	// the time to first token stays the first commit's.
	ttfb := c.req.ttfb
	c.req.commit(leg.t, c.req.status)
	c.req.ttfb = ttfb
	return true
}

// conts0 names the target whose stream broke.
func (k *continuer) conts0() string {
	if n := len(k.conts); n > 0 {
		return k.conts[n-1].to
	}
	return k.t.up.name + " (" + k.c.req.modelFor(k.t) + ")"
}

// refusedPrefill is the hand-off's rule for a continuation: a target that
// refuses a prefill with a 400 naming it gets the instruction from now on,
// and the chain is asked again.
func (k *continuer) refusedPrefill(leg *legResult, bodyFor func(*target) *requestBody) bool {
	res := leg.res
	if res.events != nil || res.resp.StatusCode != 400 || leg.t.noPrefill == nil || continueHow(leg.t) == handoff.Instruct {
		return false
	}
	if !bytes.Contains(bytes.ToLower(res.wholeBody()), []byte("prefill")) {
		return false
	}
	leg.t.noPrefill.Store(true)
	leg.done()
	k.c.req.note(leg.t, "refused the answer so far as a prefill (400): asked with an instruction instead, from now on for this target")
	return true
}

// closeAttempt ends the attempt being read: its connection is closed (the
// upstream stops, and so does what it bills) and its slot given back.
func (k *continuer) closeAttempt() {
	res := k.res
	res.finish()
	_ = res.resp.Body.Close()
	res.release()
	if k.release != nil {
		k.release()
		k.release = nil
	}
}

// finish releases the continuing attempt once the stream is over (the
// first attempt is respond's to release).
func (k *continuer) finish() {
	k.rec.Release()
	if len(k.conts) == 0 {
		return
	}
	k.closeAttempt()
}

// continuationLeg is a chain run that walks the rest of c's chain (the
// same plan and cursor) for a continuation, handing back the committed
// attempt in the client's dialect, with a fresh try_duration.
func (c *chainRun) continuationLeg(bodyFor func(*target) *requestBody) *chainRun {
	l := &chainRun{h: c.h, w: c.w, r: c.r, req: c.req, rt: c.rt, body: c.body, pol: c.pol,
		plan: c.plan, cur: c.cur, canaryTried: c.canaryTried,
		leg: &legResult{native: true}, bodyFor: bodyFor}
	l.deadline = time.Now().Add(c.h.tryDur)
	return l
}

// isEnd reports whether ev is the end event of the stream's dialect: by
// its `event:` line, else by its data's type as a JSON string literal
// (an escaped quote inside a string cannot make one), so no event is
// decoded on the hot path.
func (k *continuer) isEnd(ev *sse.Event) bool {
	switch k.d {
	case splice.Messages:
		return typed(ev, "message_stop")
	case splice.Responses:
		return typed(ev, "response.completed") || typed(ev, "response.incomplete")
	}
	return ev.IsDone()
}

// typed reports an event of type t: its `event:` line, or, without one,
// data naming it as a type value.
func typed(ev *sse.Event, t string) bool {
	if ev.Type != "" {
		return ev.Type == t
	}
	i := bytes.Index(ev.Data, []byte(`"type"`))
	if i < 0 {
		return false
	}
	rest := bytes.TrimLeft(ev.Data[i+len(`"type"`):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return false
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	return len(rest) > len(t)+1 && rest[0] == '"' && string(rest[1:1+len(t)]) == t && rest[1+len(t)] == '"'
}

// MarshalLogObject is one continuation on the log line.
func (ct continuation) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("from", ct.from)
	enc.AddString("to", ct.to)
	enc.AddInt("at_token", ct.atToken)
	enc.AddString("where", ct.where)
	enc.AddString("why", ct.why)
	return nil
}

// continuations is the log line's `continued` array.
type continuations []continuation

func (cs continuations) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	for _, ct := range cs {
		if err := enc.AppendObject(ct); err != nil {
			return err
		}
	}
	return nil
}
