package llmrelay_test

// State across restarts and across a fleet (durable.go, fleet.go), with
// real processes: each relay instance is this test binary started as a
// Caddy (TestMain), with its own data directory (so its own instance ID)
// and storage; the shared state is a real redis-server on a unix socket in
// a temp dir. The upstreams are fake, in the test process, on 127.0.0.1.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	llmrelay "github.com/llmrelay/caddy-llm-relay"
)

// startRedis starts a redis-server on a unix socket in a temp dir, with no
// persistence (a kill loses its data, as the outage test wants). It skips
// where redis-server is absent, unless RELAY_REQUIRE_REDIS=1 (CI).
func startRedis(t testing.TB, sock string) *exec.Cmd { return llmrelay.StartTestRedis(t, sock) }

// relayProc is a relay instance in a process of its own.
type relayProc struct {
	cmd   *exec.Cmd
	dir   string
	base  string
	admin string // Caddy's admin API (metrics)
	log   string
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startRelayProc runs this binary as a Caddy serving block (an llm_relay
// block) on a free port, with dir as its home: data directory (instance
// ID), storage and log. The same dir again is the same instance restarted.
func startRelayProc(t testing.TB, dir, block string) *relayProc {
	t.Helper()
	port, admin := freePort(t), freePort(t)
	p := &relayProc{dir: dir, base: fmt.Sprintf("http://127.0.0.1:%d", port), log: filepath.Join(dir, "caddy.log"),
		admin: fmt.Sprintf("http://127.0.0.1:%d", admin)}
	cfg := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	http_port %d
	auto_https off
	storage file_system %s
	log {
		output file %s
		format json
	}
}
:%d {
	%s
}
`, admin, port, filepath.Join(dir, "storage"), p.log, port, block)
	cfgPath := filepath.Join(dir, "Caddyfile")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable() // os.Args[0] is "caddy" once Caddy's packages have run
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(self, "run", "--config", cfgPath, "--adapter", "caddyfile")
	p.cmd.Env = append(os.Environ(), "LLM_RELAY_TEST_CADDY=1", "XDG_DATA_HOME="+filepath.Join(dir, "data"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "HOME="+dir)
	stderr, err := os.Create(filepath.Join(dir, "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close() // the child has its own copy
	p.cmd.Stdout, p.cmd.Stderr = nil, stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() { // the relay's own lines, after it stopped
			b, _ := os.ReadFile(p.log)
			var keep []string
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, `"logger":"http.handlers.llm_relay"`) && !strings.Contains(l, `"msg":"relayed"`) {
					keep = append(keep, l)
				}
			}
			t.Logf("%s:\n%s", p.log, strings.Join(keep, "\n"))
		}
	})
	t.Cleanup(func() { p.stop(t) })
	waitFor(t, 20*time.Second, "relay process listening", func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 100*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return p
}

// stop ends the process as an operator's `systemctl stop` does: SIGTERM,
// which makes Caddy unload its config (and the relay save its state).
func (p *relayProc) stop(t testing.TB) {
	if p.cmd.ProcessState != nil || p.cmd.Process == nil {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("the relay process %s was gone before it was stopped: %v", p.dir, err)
	}
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
		t.Errorf("relay process did not stop within 15s of SIGTERM")
	}
	// Under -race the child is race-built too: its reports go to stderr,
	// as would a panic.
	if b, _ := os.ReadFile(filepath.Join(p.dir, "stderr.log")); strings.Contains(string(b), "DATA RACE") || strings.Contains(string(b), "panic:") {
		t.Errorf("the relay process %s reported a data race or a panic:\n%s", p.dir, b)
	}
	if b, _ := os.ReadFile(p.log); strings.Contains(string(b), "panic:") {
		t.Errorf("the relay process %s panicked:\n%s", p.dir, b)
	}
}

// chat sends one chat completion with the key and returns the status.
func (p *relayProc) chat(t *testing.T, key, model string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", p.base+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", p.base, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// chatOK sends n chat completions with the key and fails the test unless
// each gets 200.
func (p *relayProc) chatOK(t *testing.T, key, model string, n int) {
	t.Helper()
	for i := range n {
		if st := p.chat(t, key, model); st != 200 {
			t.Fatalf("%s: request %d of %d (%s, %s): status %d", p.dir, i+1, n, key, model, st)
		}
	}
}

// fleetUpstreams are the fake providers of the fleet tests: ok answers
// with 1,000 prompt tokens (at $1 per MTok, $0.001 a request), dead and
// canary fail with 500; each counts what it got.
type fleetUpstreams struct {
	ok, dead, canary *fakeUpstream
	slow             *fakeUpstream // answers ok after slowFor
	deadHits         atomic.Int64
	canaryHits       atomic.Int64
}

func newFleetUpstreams(t *testing.T) *fleetUpstreams {
	u := &fleetUpstreams{}
	u.ok = newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 200, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":0,"total_tokens":1000}}`)
	})
	u.dead = newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		u.deadHits.Add(1)
		answerJSON(w, 500, `{"error":{"message":"down","type":"server_error"}}`)
	})
	u.slow = newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(slowFor):
		case <-r.Context().Done():
		}
		answerJSON(w, 200, okCompletion)
	})
	u.canary = newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		u.canaryHits.Add(1)
		answerJSON(w, 500, `{"error":{"message":"bad canary","type":"server_error"}}`)
	})
	return u
}

