package llmrelay_test

// End-to-end tests of health-aware routing: the SLO, passive ejection,
// health state across a config reload, active health checks, region hints,
// weighted pools and the status view (admin API and llm_relay_status).
// The canary and shadow tests are in canary_e2e_test.go and
// shadow_e2e_test.go; they share the status helpers below.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	llmrelay "github.com/llmrelay/caddy-llm-relay"
)

// adminStatusURL is the relay's status on Caddy's admin API.
const adminStatusURL = "http://localhost:2999/llm_relay/status"

// relayStatusDoc is the status JSON, as much of it as the tests read.
type relayStatusDoc struct {
	Time     time.Time  `json:"time"`
	Targets  []rsTarget `json:"targets"`
	Canaries []rsCanary `json:"canaries"`
	Shadows  []rsShadow `json:"shadows"`
}

type rsTarget struct {
	Name                string    `json:"name"`
	Status              string    `json:"status"`
	Samples             int       `json:"samples"`
	SuccessRatio        float64   `json:"success_ratio"`
	TTFTP90             string    `json:"ttft_p90"`
	LatencyEWMA         string    `json:"latency_ewma"`
	ProbeRTT            string    `json:"probe_rtt"`
	ConsecutiveFailures int       `json:"consecutive_failures"`
	Ejections           int       `json:"ejections"`
	CooldownUntil       time.Time `json:"cooldown_until"`
	Cooldown            string    `json:"cooldown"`
	Reason              string    `json:"reason"`
	Upstream            string    `json:"upstream"`
	Model               string    `json:"model"`
	Region              string    `json:"region"`
	Aliases             []string  `json:"aliases"`
}

type rsCanary struct {
	Name           string  `json:"name"`
	State          string  `json:"state"`
	Share          float64 `json:"share"`
	Samples        int     `json:"samples"`
	TotalSamples   int64   `json:"total_samples"`
	TotalFailed    int64   `json:"total_failed"`
	ErrorRate      float64 `json:"error_rate"`
	RollbackReason string  `json:"rollback_reason"`
}

type rsShadow struct {
	Alias    string  `json:"alias"`
	Upstream string  `json:"upstream"`
	Model    string  `json:"model"`
	Percent  float64 `json:"percent"`
	Stats    struct {
		MaxConcurrent  int     `json:"max_concurrent"`
		Sent           int64   `json:"sent"`
		Dropped        int64   `json:"dropped"`
		Running        int64   `json:"running"`
		OK             int64   `json:"ok"`
		Failed         int64   `json:"failed"`
		LastError      string  `json:"last_error"`
		Compared       int64   `json:"compared"`
		MeanSimilarity float64 `json:"mean_similarity"`
		MeanLengthRat  float64 `json:"mean_length_ratio"`
	} `json:"stats"`
}

// getStatusRaw GETs a status URL and returns its body, checking the status
// code and headers.
func getStatusRaw(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", url, resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("GET %s: Content-Type %q", url, ct)
	}
	return []byte(body)
}

// getRelayStatus returns the decoded status from the admin API.
func getRelayStatus(t *testing.T) relayStatusDoc {
	t.Helper()
	var d relayStatusDoc
	raw := getStatusRaw(t, adminStatusURL)
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("decoding status: %v\n%s", err, raw)
	}
	return d
}

// target returns the status of the (only) target on upstream, or nil.
func (d relayStatusDoc) target(upstream string) *rsTarget {
	for i := range d.Targets {
		if d.Targets[i].Upstream == upstream {
			return &d.Targets[i]
		}
	}
	return nil
}

// mustTarget is target, failing the test when it is missing.
func mustTarget(t *testing.T, d relayStatusDoc, upstream string) *rsTarget {
	t.Helper()
	if tg := d.target(upstream); tg != nil {
		return tg
	}
	t.Fatalf("no target on upstream %q in the status: %+v", upstream, d.Targets)
	return nil
}

// logEntry is one JSON line of the Caddy log.
type logEntry map[string]any

func (e logEntry) str(k string) string { s, _ := e[k].(string); return s }

