package llmrelay_test

// The status page in a real headless Chromium shows each target's price
// and whence, the Prices section's source link, the SLO's reasoning floor
// and cluster rate, and a model's region pin (helpers:
// statuspage_browser_e2e_test.go).

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

func TestStatusPagePricesInChromium(t *testing.T) {
	browser, console := newBrowser(t)
	startRelay(t, `llm_relay {
		upstream sp-fra http://127.0.0.1:9099/v1 {
			region fra
		}
		upstream sp-nrt http://127.0.0.1:9099/v1 {
			region nrt
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
				cluster_rate 0.8
			}
		}
	}
	handle /status {
		llm_relay_status
	}`)
	if err := chromedp.Do(browser, chromedp.Navigate(relayBase+"/status"), chromedp.WaitVisible(chromedp.CSS(`#chains`))); err != nil {
		t.Fatal(err)
	}
	type pageView struct {
		Heading string     `json:"heading"`
		Header  []string   `json:"header"`
		Rows    [][]string `json:"rows"`
		Href    string     `json:"href"`
		Rel     string     `json:"rel"`
		Prices  []string   `json:"prices"`
	}
	// The chain's table as the browser parsed it: every row as many cells
	// as the header, so the price is under its heading.
	v, err := chromedp.Run(browser, chromedp.Evaluate[pageView](`(function(){
		var h=document.querySelector('#chains h3'), tb=h.nextElementSibling.querySelector('table');
		var rows=Array.from(tb.querySelectorAll('tr'));
		var cells=function(tr){return Array.from(tr.children).map(function(c){return c.innerText.trim()})};
		var a=document.querySelector('#prices a');
		return {heading:h.innerText, header:cells(rows[0]), rows:rows.slice(1).map(cells),
			href:a?a.href:'', rel:a?a.rel:'', prices:Array.from(document.querySelectorAll('#prices tr.price')).map(function(r){return r.innerText})};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if v.Heading != "sp-resident pinned to fra" {
		t.Errorf("chain heading %q, want it pinned to fra", v.Heading)
	}
	col, slo := -1, -1
	for i, h := range v.Header {
		switch h {
		case "$/M":
			col = i
		case "slo":
			slo = i
		}
	}
	if col < 0 || slo < 0 || len(v.Rows) != 4 {
		t.Fatalf("header %q and %d rows: want a $/M and an slo column, 4 targets", v.Header, len(v.Rows))
	}
	for i, want := range []string{"$1.25 / $10 built-in", "$3 / $9 config: sp-priced", "unpriced", "client’s model"} {
		row := v.Rows[i]
		if len(row) != len(v.Header) {
			t.Fatalf("row %d has %d cells, the header %d: %q", i, len(row), len(v.Header), row)
		}
		if row[col] != want {
			t.Errorf("target %d's price %q, want %q", i, row[col], want)
		}
		if !strings.Contains(row[slo], "reasoning ≥ 50% of baseline cluster ≤ 0.80") {
			t.Errorf("target %d's slo %q lacks the reasoning floor and cluster rate", i, row[slo])
		}
	}
	if !strings.HasPrefix(v.Href, "https://") || v.Rel != "noreferrer" || len(v.Prices) != 2 ||
		!strings.Contains(v.Prices[0], "gpt-5") || !strings.Contains(v.Prices[0], "taken 2026-") || !strings.Contains(v.Prices[1], "config: price sp-priced") {
		t.Errorf("Prices: link %q rel %q, rows %q", v.Href, v.Rel, v.Prices)
	}
	if lines := console.all(); len(lines) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(lines, "\n"))
	}
}
