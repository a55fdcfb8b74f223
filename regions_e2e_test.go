package llmrelay_test

// Regions as clients use them (issue 29, section 2), through a real Caddy:
// a region hint orders within a tier and never across ranks, GET /v1/ping
// times a region, a pin keeps a request in one region, and the published
// sample's region picker (Python, urllib) works against all of it.
//
// The regions are simulators on :9091 with different latencies (the
// simulator's `latency` delays every answer, GET /models too, as a far
// region would) and scripted fake upstreams for regions that are down.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const regionKey = "sk-region-client"

// regionSimSite: one simulator per region or provider, each under its own
// path. nrt answers at once, kix after 150 ms, icn after 300 ms; the mixed
// chain's Codex is slowest, DeepSeek fastest.
const regionSimSite = `http://127.0.0.1:9091 {
	handle /nrt/* {
		llm_simulator {
			content_tokens 4
			reasoning_tokens 2
			pattern steady 0
		}
	}
	handle /kix/* {
		llm_simulator {
			content_tokens 4
			reasoning_tokens 2
			pattern steady 0
			latency 150ms
		}
	}
	handle /icn/* {
		llm_simulator {
			content_tokens 4
			reasoning_tokens 2
			pattern steady 0
			latency 300ms
		}
	}
	handle /codex/* {
		llm_simulator {
			content_tokens 4
			reasoning_tokens 2
			pattern steady 0
			latency 250ms
		}
	}
	handle /claude/* {
		llm_simulator {
			content_tokens 4
			reasoning_tokens 2
			pattern steady 0
			latency 60ms
		}
	}
	handle /deepseek/* {
		llm_simulator {
			content_tokens 4
			reasoning_tokens 2
			pattern steady 0
		}
	}
	handle /reason/* {
		llm_simulator {
			seed 28
			reasoning_tokens 24
			content_tokens 16
			pattern steady 0
		}
	}
	handle /echo/* {
		llm_simulator {
			seed 29
			content_tokens 8
			pattern steady 0
			echo handoff
		}
	}
}`

// down is a region that is out: every request, probes included, gets 503.
func down(_ int, w http.ResponseWriter, _ *http.Request) {
	answerJSON(w, http.StatusServiceUnavailable, overloadedBody)
}

// getPing GETs /v1/ping with the given header pairs.
func getPing(t *testing.T, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, relayBase+"/v1/ping", nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, readAll(t, resp)
}

type pingAnswer struct {
	Object, Region, Hint, Upstream string
	UpstreamRegion                 string  `json:"upstream_region"`
	UpstreamStatus                 string  `json:"upstream_status"`
	RTTMS                          float64 `json:"rtt_ms"`
	UnixMS                         int64   `json:"unix_ms"`
	Time                           time.Time
}