// block is the relay config every instance of a test shares; state is its
// state line.
func (u *fleetUpstreams) block(state string) string {
	return fmt.Sprintf(`llm_relay {
		key sk-team team budget 0.005 per day
		key sk-bulk bulk
		key sk-limited limited {
			rpm 6
		}
		key sk-conc conc {
			max_concurrent 1
		}
		key sk-capped capped {
			max_concurrent 3
		}
		key sk-ahead ahead {
			max_concurrent 3
		}
		key sk-other other {
			rpm 100
		}
		upstream ok %s
		upstream slow %s
		upstream dead %s
		upstream canup %s
		model m {
			to ok
		}
		model e {
			to dead
			to ok
		}
		model s {
			to slow
		}
		model c {
			to ok
			canary canup 100 {
				guard {
					error_rate 0.1
					min_samples 3
					window 3
				}
			}
		}
		price m {
			input 1
			output 1
		}
		%s
	}
	handle /status {
		llm_relay_status
	}`, u.ok.v1(), u.slow.v1(), u.dead.v1(), u.canary.v1(), state)
}

// metric returns the first line of the admin /metrics that starts with
// name (and a label set), or "".
func (p *relayProc) metric(t *testing.T, name string) string {
	t.Helper()
	resp, err := http.Get(p.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name+"{") {
			return l
		}
	}
	return ""
}

