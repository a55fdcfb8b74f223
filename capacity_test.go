package llmrelay

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/health"
	"github.com/llmrelay/caddy-llm-relay/internal/ratelimit"
)

// cappedTarget is a target named name with one cap of limit, n in flight.
func cappedTarget(name string, limit, n int64, shed float64) *target {
	c := &capCounter{inFlight: new(atomic.Int64), max: limit, admit: admitted(limit, shed)}
	c.inFlight.Store(n)
	return &target{up: &upstreamRuntime{name: name}, caps: []*capCounter{c}}
}

func names(ts []*target) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.up.name)
	}
	return out
}

func TestSpillOver(t *testing.T) {
	for _, c := range []struct {
		name     string
		inFlight []int64 // per target, of 10; -1: no cap
		canary   bool
		want     []string
		from     string
	}{
		{"all below spill_at", []int64{6, 0, 0}, false, []string{"a", "b", "c"}, ""},
		{"first busy", []int64{7, 0, 0}, false, []string{"b", "c", "a"}, "a"},
		{"busy ones keep their order behind", []int64{7, 9, 1}, false, []string{"c", "a", "b"}, "a"},
		{"only a later one busy", []int64{1, 8, 0}, false, []string{"a", "c", "b"}, "b"},
		{"all busy: the order stands", []int64{7, 8, 9}, false, []string{"a", "b", "c"}, ""},
		{"no cap is always room", []int64{9, -1, 9}, false, []string{"b", "a", "c"}, "a"},
		{"the canary stays first", []int64{9, 9, 0}, true, []string{"a", "c", "b"}, "b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var p plan
			for i, n := range c.inFlight {
				tg := &target{up: &upstreamRuntime{name: string(rune('a' + i))}}
				if n >= 0 {
					tg = cappedTarget(tg.up.name, 10, n, .95)
				}
				p.targets, p.halfOpen = append(p.targets, tg), append(p.halfOpen, i == 2)
			}
			p.canaryFirst = c.canary
			third := p.targets[2]
			from := p.spillOver(.7)
			if got := names(p.targets); !slices.Equal(got, c.want) {
				t.Errorf("order %v, want %v", got, c.want)
			}
			if (from == nil) != (c.from == "") || from != nil && from.up.name != c.from {
				t.Errorf("spilled from %v, want %q", from, c.from)
			}
			if i := slices.Index(p.targets, third); !p.halfOpen[i] {
				t.Errorf("the half-open flag did not move with its target: %v", p.halfOpen)
			}
		})
	}
}

func TestAcquireAllOrNothing(t *testing.T) {
	up := cappedTarget("a", 4, 0, 1)
	own := cappedTarget("a", 2, 0, 1)
	tg := &target{up: up.up, caps: []*capCounter{up.caps[0], own.caps[0]}}
	for i := range 2 {
		if occ, ok := tg.acquire(); !ok || occ != float64(i)/2 {
			t.Fatalf("acquire %d: occupancy %v, ok %v", i+1, occ, ok)
		}
	}
	if _, ok := tg.acquire(); ok {
		t.Fatal("a third request on a target capped at 2 was admitted")
	}
	if n := up.caps[0].inFlight.Load(); n != 2 {
		t.Fatalf("the upstream's counter holds %d after a refused acquire, want 2 (all or nothing)", n)
	}
	tg.release()
	if tg.occupancy() != 0.5 || !tg.hasRoom() {
		t.Fatalf("after a release: occupancy %v, room %v", tg.occupancy(), tg.hasRoom())
	}
	// shed_at 95 % of 20 keeps one slot of headroom; of 10 it keeps none.
	for _, c := range []struct{ max, admit int64 }{{20, 19}, {10, 10}, {1, 1}, {100, 95}} {
		if got := cappedTarget("x", c.max, 0, .95).caps[0].admit; got != c.admit {
			t.Errorf("max %d at 95 %%: admits %d, want %d", c.max, got, c.admit)
		}
	}
}