// TestRegionsPing: GET /v1/ping with a region code answers after a round
// trip to the region's healthiest upstream (the health probe's GET
// /models, with its key), naming it and the time; 503 when the region's
// upstreams are all out, 404 for a region no upstream has; without a
// hint, or with auto, the edge's answer as before, with no round trip.
func TestRegionsPing(t *testing.T) {
	sin := newFakeUpstream(t, down)
	icnDown := newFakeUpstream(t, down)
	icnUp := newFakeUpstream(t, okHandler)
	startRelay(t, fmt.Sprintf(`llm_relay {
		key %s
		region edge-tokyo
		upstream nrt-1 http://127.0.0.1:9091/nrt/v1 {
			api_key sk-upstream-secret-nrt
			region nrt
		}
		upstream kix-1 http://127.0.0.1:9091/kix/v1 {
			api_key sk-upstream-secret-kix
			region kix
		}
		upstream icn-down %s {
			region icn
		}
		upstream icn-up %s {
			region icn
			health_check {
				uri /models
				timeout 2s
				interval 1h
			}
		}
		upstream sin-1 %s {
			api_key sk-upstream-secret-sin
			region sin
		}
		failover {
			backoff 1ms 1ms
		}
		model chat {
			to nrt-1
			to kix-1
		}
		model icn {
			to icn-down
			to icn-up
		}
		model sin {
			to sin-1
		}
	}`, regionKey, icnDown.v1(), icnUp.v1(), sin.v1()), regionSimSite)
	auth := []string{"Authorization", "Bearer " + regionKey}

	// Without a hint, with auto: the edge's own answer, no key, no round trip.
	for _, hint := range []string{"", "auto"} {
		code, body := getPing(t, "X-Region-Hint", hint)
		var p pingAnswer
		if code != 200 || json.Unmarshal([]byte(body), &p) != nil || p.Region != "edge-tokyo" || p.Upstream != "" || p.Hint != "" {
			t.Errorf("hint %q: %d %s; want the edge's answer", hint, code, body)
		}
	}
	// A region ping makes a request with the relay's provider key: it
	// wants the client's.
	if code, body := getPing(t, "X-Region-Hint", "nrt"); code != 401 || decodeErr(t, body).Error.Code != "invalid_api_key" {
		t.Errorf("region ping without a key: %d %s", code, body)
	}

	var kixMS float64
	for _, tc := range []struct{ hint, upstream, region string }{
		{"nrt", "nrt-1", "nrt"},
		{"KIX", "kix-1", "kix"},
		{"nrt!", "nrt-1", "nrt"}, // a strict pin pings as its code does
	} {
		before := time.Now()
		code, body := getPing(t, append([]string{"X-Region-Hint", tc.hint}, auth...)...)
		took := time.Since(before)
		var p pingAnswer
		if err := json.Unmarshal([]byte(body), &p); err != nil || code != 200 {
			t.Fatalf("ping %s: %d %s", tc.hint, code, body)
		}
		if p.Object != "relay.ping" || p.Region != "edge-tokyo" || p.Upstream != tc.upstream || p.UpstreamRegion != tc.region ||
			p.UpstreamStatus != "healthy" || p.RTTMS <= 0 || p.Time.UnixMilli() != p.UnixMS {
			t.Errorf("ping %s: %+v", tc.hint, p)
		}
		if strings.Contains(body, "sk-upstream-secret") {
			t.Errorf("ping %s leaks the upstream's key: %s", tc.hint, body)
		}
		if tc.upstream == "kix-1" {
			kixMS = p.RTTMS
			// The round trip is live: kix's 150 ms are in it and in the answer's time.
			if p.RTTMS < 140 || took < 140*time.Millisecond {
				t.Errorf("ping kix: rtt_ms %.1f, answered after %s; want at least kix's 150ms latency", p.RTTMS, took)
			}
		}
	}
	if kixMS == 0 {
		t.Fatal("no kix ping")
	}

	// The healthiest upstream of the region: once icn-down is ejected (by
	// live traffic), a ping goes to icn-up without asking icn-down.
	for range 3 {
		if up, _ := servedBy(t, `{"model":"icn","messages":[{"role":"user","content":"hi"}]}`, append([]string{"X-Region-Hint", "icn!"}, auth...)...); up != "icn-up" {
			t.Fatalf("icn chat served by %q", up)
		}
	}
	if st := mustTarget(t, getRelayStatus(t), "icn-down").Status; st != "ejected" {
		t.Fatalf("icn-down is %s, want ejected", st)
	}
	asked := len(icnDown.requests())
	code, body := getPing(t, append([]string{"X-Region-Hint", "icn"}, auth...)...)
	var p pingAnswer
	if code != 200 || json.Unmarshal([]byte(body), &p) != nil || p.Upstream != "icn-up" {
		t.Errorf("ping icn: %d %s; want icn-up", code, body)
	}
	if n := len(icnDown.requests()); n != asked {
		t.Errorf("the ping asked the ejected icn-down (%d requests, was %d)", n, asked)
	}
	reqs := icnUp.requests()
	if last := reqs[len(reqs)-1]; last.path != "/v1/models" || last.header.Get("X-Region-Hint") != "" || last.header.Get("Authorization") != "" {
		t.Errorf("icn-up got %s with headers %v; want the probe's GET /v1/models without the client's headers", last.path, last.header)
	}

	// Every upstream of the region out: 503 naming the region and why.
	code, body = getPing(t, append([]string{"X-Region-Hint", "sin"}, auth...)...)
	e := decodeErr(t, body)
	if code != 503 || e.Error.Code != "region_unavailable" || !strings.Contains(e.Error.Message, `"sin"`) ||
		!strings.Contains(e.Error.Message, "sin-1: answered 503") || strings.Contains(body, "sk-upstream-secret") || strings.Contains(body, "127.0.0.1") {
		t.Errorf("ping sin: %d %s", code, body)
	}
	// Once live traffic has ejected it, the ping does not ask it at all.
	for range 3 {
		resp := post(t, `{"model":"sin","messages":[{"role":"user","content":"hi"}]}`, auth...)
		readAll(t, resp)
	}
	asked = len(sin.requests())
	code, body = getPing(t, append([]string{"X-Region-Hint", "sin"}, auth...)...)
	if e := decodeErr(t, body); code != 503 || e.Error.Code != "region_unavailable" || !strings.Contains(e.Error.Message, "cooling down") {
		t.Errorf("ping sin, ejected: %d %s", code, body)
	}
	if n := len(sin.requests()); n != asked {
		t.Errorf("the ping asked the ejected sin-1")
	}
	// No upstream in the region: 404 listing the known ones.
	code, body = getPing(t, append([]string{"X-Region-Hint", "fra"}, auth...)...)
	e = decodeErr(t, body)
	if code != 404 || e.Error.Code != "region_not_found" || !strings.Contains(e.Error.Message, `"fra"`) ||
		!strings.Contains(e.Error.Message, "the known regions are icn, kix, nrt, sin") {
		t.Errorf("ping fra: %d %s", code, body)
	}
	// A hint that is no hint: 400.
	if code, body := getPing(t, append([]string{"X-Region-Hint", "auto!"}, auth...)...); code != 400 || decodeErr(t, body).Error.Code != "invalid_region_hint" {
		t.Errorf("ping auto!: %d %s", code, body)
	}
}

