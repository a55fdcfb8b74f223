package llmrelay

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// Non-stream Chat Completions answers built from a stream.
//
// A client that asks for one answer (no `stream`) gets it whole, so the
// relay has nothing to cut and no moment to see: a reasoning budget
// cannot stop the upstream, and the reasoning's timing is lost. When the
// request asks for `return_reasoning_trace`, or its route has a reasoning
// budget, the relay sends the attempt as a stream instead (asking for the
// usage chunk), reads it to its end itself, and answers the client with
// the chat.completion the chunks add up to (chat.Assembler). The budget
// then counts the reasoning as it does on a stream, and each reasoning
// delta's arrival is kept for the trace.
//
// Nothing reaches the client before the stream has ended, so unlike a
// stream's, every failure of the attempt, before or after its first
// chunk, can still fail over: an attempt whose stream breaks, stalls past
// stream_idle_timeout, ends without [DONE] or carries an error event is
// a failed attempt like one that never answered.

// fieldTrace is the body field that asks for the reasoning trace. The
// upstream never sees it (see requestBody.forTarget).
const fieldTrace = "return_reasoning_trace"

// assembleFromStream turns a non-stream Chat Completions request into a
// stream the relay assembles, when it asks for the reasoning trace or has
// a reasoning budget. A stream request is left alone: its client sees the
// reasoning deltas as they come, and the budget already applies.
func assembleFromStream(body *requestBody, ep endpoint, budget int) {
	if !ep.assemblesTrace() || body.stream || !body.trace && budget <= 0 {
		return
	}
	body.set("stream", json.RawMessage("true"))
	body.stream, body.assemble = true, true
}

// assembledAnswer is a chat.completion ready for the client, and the
// attempt it came from.
type assembledAnswer struct {
	t      *target
	header http.Header // the upstream's response headers
	body   []byte
	// reasoningRunes is the reasoning read from the stream, for the
	// usage when the upstream counts none (see withReasoning).
	reasoningRunes int
}

// assembly is the reading of one assembled attempt's stream: the chunks
// so far, and the reasoning budget's count over them (pace.BudgetCount,
// as the pacer counts it on a stream).
type assembly struct {
	a       chat.Assembler
	budget  pace.BudgetCount
	hiding  bool // reasoning is left out: `reasoning hide`, or a truncating budget ran out
	answer  bool // answer text has come (a failover budget then truncates)
	cut     bool // the budget truncated the reasoning
	end     time.Duration
	errCode string // an error event's code
	size    int    // the data read so far, bounded by maxAnswer
	scratch []byte

	// reasoningRunes is the reasoning read, kept or left out: the usage
	// estimate's when the upstream counts none (see withReasoning).
	reasoningRunes int
}

// read reads the attempt's stream, the events held at its commit point
// first (they arrived by its time to first token), to its end.
func (s *assembly) read(res *attemptResult) (pace.End, error) {
	for i := range res.first {
		if end, over := s.event(&res.first[i], res.ttft); over {
			return end, nil
		}
	}
	for {
		ev, err := res.events.Next()
		at := time.Since(res.started)
		switch {
		case err == io.EOF:
			return pace.EndEOF, nil
		case err != nil:
			return pace.EndBroken, err
		}
		if end, over := s.event(&ev, at); over {
			return end, nil
		}
	}
}

// event takes one event that arrived at `at` (since the attempt started);
// over reports that the stream ended with it, as end says.
func (s *assembly) event(ev *sse.Event, at time.Duration) (end pace.End, over bool) {
	switch {
	case ev.Unterminated:
		return pace.EndUnterminated, true
	case !ev.HasData:
		return 0, false // a keep-alive comment
	case ev.IsDone():
		s.end = at
		return pace.EndDone, true
	case isErrorEvent(ev):
		s.errCode = errorEventCode(ev.Data)
		return pace.EndErrorEvent, true
	}
	s.end = at
	if s.size += len(ev.Data); s.size > maxAnswer {
		return pace.EndTooLarge, true // the answer is held whole, as a translated one is
	}
	var c pace.Chunk
	c, s.scratch = pace.ClassifyFormat(pace.FormatChat, ev, s.scratch[:0])
	s.reasoningRunes += c.ReasoningRunes
	switch s.budget.Count(&c, s.answer) {
	case pace.BudgetEnd:
		// As on a stream, the chunk that passed the budget goes without
		// its reasoning, and the answer ends with it.
		s.a.Add(ev.Data, at, true)
		s.cut = true
		return pace.EndReasoningBudget, true
	case pace.BudgetLeaveOut:
		s.hiding, s.cut = true, true
	}
	drop := s.hiding
	if c.AnswerRunes > 0 {
		s.answer = true
	}
	s.a.Add(ev.Data, at, drop)
	return 0, false
}

