package sharedstate

import (
	"strings"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/canary"
	"github.com/llmrelay/caddy-llm-relay/internal/health"
)

func TestParseSpend(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		err  string
	}{
		{"0", 0, ""},
		{"3000000", 3_000_000, ""},
		{"-5000000", 0, "negative"},
		{"x", 0, "not a whole number"},
		{"1.5", 0, "not a whole number"},
		{"", 0, "not a whole number"},
		{"99999999999999999999", 0, "not a whole number"}, // past int64
		{"1000000000000000001", 0, "billion"},
	} {
		got, err := ParseSpend(tt.in)
		if got != tt.want || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("ParseSpend(%q) = %d, %v; want %d, %q", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestAddSpendSaturates(t *testing.T) {
	if got := AddSpend(MaxSpendNano, 2); got != MaxSpendNano+2 {
		t.Errorf("AddSpend: %d", got)
	}
	s := int64(0)
	for range 10 {
		s = AddSpend(s, MaxSpendNano)
	}
	if s != 1<<63-1 {
		t.Errorf("ten times the most an instance may spend: %d, want the largest int64", s)
	}
}

func TestParseFigures(t *testing.T) {
	at := time.UnixMilli(1_780_000_000_123)
	good := Figures{Requests: 4, Tokens: 120, InFlight: 2, At: at}
	if got, err := ParseFigures(good.String()); err != nil || got != good {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	good.Since = at.Add(-time.Second)
	if got, err := ParseFigures(good.String()); err != nil || got != good || !got.Recent(at, time.Minute) || got.Recent(at.Add(time.Minute), time.Minute) {
		t.Fatalf("round trip with a start: %+v, %v", got, err)
	}
	for _, tt := range []struct{ in, err string }{
		{"0 0 -10 1780000000123", "negative"},
		{"-1 0 0 1780000000123", "negative counters"},
		{"0 -1 0 1780000000123", "negative counters"},
		{"0 0 0", "four numbers"},
		{"0 0 0 0 0 0", "four numbers"},
		{"0 0 0 1780000000123 12", "start before 2020"},
		{"0 0 0 1780000000123 1780000000000", ""},
		{"0  0 0 1780000000123", "whole numbers"}, // five parts, one empty
		{"0 0 0x3 1780000000123", "whole numbers"},
		{"+1 0 0 1780000000123", ""}, // ParseInt's sign: a number all the same
		{"0 0 0 12", "before 2020"},
		{"0 0 0 999999999999999", "after 9999"},
		{strings.Repeat("9", 30) + " 0 0 1", "whole numbers"},
	} {
		_, err := ParseFigures(tt.in)
		if (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("ParseFigures(%q): %v, want %q", tt.in, err, tt.err)
		}
	}
}

// FuzzParseFigures: whatever Redis holds, ParseFigures either refuses it
// or returns figures a relay could have written, which read back the same.
func FuzzParseFigures(f *testing.F) {
	for _, s := range []string{"0 0 0 1780000000123", "1 2 3 1780000000123", "0 0 -10 1780000000123", "", "x y z w"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fig, err := ParseFigures(s)
		if err != nil {
			return
		}
		if fig.Requests < 0 || fig.Tokens < 0 || fig.InFlight < 0 || fig.At.Year() < 2020 || !fig.Since.IsZero() && fig.Since.Year() < 2020 {
			t.Fatalf("%q: %+v", s, fig)
		}
		again, err := ParseFigures(fig.String())
		if err != nil || again != fig {
			t.Fatalf("%q: %+v does not read back: %+v, %v", s, fig, again, err)
		}
	})
}

func TestDrain(t *testing.T) {
	for _, tt := range []struct {
		last, now int64
		want      int64
	}{
		{10, 14, 4},
		{10, 10, 0},
		{10, 3, 0},                 // restarted
		{0, 1_000_000_000_000, 30}, // a jump: one limit at most
	} {
		if got := Drain(tt.last, tt.now, 30); got != tt.want {
			t.Errorf("Drain(%d, %d, 30) = %d, want %d", tt.last, tt.now, got, tt.want)
		}
	}
}

func TestCheckCanary(t *testing.T) {
	now := time.Unix(1_780_000_000, 0)
	p, note, err := CheckCanary(canary.Persisted{State: canary.StateActive, Step: 1, Since: now.Add(-time.Minute)}, now)
	if err != nil || note != "" || !p.Since.Equal(now.Add(-time.Minute)) {
		t.Errorf("a good step: %+v, %q, %v", p, note, err)
	}
	p, note, err = CheckCanary(canary.Persisted{State: canary.StateRolledBack, Since: now.Add(time.Hour)}, now)
	if err != nil || !strings.Contains(note, "ahead") || !p.Since.Equal(now) {
		t.Errorf("a rollback an hour ahead is obeyed, from now, and named: %+v, %q, %v", p, note, err)
	}
	p, note, _ = CheckCanary(canary.Persisted{State: canary.StateActive, Step: 1, Since: now.Add(time.Second)}, now)
	if note != "" || !p.Since.Equal(now) {
		t.Errorf("a second ahead: %+v, %q", p, note)
	}
	for _, bad := range []canary.Persisted{{State: "bogus"}, {State: ""}, {State: canary.StateActive, Step: -1}} {
		if _, _, err := CheckCanary(bad, now); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestCheckEjection(t *testing.T) {
	now := time.Unix(1_780_000_000, 0)
	for _, tt := range []struct {
		e   health.Ejection
		err string
	}{
		{health.Ejection{Until: now.Add(10 * time.Second), Cooldown: 10 * time.Second}, ""},
		{health.Ejection{Until: now.Add(14 * time.Second), Cooldown: 10 * time.Second}, ""}, // a clock 4 s ahead
		{health.Ejection{Until: now.Add(-time.Second), Cooldown: 10 * time.Second}, ""},     // over: Adopt ignores it
		{health.Ejection{Until: now.AddDate(1, 0, 0), Cooldown: 10 * time.Second}, "clock running ahead"},
		{health.Ejection{Until: now.Add(16 * time.Second), Cooldown: 10 * time.Second}, "clock running ahead"},
		{health.Ejection{Until: now.Add(time.Second), Cooldown: time.Hour}, "cooldown"},
		{health.Ejection{Until: now.Add(time.Second), Cooldown: -time.Second}, "cooldown"},
	} {
		err := CheckEjection(tt.e, now, 5*time.Minute)
		if (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("CheckEjection(until %s, cooldown %s): %v, want %q", tt.e.Until.Sub(now), tt.e.Cooldown, err, tt.err)
		}
	}
}

func TestIsInstanceID(t *testing.T) {
	for s, want := range map[string]bool{
		"0b7c2c1e-5e8a-4a52-9a3e-3f1f2d6c7b10": true,
		"0B7C2C1E-5E8A-4A52-9A3E-3F1F2D6C7B10": true,
		"unknown":                              true,
		"x":                                    false,
		"0b7c2c1e-5e8a-4a52-9a3e-3f1f2d6c7b1g": false,
		"0b7c2c1e05e8a-4a52-9a3e-3f1f2d6c7b10": false,
		"":                                     false,
	} {
		if got := IsInstanceID(s); got != want {
			t.Errorf("IsInstanceID(%q) = %v", s, got)
		}
	}
}
