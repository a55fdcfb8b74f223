package llmrelay_test

// The fleet's shared state against what else may be in Redis (fleet.go,
// fleetread.go): keys of the wrong type under the prefix, values no relay
// writes, clocks that disagree, fields too large to read. Two relay
// processes on a real redis-server, as in fleet_e2e_test.go.

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// stateView is the status view's state object.
type stateView struct {
	Backend   string `json:"backend"`
	Instance  string `json:"instance"`
	Up        *bool  `json:"up"`
	LastError string `json:"last_error"`
	Problems  []struct {
		Key     string `json:"key"`
		Field   string `json:"field"`
		Problem string `json:"problem"`
	} `json:"problems"`
}

func (p *relayProc) state(t *testing.T) stateView {
	t.Helper()
	var st struct {
		State stateView `json:"state"`
	}
	if err := json.Unmarshal([]byte(p.statusBody(t)), &st); err != nil {
		t.Fatal(err)
	}
	return st.State
}

// problem returns the status view's problem naming key (and field, when
// not ""), or "".
func (s stateView) problem(key, field string) string {
	for _, p := range s.Problems {
		if p.Key == key && (field == "" || p.Field == field) {
			return p.Problem
		}
	}
	return ""
}

func (f fleet) client(t *testing.T) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: f.sock})
	t.Cleanup(func() { c.Close() })
	return c
}

// rounds waits until p has written its key limits n more times: a round
// of p's that began after this call has read what Redis held when it was
// made, and once the next one began, applied it. The figures of key
// "limited" (rpm 6) are written at every sync_interval, in the same round
// trip as spend and the others' figures are read.
func (f fleet) rounds(t *testing.T, p *relayProc, n int) {
	t.Helper()
	c, id := f.client(t), p.state(t).Instance
	last, _ := c.HGet(context.Background(), "llm_relay:limits:limited", id).Result()
	for i := range n {
		waitFor(t, 5*time.Second, "round "+strconv.Itoa(i+1)+" of "+p.dir, func() bool {
			v, _ := c.HGet(context.Background(), "llm_relay:limits:limited", id).Result()
			if v != "" && v != last {
				last = v
				return true
			}
			return false
		})
	}
}

