package llmrelay_test

// The status page in a real headless Chromium (Debian's chromium package),
// driven through the DevTools protocol (chromedp), against a relay with
// traffic on it: streams in mode off and split-reasoning, a failover, a
// key with a budget, a canary and a shadow.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// chromiumPath finds Chromium; the test skips without it, unless
// RELAY_REQUIRE_CHROMIUM=1 (CI installs it).
func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "chromium not installed (Debian: apt-get install chromium)"
	if os.Getenv("RELAY_REQUIRE_CHROMIUM") == "1" {
		t.Fatal(msg + " (RELAY_REQUIRE_CHROMIUM=1)")
	}
	t.Skip(msg)
	return ""
}

// newBrowser starts a headless Chromium with the flags it needs here (as
// root, in a VM without a GPU or a session bus) and a fresh profile.
func newBrowser(t *testing.T) (context.Context, *consoleLog) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelC(); cancelA() })
	logs := &consoleLog{}
	// Every console message of the page: console.error and .warn calls,
	// uncaught exceptions, and the browser log's errors and warnings
	// (a refused script or style, a failed load).
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			switch string(m.Type) {
			case "error", "warning", "assert":
				logs.add(m.String())
			default:
				if m.IsException() {
					logs.add(m.String())
				}
			}
		}
	}()
	return ctx, logs
}

type consoleLog struct {
	mu    sync.Mutex
	lines []string
}

func (c *consoleLog) add(s string) {
	c.mu.Lock()
	c.lines = append(c.lines, s)
	c.mu.Unlock()
}

func (c *consoleLog) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

