package llmrelay

import (
	"bytes"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/canary"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sharedstate"
)

// bigStatus is the size case: 100 targets (in 25 chains of 4) and
// 50 recent streams of 200 events in and out, with failovers and keys,
// and each kind of price.
func bigStatus() Status {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	st := Status{Time: now, Canaries: []canary.Snapshot{{Name: "c → canup (*)", State: canary.StateActive, Share: 5, Steps: []float64{5, 50, 100}}}}
	for c := range 25 {
		ch := chainView{Alias: fmt.Sprintf("alias-%d", c)}
		for t := range 4 {
			l := chainLink{Upstream: fmt.Sprintf("provider-%d", t), Model: "model-name-long", Status: "healthy", Samples: 50,
				SuccessRatio: 0.98, TTFTP50MS: 420, TTFTP90MS: 900, SLOTTFTMS: 1500, SLOSuccess: 0.95}
			for i := range 30 {
				l.RecentTTFTMS = append(l.RecentTTFTMS, float64(300+i*17%400))
			}
			// Each kind of price, a built-in one with a long source URL.
			l.Price = []*priceInfo{
				{From: priceBuiltin, Match: "claude-opus-4-8", Input: 5, Output: 25, CachedInput: 0.5, CacheWrite: 6.25,
					Source: "https://platform.claude.com/docs/en/about-claude/pricing?ref=optimizesmart.com", Taken: "2026-12-07"},
				{From: priceConfig, Match: "model-*", Input: 1.25, Output: 10},
				{From: priceNone}, {From: "per_request"}}[t]
			ch.Targets = append(ch.Targets, l)
		}
		st.Chains = append(st.Chains, ch)
	}
	for s := range 50 {
		v := streamView{At: now, Key: "team", Alias: "alias-1", Upstream: "provider-0", Model: "model", Mode: "split-reasoning",
			EventsIn: 200, EventsOut: 200}
		for i := range 200 {
			lane := float64(pace.LaneReasoning)
			if i >= 100 {
				lane = float64(pace.LaneAnswer)
			}
			v.Marks = append(v.Marks, [3]float64{float64(i * 7), 0, lane}, [3]float64{float64(i*7 + s), 1, lane})
		}
		st.Streams = append(st.Streams, v)
	}
	for range 50 {
		st.Failovers = append(st.Failovers, failoverView{At: now, Key: "team", Alias: "alias-1", Status: 200,
			Attempts: []attemptOutcome{{Target: "provider-0 (model)", Outcome: "status 503", AtMS: 12}, {Target: "provider-1 (model)", Outcome: "answered 200", AtMS: 40}}})
	}
	for k := range 20 {
		st.Keys = append(st.Keys, keyStatus{Key: fmt.Sprintf("team-%d", k), SpentUSD: 12.5, BudgetUSD: 50, Budget: "$50.00 daily", Period: "day", Alerts: []int{50}})
	}
	return st
}