// logEntries parses the Caddy log written so far.
func logEntries(t *testing.T, path string) []logEntry {
	t.Helper()
	var out []logEntry
	sc := bufio.NewScanner(strings.NewReader(readLog(t, path)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e logEntry
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

// findLog returns the first entry with this level and message whose
// string fields contain the given values (field, substring, ...), or nil.
func findLog(entries []logEntry, level, msg string, fields ...string) logEntry {
next:
	for _, e := range entries {
		if e.str("level") != level || e.str("msg") != msg {
			continue
		}
		for i := 0; i+1 < len(fields); i += 2 {
			if !strings.Contains(e.str(fields[i]), fields[i+1]) {
				continue next
			}
		}
		return e
	}
	return nil
}

// mustLog fails unless the log holds a matching entry (see findLog).
func mustLog(t *testing.T, path, level, msg string, fields ...string) logEntry {
	t.Helper()
	e := findLog(logEntries(t, path), level, msg, fields...)
	if e == nil {
		t.Errorf("no %s log %q with %q in:\n%s", level, msg, fields, readLog(t, path))
	}
	return e
}

// servedBy posts body (with optional header pairs), requires a 200 and
// returns the X-Relay-Upstream and X-Relay-Attempts headers.
func servedBy(t *testing.T, body string, header ...string) (upstream, attempts string) {
	t.Helper()
	resp := post(t, body, header...)
	b := readAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return resp.Header.Get("X-Relay-Upstream"), resp.Header.Get("X-Relay-Attempts")
}

func okHandler(n int, w http.ResponseWriter, r *http.Request) { answerJSON(w, 200, okCompletion) }

// TestHealthSLOSlowTargetLosesAndRegainsTraffic: a target whose time to
// first token climbs past its (model-level) SLO is moved behind the next
// target; once fast again, the one live recheck per second lets it prove
// it and win its place back.
func TestHealthSLOSlowTargetLosesAndRegainsTraffic(t *testing.T) {
	var slow atomic.Bool
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if slow.Load() {
			time.Sleep(500 * time.Millisecond)
		}
		answerJSON(w, 200, okCompletion)
	})
	b := newFakeUpstream(t, okHandler)
	// The relay-wide SLO is lenient; the model's block overrides its ttft
	// and keeps its window and min_samples.
	logFile := startRelay(t, fmt.Sprintf(`llm_relay {
		upstream a %s
		upstream b %s
		slo {
			ttft 5s
			window 4
			min_samples 3
		}
		model chat {
			to a
			to b
			slo {
				ttft 200ms
			}
		}
	}`, a.v1(), b.v1()))

	for i := 0; i < 3; i++ {
		if up, _ := servedBy(t, chatBody); up != "a" {
			t.Fatalf("warm-up %d: served by %q, want a (first in the chain, healthy)", i, up)
		}
	}
	slow.Store(true)
	// This slow answer makes the window's p90 (of 4: its maximum) 500ms.
	if up, _ := servedBy(t, chatBody); up != "a" {
		t.Fatalf("served by %q; a is still healthy before its slow sample", up)
	}
	st := mustTarget(t, getRelayStatus(t), "a")
	if st.Status != "degraded" || !strings.Contains(st.Reason, "> slo 200ms") {
		t.Fatalf("a after a slow sample: status %q reason %q; want degraded by the model's 200ms ttft", st.Status, st.Reason)
	}
	mustLog(t, logFile, "warn", "target degraded", "target", "a (*)", "reason", "ttft p90")

	// Degraded: b first. At most one request per second still goes to a
	// first (the recheck), so of a quick burst nearly all go to b.
	start := time.Now()
	toA := 0
	for i := 0; i < 8; i++ {
		if up, _ := servedBy(t, chatBody); up == "a" {
			toA++
		}
	}
	if allowed := 1 + int(time.Since(start)/time.Second); toA > allowed {
		t.Errorf("a served %d of 8 requests in %s while degraded; rechecks allow %d", toA, time.Since(start), allowed)
	}

	// a recovers. Each request more than a second after the previous one
	// is a recheck and goes to a; after enough fast samples a is healthy.
	slow.Store(false)
	recovered := false
	for i := 0; i < 10 && !recovered; i++ { // bounded: ~11s
		time.Sleep(1100 * time.Millisecond)
		if up, _ := servedBy(t, chatBody); up != "a" {
			t.Errorf("recheck %d: served by %q; a degraded target's recheck goes to it first once a second", i, up)
		}
		recovered = mustTarget(t, getRelayStatus(t), "a").Status == "healthy"
	}
	if !recovered {
		t.Fatalf("a still not healthy after 10 rechecks: %+v", mustTarget(t, getRelayStatus(t), "a"))
	}
	for i := 0; i < 5; i++ {
		if up, _ := servedBy(t, chatBody); up != "a" {
			t.Errorf("after recovery: served by %q, want a", up)
		}
	}
	mustLog(t, logFile, "info", "target healthy", "target", "a (*)")
}

// failingA is an upstream that always answers 503.
func failingA(t *testing.T) *fakeUpstream {
	return newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 503, `{"error":{"message":"overloaded","type":"server_error","code":null}}`)
	})
}