// result renders the assembled answer. ended: the budget ended it, so
// every choice finishes with "length", as an upstream's own token limit
// would end it; a choice whose reasoning the budget cut is marked
// relay_reasoning_truncated.
func (s *assembly) result(t *target, res *attemptResult, trace, ended bool) *assembledAnswer {
	comp := s.a.Completion(s.end, trace)
	for i := range comp.Choices {
		ch := &comp.Choices[i]
		if ended {
			length := "length"
			ch.FinishReason = &length
		}
		ch.ReasoningTruncated = s.cut
	}
	return &assembledAnswer{t: t, header: res.resp.Header.Clone(), body: comp.JSON(), reasoningRunes: s.reasoningRunes}
}

// assemble reads a committed attempt of an assembled request to its end
// and answers the client, or reports that the chain goes on: the attempt
// failed, or its reasoning passed the budget with the failover action
// before any answer (its answer, cut, is kept in case no later attempt
// gives one).
func (c *chainRun) assemble(t *target, res *attemptResult) chainOutcome {
	s := &assembly{
		a:      chat.Assembler{Created: time.Now().Unix()},
		budget: pace.BudgetCount{Limit: c.pol.cfg.ReasoningBudget, Action: c.pol.cfg.BudgetAction},
		hiding: c.pol.cfg.HideReasoning,
	}
	// Nothing is sent before the answer is whole, so a stream that breaks
	// could start over; with after_commit continue it is continued as a
	// client's stream would be (continuation.go), and the reasoning and
	// answer already read are not paid for twice.
	k := c.newContinuer(t, res)
	if k != nil {
		res.first, res.events = k.passFirst(res.first), k
	}
	end, err := s.read(res)
	c.req.budgetCut = c.req.budgetCut || s.cut
	if k != nil {
		defer k.finish()
	}
	if k != nil && len(k.conts) > 0 {
		t, res = k.t, k.res // the attempt that ended the stream; the first was closed at the break
	}
	res.release()
	if end == pace.EndDone {
		// Closed before it is cancelled, so its connection is reused.
		_ = res.resp.Body.Close()
		res.finish()
		c.writeAssembled(s.result(t, res, c.body.trace, false))
		return chainFinished
	}
	cause := res.cause()
	res.finish() // cancelled first: the close does not wait for the rest
	_ = res.resp.Body.Close()

	budget := strconv.Itoa(s.budget.Limit)
	switch {
	case end == pace.EndReasoningBudget && s.budget.Action == pace.BudgetFailover:
		c.req.budgetHits++
		c.req.note(t, "reasoning passed the budget of "+budget+" tokens before any answer: failing over")
		c.cut = s.result(t, res, c.body.trace, true)
		c.deadline = time.Now().Add(c.h.tryDur) // as a stream's budget failover gets
		return chainNext
	case end == pace.EndReasoningBudget:
		c.req.note(t, "reasoning passed the budget of "+budget+" tokens: the answer ends there (finish_reason length)")
		c.writeAssembled(s.result(t, res, c.body.trace, true))
		return chainFinished
	case c.r.Context().Err() != nil:
		c.req.status = statusClientClosed
		return chainFinished
	}

	c.failed++
	// Nothing was sent yet: every other end fails over (an assembled
	// stream is Chat Completions', whose EOF before [DONE] is a
	// truncation).
	b, _ := c.h.classifyEnd(c.req.ep, end, false, err, cause, s.errCode)
	if end == pace.EndTooLarge {
		// Another target would most likely answer as long: give up.
		c.req.note(t, b.why)
		return chainGiveUp
	}
	if b.health {
		c.h.recordBroken(t, c.req.start)
	}
	c.req.idleTimeout = c.req.idleTimeout || b.idle
	c.req.note(t, b.why+" (nothing sent yet: failing over)")
	return chainNext
}

// writeAssembled answers the client with an assembled chat.completion.
func (c *chainRun) writeAssembled(ans *assembledAnswer) {
	c.req.commit(ans.t, http.StatusOK)
	c.req.reasoningRunes = ans.reasoningRunes
	hdr := c.w.Header()
	copyHeader(hdr, ans.header)
	for _, k := range []string{"Content-Encoding", "Cache-Control", "X-Accel-Buffering"} {
		hdr.Del(k) // the stream's, not this answer's
	}
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Content-Length", strconv.Itoa(len(ans.body)))
	setRelayHeaders(hdr, ans.t, c.req)
	setContinuedHeader(hdr, c.req.continued)
	c.h.setAnswerCost(hdr, c.req, ans.body)
	c.w.WriteHeader(http.StatusOK)
	_, _ = c.w.Write(ans.body)
	c.headersOut = true
}
