package llmrelay

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// priceStatus is a status with one chain of each kind of price, a
// reasoning SLO and a region pin; source is the built-in price's page.
func priceStatus(source string) Status {
	link := func(up, model string, p *priceInfo) chainLink {
		return chainLink{Upstream: up, Model: model, Status: "healthy", SLOTTFTMS: 1500, SLOSuccess: 0.95,
			SLOReasoningFloor: 0.5, SLOClusterRate: 0.8, Price: p}
	}
	return Status{Time: time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC), Chains: []chainView{{Alias: "resident", RegionPin: "fra",
		Targets: []chainLink{
			link("openai", "gpt-5-2025-08-07", &priceInfo{From: priceBuiltin, Match: "gpt-5", Input: 1.25, Output: 10, CachedInput: 0.125,
				Source: source, Taken: "2026-12-07"}),
			link("azure", "gpt-5", &priceInfo{From: priceConfig, Match: "gpt-5", Input: 2, Output: 12}),
			link("local", "my-local-model", &priceInfo{From: priceNone}),
			link("any", "*", &priceInfo{From: "per_request"}),
		}}, {Alias: "plain", Targets: []chainLink{{Upstream: "openai", Model: "gpt-5-2025-08-07", Status: "healthy"}}}}}
}

// priceCells are the page's target rows' price cells (the row's seventh
// line, after the slo cell), in order.
func priceCells(page string) []string {
	var cells []string
	for _, row := range strings.Split(page, `<tr class="target"`)[1:] {
		if lines := strings.Split(row, "\n"); len(lines) > 6 {
			cells = append(cells, lines[6])
		}
	}
	return cells
}

