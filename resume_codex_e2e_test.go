package llmrelay_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestResumeCodexRetryReattaches: Codex CLI's own retry re-attaches. The
// real CLI asks the relay through a proxy that drops its first stream
// mid-event after a few events (past the commit point: the relay has
// answered 200 and is generating). Codex sees the stream break before
// response.completed ("Reconnecting... 1/5") and re-POSTs the request,
// which the relay re-attaches to the running generation (resume
// coalesce: the same key, the same request, a stream whose client went
// away) and replays from its first event. Codex prints the whole answer,
// and the simulator, watched by a proxy in front of it, was asked for one
// generation, not two. Through a Chat target and a native one.
//
// Codex's retry is not byte for byte its first send: its client_metadata
// is a hash map whose keys come out in another order each time. Before
// requestHash hashed the canonical body, the retry started a second
// generation (this test saw two upstream requests).
func TestResumeCodexRetryReattaches(t *testing.T) {
	codex := requireNodeTool(t, filepath.Join(".bin", "codex"), "Codex CLI")
	witness := newRCProxy(t, rcSim, 0)
	logFile := startRelay(t, rcRelay(witness.URL), rcSite)
	want := rcWantText(t)
	for i, model := range []string{"slow", "slow-native"} {
		cutter := newRCProxy(t, relayBase, 6)
		stdout, stderr, err := runCodex(t, codex, cutter.URL+"/v1", "sk-rc-a", model, "Say hi")
		if err != nil || strings.TrimSpace(stdout) != strings.TrimSpace(want) {
			t.Fatalf("%s: codex exec (%v) printed\n%q\nwant\n%q\nstderr: %s\nrelay log:\n%s", model, err, stdout, want, stderr, readLog(t, logFile))
		}
		if !strings.Contains(stderr, "Reconnecting... 1/") {
			t.Errorf("%s: codex did not say it reconnected:\n%s", model, stderr)
		}
		posts := cutter.generations(2)
		if len(posts) != 2 || posts[0].End != "cut" || posts[0].Events != 6 || posts[1].End == "cut" {
			t.Fatalf("%s: want Codex's first stream cut after 6 events and one retry; the proxy saw %+v", model, rcSummary(posts))
		}
		if posts[0].Path != posts[1].Path || canonicalJSON(t, posts[0].Body) != canonicalJSON(t, posts[1].Body) {
			t.Errorf("%s: Codex's retry is not the same request", model)
		}
		gens := witness.generations(i + 2)
		if len(gens) != i+1 || gens[i].End != "complete" {
			t.Errorf("%s: the simulator saw %d generations (%+v); want one per run, complete", model, len(gens)-i, rcSummary(gens[i:]))
		}
	}
	var reattached int
	for _, line := range strings.Split(readLog(t, logFile), "\n") {
		if strings.Contains(line, `"msg":"relayed"`) && strings.Contains(line, `"resume":"reattached"`) {
			reattached++
		}
	}
	if reattached != 2 {
		t.Errorf("the relay logged %d re-attached requests; want 2 (one per Codex retry)", reattached)
	}
}