// TestRegionsAutoWithinRank: the mixed chain, a Codex model, then
// Claude, then DeepSeek, where each later rank is faster. With
// `X-Region-Hint: auto` the first rank is still tried first; latency
// chooses only within it (Codex in two regions, pooled), and a region
// code naming a later rank's region does not move it ahead either.
func TestRegionsAutoWithinRank(t *testing.T) {
	startRelay(t, fmt.Sprintf(`llm_relay {
		key %s
		upstream codex-fra http://127.0.0.1:9091/codex/v1 {
			region fra
			health_check {
				interval 1s
			}
		}
		upstream codex-nrt http://127.0.0.1:9091/nrt/v1 {
			region nrt
			health_check {
				interval 1s
			}
		}
		upstream claude-sin http://127.0.0.1:9091/claude/v1 {
			api anthropic
			region sin
			health_check {
				interval 1s
			}
		}
		upstream deepseek-icn http://127.0.0.1:9091/deepseek/v1 {
			api chat
			region icn
			health_check {
				interval 1s
			}
		}
		model agent {
			to codex-fra gpt-5-codex {
				rank 1
			}
			to codex-nrt gpt-5-codex {
				rank 1
			}
			to claude-sin claude-sonnet-4-5
			to deepseek-icn deepseek-chat
		}
	}`, regionKey), regionSimSite)
	auth := []string{"Authorization", "Bearer " + regionKey}
	// Wait until the probes have measured every target.
	waitFor(t, 10*time.Second, "every target's latency", func() bool {
		doc := getRelayStatus(t)
		for _, u := range []string{"codex-fra", "codex-nrt", "claude-sin", "deepseek-icn"} {
			if tg := doc.target(u); tg == nil || tg.LatencyEWMA == "" {
				return false
			}
		}
		return true
	})
	body := `{"model":"agent","messages":[{"role":"user","content":"hi"}]}`
	for i := range 6 {
		up, att := servedBy(t, body, append([]string{"X-Region-Hint", "auto"}, auth...)...)
		if up != "codex-nrt" || att != "1" {
			doc := getRelayStatus(t)
			t.Fatalf("auto, request %d: served by %s after %s attempts; want codex-nrt, the faster of the first rank (latencies: codex-fra %s, codex-nrt %s, claude %s, deepseek %s)",
				i, up, att, mustTarget(t, doc, "codex-fra").LatencyEWMA, mustTarget(t, doc, "codex-nrt").LatencyEWMA,
				mustTarget(t, doc, "claude-sin").LatencyEWMA, mustTarget(t, doc, "deepseek-icn").LatencyEWMA)
		}
	}
	// A region code prefers its region within the first rank...
	for range 4 {
		if up, _ := servedBy(t, body, append([]string{"X-Region-Hint", "fra"}, auth...)...); up != "codex-fra" {
			t.Fatalf("hint fra: served by %s, want codex-fra", up)
		}
	}
	// ...and one naming a later rank's region moves nothing ahead of it.
	for _, hint := range []string{"icn", "sin"} {
		if up, _ := servedBy(t, body, append([]string{"X-Region-Hint", hint}, auth...)...); !strings.HasPrefix(up, "codex-") {
			t.Fatalf("hint %s: served by %s, want a Codex target (the first rank)", hint, up)
		}
	}
}

