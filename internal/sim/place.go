package sim

import "fmt"

// Fault places (Fault.In): the phase of a stream a drop or error fault
// cuts in the middle of.
const (
	InReasoning = "reasoning"
	InAnswer    = "answer"
	InToolArgs  = "tool_args"
)

// placeKey separates the draws of a fault's place in its phase from the
// fault draws and the tag cuts.
const placeKey = 0x706c616365637574 // "placecut"

func (f Fault) validatePlace() error {
	switch f.In {
	case "", InReasoning, InAnswer, InToolArgs:
	default:
		return fmt.Errorf("%s: unknown phase %q (want %q, %q or %q)", f.Kind, f.In, InReasoning, InAnswer, InToolArgs)
	}
	switch {
	case f.In != "" && f.BeforeEnd:
		return fmt.Errorf("%s: in %s and before_end are two places; give one", f.Kind, f.In)
	case (f.In != "" || f.BeforeEnd) && f.After != 0:
		return fmt.Errorf("%s: after counts events from the start; leave it 0 with in or before_end", f.Kind)
	}
	return nil
}

// streamShape counts the counted events of one answer's stream, in
// order: the lead (Chat's role chunk, message_start, response.created),
// the reasoning deltas, the text deltas, then a tool call's events
// before its arguments (Chat's id-and-name delta) and its argument
// deltas. A phase that is not streamed counts 0.
type streamShape struct {
	lead, reasoning, answer, toolHead, toolArgs int
}

// place returns the fault to apply to the n-th request given the shape
// of its answer: f itself for a fault placed by After or BeforeEnd; for
// a fault placed In a phase, a copy whose After is the position of its
// cut, or nil when the answer has no such phase.
func (s *Server) place(f *Fault, n int64, sh streamShape) *Fault {
	if f == nil || f.In == "" {
		return f
	}
	before, k := 0, 0
	switch f.In {
	case InReasoning:
		before, k = sh.lead, sh.reasoning
	case InAnswer:
		before, k = sh.lead+sh.reasoning, sh.answer
	case InToolArgs:
		before, k = sh.lead+sh.reasoning+sh.answer+sh.toolHead, sh.toolArgs
	}
	if k == 0 {
		return nil
	}
	placed := *f
	placed.After = before + midpoint(k, newRNG(uint64(s.cfg.Seed), uint64(n), placeKey))
	return &placed
}

// midpoint draws m in [k/4, 3k/4], at least 1 and below k when k > 1:
// about the middle of k deltas.
func midpoint(k int, r *rng) int {
	lo := max(1, k/4)
	hi := max(lo, min(k-1, (3*k+3)/4))
	return lo + int(r.next()%uint64(hi-lo+1))
}

// tripsAt reports whether a pending fault trips once sent counted
// events have gone out: After counts them, and a fault placed before
// the end waits for the end.
func tripsAt(f *Fault, sent int) bool {
	return f != nil && !f.BeforeEnd && sent >= f.After
}