// ejectByTraffic sends 3 requests, each failing over from a (503) to b,
// which ejects a; it returns a's status entry.
func ejectByTraffic(t *testing.T, a *fakeUpstream) *rsTarget {
	t.Helper()
	for i := 0; i < 3; i++ {
		if up, att := servedBy(t, chatBody); up != "b" || att != "2" {
			t.Fatalf("request %d: served by %q after %s attempts; want b after 2", i, up, att)
		}
	}
	if n := len(a.requests()); n != 3 {
		t.Fatalf("a got %d requests, want 3", n)
	}
	return mustTarget(t, getRelayStatus(t), "a")
}

// TestHealthPassiveEjection: three consecutive failures eject a target for
// its cooldown; it gets no more requests, the status shows why and until
// when, and a warning is logged.
func TestHealthPassiveEjection(t *testing.T) {
	a := failingA(t)
	b := newFakeUpstream(t, okHandler)
	logFile := startRelay(t, fmt.Sprintf(`llm_relay {
		upstream a %s
		upstream b %s
		model chat {
			to a model-a
			to b model-b
		}
	}`, a.v1(), b.v1()))

	before := time.Now()
	st := ejectByTraffic(t, a)
	if st.Status != "ejected" || st.Reason != "3 consecutive failures" {
		t.Errorf("a: status %q reason %q; want ejected after 3 consecutive failures", st.Status, st.Reason)
	}
	if st.Cooldown != "10s" || st.Ejections != 1 || st.ConsecutiveFailures != 3 || st.Model != "model-a" {
		t.Errorf("a: %+v; want cooldown 10s, 1 ejection, 3 consecutive failures, model model-a", st)
	}
	if until := st.CooldownUntil; until.Before(before.Add(9*time.Second)) || until.After(time.Now().Add(10*time.Second)) {
		t.Errorf("a: cooldown_until %s, want about 10s after %s", until, before)
	}
	if sb := mustTarget(t, getRelayStatus(t), "b"); sb.Status != "healthy" || sb.Samples != 3 || sb.SuccessRatio != 1 {
		t.Errorf("b: %+v; want healthy with 3 good samples", sb)
	}

	for i := 0; i < 5; i++ {
		if up, att := servedBy(t, chatBody); up != "b" || att != "1" {
			t.Errorf("after ejection: served by %q after %s attempts; want b at once", up, att)
		}
	}
	if n, m := len(a.requests()), len(b.requests()); n != 3 || m != 8 {
		t.Errorf("a got %d requests (want 3: none after the ejection), b %d (want 8)", n, m)
	}
	e := mustLog(t, logFile, "warn", "target ejected", "target", "a (model-a)", "reason", "3 consecutive failures")
	if e != nil && (e.str("from") != "healthy" || e.str("to") != "ejected") {
		t.Errorf("ejection log: %v", e)
	}
}

