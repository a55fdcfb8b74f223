package llmrelay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestCanaryPhaseInChromium: the status page, in a real Chromium, shows a
// canary's roll-out with the current phase marked, which phase of how
// many it is, and when it ends (the status JSON's next_step_at); after a
// promotion, the next phase and its end. Skipped without Chromium.
func TestCanaryPhaseInChromium(t *testing.T) {
	browser, console := newBrowser(t)
	startRelay(t, `llm_relay {
		upstream fast http://127.0.0.1:9093/fast/v1
		model phased {
			to fast
			canary fast {
				key header X-User
				guard {
					min_samples 1
				}
				promote 12.5% for 1s, 50% for 1d, 100%
			}
		}
	}
	handle /status {
		llm_relay_status
	}`, phaseSimSite)

	type pageCanary struct {
		Current string `json:"current"`
		Phases  string `json:"phases"`
		Ends    string `json:"ends"`
		EndText string `json:"endText"`
	}
	const readJS = `(function(){var r=document.querySelector('tr.canary'), e=r.querySelector('td.phase-ends');
		return {current:r.querySelector('.phase.current').textContent, phases:r.querySelector('td.phases').textContent,
			ends:e.dataset.ends||'', endText:e.textContent};})()`
	read := func(when string) pageCanary {
		t.Helper()
		if err := chromedp.Do(browser, chromedp.Navigate(relayBase+"/status"), chromedp.WaitVisible(chromedp.CSS(`tr.canary`))); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		p, err := chromedp.Run(browser, chromedp.Evaluate[pageCanary](readJS))
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		return p
	}

	st := canaryStatus(t)["phased"]
	p := read("first phase")
	ends := st.NextStepAt.UTC()
	if p.Current != "12.5% for 1s" || !strings.Contains(p.Phases, "12.5% for 1s → 50% for 1d → 100%") || !strings.Contains(p.Phases, "phase 1 of 3") {
		t.Errorf("first phase on the page: %+v", p)
	}
	if p.Ends != ends.Format(time.RFC3339) || !strings.Contains(p.EndText, ends.Format("2006-01-02 15:04:05")+" UTC") || !strings.Contains(p.EndText, "and 1 more attempt") {
		t.Errorf("first phase's end on the page: %+v; the JSON's %v", p, ends)
	}

	// One attempt from a user in the canary, then past the phase's end.
	streamChat(t, "phased", "X-User", usersBelow(12.5, 1)[0])
	waitFor(t, 10*time.Second, "the second phase", func() bool {
		streamChat(t, "phased", "X-User", "someone")
		return canaryStatus(t)["phased"].Step == 1
	})
	st = canaryStatus(t)["phased"]
	p = read("second phase")
	ends = st.NextStepAt.UTC()
	if p.Current != "50% for 1d" || !strings.Contains(p.Phases, "phase 2 of 3") || p.Ends != ends.Format(time.RFC3339) ||
		!strings.Contains(p.EndText, ends.Format("2006-01-02 15:04:05")+" UTC") {
		t.Errorf("second phase on the page: %+v; the JSON's end %v", p, ends)
	}
	if ends.Sub(st.Since) != 24*time.Hour {
		t.Errorf("second phase ends %v after it began, want 1d", ends.Sub(st.Since))
	}
	if lines := console.all(); len(lines) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(lines, "\n"))
	}
}
