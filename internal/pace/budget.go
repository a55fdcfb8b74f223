package pace

import "github.com/llmrelay/caddy-llm-relay/internal/usage"

// BudgetCount is a reasoning budget applied to one stream as it is read:
// it counts each chunk's reasoning and says what the budget's action makes
// of it. The re-pacer (Pacer) and the relay's non-stream answers assembled
// from a stream both count with it, so a budget cuts a stream and a whole
// answer at the same point.
type BudgetCount struct {
	Limit  int          // reasoning tokens allowed; 0: no budget
	Action BudgetAction // what happens past Limit
	Tokens int          // reasoning tokens counted so far
	ended  bool         // the verdict was BudgetEnd: the stream ends there
}

// BudgetVerdict is what the budget makes of one chunk's reasoning.
type BudgetVerdict uint8

const (
	// BudgetWithin: the reasoning is within the budget (or there is none).
	BudgetWithin BudgetVerdict = iota
	// BudgetLeaveOut: the budget ran out with the truncate action, or
	// with the failover action after answer text came: this chunk's
	// reasoning and all that follows is left out, the answer goes on.
	BudgetLeaveOut
	// BudgetEnd: the budget ran out with the error action, or the
	// failover action before any answer: the stream ends at this chunk,
	// without its reasoning. Given once; the chunks after are past the
	// end.
	BudgetEnd
)

// Count adds a chunk's reasoning (c.ReasoningRunes > 0) to the count;
// answerSeen says whether answer text came before it.
func (b *BudgetCount) Count(c *Chunk, answerSeen bool) BudgetVerdict {
	if b.Limit <= 0 || c.ReasoningRunes == 0 {
		return BudgetWithin
	}
	b.Tokens += ReasoningTokens(c)
	switch {
	case b.Tokens <= b.Limit:
		return BudgetWithin
	case b.ended:
		return BudgetLeaveOut
	case b.Action == BudgetError, b.Action == BudgetFailover && !answerSeen:
		b.ended = true
		return BudgetEnd
	}
	return BudgetLeaveOut
}

// ReasoningTokens is what a reasoning budget counts for one chunk that
// carries reasoning (ReasoningRunes > 0): the token estimate of its text,
// or a quarter of its runes when the text was not decoded.
func ReasoningTokens(c *Chunk) int {
	if c.Kind == KindText && c.Channel == ChanReasoning {
		return max(1, usage.EstimateTokens(c.Text))
	}
	return max(1, (c.ReasoningRunes+3)/4)
}