// TestHealthSuccessRatioEjects: failures that never come 3 in a row still
// eject a target once its window's success ratio falls below half the
// SLO's; and when every target is out, the least bad is still tried.
func TestHealthSuccessRatioEjects(t *testing.T) {
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n%2 == 1 {
			answerJSON(w, 503, `{}`)
			return
		}
		answerJSON(w, 200, okCompletion)
	})
	b := failingA(t)
	startRelay(t, fmt.Sprintf(`llm_relay {
		upstream a %s
		upstream b %s
		slo {
			success 0.9
			window 4
			min_samples 3
		}
		model chat {
			to a
			to b
		}
	}`, a.v1(), b.v1()))

	// a: fail (then b fails too: 502), ok, fail.
	wantStatus := []int{502, 200, 502}
	for i, want := range wantStatus {
		resp := post(t, chatBody)
		body := readAll(t, resp)
		if resp.StatusCode != want {
			t.Fatalf("request %d: status %d, want %d: %s", i, resp.StatusCode, want, body)
		}
	}
	doc := getRelayStatus(t)
	sa, sb := mustTarget(t, doc, "a"), mustTarget(t, doc, "b")
	if sa.Status != "ejected" || !strings.Contains(sa.Reason, "success 0.33 < 0.45 (half the slo 0.90)") || sa.ConsecutiveFailures != 1 {
		t.Errorf("a: %+v; want ejected by its success ratio, with 1 consecutive failure", sa)
	}
	// b failed the 2 requests a did not serve: not yet 3 in a row, but
	// 0 of 2 is below the bound only from min_samples 3 on.
	if sb.Status == "ejected" {
		t.Errorf("b: %+v; 2 failures eject nothing", sb)
	}
	b3 := len(b.requests())
	// b's third failure ejects it too; then both are out and the least
	// bad (a, whose cooldown ends first) is still tried, then b.
	resp := post(t, chatBody)
	readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Relay-Upstream") != "a" {
		t.Errorf("a ejected, b healthy but failing: status %d from %q", resp.StatusCode, resp.Header.Get("X-Relay-Upstream"))
	}
	if len(b.requests()) != b3+1 {
		t.Errorf("b got %d requests, want %d (tried first while a is ejected)", len(b.requests()), b3+1)
	}
	if sb := mustTarget(t, getRelayStatus(t), "b"); sb.Status != "ejected" {
		t.Fatalf("b after 3 consecutive failures: %+v", sb)
	}
	na, nb := len(a.requests()), len(b.requests())
	resp = post(t, chatBody)
	body := readAll(t, resp)
	if len(a.requests()) != na+1 || len(b.requests()) != nb+1 {
		t.Errorf("both ejected: a got %d, b %d more requests; want 1 each (nothing is left out)", len(a.requests())-na, len(b.requests())-nb)
	}
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("both ejected and failing: status %d, want 502: %s", resp.StatusCode, body)
	}
	mustContain(t, decodeErr(t, body).Error.Message, "a (chat): status 503; b (chat): status 503")
}

// TestHealthStateSurvivesReload: a config reload with the same upstreams
// keeps their health: an ejected target stays ejected, with the same
// cooldown, and keeps getting no traffic.
func TestHealthStateSurvivesReload(t *testing.T) {
	a := failingA(t)
	b := newFakeUpstream(t, okHandler)
	block := func(extra string) string {
		return fmt.Sprintf(`llm_relay {
		upstream a %s
		upstream b %s
		model chat {
			to a
			to b
		}
		%s
	}`, a.v1(), b.v1(), extra)
	}
	startRelay(t, block(""))
	st := ejectByTraffic(t, a)
	if st.Status != "ejected" {
		t.Fatalf("a: %+v, want ejected", st)
	}

	startRelay(t, block("model other {\n\t\t\tto b\n\t\t}"))
	doc := getRelayStatus(t)
	st2 := mustTarget(t, doc, "a")
	if st2.Status != "ejected" || st2.Ejections != 1 || !st2.CooldownUntil.Equal(st.CooldownUntil) || st2.Reason != st.Reason {
		t.Errorf("after reload a is %+v; want the same ejection as before (%+v)", st2, st)
	}
	if sb := mustTarget(t, doc, "b"); !reflect.DeepEqual(sortedCopy(sb.Aliases), []string{"chat", "other"}) || sb.Samples != 3 {
		t.Errorf("after reload b is %+v; want the new config's aliases chat and other, and its 3 samples kept", sb)
	}
	seen := map[string]int{}
	for _, tg := range doc.Targets {
		seen[tg.Upstream+"|"+tg.Model]++
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("target %s listed %d times", k, n)
		}
	}

	for i := 0; i < 5; i++ {
		if up, att := servedBy(t, chatBody); up != "b" || att != "1" {
			t.Errorf("after reload: served by %q after %s attempts; want b at once", up, att)
		}
	}
	if up, _ := servedBy(t, `{"model":"other","messages":[{"role":"user","content":"hi"}]}`); up != "b" {
		t.Errorf("the new config's model other was served by %q", up)
	}
	if n := len(a.requests()); n != 3 {
		t.Errorf("a got %d requests; the reload must not clear its ejection", n)
	}
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}

