package usage

import (
	"testing"
	"time"
)

func TestReasoningBudget(t *testing.T) {
	l := NewLedger()
	day := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	if _, ok := l.Reasoning("k", day); ok {
		t.Fatal("an unknown key has a reasoning budget")
	}
	l.SetReasoningBudget("k", ReasoningBudget{Limit: 100, Period: Day})
	l.Add("k", 0, Usage{Completion: 80, Reasoning: 60}, day)
	s, ok := l.Reasoning("k", day)
	if !ok || s.Used != 60 || s.Blocked || !s.End.Equal(time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("after 60: %+v %v", s, ok)
	}
	l.SetOthersReasoning("k", Day, Day.Start(day), 40, day)
	if s, _ = l.Reasoning("k", day); !s.Blocked || s.Used != 100 || s.Others != 40 {
		t.Fatalf("with the fleet's 40: %+v", s)
	}
	// The fleet's figure of another period does not count.
	l.SetOthersReasoning("k", Day, Day.Start(day).AddDate(0, 0, -1), 40, day)
	if s, _ = l.Reasoning("k", day); s.Blocked {
		t.Fatalf("yesterday's fleet figure counted: %+v", s)
	}
	// The next day starts afresh.
	if s, _ = l.Reasoning("k", day.Add(24*time.Hour)); s.Used != 0 || s.Blocked {
		t.Fatalf("next day: %+v", s)
	}
	// A monthly budget counts the month; restored counts count.
	l2 := NewLedger()
	l2.Restore(l.Export(day), day)
	l2.SetReasoningBudget("k", ReasoningBudget{Limit: 50, Period: Month})
	if s, _ = l2.Reasoning("k", day); !s.Blocked || s.Used != 60 {
		t.Fatalf("restored, monthly: %+v", s)
	}
	l2.SetReasoningBudget("k", ReasoningBudget{})
	if _, ok := l2.Reasoning("k", day); ok {
		t.Fatal("a removed budget is still there")
	}
}