// TestStatusPageSize: the page stays under 200 KB with 100 targets and 50
// recent streams, and draws one mark per event.
func TestStatusPageSize(t *testing.T) {
	var buf bytes.Buffer
	if err := renderStatusPage(&buf, statusPageData{Status: bigStatus(), Refresh: defaultPageRefresh}); err != nil {
		t.Fatal(err)
	}
	if buf.Len() > 200_000 {
		t.Errorf("status page is %d bytes with 100 targets and 50 streams, want under 200 KB", buf.Len())
	}
	page := buf.String()
	if n := strings.Count(page, `class="target"`); n != 100 {
		t.Errorf("%d target rows, want 100", n)
	}
	// One path vertex (M, then h) per mark, and every mark drawn.
	total := 0
	for _, m := range regexp.MustCompile(`data-marks="(\d+)" d="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		n, _ := strconv.Atoi(m[1])
		vertices := 0
		if m[2] != "" {
			vertices = 1 + strings.Count(m[2], "h")
		}
		if vertices != n {
			t.Fatalf("a path says %d marks and has %d vertices: %q", n, vertices, m[2])
		}
		total += n
	}
	if total != 50*400 {
		t.Errorf("%d marks drawn, want 20,000 (50 streams of 200 events in and 200 out)", total)
	}
	t.Logf("%d bytes", buf.Len())
}

// BenchmarkStatusPage is the server's cost of the page: the bound
// is 5 ms (go test -bench StatusPage -run X .).
func BenchmarkStatusPage(b *testing.B) {
	st := bigStatus()
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if err := renderStatusPage(&buf, statusPageData{Status: st, Refresh: defaultPageRefresh}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "bytes/page")
}

func TestWantsHTML(t *testing.T) {
	for accept, want := range map[string]bool{
		"": false, "*/*": false, "application/json": false,
		"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8": true,
		"application/json, text/html":                                     false,
		"text/html;q=0.9":                                                 true,
	} {
		r, _ := http.NewRequest("GET", "/status", nil)
		r.Header.Set("Accept", accept)
		if got := wantsHTML(r); got != want {
			t.Errorf("Accept %q: wantsHTML = %v, want %v", accept, got, want)
		}
	}
}

// TestPageRefresh: the page's own refresh is held between a second and an
// hour; 0 (which made an open page refetch itself about 250 times a
// second) and words get the bound or the default, never 0.
func TestPageRefresh(t *testing.T) {
	for q, want := range map[string]time.Duration{
		"": 5 * time.Second, "5": 5 * time.Second, "2.5": 2500 * time.Millisecond, "60": time.Minute,
		"0": time.Second, "-3": time.Second, "0.001": time.Second, "1e-9": time.Second,
		"abc": 5 * time.Second, "NaN": 5 * time.Second, "Inf": time.Hour, "99999": time.Hour,
	} {
		if got := pageRefresh(q); got != want {
			t.Errorf("refresh=%q: %v, want %v", q, got, want)
		}
	}
	var buf bytes.Buffer
	if err := renderStatusPage(&buf, statusPageData{Status: bigStatus(), Refresh: pageRefresh("0")}); err != nil {
		t.Fatal(err)
	}
	// html/template writes a number in a script with a space either side.
	if page := buf.String(); !strings.Contains(page, "setInterval(refresh, 1000 )") || !strings.Contains(page, "refresh every 1s") {
		t.Errorf("the page for refresh=0 does not refresh every second:\n%s", page[strings.LastIndex(page, "<script>"):])
	}
}

// TestStatusPageSharedState: the state's last error and the keys skipped
// are on the page; neither is there when there is none.
func TestStatusPageSharedState(t *testing.T) {
	up := true
	st := Status{Time: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC), State: &fleetStatus{Backend: "redis", Up: &up,
		Problems: []sharedstate.Named{{Key: "llm_relay:canary", What: "a string, not a hash", Since: time.Date(2026, 12, 4, 11, 59, 0, 0, time.UTC)},
			{Key: "llm_relay:limits:team", Field: "ghost", What: "-10 requests in flight: negative, skipped"}}}}
	var buf bytes.Buffer
	if err := renderStatusPage(&buf, statusPageData{Status: st, Refresh: defaultPageRefresh}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{`2 skipped`, `id="shared-state"`, `llm_relay:canary`, `a string, not a hash`, `11:59:00`, `ghost`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page, `id="state-error"`) {
		t.Errorf("a last error on the page with none")
	}
	down := false
	st.State = &fleetStatus{Backend: "redis", Up: &down, LastError: "dial unix /run/redis.sock: connect: connection refused"}
	buf.Reset()
	if err := renderStatusPage(&buf, statusPageData{Status: st, Refresh: defaultPageRefresh}); err != nil {
		t.Fatal(err)
	}
	page = buf.String()
	if !strings.Contains(page, "connection refused") || strings.Contains(page, `id="shared-state"`) {
		t.Errorf("down with an error and no problem: the page has the error %v, a skipped section %v",
			strings.Contains(page, "connection refused"), strings.Contains(page, `id="shared-state"`))
	}
}