// TestHealthActiveChecks: probes GET <base>/models with the upstream's own
// key (never a client's), failing probes eject a target that gets no
// traffic, good probes feed its latency, and a reload stops the probes.
func TestHealthActiveChecks(t *testing.T) {
	var probesA, probesC atomic.Int64
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
			probesA.Add(1)
			answerJSON(w, 500, `{"error":{"message":"down","type":"server_error","code":null}}`)
			return
		}
		answerJSON(w, 200, okCompletion)
	})
	c := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
			probesC.Add(1)
			answerJSON(w, 200, `{"object":"list","data":[]}`)
			return
		}
		answerJSON(w, 200, okCompletion)
	})
	b := newFakeUpstream(t, okHandler)
	relay := func(checks bool) string {
		hcA, hcC := "", ""
		if checks {
			// 1s: the probe interval's floor.
			hcA = "health_check {\n\t\t\t\turi /models\n\t\t\t\tinterval 1s\n\t\t\t\ttimeout 1s\n\t\t\t}"
			hcC = "health_check {\n\t\t\t\tinterval 1s\n\t\t\t}"
		}
		return fmt.Sprintf(`llm_relay {
		key sk-client-e2e-health
		upstream b %s
		upstream a %s {
			api_key sk-upstream-a
			%s
		}
		upstream c %s {
			api_key sk-upstream-c
			%s
		}
		model chat {
			to b
			to a
			to c
		}
	}`, b.v1(), a.v1(), hcA, c.v1(), hcC)
	}
	logFile := startRelay(t, relay(true))

	for i := 0; i < 3; i++ {
		if up, _ := servedBy(t, chatBody, "Authorization", "Bearer sk-client-e2e-health"); up != "b" {
			t.Fatalf("served by %q, want b", up)
		}
	}
	waitFor(t, 10*time.Second, "failing probes to eject a", func() bool {
		return getRelayStatus(t).target("a").Status == "ejected"
	})
	waitFor(t, 10*time.Second, "a good probe of c", func() bool { return probesC.Load() >= 2 })
	doc := getRelayStatus(t)
	if sa := mustTarget(t, doc, "a"); sa.Reason != "3 consecutive failures" || sa.Samples != 0 {
		t.Errorf("a: %+v; want ejected by 3 consecutive failures with no live samples", sa)
	}
	if sc := mustTarget(t, doc, "c"); sc.Status != "healthy" || sc.LatencyEWMA == "" || sc.ProbeRTT == "" {
		t.Errorf("c: %+v; want healthy with a latency and a probe round trip measured by its probes", sc)
	}
	if sb := mustTarget(t, doc, "b"); sb.ProbeRTT != "" {
		t.Errorf("b has no health_check, yet a probe round trip %q", sb.ProbeRTT)
	}
	mustLog(t, logFile, "warn", "target ejected", "target", "a (*)", "reason", "3 consecutive failures")

	for name, f := range map[string]*fakeUpstream{"a": a, "c": c} {
		reqs := f.requests()
		if len(reqs) < 2 {
			t.Errorf("%s got %d probes", name, len(reqs))
		}
		for _, r := range reqs {
			if r.path != "/v1/models" {
				t.Errorf("%s got a request for %s; only probes were expected (b serves everything)", name, r.path)
			}
			if got := r.header.Get("Authorization"); got != "Bearer sk-upstream-"+name {
				t.Errorf("%s probe Authorization %q, want its own api_key", name, got)
			}
		}
	}
	if probesA.Load() != int64(len(a.requests())) {
		t.Errorf("a's probes are not all GETs of /v1/models")
	}
	for name, f := range map[string]*fakeUpstream{"a": a, "b": b, "c": c} {
		for _, r := range f.requests() {
			for k, vs := range r.header {
				for _, v := range vs {
					if strings.Contains(v, "sk-client-e2e-health") {
						t.Errorf("%s received the client's key in %s", name, k)
					}
				}
			}
		}
	}

	// The same upstreams without health_check: the old probes stop.
	startRelay(t, relay(false))
	n := len(a.requests())
	time.Sleep(2500 * time.Millisecond) // two and a half probe intervals
	if m := len(a.requests()); m > n+1 {
		t.Errorf("a got %d more probes after a reload removed its health_check", m-n)
	}
}

