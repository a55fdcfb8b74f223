package usage

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

func TestPriceCost(t *testing.T) {
	p := Price{Input: 2.5, Output: 10, CachedInput: 1.25} // gpt-4o
	for _, tc := range []struct {
		name string
		u    Usage
		want float64
	}{
		{"zero", Usage{}, 0},
		{"plain", Usage{Prompt: 1_000_000, Completion: 1_000_000}, 12.5},
		{"cached", Usage{Prompt: 1000, Cached: 400, Completion: 100}, (600*2.5 + 400*1.25 + 100*10) / 1e6},
		// Reasoning is inside Completion: billed once, as output.
		{"reasoning", Usage{Prompt: 100, Completion: 500, Reasoning: 300}, (100*2.5 + 500*10) / 1e6},
		{"cached over prompt", Usage{Prompt: 100, Cached: 500}, 100 * 1.25 / 1e6},
		{"negative", Usage{Prompt: -5, Completion: -5, Cached: -1}, 0},
	} {
		if got := p.Cost(tc.u); !near(got, tc.want) {
			t.Errorf("%s: Cost = %g, want %g", tc.name, got, tc.want)
		}
	}
	// CachedInput 0 means the same as Input.
	q := Price{Input: 3, Output: 15}
	if got, want := q.Cost(Usage{Prompt: 1000, Cached: 1000}), 1000*3/1e6; !near(got, want) {
		t.Errorf("CachedInput 0: Cost = %g, want %g", got, want)
	}
}

func TestNormalize(t *testing.T) {
	if got, want := Normalize(100, 50, 200, 30, false), (Usage{Prompt: 100, Completion: 250, Reasoning: 200, Cached: 30}); got != want {
		t.Errorf("reasoning outside: %+v, want %+v", got, want)
	}
	if got, want := Normalize(100, 250, 200, 30, true), (Usage{Prompt: 100, Completion: 250, Reasoning: 200, Cached: 30}); got != want {
		t.Errorf("reasoning inside: %+v, want %+v", got, want)
	}
	if got, want := Normalize(10, 5, 50, 99, true), (Usage{Prompt: 10, Completion: 5, Reasoning: 5, Cached: 10}); got != want {
		t.Errorf("capped: %+v, want %+v", got, want)
	}
	if got, want := Normalize(-1, -2, -3, -4, false), (Usage{}); got != want {
		t.Errorf("negative: %+v, want %+v", got, want)
	}
	a := Usage{Prompt: 1, Completion: 2, Reasoning: 1, Cached: 1}
	if got, want := a.Add(Usage{Prompt: 10, Completion: 20, Estimated: true}), (Usage{Prompt: 11, Completion: 22, Reasoning: 1, Cached: 1, Estimated: true}); got != want {
		t.Errorf("Add: %+v, want %+v", got, want)
	}
	if a.Total() != 3 {
		t.Errorf("Total = %d", a.Total())
	}
}

func TestPriceTable(t *testing.T) {
	tab := NewPriceTable(map[string]Price{
		"gpt-4o":        {Input: 2.5, Output: 10},
		"gpt-4o*":       {Input: 2.6, Output: 11},
		"gpt-4o-mini*":  {Input: 0.15, Output: 0.6},
		"deepseek-chat": {Input: 0.27, Output: 1.1, CachedInput: 0.07},
		"o*":            {Input: 1, Output: 4},
	})
	for _, tc := range []struct {
		model string
		want  float64 // Input
		ok    bool
	}{
		{"gpt-4o", 2.5, true},
		{"gpt-4o-2024-08-06", 2.6, true},
		{"gpt-4o-mini", 0.15, true},
		{"gpt-4o-mini-2024-07-18", 0.15, true},
		{"o3-mini", 1, true},
		{"deepseek-chat", 0.27, true},
		{"deepseek-chat-v2", 0, false}, // exact names are not prefixes
		{"GPT-4o", 0, false},           // case-sensitive
		{"claude", 0, false},
		{"", 0, false},
	} {
		p, ok := tab.Lookup(tc.model)
		if ok != tc.ok || p.Input != tc.want {
			t.Errorf("Lookup(%q) = %+v, %v; want Input %g, %v", tc.model, p, ok, tc.want, tc.ok)
		}
	}
	if tab.Len() != 5 {
		t.Errorf("Len = %d", tab.Len())
	}
	def := NewPriceTable(map[string]Price{"*": {Input: 9}, "a*": {Input: 1}})
	if p, ok := def.Lookup("zzz"); !ok || p.Input != 9 {
		t.Errorf("default: %+v, %v", p, ok)
	}
	if p, _ := def.Lookup("abc"); p.Input != 1 {
		t.Errorf("longer prefix: %+v", p)
	}
	var nilTab *PriceTable
	if _, ok := nilTab.Lookup("x"); ok || nilTab.Len() != 0 {
		t.Error("nil table has a price")
	}
}