func TestEffortStepDown(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"reasoning_effort":"high"}`, `{"reasoning_effort":"medium"}`},
		{`{"reasoning_effort":"low"}`, `{"reasoning_effort":"minimal"}`},
		{`{"reasoning_effort":"minimal"}`, `{"reasoning_effort":"minimal"}`},
		{`{"reasoning":{"effort":"xhigh","summary":"auto"}}`, `{"reasoning":{"effort":"high","summary":"auto"}}`},
		{`{"thinking":{"type":"enabled","budget_tokens":8192},"max_tokens":9000}`, `{"max_tokens":9000,"thinking":{"budget_tokens":4096,"type":"enabled"}}`},
		{`{"thinking":{"type":"enabled","budget_tokens":1500}}`, `{"thinking":{"budget_tokens":1024,"type":"enabled"}}`},
		{`{"messages":[]}`, `{"messages":[]}`},
	} {
		body := `{"model":"m",` + c.body[1:]
		rb, err := parseRequestBody([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		tg := newTarget(&upstreamRuntime{name: "u"}, "")
		d := tg.degraded(capacityPolicy{}, rb)
		p, err := rb.forTarget(d, exchange{})
		if err != nil {
			t.Fatal(err)
		}
		var got, want any
		_ = json.Unmarshal(p.Bytes(), &got)
		_ = json.Unmarshal([]byte(`{"model":"m",`+c.want[1:]), &want)
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		if string(gb) != string(wb) {
			t.Errorf("%s degraded: %s, want %s", c.body, gb, wb)
		}
	}
}

func TestResolveCapacity(t *testing.T) {
	p, err := resolveCapacity(nil)
	if err != nil || p.spill != .7 || p.degrade != .85 || p.shed != .95 || p.queue != 0 || p.edits != nil {
		t.Fatalf("defaults: %+v %v", p, err)
	}
	p, err = resolveCapacity(&Capacity{ShedAt: 100, Degrade: &DegradeEdit{}})
	if err != nil || p.shed != 1 || p.spill != .7 || p.edits == nil || len(p.edits) != 0 {
		t.Fatalf("shed_at 100 and an empty degrade block: %+v %v", p, err)
	}
	for _, c := range []*Capacity{{SpillAt: 90, DegradeAt: 80}, {ShedAt: 101}, {SpillAt: -1}, {QueueTimeout: -1}} {
		if _, err := resolveCapacity(c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// BenchmarkCapacity: what a capped chain adds to a request: the spill-over
// check of a two-target plan, acquire and release.
func BenchmarkCapacity(b *testing.B) {
	a, c := cappedTarget("a", 1000, 0, .95), cappedTarget("b", 1000, 0, .95)
	targets := []*target{a, c}
	halfOpen := []bool{false, false}
	for b.Loop() {
		p := plan{targets: targets, halfOpen: halfOpen}
		p.spillOver(.7)
		if _, ok := a.acquire(); !ok {
			b.Fatal("refused")
		}
		a.release()
	}
}

// BenchmarkLimitsAndCaps: everything a request pays for issue 15's
// controls together, on a key with rpm, tpm and max_concurrent and a
// chain of two capped targets: both takes and their six headers, the
// key's in-flight count, the spill-over check, acquire and release, and
// the tokens settled at the end (the bound: 1 µs).
func BenchmarkLimitsAndCaps(b *testing.B) {
	t0 := time.Now()
	inFlight := new(keyInFlight)
	kl := &keyLimits{requests: ratelimit.NewBucket(1_000_000_000, t0), tokens: ratelimit.NewBucket(1_000_000_000, t0),
		maxInFlight: 1000, inFlight: &inFlight.own, othersInFlight: &inFlight.others}
	w := headerSink(http.Header{})
	a, c := cappedTarget("a", 1000, 0, .95), cappedTarget("b", 1000, 0, .95)
	targets, halfOpen := []*target{a, c}, []bool{false, false}
	for b.Loop() {
		now := time.Now()
		if kl.takeRequest(w, "team", now) != nil || kl.takeTokens(w, "team", 100, now) != nil || kl.enter("team") != nil {
			b.Fatal("refused")
		}
		p := plan{targets: targets, halfOpen: halfOpen}
		p.spillOver(.7)
		if _, ok := a.acquire(); !ok {
			b.Fatal("refused")
		}
		a.release()
		kl.leave()
		kl.settleTokens(100, 120, now)
	}
}

// TestFullRecoveringTargetKeepsItsTrial: a recovering (half-open) target
// at shed_at is passed before its one trial request is claimed, so the
// trial is there for the next request that can go to it, not spent on
// one that never did.
func TestFullRecoveringTargetKeepsItsTrial(t *testing.T) {
	now := time.Now()
	full := cappedTarget("recovering", 1, 1, 1)
	full.health = health.NewTarget("recovering (*)", 10)
	start := now.Add(-time.Minute)
	full.health.Adopt(health.Ejection{Until: start.Add(time.Second), Cooldown: time.Second, Reason: "test"}, "test", start, health.SLO{}, defaultPolicy)
	if st := full.health.Status(now, health.SLO{}); st != health.HalfOpen {
		t.Fatalf("status %v, want half-open", st)
	}
	spare := newTarget(&upstreamRuntime{name: "spare", api: apiOpenAI}, "")
	full.up.api = apiOpenAI
	body, err := parseRequestBody([]byte(`{"model":"m","messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := &chainRun{h: &Relay{capacity: capacityPolicy{spill: .7, degrade: .85, shed: 1}}, r: httptest.NewRequest("POST", "/v1/chat/completions", nil),
		req: newRequestState(testEndpoint(restChat)), rt: &route{alias: "m"}, body: body, deadline: now.Add(time.Minute),
		plan: plan{targets: []*target{full, spare}, halfOpen: []bool{true, false}}, cur: newChainCursor(2, 2)}
	st, _ := c.cur.nextStep(now, c.deadline, backoffPolicy{}, nil)
	if out := c.step(st); out != chainNext {
		t.Fatalf("step on the full target: %v, want chainNext", out)
	}
	if !full.health.ClaimTrial(time.Now()) {
		t.Error("the recovering target's trial was claimed by a request that was not sent to it")
	}
}
