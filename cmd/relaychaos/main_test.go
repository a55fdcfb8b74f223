package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/llmrelay/caddy-llm-relay/cmd/internal/inproc"
	"github.com/llmrelay/caddy-llm-relay/internal/chaos"
)

// TestConfigAdapts: every generation of the config adapts, generations
// differ (so each load is a real reload), and every case has its alias.
func TestConfigAdapts(t *testing.T) {
	cs, _, rcs := selectCases(options{})
	p := ports{sim: 1001, relay: 1002, chaos: 1003, proxy: 1004, bad: 1005, dead: 1006, resume: 1007}
	adapter := caddyconfig.GetAdapter("caddyfile")
	var prev []byte
	for gen := 1; gen <= 2; gen++ {
		src := caddyfile(p, gen, cs, rcs, "discard", "ERROR")
		cfg, warnings, err := adapter.Adapt([]byte(src), map[string]any{"filename": "test.Caddyfile"})
		if err != nil {
			t.Fatalf("generation %d: %v\n%s", gen, err, src)
		}
		if len(warnings) > 0 {
			t.Errorf("generation %d: warnings %v", gen, warnings)
		}
		for _, c := range cs {
			if !bytes.Contains(cfg, []byte(`"alias":"`+c.alias+`"`)) {
				t.Errorf("case %s: alias %s missing from the JSON config", c.name, c.alias)
			}
		}
		for _, c := range rcs {
			if !bytes.Contains(cfg, []byte(`"alias":"`+c.alias+`"`)) {
				t.Errorf("resume case %s: alias %s missing from the JSON config", c.name, c.alias)
			}
		}
		if len(rcs) != 3 || !bytes.Contains(cfg, []byte(`"resume":{`)) {
			t.Errorf("%d resume cases; no resume block in the JSON config", len(rcs))
		}
		if !strings.Contains(string(cfg), `"stream_idle_timeout":3000000000`) {
			t.Errorf("stream_idle_timeout not in the JSON config")
		}
		if bytes.Equal(cfg, prev) {
			t.Fatal("two generations adapt to the same JSON: the reload would be a no-op")
		}
		prev = cfg
	}
}

func TestSelectCases(t *testing.T) {
	all, allRedis, allResume := selectCases(options{})
	if got, _, _ := selectCases(options{skip: "budget,shadow"}); len(got) != len(all)-2 {
		t.Fatalf("skip: %d cases of %d", len(got), len(all))
	}
	got, rcs, res := selectCases(options{only: "429-only"})
	if len(got) != 1 || got[0].alias != "chaos-429-only" || got[0].path != "chat/completions" || len(rcs) != 0 || len(res) != 0 {
		t.Fatalf("only: %+v, fleet cases %d", got, len(rcs))
	}
	if _, rcs, _ := selectCases(options{skip: "redis-future"}); len(rcs) != len(allRedis)-1 || len(allRedis) < 3 {
		t.Fatalf("skip redis-future: %d fleet cases of %d", len(rcs), len(allRedis))
	}
	if got, rcs, _ := selectCases(options{only: "redis-negative"}); len(got) != 0 || len(rcs) != 1 {
		t.Fatalf("only redis-negative: %d chaos cases, %d fleet cases", len(got), len(rcs))
	}
	if got, rcs, res := selectCases(options{only: "resume-responses"}); len(got) != 0 || len(rcs) != 0 || len(res) != 1 || res[0].path != "responses" {
		t.Fatalf("only resume-responses: %d chaos, %d fleet, %+v resume cases", len(got), len(rcs), res)
	}
	if _, _, res := selectCases(options{skip: "resume-chat"}); len(res) != len(allResume)-1 {
		t.Fatalf("skip resume-chat: %d resume cases of %d", len(res), len(allResume))
	}
}

// TestPeerConfigAdapts: a fleet peer's config adapts, with a key of each
// kind per fleet case and the shared state on Redis.
func TestPeerConfigAdapts(t *testing.T) {
	rcs := chaos.RedisCases()
	src := peerCaddyfile(&peer{name: "A", dir: t.TempDir(), port: 1001}, 1002, "/tmp/r.sock", rcs)
	cfg, err := inproc.Adapt(src, "peer.Caddyfile", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rcs {
		k := fleetCaseKeys(c)
		for _, name := range []string{k.Conc, k.RPM} {
			if !bytes.Contains(cfg, []byte(`"name":"`+name+`"`)) {
				t.Errorf("case %s: key %s missing from the peer's JSON config", c.Name, name)
			}
		}
	}
	if !bytes.Contains(cfg, []byte(`"backend":"redis"`)) {
		t.Errorf("no state redis in the peer's JSON config:\n%s", cfg)
	}
}

func TestReloadOverlap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	l := &loader{reloads: []span{{t0, t0.Add(100 * time.Millisecond)}, {t0.Add(10 * time.Second), time.Time{}}}}
	for _, tt := range []struct {
		from, to time.Duration
		want     bool
	}{
		{-time.Second, -time.Millisecond, false},                   // before the first
		{-time.Second, 50 * time.Millisecond, true},                // during it
		{time.Second, 2 * time.Second, true},                       // in its shutdown slack
		{4 * time.Second, 5 * time.Second, false},                  // well after it
		{9 * time.Second, 10*time.Second + time.Millisecond, true}, // the running one
	} {
		if got := l.overlaps(t0.Add(tt.from), t0.Add(tt.to)); got != tt.want {
			t.Errorf("[%s, %s]: %v, want %v", tt.from, tt.to, got, tt.want)
		}
	}
}