func TestParseUsage(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		want      Usage
		ok        bool
	}{
		{"openai", `{"prompt_tokens":1200,"completion_tokens":300,"total_tokens":1500,
			"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},
			"completion_tokens_details":{"reasoning_tokens":192,"audio_tokens":0,"accepted_prediction_tokens":0}}`,
			Usage{Prompt: 1200, Completion: 300, Reasoning: 192, Cached: 1024}, true},
		{"minimal", `{"prompt_tokens":5,"completion_tokens":7}`, Usage{Prompt: 5, Completion: 7}, true},
		{"prompt only", `{"prompt_tokens":5}`, Usage{Prompt: 5}, true},
		{"deepseek", `{"prompt_tokens":100,"completion_tokens":20,"prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":36,
			"completion_tokens_details":{"reasoning_tokens":15}}`,
			Usage{Prompt: 100, Completion: 20, Reasoning: 15, Cached: 64}, true},
		{"null details", `{"prompt_tokens":3,"completion_tokens":4,"prompt_tokens_details":null,"completion_tokens_details":null}`, Usage{Prompt: 3, Completion: 4}, true},
		{"responses api", `{"input_tokens":50,"input_tokens_details":{"cached_tokens":10},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":30},"total_tokens":90}`,
			Usage{Prompt: 50, Completion: 40, Reasoning: 30, Cached: 10}, true},
		{"cached over prompt", `{"prompt_tokens":10,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":20}}`, Usage{Prompt: 10, Completion: 1, Cached: 10}, true},
		{"null", `null`, Usage{}, false},
		{"empty", `{}`, Usage{}, false},
		{"not json", `{"prompt_tokens":`, Usage{}, false},
		{"array", `[1,2]`, Usage{}, false},
		{"nothing", ``, Usage{}, false},
	} {
		got, ok := ParseUsage([]byte(tc.raw))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "$0.00"},
		{0.0123, "$0.0123"},
		{0.01, "$0.01"},
		{0.5, "$0.50"},
		{0.12345, "$0.1235"},
		{0.0000075, "$0.0000075"},
		{0.00001, "$0.00001"},
		{0.0099999, "$0.01"},
		{0.9999999, "$1.00"},
		{1, "$1.00"},
		{40.1234, "$40.12"},
		{999.999, "$1,000.00"},
		{1234.56, "$1,234.56"},
		{1234567.891, "$1,234,567.89"},
		{-1, "-$1.00"},
		{-0.05, "-$0.05"},
		{math.NaN(), "$NaN"},
		{math.Inf(1), "$Inf"},
	} {
		if got := FormatUSD(tc.v); got != tc.want {
			t.Errorf("FormatUSD(%g) = %q, want %q", tc.v, got, tc.want)
		}
	}
	for n, want := range map[int]string{0: "0", 999: "999", 12345: "12,345", 1234567: "1,234,567", -4000: "-4,000"} {
		if got := FormatTokens(n); got != want {
			t.Errorf("FormatTokens(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseUsageAnthropic(t *testing.T) {
	u, ok := ParseUsage([]byte(`{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":7}`))
	want := Usage{Prompt: 1110, Completion: 7, Cached: 1000, CacheWrite: 100}
	if !ok || u != want {
		t.Fatalf("got %+v %v, want %+v", u, ok, want)
	}
	// The relay's chat translation: prompt_tokens already holds both.
	u, ok = ParseUsage([]byte(`{"prompt_tokens":1110,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":1000},"cache_creation_input_tokens":100}`))
	if !ok || u != want {
		t.Fatalf("chat form: got %+v %v, want %+v", u, ok, want)
	}
	// Prices: 10 input at $3, 100 written at $3.75, 1000 read at $0.30, 7 out at $15 (per MTok).
	got := Price{Input: 3, Output: 15, CachedInput: 0.3, CacheWrite: 3.75}.Cost(want)
	exp := (10*3 + 100*3.75 + 1000*0.3 + 7*15) / 1e6
	if diff := got - exp; diff > 1e-12 || diff < -1e-12 {
		t.Fatalf("cost %v, want %v", got, exp)
	}
}
