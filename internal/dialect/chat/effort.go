package chat

// The thinking-budget ladder: every dialect that sizes reasoning in tokens
// (Anthropic's thinking.budget_tokens, Gemini's thinkingBudget) maps a
// reasoning_effort onto these bounds and back, so that an effort crosses
// any of them and comes back the same. The dialects add their own edges
// (Gemini's "none" is a budget of 0; Anthropic has no budget for it).
const (
	BudgetMinimal = 1024 // Anthropic's smallest budget_tokens
	BudgetLow     = 2048
	BudgetMedium  = 8192
	BudgetHigh    = 24576 // Gemini 2.5 Flash's largest thinkingBudget
)

// BudgetForEffort is the thinking budget of a reasoning_effort; ok is
// false for "none", "" and efforts it does not know.
func BudgetForEffort(effort string) (budget int, ok bool) {
	switch effort {
	case "minimal":
		return BudgetMinimal, true
	case "low":
		return BudgetLow, true
	case "medium":
		return BudgetMedium, true
	case "high", "xhigh", "max":
		return BudgetHigh, true
	}
	return 0, false
}

// EffortForBudget is the reasoning_effort whose budget is the smallest at
// or above budget ("high" above BudgetMedium).
func EffortForBudget(budget int) string {
	switch {
	case budget <= BudgetMinimal:
		return "minimal"
	case budget <= BudgetLow:
		return "low"
	case budget <= BudgetMedium:
		return "medium"
	}
	return "high"
}
