package usage

import "time"

// A key's reasoning budget: the reasoning tokens its name may use in a UTC
// day or month, counted from usage as the spend is (the windows' own
// reasoning counts, which Export and Restore keep), plus what the other
// instances of a fleet used in the same period (SetOthersReasoning).

// ReasoningBudget is a key's reasoning tokens per Period; Limit 0: none.
type ReasoningBudget struct {
	Limit  int64
	Period Period
}

// reasoningAccount is an account's reasoning budget and the fleet's use.
type reasoningAccount struct {
	budget ReasoningBudget
	others [numPeriods]remote // the rest of the fleet's reasoning tokens
}

// SetReasoningBudget sets key's reasoning budget (ReasoningBudget{} for
// none), as SetBudget does its spending budget: counts are kept, so a
// changed budget applies to the period's use so far. A negative Limit is
// none; a Period other than Month is Day.
func (l *Ledger) SetReasoningBudget(key string, b ReasoningBudget) {
	b.Limit = max(b.Limit, 0)
	if b.Period != Month {
		b.Period = Day
	}
	a := l.getOrCreate(key)
	a.mu.Lock()
	a.reasoning.budget = b
	a.mu.Unlock()
}

// reasoningUsed is the period's reasoning tokens, this instance's own and
// (for the same period) the rest of the fleet's (a.mu held).
func (a *account) reasoningUsed(p Period) int64 {
	n := a.win[p].c.reasoning
	if o := a.reasoning.others[p]; !o.start.IsZero() && o.start.Equal(a.win[p].start) {
		n += o.nano
	}
	return n
}

// ReasoningState is a key's reasoning budget at a time.
type ReasoningState struct {
	Budget ReasoningBudget
	// Used is the period's reasoning tokens (the fleet's, with a shared
	// state); Others is the other instances' part of it.
	Used, Others int64
	// Start and End bound the budget's current period, in UTC.
	Start, End time.Time
	// Blocked is set once Used >= Limit.
	Blocked bool
}

// Reasoning returns key's reasoning budget state at now; ok is false for
// a key with no reasoning budget (or one the ledger does not know).
func (l *Ledger) Reasoning(key string, now time.Time) (s ReasoningState, ok bool) {
	a := l.get(key)
	if a == nil {
		return s, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reasoning.budget.Limit == 0 {
		return s, false
	}
	a.roll(now)
	p := a.reasoning.budget.Period
	s = ReasoningState{Budget: a.reasoning.budget, Used: a.reasoningUsed(p), Start: a.win[p].start}
	s.Others, s.End = s.Used-a.win[p].c.reasoning, p.Next(s.Start)
	s.Blocked = s.Used >= s.Budget.Limit
	return s, true
}

// SetOthersReasoning sets what the rest of a fleet used of key's
// reasoning tokens in period p that starts at start (the sum of the other
// instances' own counts, from the shared state), as SetOthers does spend.
func (l *Ledger) SetOthersReasoning(key string, p Period, start time.Time, tokens int64, now time.Time) {
	if p < 0 || p >= numPeriods {
		return
	}
	a := l.getOrCreate(key)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.roll(now)
	a.reasoning.others[p] = remote{start: start.UTC(), nano: max(tokens, 0)}
}
