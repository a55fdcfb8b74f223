package pace

import (
	"testing"
	"time"
)

// TestBudgetCount: the one reasoning-budget rule the pacer and assembled
// answers share. Each chunk carries 8 runes of reasoning (2 tokens), the
// budget is 5 tokens: the third chunk passes it.
func TestBudgetCount(t *testing.T) {
	c := Chunk{Kind: KindOther, ReasoningRunes: 8}
	for _, tc := range []struct {
		action     BudgetAction
		answerSeen bool
		want       []BudgetVerdict
	}{
		{BudgetTruncate, false, []BudgetVerdict{BudgetWithin, BudgetWithin, BudgetLeaveOut, BudgetLeaveOut}},
		{BudgetError, false, []BudgetVerdict{BudgetWithin, BudgetWithin, BudgetEnd, BudgetLeaveOut}},
		{BudgetError, true, []BudgetVerdict{BudgetWithin, BudgetWithin, BudgetEnd, BudgetLeaveOut}},
		{BudgetFailover, false, []BudgetVerdict{BudgetWithin, BudgetWithin, BudgetEnd, BudgetLeaveOut}},
		{BudgetFailover, true, []BudgetVerdict{BudgetWithin, BudgetWithin, BudgetLeaveOut, BudgetLeaveOut}},
	} {
		b := BudgetCount{Limit: 5, Action: tc.action}
		for i, want := range tc.want {
			if got := b.Count(&c, tc.answerSeen); got != want {
				t.Errorf("action %v, answer seen %v, chunk %d: %v, want %v", tc.action, tc.answerSeen, i+1, got, want)
			}
		}
		if b.Tokens != 8 {
			t.Errorf("action %v: counted %d tokens, want 8", tc.action, b.Tokens)
		}
	}
	var none BudgetCount
	if got := none.Count(&c, false); got != BudgetWithin || none.Tokens != 0 {
		t.Errorf("no budget: %v, %d tokens; want within, nothing counted", got, none.Tokens)
	}
	b := BudgetCount{Limit: 1}
	if got := b.Count(&Chunk{AnswerRunes: 40}, false); got != BudgetWithin || b.Tokens != 0 {
		t.Errorf("an answer chunk: %v, %d tokens; want within, nothing counted", got, b.Tokens)
	}
}

// TestStatsReasoningRunes: a stream's Stats count the reasoning read from
// the upstream, in every mode, whether it was sent, hidden or left out by
// a truncating budget: the usage estimate of an upstream that does not
// count its reasoning (spend.go) rests on it.
func TestStatsReasoningRunes(t *testing.T) {
	arrs := []arrival{
		{at: 0, ev: chunkEvent("reasoning_content", "Let me think")},      // 12 runes
		{at: 10 * time.Millisecond, ev: chunkEvent("reasoning", " über")}, // 5
		{at: 20 * time.Millisecond, ev: chunkEvent("content", "Answer.")},
		{at: 30 * time.Millisecond, ev: parseOne("data: [DONE]\n\n")},
	}
	for _, cfg := range []Config{
		{Mode: ModeOff},
		{Mode: ModePace},
		{Mode: ModeSplit},
		{Mode: ModeSplit, HideReasoning: true},
		{Mode: ModeOff, ReasoningBudget: 1, BudgetAction: BudgetTruncate},
	} {
		_, p := simulate(t, cfg, arrs)
		if got := p.Stats().ReasoningRunes; got != 17 {
			t.Errorf("%+v: %d reasoning runes counted, want 17", cfg, got)
		}
	}
}
