package llmrelay_test

// The status page in a real headless Chromium shows a target degraded by
// its reasoning, with the reason, and a shadow's verdict with both sides'
// reasoning (helpers: statuspage_browser_e2e_test.go).

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

func TestStatusPageReasoningInChromium(t *testing.T) {
	browser, console := newBrowser(t)
	startRelay(t, `llm_relay {
		upstream a http://127.0.0.1:9092/a/v1
		upstream b http://127.0.0.1:9092/b/v1
		upstream thin http://127.0.0.1:9092/thin/v1
		model chat {
			to a
			to b
			shadow thin 100
			slo {
				reasoning_floor 0.5
				window 10
				min_samples 4
			}
		}
	}
	handle /status {
		llm_relay_status
	}`, reasoningSimSite)

	for i := range 25 {
		if up := streamServedBy(t, reasoningChatBody); up != "a" {
			t.Fatalf("baseline request %d served by %q", i, up)
		}
	}
	for range 3 { // the third answer of 4 tokens degrades a
		streamServedBy(t, reasoningChatBody, "X-Sim-Reasoning-Tokens", "4")
	}
	waitFor(t, 10*time.Second, "28 shadow copies", func() bool {
		d := getShadowVerdicts(t)
		return len(d.Shadows) == 1 && d.Shadows[0].Verdict.Samples == 10 && d.Shadows[0].Stats.OK == 28
	})
	if st := mustTarget(t, getRelayStatus(t), "a"); st.Status != "degraded" {
		t.Fatalf("a is %s (%s), want degraded", st.Status, st.Reason)
	}

	if err := chromedp.Do(browser, chromedp.Navigate(relayBase+"/status"), chromedp.WaitVisible(chromedp.CSS(`#chains`))); err != nil {
		t.Fatal(err)
	}
	text := func(sel string) string {
		s, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return s
	}
	degraded := text(`tr.target[data-status="degraded"]`)
	for _, want := range []string{"a (*)", "degraded", "reasoning 46% of baseline (40 → 18 tokens, effort high)"} {
		if !strings.Contains(degraded, want) {
			t.Errorf("the degraded target's row %q lacks %q", degraded, want)
		}
	}
	shadowRow := text(`tr.shadow`)
	verdict := text(`tr.shadow td.verdict[data-verdict="fail"]`)
	for what, want := range map[string][]string{
		shadowRow: {"chat", "thin", "29 → 4", "over 10", "reasoning 14% of the primary's (29 → 4 tokens) < floor 0.50"},
		verdict:   {"fail"},
	} {
		for _, w := range want {
			if !strings.Contains(what, w) {
				t.Errorf("%q not in %q", w, what)
			}
		}
	}
	if lines := console.all(); len(lines) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(lines, "\n"))
	}
	// The chains and the shadows, for a person to look at.
	for name, sel := range map[string]string{"status-page-reasoning-chains.png": "#chains", "status-page-reasoning-shadows.png": "#canaries"} {
		shot, err := chromedp.Run(browser, chromedp.Screenshot(chromedp.CSS(sel)))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.ArtifactDir(), name)
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
}
