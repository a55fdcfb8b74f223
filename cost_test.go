package llmrelay

import (
	"math"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

func TestFormatCost(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0", 0.031: "0.031", 0.00013625: "0.00013625", 4.2e-8: "0.000000042", 1234.5: "1234.5",
		1e-10: "0", 0.1 + 0.2: "0.3",
	} {
		if got := formatCost(v); got != want {
			t.Errorf("formatCost(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestPriceFor: a price block for the model, then for the alias, then the
// built-in list (unless off), then none.
func TestPriceFor(t *testing.T) {
	off := false
	h := &Relay{prices: usage.NewPriceTable(map[string]usage.Price{
		"gpt-4.1": {Input: 1000, Output: 2000}, "fast": {Input: 3, Output: 4}, "local-*": {Input: 0, Output: 0},
	})}
	for _, c := range []struct{ model, alias, from, match string }{
		{"gpt-4.1", "fast", priceConfig, "gpt-4.1"},
		{"gpt-5-2025-08-07", "fast", priceConfig, "fast"},
		{"gpt-5-2025-08-07", "other", priceBuiltin, "gpt-5"},
		{"local-llama", "other", priceConfig, "local-*"},
		{"my-model", "other", priceNone, ""},
	} {
		if _, info := h.priceFor(c.model, c.alias); info.From != c.from || info.Match != c.match {
			t.Errorf("priceFor(%s, %s) = %+v; want %s %s", c.model, c.alias, info, c.from, c.match)
		}
	}
	if _, info := h.priceFor("gpt-5", "x"); info.Source == "" || info.Taken == "" || info.Input != 1.25 {
		t.Errorf("built-in gpt-5: %+v", info)
	}
	h.BuiltinPrices = &off
	if _, ok := h.priceOf("gpt-5", "x"); ok {
		t.Error("builtin_prices off still prices gpt-5")
	}
}

// TestHandoffAnswerLegCached: the answer leg's cached prompt tokens are
// priced as cached input, as every other request's are (spend.go).
func TestHandoffAnswerLegCached(t *testing.T) {
	rec := &handoffRecord{reasonModel: "r", reasonPrompt: 100, reasoningTokens: 50,
		answerModel: "a", answerPrompt: 1000, answerCompletion: 10, answerCached: 800}
	price := usage.Price{Input: 10, Output: 20, CachedInput: 1}
	cost, ok := rec.cost(func(string) (usage.Price, bool) { return price, true })
	reason := (100*10 + 50*20) / 1e6
	answer := (200*10 + 800*1 + 10*20) / 1e6
	if !ok || math.Abs(cost-(reason+answer)) > 1e-12 || math.Abs(rec.answerCost-answer) > 1e-12 {
		t.Errorf("cost %v (answer leg %v); want %v + %v", cost, rec.answerCost, reason, answer)
	}
}

func TestKeyReasoningBudgets(t *testing.T) {
	b, err := keyReasoningBudgets([]ClientKey{{Name: "a", ReasoningBudget: 10}, {Name: "a"}, {Name: "b", ReasoningBudget: 5, ReasoningBudgetPeriod: "month"}, {}})
	if err != nil || b["a"] != (usage.ReasoningBudget{Limit: 10, Period: usage.Day}) || b["b"] != (usage.ReasoningBudget{Limit: 5, Period: usage.Month}) || b["key-4"].Limit != 0 {
		t.Errorf("%v %v", b, err)
	}
	if _, err := keyReasoningBudgets([]ClientKey{{Name: "a", ReasoningBudget: 10}, {Name: "a", ReasoningBudget: 10, ReasoningBudgetPeriod: "month"}}); err == nil {
		t.Error("two reasoning budgets for one name load")
	}
}

// TestTargetPricesAtProvision: a configured target's price is resolved
// once at provision, as priceFor gives it (a price block, the built-in
// list, none); a client's model forwarded unchanged is priced per
// request.
func TestTargetPricesAtProvision(t *testing.T) {
	h := startParityRelay(t, `llm_relay {
	state off
	upstream tp-a http://127.0.0.1:1/v1
	price tp-priced {
		input 3
		output 9
	}
	model tp-alias {
		to tp-a gpt-5-2025-08-07
		to tp-a tp-priced
		to tp-a tp-local
		to tp-a
	}
}`)
	for _, c := range []struct {
		model  string
		priced bool
		input  float64
	}{{"gpt-5-2025-08-07", true, 1.25}, {"tp-priced", true, 3}, {"tp-local", false, 0}} {
		tp, ok := h.targetPrices[[2]string{c.model, "tp-alias"}]
		if !ok {
			t.Errorf("%s: not resolved at provision", c.model)
			continue
		}
		want, info := h.priceFor(c.model, "tp-alias")
		if tp.priced != c.priced || tp.price != want || tp.price.Input != c.input || (info.From != priceNone) != c.priced {
			t.Errorf("%s: resolved %+v; priceFor %+v %s; want priced %v input %v", c.model, tp, want, info.From, c.priced, c.input)
		}
	}
	if len(h.targetPrices) != 3 {
		t.Errorf("targetPrices %v: want the 3 configured models only", h.targetPrices)
	}
	if p, ok := h.priceOf("claude-sonnet-4-5-20250929", "tp-alias"); !ok || p.Input == 0 {
		t.Errorf("a forwarded client model: %+v %v; want the built-in price", p, ok)
	}
}
