package sim

import (
	"strings"
	"testing"
	"time"
)

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Models: []string{""}}, "empty model name"},
		{Config{ReasoningTokens: new(-1)}, "reasoning tokens: must be >= 0"},
		{Config{ContentTokens: new(-2)}, "content tokens: must be >= 0"},
		{Config{TTFB: -time.Second}, "ttfb"},
		{Config{ReasoningPattern: Pattern{Kind: "bursty"}}, `reasoning pattern: unknown kind "bursty"`},
		{Config{ContentPattern: Pattern{Kind: Steady, Rate: -1}}, "content pattern: steady rate"},
		{Config{ContentPattern: Pattern{Kind: Clustered, Burst: -1}}, "clustered burst"},
		{Config{Faults: []Fault{{Kind: FaultStatus, Status: 200}}}, "faults[0]: status must be an HTTP error status 400-599"},
		{Config{Faults: []Fault{{Kind: FaultStall, Rate: 1.5}}}, "rate must be a probability"},
		{Config{Faults: []Fault{{Kind: FaultDrop, After: -1}}}, "after must be >= 0"},
		{Config{Faults: []Fault{{Kind: "explode"}}}, `unknown kind "explode"`},
	} {
		_, err := New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want error containing %q", tc.cfg, err, tc.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	s, err := New(Config{
		ContentPattern: Pattern{Kind: Clustered},
		Faults:         []Fault{{Kind: FaultStall}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := s.cfg
	if c.Models[0] != DefaultModel || c.Seed != DefaultSeed || *c.ReasoningTokens != 60 || *c.ContentTokens != 40 {
		t.Errorf("defaults %+v", c)
	}
	if c.ReasoningPattern != (Pattern{Kind: Steady, Rate: DefaultRate}) {
		t.Errorf("default pattern %+v", c.ReasoningPattern)
	}
	if want := (Pattern{Kind: Clustered, Burst: 20, Pause: 800 * time.Millisecond, BurstSpread: 5 * time.Millisecond}); c.ContentPattern != want {
		t.Errorf("clustered defaults %+v", c.ContentPattern)
	}
	if c.Faults[0].Rate != 1 {
		t.Errorf("fault rate default %v", c.Faults[0].Rate)
	}
}