// statusBody is the status view's JSON.
func (p *relayProc) statusBody(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(p.base + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// stateUp reads the status view's state.up (nil without one).
func (p *relayProc) stateUp(t *testing.T) *bool {
	t.Helper()
	resp, err := http.Get(p.base + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		State struct {
			Backend string `json:"backend"`
			Up      *bool  `json:"up"`
		} `json:"state"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.State.Up
}

// countLines counts the log lines with msg in the given logs.
func countLines(t *testing.T, msg string, logs ...string) int {
	n := 0
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		n += strings.Count(string(b), `"msg":"`+msg+`"`)
	}
	return n
}

// slowFor is how long the slow upstream takes to answer.
const slowFor = 4 * time.Second

// TestFleetSharesKeyLimits: a key's rpm and max_concurrent hold for the
// fleet: what A took is drained from B's bucket, and a request in flight
// on A counts on B.
func TestFleetSharesKeyLimits(t *testing.T) {
	f := startFleet(t, "sync_interval 250ms")
	a, b := f.a, f.b

	// rpm 6: 4 on A, then B has 2 left (a request every 10s refills
	// nothing to speak of here).
	// Each instance's own view of the key (GET /v1/balance) says when
	// the other's requests have reached it: a fixed wait was too short
	// under the whole -race suite on 2 cores (the sync is every 250ms,
	// but a loaded machine delays its write, read and tick).
	a.chatOK(t, "sk-limited", "m", 4)
	b.awaitRPMRemaining(t, "sk-limited", 2)
	b.chatOK(t, "sk-limited", "m", 2)
	if st := b.chat(t, "sk-limited", "m"); st != 429 {
		t.Errorf("B's 3rd request after A's 4 of rpm 6: status %d, want 429", st)
	}
	a.awaitRPMRemaining(t, "sk-limited", 0)
	if st := a.chat(t, "sk-limited", "m"); st != 429 {
		t.Errorf("A after the fleet's 6 of rpm 6: status %d, want 429", st)
	}

	// max_concurrent 1: a slow request in flight on A; B refuses the
	// key's second, and takes it again once A's is over.
	done := make(chan int)
	go func() { done <- a.chat(t, "sk-conc", "s") }()
	time.Sleep(syncWait)
	if st := b.chat(t, "sk-conc", "m"); st != 429 {
		t.Errorf("B while A has the key's one request in flight: status %d, want 429", st)
	}
	if st := <-done; st != 200 {
		t.Fatalf("A's slow request: status %d", st)
	}
	time.Sleep(syncWait)
	if st := b.chat(t, "sk-conc", "m"); st != 200 {
		t.Errorf("B after A's request ended: status %d, want 200", st)
	}
}

// TestFleetSharesKeyLimitsWithLateInstance: an instance that first sees
// another after that one's requests (here: it starts after them) still
// counts them, when the other's counters started less than a minute
// ago. Before, the first sighting was taken as the baseline: B let a
// fleet's first requests through its rpm as if A had taken none (the
// cause of TestFleetSharesKeyLimits failing under the whole -race suite).
func TestFleetSharesKeyLimitsWithLateInstance(t *testing.T) {
	dir := t.TempDir()
	u := newFleetUpstreams(t)
	sock := filepath.Join(dir, "redis.sock")
	startRedis(t, sock)
	state := "state redis unix:" + sock + " {\n\t\t\tsync_interval 250ms\n\t\t}"
	a := startRelayProc(t, filepath.Join(dir, "a"), u.block(state))
	a.chatOK(t, "sk-limited", "m", 4)
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: sock})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, _ := c.HGetAll(context.Background(), "llm_relay:limits:limited").Result()
		if len(v) > 0 && strings.HasPrefix(firstValue(v), "4 ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A never wrote its 4 requests to Redis: %v", v)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b := startRelayProc(t, filepath.Join(dir, "b"), u.block(state))
	b.awaitRPMRemaining(t, "sk-limited", 2)
	b.chatOK(t, "sk-limited", "m", 2)
	if st := b.chat(t, "sk-limited", "m"); st != 429 {
		t.Errorf("B's 3rd request after A's 4 of rpm 6: status %d, want 429", st)
	}
}

func firstValue(m map[string]string) string {
	for _, v := range m {
		return v
	}
	return ""
}

// awaitRPMRemaining waits (within 10s) until the instance's GET
// /v1/balance for the key shows at most want requests left of its rpm.
func (p *relayProc) awaitRPMRemaining(t *testing.T, key string, want int64) {
	t.Helper()
	var last int64 = -1
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodGet, p.base+"/v1/balance", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s/v1/balance: %v", p.base, err)
		}
		var v struct {
			Limits struct {
				RPM *struct {
					Remaining int64 `json:"remaining"`
				} `json:"rpm"`
			} `json:"limits"`
		}
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if err != nil || v.Limits.RPM == nil {
			t.Fatalf("GET %s/v1/balance: no rpm limit (%v)", p.base, err)
		}
		if last = v.Limits.RPM.Remaining; last <= want {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: the key's rpm shows %d left after 10s, want at most %d: the other instance's requests never reached it", p.base, last, want)
}

// syncWait is long enough for a change on one instance to reach another
// (a write and a read at sync_interval 250ms, and a tick).
const syncWait = 1200 * time.Millisecond

// fleet is two relay instances, A and B, sharing a redis-server.
type fleet struct {
	u     *fleetUpstreams
	a, b  *relayProc
	sock  string
	redis *exec.Cmd
}

// startFleet starts a redis-server and two instances on it, whose
// `state redis` block holds settings.
func startFleet(t *testing.T, settings string) fleet {
	return startFleetOn(t, settings, nil)
}

// startFleetOn is startFleet with prepare run on the redis-server before
// the instances start (nil: nothing).
func startFleetOn(t *testing.T, settings string, prepare func(*redis.Client)) fleet {
	dir := t.TempDir()
	f := fleet{u: newFleetUpstreams(t), sock: filepath.Join(dir, "redis.sock")}
	f.redis = startRedis(t, f.sock)
	if prepare != nil {
		c := redis.NewClient(&redis.Options{Network: "unix", Addr: f.sock})
		prepare(c)
		c.Close()
	}
	state := "state redis unix:" + f.sock + " {\n\t\t\t" + settings + "\n\t\t}"
	f.a = startRelayProc(t, filepath.Join(dir, "a"), f.u.block(state))
	f.b = startRelayProc(t, filepath.Join(dir, "b"), f.u.block(state))
	return f
}

func TestFleetSharesSpendCanaryAndEjections(t *testing.T) {
	f := startFleet(t, "sync_interval 250ms")
	u, a, b := f.u, f.a, f.b

	// Spend: $0.003 on A and $0.002 on B reach the key's $0.005 together.
	// Each waits for the other's spend to be in Redis and for rounds of
	// its own after that (a fixed wait was too short under load).
	c, ctx := f.client(t), context.Background()
	day := time.Now().UTC().Format("2006-01-02")
	spent := func(p *relayProc, want string) {
		t.Helper()
		waitFor(t, 5*time.Second, "the spend in Redis", func() bool {
			v, _ := c.HGet(ctx, "llm_relay:spend:team:day:"+day, p.state(t).Instance).Result()
			return v == want
		})
	}
	a.chatOK(t, "sk-team", "m", 3)
	spent(a, "3000000")
	f.rounds(t, b, 2)
	for i := range 2 {
		if st := b.chat(t, "sk-team", "m"); st != 200 {
			t.Fatalf("B request %d: status %d (B must not count A's spend before the budget is reached)", i+1, st)
		}
	}
	spent(b, "2000000")
	f.rounds(t, a, 2)
	for name, p := range map[string]*relayProc{"A": a, "B": b} {
		if st := p.chat(t, "sk-team", "m"); st != 429 {
			t.Errorf("%s after the fleet spent the budget: status %d, want 429", name, st)
		}
	}
	// Each threshold (50, 80, 100 %) is logged once by the whole fleet.
	waitFor(t, 3*time.Second, "three budget alerts", func() bool { return countLines(t, "key budget alert", a.log, b.log) >= 3 })
	time.Sleep(syncWait)
	if n := countLines(t, "key budget alert", a.log, b.log); n != 3 {
		t.Errorf("%d budget alert lines across the fleet, want 3 (one per threshold)", n)
	}

	// Canary: rolled back on A, B sends it nothing within a second.
	a.chatOK(t, "sk-bulk", "c", 3)
	waitFor(t, 2*time.Second, "A's canary rollback", func() bool { return countLines(t, "canary rolled back", a.log) == 1 })
	time.Sleep(time.Second) // the bound: obeyed everywhere within 1 s
	u.canaryHits.Store(0)
	b.chatOK(t, "sk-bulk", "c", 5)
	if n := u.canaryHits.Load(); n != 0 {
		t.Errorf("the canary rolled back on A got %d requests from B", n)
	}

	// Ejection: dead ejected on A (3 failures), skipped by B.
	a.chatOK(t, "sk-bulk", "e", 3)
	time.Sleep(syncWait)
	u.deadHits.Store(0)
	b.chatOK(t, "sk-bulk", "e", 3)
	if n := u.deadHits.Load(); n != 0 {
		t.Errorf("the target ejected on A got %d requests from B", n)
	}
}

// restartScenario puts state into an instance (a key over budget, a
// canary rolled back, a target ejected), restarts it (in fresh as another
// instance with a new data directory) and checks all three survived.
func restartScenario(t *testing.T, u *fleetUpstreams, dir, state string, fresh bool) {
	a := startRelayProc(t, filepath.Join(dir, "a"), u.block(state))
	for range 5 {
		a.chat(t, "sk-team", "m")
	}
	if st := a.chat(t, "sk-team", "m"); st != 429 {
		t.Fatalf("over budget before the restart: status %d", st)
	}
	for range 3 {
		a.chat(t, "sk-bulk", "c")
		a.chat(t, "sk-bulk", "e")
	}
	time.Sleep(syncWait) // the state reaches Redis
	a.stop(t)

	again := filepath.Join(dir, "a")
	if fresh {
		again = filepath.Join(dir, "a2")
	}
	a2 := startRelayProc(t, again, u.block(state))
	if fresh {
		time.Sleep(syncWait) // the first read from Redis
	}
	if st := a2.chat(t, "sk-team", "m"); st != 429 {
		t.Errorf("after the restart the key over its budget got status %d, want 429", st)
	}
	u.canaryHits.Store(0)
	u.deadHits.Store(0)
	for range 3 {
		a2.chat(t, "sk-bulk", "c")
		a2.chat(t, "sk-bulk", "e")
	}
	if n := u.canaryHits.Load(); n != 0 {
		t.Errorf("after the restart the rolled-back canary got %d requests", n)
	}
	if n := u.deadHits.Load(); n != 0 {
		t.Errorf("after the restart the ejected target got %d requests within its cooldown", n)
	}
}

func TestRestartKeepsStateInCaddyStorage(t *testing.T) {
	restartScenario(t, newFleetUpstreams(t), t.TempDir(), "", false)
}

func TestRestartKeepsStateInRedis(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	startRedis(t, sock)
	// Another machine takes over: a new data directory and no saved
	// file, only Redis.
	restartScenario(t, newFleetUpstreams(t), dir, "state redis unix:"+sock+" {\n\t\t\tsync_interval 250ms\n\t\t}", true)
}

func TestRedisOutageLosesNothing(t *testing.T) {
	f := startFleet(t, "sync_interval 250ms")
	a, b, sock, rs := f.a, f.b, f.sock, f.redis

	served := 0
	send := func(n int) {
		for i := range n {
			p := a
			if i%2 == 1 {
				p = b
			}
			if st := p.chat(t, "sk-bulk", "m"); st != 200 {
				t.Fatalf("request %d: status %d", served+1, st)
			}
			served++
		}
	}
	send(10)
	time.Sleep(syncWait)
	_ = rs.Process.Kill() // Redis dies with everything it held
	_ = rs.Wait()
	send(20) // none of these fails for it
	waitFor(t, 3*time.Second, "the outage logged", func() bool {
		return countLines(t, "shared state unreachable; serving from this instance's view (spend is kept and written when it is back)", a.log, b.log) == 2
	})
	if up := a.stateUp(t); up == nil || *up {
		t.Errorf("status view during the outage: state.up = %v, want false", up)
	}
	if m := a.metric(t, "llm_relay_shared_state_up"); !strings.HasSuffix(m, " 0") {
		t.Errorf("metric during the outage: %q, want 0", m)
	}
	startRedis(t, sock)
	send(10)
	time.Sleep(2 * syncWait)
	for name, p := range map[string]*relayProc{"A": a, "B": b} {
		if st := p.state(t); st.Up == nil || !*st.Up || st.LastError != "" {
			t.Errorf("%s: status view after the outage: state.up = %v, last_error %q; want up and no error", name, st.Up, st.LastError)
		}
	}
	if m := a.metric(t, "llm_relay_shared_state_up"); !strings.HasSuffix(m, " 1") {
		t.Errorf("metric after the outage: %q, want 1", m)
	}

	c := redis.NewClient(&redis.Options{Network: "unix", Addr: sock})
	defer c.Close()
	day := time.Now().UTC().Format("2006-01-02")
	vals, err := c.HVals(context.Background(), "llm_relay:spend:bulk:day:"+day).Result()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, v := range vals {
		n, _ := strconv.ParseInt(v, 10, 64)
		total += n
	}
	if want := int64(served) * 1_000_000; total != want || len(vals) != 2 {
		t.Errorf("fleet total after the outage: %d nano-USD from %d instances, want %d (%d requests at $0.001) from 2",
			total, len(vals), want, served)
	}
	if n := countLines(t, "shared state reachable again; this instance's spend is written again", a.log, b.log); n != 2 {
		t.Errorf("%d recovery lines, want one per instance", n)
	}
}

func TestShareHealthOff(t *testing.T) {
	// The default sync_interval (500ms): a round without spend between
	// two with it.
	f := startFleet(t, "share_health off")
	u, a, b := f.u, f.a, f.b
	for range 3 {
		a.chat(t, "sk-bulk", "e")
	}
	time.Sleep(syncWait)
	u.deadHits.Store(0)
	b.chat(t, "sk-bulk", "e")
	if n := u.deadHits.Load(); n != 1 {
		t.Errorf("with share_health off, B sent %d requests to the target A ejected, want 1 (its own judgement)", n)
	}
	// Spend is still shared at the default interval.
	for range 2 {
		a.chat(t, "sk-team", "m")
	}
	waitFor(t, 3*time.Second, "B seeing A's spend", func() bool {
		return strings.Contains(b.statusBody(t), `"others_usd": 0.002`)
	})
}

// TestCorruptStateFileIsAWarning: a saved state that cannot be read is
// logged and ignored; the relay starts and serves.
func TestCorruptStateFileIsAWarning(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a")
	const id = "0b7c2c1e-5e8a-4a52-9a3e-3f1f2d6c7b10"
	for path, body := range map[string]string{
		filepath.Join(dir, "data", "caddy", "instance.uuid"):            id,
		filepath.Join(dir, "storage", "llm_relay", "state", id+".json"): `{"version":1,"spend":[{"key":`,
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	u := newFleetUpstreams(t)
	a := startRelayProc(t, dir, u.block(""))
	if st := a.chat(t, "sk-team", "m"); st != 200 {
		t.Fatalf("status %d with a corrupt state file", st)
	}
	if n := countLines(t, "saved relay state unreadable; starting without it (it is overwritten at the next save)", a.log); n != 1 {
		t.Errorf("%d warnings about the corrupt state file, want 1", n)
	}
	// The next save replaces it with a good one.
	waitFor(t, 3*time.Second, "a readable state file", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "storage", "llm_relay", "state", id+".json"))
		return json.Valid(b)
	})
}