// TestHealthRegionHint: X-Region-Hint puts the targets of that region
// first, `auto` the lowest measured latency, and the header never reaches
// an upstream.
func TestHealthRegionHint(t *testing.T) {
	eu := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		time.Sleep(80 * time.Millisecond)
		answerJSON(w, 200, okCompletion)
	})
	us := newFakeUpstream(t, okHandler)
	startRelay(t, fmt.Sprintf(`llm_relay {
		upstream eu %s {
			region eu
		}
		upstream us %s {
			region us
		}
		model chat {
			to eu
			to us
		}
	}`, eu.v1(), us.v1()))

	if up, _ := servedBy(t, chatBody); up != "eu" {
		t.Errorf("no hint: served by %q, want eu (first in the chain)", up)
	}
	for _, hint := range []string{"us", "US", "us", "us"} {
		if up, att := servedBy(t, chatBody, "X-Region-Hint", hint); up != "us" || att != "1" {
			t.Errorf("hint %s: served by %q after %s attempts, want us at once", hint, up, att)
		}
	}
	for i := 0; i < 3; i++ {
		if up, _ := servedBy(t, chatBody, "X-Region-Hint", "eu"); up != "eu" {
			t.Errorf("hint eu: served by %q", up)
		}
	}
	// An unknown region changes nothing.
	if up, _ := servedBy(t, chatBody, "X-Region-Hint", "ap"); up != "eu" {
		t.Errorf("hint ap: served by %q, want eu (chain order)", up)
	}
	doc := getRelayStatus(t)
	le, lu := mustTarget(t, doc, "eu"), mustTarget(t, doc, "us")
	if le.Region != "eu" || lu.Region != "us" || le.LatencyEWMA == "" || lu.LatencyEWMA == "" {
		t.Fatalf("status: eu %+v, us %+v; want regions and measured latencies", le, lu)
	}
	// Both latencies are known: auto picks the faster, us.
	for i := 0; i < 5; i++ {
		if up, _ := servedBy(t, chatBody, "X-Region-Hint", "auto"); up != "us" {
			t.Errorf("hint auto: served by %q, want us (eu takes 80ms more); latencies eu %s us %s", up, le.LatencyEWMA, lu.LatencyEWMA)
		}
	}
	for name, f := range map[string]*fakeUpstream{"eu": eu, "us": us} {
		for _, r := range f.requests() {
			if v := r.header.Values("X-Region-Hint"); len(v) > 0 {
				t.Errorf("%s received X-Region-Hint %q", name, v)
			}
		}
	}
}

// TestHealthWeightedPool: targets of equal rank share the traffic by
// weight when equally healthy and fast; the next rank gets nothing.
// Bounds are about 4 standard deviations wide.
func TestHealthWeightedPool(t *testing.T) {
	a := newFakeUpstream(t, okHandler)
	b := newFakeUpstream(t, okHandler)
	c := newFakeUpstream(t, okHandler)
	startRelay(t, fmt.Sprintf(`llm_relay {
		upstream a %s
		upstream b %s
		upstream c %s
		model even {
			to a {
				rank 1
			}
			to b {
				rank 1
			}
			to c {
				rank 2
			}
		}
		model heavy {
			to a {
				rank 1
				weight 3
			}
			to b {
				rank 1
			}
		}
	}`, a.v1(), b.v1(), c.v1()))

	const n = 60
	count := func(model string) map[string]int {
		got := map[string]int{}
		for i := 0; i < n; i++ {
			up, _ := servedBy(t, `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`)
			got[up]++
		}
		return got
	}
	even := count("even")
	if even["a"] < 12 || even["b"] < 12 || even["a"]+even["b"] != n {
		t.Errorf("model even (weights 1:1): %v; want both a and b well used (mean 30 each), c unused", even)
	}
	heavy := count("heavy")
	if heavy["a"] < 32 || heavy["a"] > 58 || heavy["a"]+heavy["b"] != n {
		t.Errorf("model heavy (weights 3:1): %v; want a about 45 of %d", heavy, n)
	}
	if len(c.requests()) != 0 {
		t.Errorf("c (rank 2) got %d requests while the rank 1 pool was healthy", len(c.requests()))
	}
}

// jsonShape reduces a JSON value to its shape: objects to their keys'
// shapes, arrays to the merged shape of their elements, scalars to a
// type name.
func jsonShape(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, e := range x {
			m[k] = jsonShape(e)
		}
		return m
	case []any:
		merged := map[string]any{}
		var scalar any
		for _, e := range x {
			s := jsonShape(e)
			if sm, ok := s.(map[string]any); ok {
				for k, v := range sm {
					merged[k] = v
				}
			} else {
				scalar = s
			}
		}
		if scalar != nil {
			return []any{scalar}
		}
		return []any{merged}
	default:
		return fmt.Sprintf("%T", v)
	}
}