// TestRegionsPin: `X-Region-Hint: <code>!` and a model's region_pin keep a
// request in one region: only its targets are tried, never failing over
// out of it, 503 region_unavailable (in the client's dialect) when it is
// down; a canary or shadow outside the region gets nothing; a hand-off's
// two legs both keep to it; the response and the log line say the region.
func TestRegionsPin(t *testing.T) {
	fra := newFakeUpstream(t, down)
	nrt := newFakeUpstream(t, okHandler)
	nrt2 := newFakeUpstream(t, okHandler)
	canary := newFakeUpstream(t, okHandler)
	shadow := newFakeUpstream(t, okHandler)
	logFile := startRelay(t, fmt.Sprintf(`llm_relay {
		key %s
		upstream fra %s {
			region fra
		}
		upstream nrt %s {
			region nrt
		}
		upstream nrt2 %s {
			region nrt
		}
		upstream canary-fra %s {
			region fra
		}
		upstream shadow-fra %s {
			region fra
		}
		upstream reason-fra http://127.0.0.1:9091/reason/v1 {
			api chat
			region fra
		}
		upstream reason-nrt http://127.0.0.1:9091/reason/v1 {
			api chat
			region nrt
		}
		upstream echo-fra http://127.0.0.1:9091/echo/v1 {
			api chat
			region fra
		}
		upstream echo-nrt http://127.0.0.1:9091/echo/v1 {
			api chat
			region nrt
		}
		failover {
			backoff 1ms 1ms
		}
		model chat {
			to fra
			to nrt
		}
		model resident {
			to nrt2
			to fra
			region_pin fra
		}
		model sided {
			to nrt2
			canary canary-fra 100 {
				key header X-User
			}
			shadow shadow-fra 100
		}
		model thinker {
			reason reason-fra sim-reasoner
			reason reason-nrt sim-reasoner
			to echo-fra sim-echo
			to echo-nrt sim-echo
		}
		model thinker-nrt {
			reason reason-fra sim-reasoner
			reason reason-nrt sim-reasoner
			to echo-fra sim-echo
			to echo-nrt sim-echo
			region_pin nrt
		}
	}`, regionKey, fra.v1(), nrt.v1(), nrt2.v1(), canary.v1(), shadow.v1()), regionSimSite)
	auth := []string{"Authorization", "Bearer " + regionKey}
	hint := func(h string) []string { return append([]string{"X-Region-Hint", h}, auth...) }
	chat := `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`

	// A soft hint for the region that is down fails over out of it.
	resp := post(t, chat, hint("fra")...)
	readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Relay-Upstream") != "nrt" || resp.Header.Get("X-Relay-Region") != "nrt" {
		t.Fatalf("hint fra: %d from %q (%q)", resp.StatusCode, resp.Header.Get("X-Relay-Upstream"), resp.Header.Get("X-Relay-Region"))
	}
	// Pinned to it: 503 region_unavailable, and nrt is never asked.
	asked := len(nrt.requests())
	for range 4 { // past the ejection: an ejected region still answers 503
		resp = post(t, chat, hint("fra!")...)
		body := readAll(t, resp)
		e := decodeErr(t, body)
		if resp.StatusCode != 503 || e.Error.Code != "region_unavailable" || !strings.Contains(e.Error.Message, `"fra"`) {
			t.Fatalf("pinned to fra: %d %s", resp.StatusCode, body)
		}
	}
	if n := len(nrt.requests()); n != asked {
		t.Errorf("a request pinned to fra reached nrt (%d requests, was %d)", n, asked)
	}
	// The same in the Messages dialect: an Anthropic error naming the region.
	resp = postPath(t, "/v1/messages", `{"model":"chat","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, hint("fra!")...)
	body := readAll(t, resp)
	var me struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if resp.StatusCode != 503 || json.Unmarshal([]byte(body), &me) != nil || me.Type != "error" || !strings.Contains(me.Error.Message, `region "fra"`) {
		t.Errorf("messages pinned to fra: %d %s", resp.StatusCode, body)
	}
	// Pinned to nrt: served there, and the log line says so.
	resp = post(t, chat, hint("nrt!")...)
	readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Relay-Region") != "nrt" {
		t.Fatalf("pinned to nrt: %d from %q", resp.StatusCode, resp.Header.Get("X-Relay-Upstream"))
	}
	mustLog(t, logFile, "info", "relayed", "region", "nrt", "region_pin", "nrt")
	// Hints that cannot be kept: 400, before any upstream is asked.
	for h, code := range map[string]string{"ams!": "region_not_served", "auto!": "invalid_region_hint", "!": "invalid_region_hint"} {
		resp = post(t, chat, hint(h)...)
		body := readAll(t, resp)
		if e := decodeErr(t, body); resp.StatusCode != 400 || e.Error.Code != code {
			t.Errorf("hint %s: %d %s, want 400 %s", h, resp.StatusCode, body, code)
		}
	}

	// A stored response is asked of the pinned region's upstreams only
	// (fra comes first in the config).
	askedFra := len(fra.requests())
	req, _ := http.NewRequest(http.MethodGet, relayBase+"/v1/responses/resp_1", nil)
	for i, h := 0, hint("nrt!"); i < len(h); i += 2 {
		req.Header.Set(h[i], h[i+1])
	}
	sresp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, sresp)
	if sresp.StatusCode != 200 || len(fra.requests()) != askedFra {
		t.Errorf("stored response pinned to nrt: %d; fra asked %d times more", sresp.StatusCode, len(fra.requests())-askedFra)
	}
	req.Header.Set("X-Region-Hint", "ams!")
	if sresp, err = httpClient.Do(req); err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, sresp); sresp.StatusCode != 400 || decodeErr(t, body).Error.Code != "region_not_served" {
		t.Errorf("stored response pinned to ams: %d %s", sresp.StatusCode, body)
	}

	// The operator's pin: nrt2 comes first in the chain, but the model
	// stays in fra, which is down.
	resident := `{"model":"resident","messages":[{"role":"user","content":"hi"}]}`
	asked = len(nrt2.requests())
	for _, h := range []string{"", "nrt", "auto", "fra!"} {
		resp = post(t, resident, hint(h)...)
		body := readAll(t, resp)
		if e := decodeErr(t, body); resp.StatusCode != 503 || e.Error.Code != "region_unavailable" {
			t.Errorf("resident, hint %q: %d %s", h, resp.StatusCode, body)
		}
	}
	if n := len(nrt2.requests()); n != asked {
		t.Errorf("the fra-pinned model reached nrt2 (%d requests, was %d)", n, asked)
	}
	// A client pin to another region contradicts it: 400, not either one silently.
	resp = post(t, resident, hint("nrt!")...)
	body = readAll(t, resp)
	if e := decodeErr(t, body); resp.StatusCode != 400 || e.Error.Code != "region_conflict" || !strings.Contains(e.Error.Message, `"fra"`) {
		t.Errorf("resident, hint nrt!: %d %s", resp.StatusCode, body)
	}

	// Canary and shadow in fra: a request pinned to nrt reaches neither;
	// without the pin both get it (so the check can fail).
	sided := `{"model":"sided","messages":[{"role":"user","content":"hi"}]}`
	up, _ := servedBy(t, sided, append(hint("nrt!"), "X-User", "u1")...)
	time.Sleep(200 * time.Millisecond) // a shadow copy would have gone by now
	if up != "nrt2" || len(canary.requests()) != 0 || len(shadow.requests()) != 0 {
		t.Errorf("pinned to nrt: served by %s; canary got %d, shadow %d, want none", up, len(canary.requests()), len(shadow.requests()))
	}
	if up, _ := servedBy(t, sided, append(hint(""), "X-User", "u1")...); up != "canary-fra" {
		t.Errorf("unpinned: served by %s, want the canary", up)
	}
	waitFor(t, 5*time.Second, "the unpinned request's shadow copy", func() bool { return len(shadow.requests()) == 1 })

	// A hand-off alias: pinned to nrt, both legs run there, though fra
	// comes first in both chains.
	resp = post(t, `{"model":"thinker","messages":[{"role":"user","content":"hi"}]}`, hint("nrt!")...)
	body = readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Relay-Upstream") != "echo-nrt" || !strings.HasPrefix(resp.Header.Get("X-Relay-Handoff"), "reasoned-by reason-nrt") {
		t.Errorf("thinker pinned to nrt: %d, upstream %q, %q: %s", resp.StatusCode, resp.Header.Get("X-Relay-Upstream"), resp.Header.Get("X-Relay-Handoff"), body)
	}
	resp = post(t, `{"model":"thinker","messages":[{"role":"user","content":"hi"}]}`, auth...)
	readAll(t, resp)
	if resp.Header.Get("X-Relay-Upstream") != "echo-fra" || !strings.HasPrefix(resp.Header.Get("X-Relay-Handoff"), "reasoned-by reason-fra") {
		t.Errorf("thinker unpinned: upstream %q, %q; want fra on both legs (chain order)", resp.Header.Get("X-Relay-Upstream"), resp.Header.Get("X-Relay-Handoff"))
	}
	// The operator's pin holds on both legs too.
	resp = post(t, `{"model":"thinker-nrt","messages":[{"role":"user","content":"hi"}]}`, auth...)
	readAll(t, resp)
	if resp.Header.Get("X-Relay-Upstream") != "echo-nrt" || !strings.HasPrefix(resp.Header.Get("X-Relay-Handoff"), "reasoned-by reason-nrt") {
		t.Errorf("thinker-nrt: upstream %q, %q; want nrt on both legs", resp.Header.Get("X-Relay-Upstream"), resp.Header.Get("X-Relay-Handoff"))
	}
}

// TestRegionsPythonPicker: a client written like the published sample
// (Python, urllib only) times GET /v1/ping for nrt, kix, icn, sin and
// fra, picks the fastest healthy region and chats there. nrt answers at
// once, kix after 150 ms, icn after 300 ms; sin is down; fra has no
// upstream. The chain puts nrt last, so only the hint brings it first.
func TestRegionsPythonPicker(t *testing.T) {
	py := requirePython(t)
	sin := newFakeUpstream(t, down)
	startRelay(t, fmt.Sprintf(`llm_relay {
		key %s
		upstream icn http://127.0.0.1:9091/icn/v1 {
			api chat
			region icn
		}
		upstream kix http://127.0.0.1:9091/kix/v1 {
			api chat
			region kix
		}
		upstream sin %s {
			region sin
		}
		upstream nrt http://127.0.0.1:9091/nrt/v1 {
			api chat
			region nrt
		}
		model chat {
			to icn sim-reasoner
			to kix sim-reasoner
			to sin sim-reasoner
			to nrt sim-reasoner
		}
	}`, regionKey, sin.v1()), regionSimSite)
	script, _ := filepath.Abs(filepath.Join("e2e", "python", "region_picker.py"))
	cmd := exec.Command(py, script)
	cmd.Env = append(os.Environ(), "RELAY_BASE="+relayBase, "RELAY_KEY="+regionKey, "RELAY_MODEL=chat")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("region_picker.py: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var res struct {
		Picked string
		Pings  map[string]struct {
			MS     []float64
			Answer map[string]any
		}
		Chat struct {
			Status                    int
			Upstream, Region, Content string
		}
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Picked != "nrt" || res.Chat.Status != 200 || res.Chat.Upstream != "nrt" || res.Chat.Region != "nrt" || res.Chat.Content == "" {
		t.Fatalf("picked %q, chat %+v; want nrt served by nrt\n%s", res.Picked, res.Chat, out)
	}
	for region, want := range map[string]float64{"nrt": 200, "kix": 200, "icn": 200, "sin": 503, "fra": 404} {
		p := res.Pings[region]
		ok := want == 200 && len(p.MS) == 3 && p.Answer["upstream"] == region && p.Answer["upstream_region"] == region ||
			want != 200 && len(p.MS) == 0 && p.Answer["status"] == want
		if !ok {
			t.Errorf("ping %s: %+v, want %v", region, p, want)
		}
	}
	if nrt, icn := res.Pings["nrt"].MS, res.Pings["icn"].MS; len(nrt) == 0 || len(icn) == 0 || minOf(icn) < 250 {
		t.Errorf("ping times nrt %v icn %v; want icn's at least its 300ms latency", nrt, icn)
	}
}

func minOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs[1:] {
		m = min(m, x)
	}
	return m
}