// burst sends n requests with key at once (model s: each admitted one
// holds a slot for slowFor) and returns how many were admitted.
func (p *relayProc) burst(t *testing.T, key string, n int) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", p.base+"/v1/chat/completions",
				strings.NewReader(`{"model":"s","messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("burst: %v", err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			switch resp.StatusCode {
			case 200:
				admitted++
			case 429:
			default:
				t.Errorf("burst on %s: status %d", key, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	return admitted
}

const skippedMsg = "shared state entry skipped"

// TestFleetForeignKeysDoNotStopSync: keys of the wrong type under the
// prefix, one per family the relay reads (canary roll-outs, ejections,
// spend, key limits, alert claims), are skipped and named, once; the rest
// keeps syncing, the state is up, and a key put right is read again.
func TestFleetForeignKeysDoNotStopSync(t *testing.T) {
	f := startFleet(t, "sync_interval 250ms")
	u, a, b := f.u, f.a, f.b
	c, ctx := f.client(t), context.Background()
	day := time.Now().UTC().Format("2006-01-02")
	bad := map[string]string{ // key → what it is
		"llm_relay:canary":                        "string", // another application's SET llm_relay:canary x
		"llm_relay:spend:bulk:day:" + day:         "string", // an older layout's
		"llm_relay:limits:other":                  "list",
		"llm_relay:alert:team:day:" + day + ":50": "hash",
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Each replaces what is there (the relays may have written the limits
	// already) in one transaction.
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, "llm_relay:canary", "llm_relay:spend:bulk:day:"+day, "llm_relay:limits:other", "llm_relay:alert:team:day:"+day+":50")
		p.Set(ctx, "llm_relay:canary", "x", 0)
		p.Set(ctx, "llm_relay:spend:bulk:day:"+day, "12", 0)
		p.RPush(ctx, "llm_relay:limits:other", "x")
		p.HSet(ctx, "llm_relay:alert:team:day:"+day+":50", "x", "y")
		p.Set(ctx, "llm_relay:elsewhere", "x", 0) // never read: named nowhere
		return nil
	})
	must(err)
	a.chatOK(t, "sk-bulk", "m", 1) // bulk's spend is shared from its first request
	b.chatOK(t, "sk-bulk", "m", 1)

	// Spend: $0.003 on A and $0.002 on B reach the key's $0.005 together.
	a.chatOK(t, "sk-team", "m", 3)
	waitFor(t, 5*time.Second, "A's spend in Redis", func() bool {
		v, _ := c.HGet(ctx, "llm_relay:spend:team:day:"+day, a.state(t).Instance).Result()
		return v == "3000000"
	})
	f.rounds(t, b, 2)
	b.chatOK(t, "sk-team", "m", 2)
	// B writes its spend at its own next round: A's rounds count only
	// once it is there (without this wait the test failed under load).
	waitFor(t, 5*time.Second, "B's spend in Redis", func() bool {
		v, _ := c.HGet(ctx, "llm_relay:spend:team:day:"+day, b.state(t).Instance).Result()
		return v == "2000000"
	})
	f.rounds(t, a, 2)
	for name, p := range map[string]*relayProc{"A": a, "B": b} {
		if st := p.chat(t, "sk-team", "m"); st != 429 {
			t.Errorf("%s after the fleet spent the budget: status %d, want 429 (the others' spend not applied)", name, st)
		}
	}
	// The 50 % alert's claim key is a hash: the alert is logged all the
	// same, by an instance that could not claim it.
	waitFor(t, 5*time.Second, "the 50 % budget alert", func() bool {
		for _, l := range []string{a.log, b.log} {
			raw, _ := readFile(l)
			if strings.Contains(raw, `"threshold_percent":50`) {
				return true
			}
		}
		return false
	})

	// Key limits: rpm 6, 4 on A, then B has 2.
	a.chatOK(t, "sk-limited", "m", 4)
	f.rounds(t, b, 2)
	b.chatOK(t, "sk-limited", "m", 2)
	if st := b.chat(t, "sk-limited", "m"); st != 429 {
		t.Errorf("B's 3rd request after A's 4 of rpm 6: status %d, want 429 (A's figures not applied)", st)
	}

	// Ejections: dead ejected on A, skipped by B.
	a.chatOK(t, "sk-bulk", "e", 3)
	waitFor(t, 5*time.Second, "A's ejection in Redis", func() bool { return c.HLen(ctx, "llm_relay:eject").Val() > 0 })
	f.rounds(t, b, 2)
	u.deadHits.Store(0)
	b.chatOK(t, "sk-bulk", "e", 3)
	if n := u.deadHits.Load(); n != 0 {
		t.Errorf("the target ejected on A got %d requests from B", n)
	}

	// Up, no last error, and each bad key named in the state view and in
	// one WARN line per instance, however many rounds went by.
	for name, p := range map[string]*relayProc{"A": a, "B": b} {
		st := p.state(t)
		if st.Up == nil || !*st.Up || st.LastError != "" {
			t.Errorf("%s: state up %v, last_error %q: Redis is up", name, st.Up, st.LastError)
		}
		for k, typ := range bad {
			if pr := st.problem(k, ""); !strings.Contains(pr, typ) {
				t.Errorf("%s: state problem for %s: %q, want it named as a %s", name, k, pr, typ)
			}
		}
		if pr := st.problem("llm_relay:elsewhere", ""); pr != "" {
			t.Errorf("%s: a key the relay never reads is named: %q", name, pr)
		}
		raw, _ := readFile(p.log)
		for k := range bad {
			if k == "llm_relay:alert:team:day:"+day+":50" {
				continue // read once, by whichever instance raised the alert
			}
			if n := countMatching(raw, skippedMsg, `"key":"`+k+`"`); n != 1 {
				t.Errorf("%s: %d %q lines for %s, want 1", name, n, skippedMsg, k)
			}
		}
	}

	// Put right, the canary key is read again: the problem goes, once.
	must(c.Del(ctx, "llm_relay:canary").Err())
	f.rounds(t, a, 2)
	f.rounds(t, b, 2)
	for name, p := range map[string]*relayProc{"A": a, "B": b} {
		if pr := p.state(t).problem("llm_relay:canary", ""); pr != "" {
			t.Errorf("%s: the canary key was put right and is still named: %q", name, pr)
		}
		raw, _ := readFile(p.log)
		if n := countMatching(raw, "shared state entry readable again", `"key":"llm_relay:canary"`); n != 1 {
			t.Errorf("%s: %d recovery lines for the canary key, want 1", name, n)
		}
	}

	// The ejections' hash wrong-typed: canary roll-outs still sync.
	_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, "llm_relay:eject")
		p.Set(ctx, "llm_relay:eject", "x", 0)
		return nil
	})
	must(err)
	a.chatOK(t, "sk-bulk", "c", 3)
	// (Every canary's first phase is in the hash too: wait for the
	// rollback itself.)
	waitFor(t, 5*time.Second, "A's canary rollback in Redis", func() bool {
		for _, v := range c.HGetAll(ctx, "llm_relay:canary").Val() {
			if strings.Contains(v, `"rolled_back"`) {
				return true
			}
		}
		return false
	})
	f.rounds(t, b, 2)
	u.canaryHits.Store(0)
	b.chatOK(t, "sk-bulk", "c", 5)
	if n := u.canaryHits.Load(); n != 0 {
		t.Errorf("the canary rolled back on A got %d requests from B", n)
	}
	if pr := b.state(t).problem("llm_relay:eject", ""); !strings.Contains(pr, "string") {
		t.Errorf("B: state problem for the ejections' key: %q", pr)
	}
}

// TestFleetValuesAreChecked: values in the fleet's hashes that no relay
// writes (a negative count, a time far ahead, a field of megabytes, an
// ejection for a year) are skipped and named; the limits keep holding.
func TestFleetValuesAreChecked(t *testing.T) {
	f := startFleet(t, "sync_interval 250ms")
	a, b := f.a, f.b
	c, ctx := f.client(t), context.Background()
	day := time.Now().UTC().Format("2006-01-02")
	now := time.Now()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// A negative count of requests in flight, and 3 in flight written by
	// a clock an hour ahead (an instance killed long ago, or planted).
	must(c.HSet(ctx, "llm_relay:limits:capped", "ghost", "0 0 -10 "+strconv.FormatInt(now.UnixMilli(), 10)).Err())
	must(c.HSet(ctx, "llm_relay:limits:ahead", "ahead", "0 0 3 "+strconv.FormatInt(now.Add(time.Hour).UnixMilli(), 10)).Err())
	// A negative spend, which would hide the fleet's real spend.
	must(c.HSet(ctx, "llm_relay:spend:team:day:"+day, "ghost", "-5000000").Err())
	// A field of 4 MB, which a relay would read at every sync.
	must(c.HSet(ctx, "llm_relay:limits:limited", "huge", strings.Repeat("x", 4<<20)).Err())
	f.rounds(t, a, 2)
	f.rounds(t, b, 2)

	// max_concurrent 3 holds, and is not held shut.
	var capped, ahead int
	var wg sync.WaitGroup
	wg.Go(func() { capped = a.burst(t, "sk-capped", 10) })
	wg.Go(func() { ahead = a.burst(t, "sk-ahead", 10) })
	wg.Wait()
	if capped != 3 {
		t.Errorf("max_concurrent 3 with a negative count in Redis: %d of 10 admitted, want 3", capped)
	}
	if ahead != 3 {
		t.Errorf("max_concurrent 3 with 3 in flight written an hour ahead: %d of 10 admitted, want 3", ahead)
	}

	// The negative spend does not lift the budget.
	a.chatOK(t, "sk-team", "m", 3)
	waitFor(t, 5*time.Second, "A's spend in Redis", func() bool {
		v, _ := c.HGet(ctx, "llm_relay:spend:team:day:"+day, a.state(t).Instance).Result()
		return v == "3000000"
	})
	f.rounds(t, b, 2)
	b.chatOK(t, "sk-team", "m", 2)
	f.rounds(t, b, 2)
	if st := b.chat(t, "sk-team", "m"); st != 429 {
		t.Errorf("B after the fleet spent the budget, with a negative spend in Redis: status %d, want 429", st)
	}

	// The 4 MB field is not read at every sync: Redis sends the two
	// instances far less than one copy of it in ten rounds.
	out := func() int64 {
		info := c.Info(ctx, "stats").Val()
		for _, l := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(l, "total_net_output_bytes:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		t.Fatal("no total_net_output_bytes in INFO stats")
		return 0
	}
	before := out()
	f.rounds(t, a, 5)
	f.rounds(t, b, 5)
	if sent := out() - before; sent > 1<<20 {
		t.Errorf("Redis sent %d bytes in ten rounds of two instances: the 4 MB field is read at every sync", sent)
	}

	// An ejection for a year: A's own, rewritten as another instance's
	// whose clock is a year ahead.
	a.chatOK(t, "sk-bulk", "e", 3)
	var fld, raw string
	waitFor(t, 5*time.Second, "A's ejection in Redis", func() bool {
		for k, v := range c.HGetAll(ctx, "llm_relay:eject").Val() {
			fld, raw = k, v
			return true
		}
		return false
	})
	var ej map[string]any
	must(json.Unmarshal([]byte(raw), &ej))
	ej["until"], ej["by"] = time.Now().AddDate(1, 0, 0).UTC().Format(time.RFC3339Nano), "ghost"
	rewritten, _ := json.Marshal(ej)
	must(c.HSet(ctx, "llm_relay:eject", fld, rewritten).Err())
	f.rounds(t, a, 2)
	f.rounds(t, b, 2)
	for name, p := range map[string]*relayProc{"A": a, "B": b} {
		var st struct {
			Chains []struct {
				Alias   string `json:"alias"`
				Targets []struct {
					Upstream       string  `json:"upstream"`
					CooldownLeftMS float64 `json:"cooldown_left_ms"`
				} `json:"targets"`
			} `json:"chains"`
		}
		must(json.Unmarshal([]byte(p.statusBody(t)), &st))
		for _, ch := range st.Chains {
			for _, tg := range ch.Targets {
				if tg.Upstream == "dead" && tg.CooldownLeftMS > 60_000 {
					t.Errorf("%s: target dead ejected for another %.0f s from an ejection a year long in Redis", name, tg.CooldownLeftMS/1000)
				}
			}
		}
	}

	// Each is named in the state view, and logged once.
	for name, p := range map[string]*relayProc{"A": a, "B": b} {
		st := p.state(t)
		for _, w := range []struct{ key, field, says string }{
			{"llm_relay:limits:capped", "ghost", "negative"},
			{"llm_relay:limits:ahead", "ahead", "ahead"},
			{"llm_relay:spend:team:day:" + day, "ghost", "negative"},
			{"llm_relay:limits:limited", "huge", "bytes"},
			{"llm_relay:eject", fld, "clock"},
		} {
			if pr := st.problem(w.key, w.field); !strings.Contains(pr, w.says) {
				t.Errorf("%s: state problem for %s field %s: %q, want it to say %q", name, w.key, w.field, pr, w.says)
			}
		}
		raw, _ := readFile(p.log)
		if n := countMatching(raw, skippedMsg, `"key":"llm_relay:limits:capped"`); n != 1 {
			t.Errorf("%s: %d %q lines for the negative count, want 1", name, n, skippedMsg)
		}
		if st.Up == nil || !*st.Up {
			t.Errorf("%s: state up %v", name, st.Up)
		}
	}
}

// TestFleetWithoutScripts: a Redis whose user may not run scripts (an
// ACL without @scripting): the relay says so once and shares its state
// with plain commands, a wrong-typed key still skipped and named.
func TestFleetWithoutScripts(t *testing.T) {
	f := startFleetOn(t, "sync_interval 250ms", func(c *redis.Client) {
		if err := c.Do(context.Background(), "ACL", "SETUSER", "default", "-@scripting").Err(); err != nil {
			t.Fatal(err)
		}
	})
	a, b := f.a, f.b
	c, ctx := f.client(t), context.Background()
	day := time.Now().UTC().Format("2006-01-02")
	if err := c.Set(ctx, "llm_relay:canary", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	a.chatOK(t, "sk-team", "m", 3)
	waitFor(t, 5*time.Second, "A's spend in Redis", func() bool {
		v, _ := c.HGet(ctx, "llm_relay:spend:team:day:"+day, a.state(t).Instance).Result()
		return v == "3000000"
	})
	f.rounds(t, b, 2)
	b.chatOK(t, "sk-team", "m", 2)
	// B writes its spend at its own next round: A's rounds count only
	// once it is there (without this wait the test failed under load).
	waitFor(t, 5*time.Second, "B's spend in Redis", func() bool {
		v, _ := c.HGet(ctx, "llm_relay:spend:team:day:"+day, b.state(t).Instance).Result()
		return v == "2000000"
	})
	f.rounds(t, a, 2)
	for name, p := range map[string]*relayProc{"A": a, "B": b} {
		if st := p.chat(t, "sk-team", "m"); st != 429 {
			t.Errorf("%s after the fleet spent the budget: status %d, want 429", name, st)
		}
		st := p.state(t)
		if st.Up == nil || !*st.Up || st.LastError != "" {
			t.Errorf("%s: state up %v, last_error %q", name, st.Up, st.LastError)
		}
		if pr := st.problem("llm_relay:canary", ""); pr == "" {
			t.Errorf("%s: the wrong-typed canary key is not named", name)
		}
		raw, _ := readFile(p.log)
		if n := strings.Count(raw, "Redis refuses scripts"); n != 1 {
			t.Errorf("%s: %d lines saying Redis refuses scripts, want 1", name, n)
		}
	}
}

// TestFleetRefusedEverywhereIsDown: a Redis that answers but refuses
// every key (here an ACL that gives the relay's user no key under the
// prefix; READONLY or OOM alike) is an outage, not a problem per key:
// state down, with Redis's answer as last_error.
func TestFleetRefusedEverywhereIsDown(t *testing.T) {
	f := startFleetOn(t, "sync_interval 250ms", func(c *redis.Client) {
		if err := c.Do(context.Background(), "ACL", "SETUSER", "default", "resetkeys", "~elsewhere:*").Err(); err != nil {
			t.Fatal(err)
		}
	})
	waitFor(t, 5*time.Second, "A's state down", func() bool {
		st := f.a.state(t)
		return st.Up != nil && !*st.Up
	})
	st := f.a.state(t)
	if !strings.Contains(st.LastError, "NOPERM") || len(st.Problems) != 0 {
		t.Errorf("state: last_error %q, %d problems; want Redis's NOPERM and no key named", st.LastError, len(st.Problems))
	}
	f.a.chatOK(t, "sk-bulk", "m", 1) // served all the same
}

// countMatching counts the lines of raw with msg that also contain every
// one of also.
func countMatching(raw, msg string, also ...string) int {
	n := 0
	for _, l := range strings.Split(raw, "\n") {
		if !strings.Contains(l, `"msg":"`+msg+`"`) {
			continue
		}
		ok := true
		for _, a := range also {
			ok = ok && strings.Contains(l, a)
		}
		if ok {
			n++
		}
	}
	return n
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}