// TestHealthStatusDirective: `llm_relay_status` on a site path serves the
// same JSON as the admin API, GET only.
func TestHealthStatusDirective(t *testing.T) {
	a := newFakeUpstream(t, okHandler)
	c := newFakeUpstream(t, okHandler)
	s := newFakeUpstream(t, okHandler)
	startRelay(t, fmt.Sprintf(`handle /relay-status {
		llm_relay_status
	}
	handle {
		llm_relay {
			upstream a %s {
				region eu
			}
			upstream c %s
			upstream s %s
			model chat {
				to a
				canary c 50 {
					key header X-User
				}
				shadow s 100
			}
		}
	}`, a.v1(), c.v1(), s.v1()))
	for i := 0; i < 4; i++ {
		servedBy(t, chatBody, "X-User", fmt.Sprintf("u%d", i))
	}
	// Until every copy is recorded, not only sent: a copy still comparing
	// its answer adds a field (comparing) to one snapshot and not the other.
	waitFor(t, 5*time.Second, "the shadow copies recorded", func() bool {
		var st struct {
			Shadows []struct {
				Stats struct{ OK, Failed, Comparing int64 }
			}
		}
		_ = json.Unmarshal(getStatusRaw(t, adminStatusURL), &st)
		return len(st.Shadows) == 1 && st.Shadows[0].Stats.OK+st.Shadows[0].Stats.Failed == 4 && st.Shadows[0].Stats.Comparing == 0
	})

	site := getStatusRaw(t, relayBase+"/relay-status")
	admin := getStatusRaw(t, adminStatusURL)
	var vs, va any
	if err := json.Unmarshal(site, &vs); err != nil {
		t.Fatalf("site status is not JSON: %v\n%s", err, site)
	}
	_ = json.Unmarshal(admin, &va)
	if !reflect.DeepEqual(jsonShape(vs), jsonShape(va)) {
		t.Errorf("the site's status differs in shape from the admin API's:\nsite:  %s\nadmin: %s", site, admin)
	}
	var doc relayStatusDoc
	_ = json.Unmarshal(site, &doc)
	if len(doc.Targets) != 2 || len(doc.Canaries) != 1 || len(doc.Shadows) != 1 || doc.Time.IsZero() {
		t.Errorf("site status: %s", site)
	}
	if ta := doc.target("a"); ta == nil || ta.Region != "eu" || !reflect.DeepEqual(ta.Aliases, []string{"chat"}) {
		t.Errorf("target a in the site status: %+v", ta)
	}

	req, _ := http.NewRequest(http.MethodPost, relayBase+"/relay-status", strings.NewReader("{}"))
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodGet {
		t.Errorf("POST /relay-status: status %d Allow %q body %s", resp.StatusCode, resp.Header.Get("Allow"), body)
	}
}