func TestStatusPageInChromium(t *testing.T) {
	browser, console := newBrowser(t)

	// Upstreams: a bursty reasoner (reasoning in clusters, then the
	// answer), one that fails once, a canary and a shadow.
	reasoner := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		var datas []string
		for range 3 { // three clusters of 8 reasoning deltas
			for range 8 {
				datas = append(datas, `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":"think "},"finish_reason":null}]}`)
			}
		}
		for range 10 {
			datas = append(datas, chunk("word "))
		}
		datas = append(datas, `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":40,"total_tokens":1040}}`, "[DONE]")
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i, d := range datas {
			fmt.Fprintf(w, "data: %s\n\n", d)
			if i%8 == 7 {
				fl.Flush()
				time.Sleep(60 * time.Millisecond) // the gap between clusters
			}
		}
		fl.Flush()
	})
	flaky := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 503, `{"error":{"message":"busy","type":"server_error"}}`)
	})
	side := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 200, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
	})
	startRelay(t, fmt.Sprintf(`llm_relay {
		key sk-team status-team budget 0.01 per day
		upstream flaky %s
		upstream reasoner %s
		upstream side %s
		model status-think {
			to flaky
			to reasoner
			canary side 1
			shadow side 100
		}
		price status-think {
			input 1
			output 1
		}
		smoothing split-reasoning {
			min_interval 20ms
		}
	}
	handle /status {
		llm_relay_status
	}`, flaky.v1(), reasoner.v1(), side.v1()))

	// Traffic: a split-reasoning stream and a mode-off stream (each fails
	// over from flaky first), as a client would send them.
	for _, mode := range []string{"split-reasoning", "off"} {
		resp := post(t, `{"model":"status-think","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			"Authorization", "Bearer sk-team", "X-Relay-Mode", mode)
		readAll(t, resp)
	}

	// What the JSON view says, to compare the page with.
	var st struct {
		Streams []struct {
			Mode       string   `json:"mode"`
			EventsIn   int      `json:"events_in"`
			EventsOut  int      `json:"events_out"`
			ClusterIn  *float64 `json:"reasoning_cluster_in"`
			ClusterOut *float64 `json:"reasoning_cluster_out"`
		} `json:"streams"`
		Keys []struct {
			Key      string  `json:"key"`
			SpentUSD float64 `json:"spent_usd"`
		} `json:"keys"`
	}
	resp, err := http.Get(relayBase + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("the status without Accept: text/html is not JSON: %v", err)
	}
	resp.Body.Close()
	// The status is process-wide: other tests' streams are in it too,
	// older than this test's two.
	if len(st.Streams) < 2 || st.Streams[0].Mode != "off" || st.Streams[1].Mode != "split-reasoning" {
		t.Fatalf("the JSON status's newest streams are not this test's two: %+v", st.Streams)
	}
	for _, s := range st.Streams[:2] {
		if s.ClusterIn == nil || s.ClusterOut == nil || *s.ClusterIn <= 0 || *s.ClusterIn >= 1 {
			t.Errorf("%s stream: reasoning cluster rate %v in, %v out; want both, in (0, 1)", s.Mode, s.ClusterIn, s.ClusterOut)
		}
	}
	spent := -1.0
	for _, k := range st.Keys {
		if k.Key == "status-team" {
			spent = k.SpentUSD
		}
	}
	if spent <= 0 {
		t.Fatalf("no spend for key status-team in the JSON status: %+v", st.Keys)
	}

	type streamMarks struct {
		Mode   string `json:"mode"`
		In     int    `json:"in"`
		Out    int    `json:"out"`
		DrawIn int    `json:"drawIn"`
		DrawOu int    `json:"drawOut"`
	}
	// Counts the drawn ticks per stream: one path vertex per event.
	const countJS = `Array.from(document.querySelectorAll('.stream')).map(function(s){
		var r={mode:s.dataset.mode,in:+s.dataset.eventsIn,out:+s.dataset.eventsOut,drawIn:0,drawOut:0};
		s.querySelectorAll('path.m').forEach(function(p){
			var d=p.getAttribute('d'), n=d?1+(d.match(/h/g)||[]).length:0;
			if(+p.dataset.marks!==n){throw new Error('path says '+p.dataset.marks+' marks, has '+n)}
			var row=+p.dataset.row;
			if(row<3){r.drawIn+=n}else if(row<6){r.drawOut+=n}
		});
		return r;})`
	check := func(when string) {
		t.Helper()
		sections, err := chromedp.Run(browser, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('main > section')).map(function(s){return s.id})`))
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		marks, err := chromedp.Run(browser, chromedp.Evaluate[[]streamMarks](countJS))
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		text := func(sel string) string {
			s, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(sel)))
			if err != nil {
				t.Fatalf("%s: %s: %v", when, sel, err)
			}
			return s
		}
		keyRow, failRow, canaryRow, shadowRow, targets := text(`tr.key[data-key="status-team"]`), text(`tr.failover`),
			text(`tr.canary`), text(`tr.shadow`), text(`#chains`)
		if got := strings.Join(sections, ","); got != "chains,canaries,keys,streams,failovers" {
			t.Errorf("%s: sections %s", when, got)
		}
		if len(marks) != len(st.Streams) {
			t.Fatalf("%s: %d stream timelines, want %d", when, len(marks), len(st.Streams))
		}
		for i, m := range marks {
			want := st.Streams[i]
			if m.Mode != want.Mode || m.In != want.EventsIn || m.Out != want.EventsOut {
				t.Errorf("%s: stream %d on the page %+v, in the JSON %+v", when, i, m, want)
			}
			if m.DrawIn != want.EventsIn || m.DrawOu != want.EventsOut {
				t.Errorf("%s: stream %d (%s) draws %d marks in and %d out, had %d events in and %d out",
					when, i, m.Mode, m.DrawIn, m.DrawOu, want.EventsIn, want.EventsOut)
			}
		}
		for what, want := range map[string][]string{
			keyRow:    {"status-team", usage.FormatUSD(spent), "$0.01 daily"},
			failRow:   {"status-think", "flaky (status-think)", "status 503", "reasoner (status-think): answered 200"},
			canaryRow: {"side", "active", "1%"},
			shadowRow: {"side", "100%"},
			targets:   {"status-think", "flaky (*)", "reasoner (*)"},
		} {
			for _, w := range want {
				if !strings.Contains(what, w) {
					t.Errorf("%s: %q not in %q", when, w, what)
				}
			}
		}
		if strings.Contains(keyRow+targets, "sk-team") {
			t.Errorf("%s: the key's token is on the page", when)
		}
	}

	if err := chromedp.Do(browser, chromedp.Navigate(relayBase+"/status?refresh=1"), chromedp.WaitVisible(chromedp.CSS(`#failovers`))); err != nil {
		t.Fatal(err)
	}
	check("first load")
	if _, err := chromedp.Run(browser, chromedp.Poll[bool](`+(document.body.dataset.refreshes||0) >= 2`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("auto-refresh: %v", err)
	}
	refreshes, err := chromedp.Run(browser, chromedp.Evaluate[string](`document.body.dataset.refreshes`))
	if err != nil {
		t.Fatal(err)
	}
	check("after " + refreshes + " refreshes")
	shot, err := chromedp.Run(browser, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatal(err)
	}
	if lines := console.all(); len(lines) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(lines, "\n"))
	}
	// At phone width the page does not scroll sideways: wide tables and
	// the timelines scroll or shrink inside their own boxes.
	if err := chromedp.Do(browser, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	overflow, err := chromedp.Run(browser, chromedp.Evaluate[float64](`document.documentElement.scrollWidth - window.innerWidth`))
	if err != nil {
		t.Fatal(err)
	}
	if overflow > 0 {
		t.Errorf("at 390 px the page is %v px wider than the screen", overflow)
	}
	phone, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if lines := console.all(); len(lines) > 0 {
		t.Errorf("console errors at phone width:\n%s", strings.Join(lines, "\n"))
	}
	dir := t.ArtifactDir()
	for name, png := range map[string][]byte{"status-page.png": shot, "status-page-phone.png": phone} {
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", filepath.Join(dir, name))
	}

	// ?refresh=0 refreshes once a second, the floor (it refetched about
	// 250 times a second): within 1.5 s, at most two refreshes.
	if err := chromedp.Do(browser, chromedp.Navigate(relayBase+"/status?refresh=0"), chromedp.WaitVisible(chromedp.CSS(`#failovers`))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	n, err := chromedp.Run(browser, chromedp.Evaluate[float64](`+(document.body.dataset.refreshes||0)`))
	if err != nil {
		t.Fatal(err)
	}
	if n > 2 {
		t.Errorf("with ?refresh=0 the page refreshed %v times in 1.5 s; want at most 2 (once a second)", n)
	}
}