func renderPage(t *testing.T, st Status) string {
	t.Helper()
	var buf bytes.Buffer
	if err := renderStatusPage(&buf, statusPageData{Status: st, Refresh: defaultPageRefresh}); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestStatusPagePricesSLORegion: each target row says its price and
// whence (built-in, config: its block, unpriced, the client's model),
// the Prices section links the built-in price's source page with its
// date, the slo column says the reasoning floor and cluster rate, and a
// pinned model's heading says its region.
func TestStatusPagePricesSLORegion(t *testing.T) {
	page := renderPage(t, priceStatus("https://platform.openai.com/docs/pricing"))
	cells := priceCells(page)
	want := []string{
		`<td title="cached $0.125">$1.25 / $10 <small>built-in</small></td>`,
		`<td>$2 / $12 <small>config: gpt-5</small></td>`,
		`<td><small>unpriced</small></td>`,
		`<td><small>client’s model</small></td>`,
		`<td></td>`, // no price in the view: an empty cell, the columns aligned
	}
	if strings.Join(cells, "\n") != strings.Join(want, "\n") {
		t.Errorf("price cells:\n%s\nwant:\n%s", strings.Join(cells, "\n"), strings.Join(want, "\n"))
	}
	for _, w := range []string{
		`<section id="prices">`,
		`<tr class="price" data-from="builtin"><td>gpt-5</td><td class="wrap">gpt-5-2025-08-07</td><td>$1.25</td><td>$10</td>`,
		`<td>$0.125</td><td><span class="mute">as input</span></td>`,
		`built-in, <a href="https://platform.openai.com/docs/pricing" rel="noreferrer">platform.openai.com</a>, taken 2026-12-07`,
		`<tr class="price" data-from="config"><td>gpt-5</td><td class="wrap">gpt-5</td><td>$2</td><td>$12</td>`,
		`config: price gpt-5`,
		`p90 ≤ 1.5s ≥ 95.0% reasoning ≥ 50% of baseline cluster ≤ 0.80</td>`,
		`<h3>resident <span class="badge" title="region_pin: only targets in this region are tried">pinned to fra</span></h3>`,
		`<h3>plain</h3>`,
	} {
		if !strings.Contains(page, w) {
			t.Errorf("the page lacks %s", w)
		}
	}
	if n := strings.Count(page, `<tr class="price"`); n != 2 {
		t.Errorf("%d rows in Prices, want 2 (unpriced and per-request targets have none)", n)
	}
	// Without a priced target, no Prices section.
	st := priceStatus("")
	st.Chains = st.Chains[1:]
	if page := renderPage(t, st); strings.Contains(page, `id="prices"`) || strings.Contains(page, "reasoning ≥") || strings.Contains(page, "pinned to") {
		t.Errorf("a chain without price, reasoning SLO or pin shows one")
	}
}

// TestStatusPagePriceSourceEscaped: a source URL is an attribute value
// escaped by html/template; a javascript: URL is not a link.
func TestStatusPagePriceSourceEscaped(t *testing.T) {
	page := renderPage(t, priceStatus(`https://example.com/p?a=1&b="><script>alert(1)</script>`))
	if strings.Contains(page, `<script>alert`) || strings.Contains(page, `b="`) {
		t.Fatalf("the source URL broke out of its attribute:\n%s", page[strings.Index(page, `<section id="prices">`):])
	}
	if !strings.Contains(page, `<a href="https://example.com/p?a=1&amp;b=%22%3e%3cscript%3ealert%281%29%3c/script%3e" rel="noreferrer">example.com</a>`) {
		t.Errorf("the source link is not the escaped URL:\n%s", page[strings.Index(page, `<section id="prices">`):])
	}
	page = renderPage(t, priceStatus(`javascript:alert(1)`))
	if strings.Contains(page, `href="javascript:`) || !strings.Contains(page, `href="#ZgotmplZ"`) {
		t.Errorf("a javascript: source is a link")
	}
}

// TestStatusViewPricesSLORegion: a provisioned relay's status view has
// each target's price, its SLO's reasoning_floor and cluster_rate, and
// the model's region_pin, and its page shows them.
func TestStatusViewPricesSLORegion(t *testing.T) {
	startParityRelay(t, `llm_relay {
	state off
	upstream sp-fra http://127.0.0.1:1/v1 {
		region fra
	}
	upstream sp-nrt http://127.0.0.1:2/v1 {
		region nrt
	}
	slo {
		cluster_rate 0.8
	}
	price sp-priced {
		input 3
		output 9
	}
	model sp-resident {
		to sp-fra gpt-5-2025-08-07
		to sp-nrt sp-priced
		to sp-fra sp-local
		to sp-nrt
		region_pin fra
		slo {
			reasoning_floor 0.5
		}
	}
}`)
	st := buildStatus(time.Now())
	var c *chainView
	for i := range st.Chains {
		if st.Chains[i].Alias == "sp-resident" {
			c = &st.Chains[i]
		}
	}
	if c == nil {
		t.Fatalf("no chain sp-resident in %+v", st.Chains)
	}
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		RegionPin string `json:"region_pin"`
		Targets   []struct {
			Model             string  `json:"model"`
			SLOReasoningFloor float64 `json:"slo_reasoning_floor"`
			SLOClusterRate    float64 `json:"slo_cluster_rate"`
			Price             struct {
				From, Match string
			} `json:"price"`
		} `json:"targets"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.RegionPin != "fra" || len(got.Targets) != 4 {
		t.Fatalf("chain view %s: want region_pin fra and 4 targets", raw)
	}
	for i, w := range []struct{ model, from, match string }{
		{"gpt-5-2025-08-07", "builtin", "gpt-5"}, {"sp-priced", "config", "sp-priced"}, {"sp-local", "none", ""}, {"*", "per_request", ""},
	} {
		g := got.Targets[i]
		if g.Model != w.model || g.Price.From != w.from || g.Price.Match != w.match || g.SLOReasoningFloor != 0.5 || g.SLOClusterRate != 0.8 {
			t.Errorf("target %d: %+v, want model %s, price from %s match %q, slo_reasoning_floor 0.5, slo_cluster_rate 0.8", i, g, w.model, w.from, w.match)
		}
	}
	page := renderPage(t, Status{Time: st.Time, Chains: []chainView{*c}})
	for _, w := range []string{`pinned to fra`, `reasoning ≥ 50% of baseline cluster ≤ 0.80`, `$3 / $9 <small>config: sp-priced</small>`,
		`<small>built-in</small>`, `<small>unpriced</small>`, `<small>client’s model</small>`, `rel="noreferrer">`, `, taken 20`} {
		if !strings.Contains(page, w) {
			t.Errorf("the page of a provisioned relay lacks %s", w)
		}
	}
}