// TestHealthCaddyfileErrors: the health, canary and shadow syntax errors
// name their line; settings that parse but cannot work fail at load.
func TestHealthCaddyfileErrors(t *testing.T) {
	wrap := func(upstreamBlock, modelBlock string) string {
		return ":8080 {\n\tllm_relay {\n\t\tupstream a http://127.0.0.1:1/v1" + upstreamBlock +
			"\n\t\tupstream c http://127.0.0.1:2/v1\n\t\tmodel chat {\n\t\t\tto a\n" + modelBlock + "\n\t\t}\n\t}\n}\n"
	}
	adapter := caddyconfig.GetAdapter("caddyfile")
	for _, tc := range []struct {
		name, caddyfile, want string
	}{
		{"shadow percent", wrap("", "\t\t\tshadow c -5"), `shadow: "-5" is not a percentage between 0 and 100, at Caddyfile:7`},
		{"promote percent", wrap("", "\t\t\tcanary c 5 {\n\t\t\t\tpromote 50 200 every 1m\n\t\t\t}"), `canary promote: "200" is not a percentage between 0 and 100, at Caddyfile:8`},
		{"slo arguments", wrap("", "\t\t\tslo strict {\n\t\t\t}"), "slo takes no arguments; put ttft, success, window and min_samples in its block, at Caddyfile:7"},
		{"health_check interval", wrap(" {\n\t\t\thealth_check {\n\t\t\t\tinterval 5\n\t\t\t}\n\t\t}", ""), `health_check interval: "5" is not a positive duration; write it like 250ms, 2s or 1m, at Caddyfile:5`},
		{"health_check twice", wrap(" {\n\t\t\thealth_check\n\t\t\thealth_check\n\t\t}", ""), `upstream "a": health_check is already specified, at Caddyfile:5`},
		{"status args", ":8080 {\n\tllm_relay_status now\n}\n", "llm_relay_status takes no arguments or block, at Caddyfile:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := adapter.Adapt([]byte(tc.caddyfile), nil)
			if err == nil {
				t.Fatalf("adapted without error:\n%s\n%s", tc.caddyfile, out)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error:\n\t%v\nwant it to contain:\n\t%s\nCaddyfile:\n%s", err, tc.want, tc.caddyfile)
			}
		})
	}

	// These parse, but the relay refuses them when it is provisioned.
	for _, tc := range []struct {
		name, modelBlock, want string
	}{
		{"canary at 0 without promote", "canary c 0", "a share of 0% sends it nothing"},
		{"guard min_samples above window", "canary c 5 {\nguard {\nmin_samples 20\nwindow 10\n}\n}", "min_samples 20 is larger than window 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := caddyfile.NewTestDispenser("llm_relay {\nkey sk-test\nupstream a http://127.0.0.1:1/v1\nupstream c http://127.0.0.1:2/v1\nmodel chat {\nto a\n" + tc.modelBlock + "\n}\n}")
			var r llmrelay.Relay
			if err := r.UnmarshalCaddyfile(d); err != nil {
				t.Fatalf("parse: %v", err)
			}
			ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
			defer cancel()
			err := r.Provision(ctx)
			_ = r.Cleanup()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("provision: %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestHealthReloadWidensSLOWindow: a reload that raises `slo window` keeps
// the target's samples and judges the new, wider window.
//
// Fails at the time of writing: the health state is created with the ring
// size of the first config's window (attachHealth in health.go
// calls health.NewTarget(name, slo.Window) only when the pool has no
// entry yet), and the health package caps a judged window at that ring,
// so after the reload the status (and the SLO) still count 4 samples.
func TestHealthReloadWidensSLOWindow(t *testing.T) {
	a := newFakeUpstream(t, okHandler)
	block := func(window int) string {
		return fmt.Sprintf(`llm_relay {
		upstream a %s
		slo {
			success 0.9
			window %d
			min_samples 2
		}
		model chat {
			to a
		}
	}`, a.v1(), window)
	}
	startRelay(t, block(4))
	for i := 0; i < 6; i++ {
		servedBy(t, chatBody)
	}
	if n := mustTarget(t, getRelayStatus(t), "a").Samples; n != 4 {
		t.Fatalf("window 4: %d samples counted, want 4", n)
	}
	startRelay(t, block(8))
	for i := 0; i < 4; i++ {
		servedBy(t, chatBody)
	}
	if n := mustTarget(t, getRelayStatus(t), "a").Samples; n != 8 {
		t.Errorf("after a reload to window 8 and 10 samples in all: %d samples counted, want 8", n)
	}
}

// TestHealthStatusOfSharedTargetIsStable: a target used by two models with
// different SLOs is degraded for one and healthy for the other; routing
// judges each model by its own SLO, and the status view must not flip
// between the two answers from one GET to the next.
//
// Fails at the time of writing: buildStatus (status.go) lists a shared
// target once, with the SLO of whichever route it meets first, and it
// walks h.routes, a map, so the order (and the status shown) is random.
func TestHealthStatusOfSharedTargetIsStable(t *testing.T) {
	a := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		time.Sleep(60 * time.Millisecond)
		answerJSON(w, 200, okCompletion)
	})
	b := newFakeUpstream(t, okHandler)
	startRelay(t, fmt.Sprintf(`llm_relay {
		upstream a %s
		upstream b %s
		slo {
			window 4
			min_samples 2
		}
		model strict {
			to a
			to b
			slo {
				ttft 10ms
			}
		}
		model lenient {
			to a
			to b
		}
	}`, a.v1(), b.v1()))
	for i := 0; i < 2; i++ {
		servedBy(t, `{"model":"strict","messages":[{"role":"user","content":"hi"}]}`)
	}
	// Routing: strict now avoids a, lenient still uses it.
	if up, _ := servedBy(t, `{"model":"lenient","messages":[{"role":"user","content":"hi"}]}`); up != "a" {
		t.Errorf("lenient: served by %q, want a (no ttft slo)", up)
	}
	seen := map[string]int{}
	for i := 0; i < 100; i++ {
		seen[mustTarget(t, getRelayStatus(t), "a").Status]++
	}
	if len(seen) != 1 {
		t.Errorf("the status of a changed between GETs with nothing else changing: %v", seen)
	}
}
