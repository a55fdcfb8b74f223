package pace

import "testing"

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
