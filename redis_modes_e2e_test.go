package llmrelay_test

// `state redis` on Redis as operators run it (redismodes.go): a Redis
// Cluster of three masters and a master watched by Redis Sentinel, each
// started by the test on loopback with Debian's redis-server, in a temp
// dir, without persistence. In each mode two relay instances (processes
// of their own, fleet_e2e_test.go) share a key's rpm, the first scenario
// of TestFleetSharesKeyLimits; the status view and the logs name the mode
// and addresses and never a password. RELAY_REDIS_SERVER names another
// server binary of the same protocol (valkey-server).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// rmServerBin is the server binary: $RELAY_REDIS_SERVER, else
// redis-server. Absent, the test skips, unless RELAY_REQUIRE_REDIS=1.
func rmServerBin(t *testing.T) string {
	t.Helper()
	name := os.Getenv("RELAY_REDIS_SERVER")
	if name == "" {
		name = "redis-server"
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		msg := name + " not installed (Debian: apt-get install redis-server)"
		if os.Getenv("RELAY_REQUIRE_REDIS") == "1" {
			t.Fatal(msg + " (RELAY_REQUIRE_REDIS=1)")
		}
		t.Skip(msg)
	}
	return bin
}

// rmServer is a server process started by the test, on 127.0.0.1.
type rmServer struct {
	cmd  *exec.Cmd
	addr string
	log  string
}

// rmStart runs the server binary with args (a config file first, when
// there is one) and the common settings, in dir, and waits until it
// answers PING with password. It is killed at the test's end.
func rmStart(t *testing.T, bin, dir, password string, port int, args ...string) *rmServer {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s := &rmServer{addr: fmt.Sprintf("127.0.0.1:%d", port), log: filepath.Join(dir, "server.log")}
	args = append(args, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--loglevel", "notice", "--logfile", s.log)
	s.cmd = exec.Command(bin, args...)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.kill() })
	c := redis.NewClient(&redis.Options{Addr: s.addr, Password: password, MaxRetries: -1})
	defer c.Close()
	waitFor(t, 10*time.Second, "the server at "+s.addr+" answering", func() bool {
		return c.Ping(context.Background()).Err() == nil
	})
	return s
}

func (s *rmServer) kill() {
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// rmCluster starts a Redis Cluster of three masters (no replicas) with
// password, each holding a third of the slots, and returns the nodes'
// addresses once every node says cluster_state:ok and knows the others.
func rmCluster(t *testing.T, password string) []string {
	t.Helper()
	bin, dir := rmServerBin(t), t.TempDir()
	var addrs []string
	var buses []int // the nodes' cluster bus ports
	var nodes []*redis.Client
	for i := range 3 {
		d, bus := filepath.Join(dir, fmt.Sprint(i)), freePort(t)
		s := rmStart(t, bin, d, password, freePort(t), "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(d, "nodes.conf"), "--cluster-port", fmt.Sprint(bus),
			"--cluster-node-timeout", "2000", "--requirepass", password, "--masterauth", password)
		addrs, buses = append(addrs, s.addr), append(buses, bus)
		c := redis.NewClient(&redis.Options{Addr: s.addr, Password: password})
		t.Cleanup(func() { c.Close() })
		nodes = append(nodes, c)
	}
	ctx := context.Background()
	for i, c := range nodes {
		lo, hi := i*16384/3, (i+1)*16384/3-1
		if err := c.ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			t.Fatalf("CLUSTER ADDSLOTS %d-%d on %s: %v", lo, hi, addrs[i], err)
		}
	}
	for i, a := range addrs[1:] {
		host, port, _ := strings.Cut(a, ":")
		if err := nodes[0].Do(ctx, "cluster", "meet", host, port, buses[i+1]).Err(); err != nil {
			t.Fatalf("CLUSTER MEET %s: %v", a, err)
		}
	}
	waitFor(t, 20*time.Second, "cluster_state:ok on every node", func() bool {
		for _, c := range nodes {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3") {
				return false
			}
		}
		return true
	})
	return addrs
}

// rmSentinel is a master (and, with replica, a replica of it) watched by
// one sentinel as "mymaster"; the master's password is password, the
// sentinel's own sentinelPassword.
type rmSentinel struct {
	master, replica, sentinel *rmServer
}

func rmStartSentinel(t *testing.T, password, sentinelPassword string, replica bool) rmSentinel {
	t.Helper()
	bin, dir := rmServerBin(t), t.TempDir()
	var s rmSentinel
	s.master = rmStart(t, bin, filepath.Join(dir, "master"), password, freePort(t),
		"--requirepass", password, "--masterauth", password)
	if replica {
		host, port, _ := strings.Cut(s.master.addr, ":")
		s.replica = rmStart(t, bin, filepath.Join(dir, "replica"), password, freePort(t),
			"--requirepass", password, "--masterauth", password, "--replicaof", host, port)
		c := redis.NewClient(&redis.Options{Addr: s.replica.addr, Password: password})
		defer c.Close()
		waitFor(t, 10*time.Second, "the replica in sync", func() bool {
			info, _ := c.Info(context.Background(), "replication").Result()
			return strings.Contains(info, "master_link_status:up")
		})
	}
	// Sentinel rewrites its config file: it is the test's, in the temp dir.
	sdir := filepath.Join(dir, "sentinel")
	if err := os.MkdirAll(sdir, 0o700); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(s.master.addr, ":")
	conf := filepath.Join(sdir, "sentinel.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`sentinel monitor mymaster %s %s 1
sentinel auth-pass mymaster %s
sentinel down-after-milliseconds mymaster 1000
sentinel failover-timeout mymaster 4000
sentinel parallel-syncs mymaster 1
requirepass %s
`, host, port, password, sentinelPassword)), 0o600); err != nil {
		t.Fatal(err)
	}
	s.sentinel = rmStart(t, bin, sdir, sentinelPassword, freePort(t), conf, "--sentinel")
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.sentinel.addr, Password: sentinelPassword})
	defer sc.Close()
	waitFor(t, 10*time.Second, "the sentinel naming the master", func() bool {
		a, err := sc.GetMasterAddrByName(context.Background(), "mymaster").Result()
		return err == nil && len(a) == 2 && a[0]+":"+a[1] == s.master.addr
	})
	return s
}

// rmStateView is the status view's state, with the Redis it names.
type rmStateView struct {
	Backend   string `json:"backend"`
	Redis     string `json:"redis"`
	Up        *bool  `json:"up"`
	LastError string `json:"last_error"`
}

func (p *relayProc) rmState(t *testing.T) rmStateView {
	t.Helper()
	var st struct {
		State rmStateView `json:"state"`
	}
	if err := json.Unmarshal([]byte(p.statusBody(t)), &st); err != nil {
		t.Fatal(err)
	}
	return st.State
}

// rmFleet starts two relay instances whose state line is state (its
// block: sync_interval 250ms and settings), and checks that each says in
// its status view it is up on the Redis named want.
func rmFleet(t *testing.T, state, settings, want string) (a, b *relayProc) {
	t.Helper()
	dir, u := t.TempDir(), newFleetUpstreams(t)
	line := state + " {\n\t\t\tsync_interval 250ms\n\t\t\t" + settings + "\n\t\t}"
	a = startRelayProc(t, filepath.Join(dir, "a"), u.block(line))
	b = startRelayProc(t, filepath.Join(dir, "b"), u.block(line))
	for _, p := range []*relayProc{a, b} {
		waitFor(t, 10*time.Second, "the instance's shared state up", func() bool {
			st := p.rmState(t)
			return st.Up != nil && *st.Up
		})
		if st := p.rmState(t); st.Backend != "redis" || st.Redis != want {
			t.Errorf("%s: status view's state: backend %q, redis %q; want redis, %q", p.dir, st.Backend, st.Redis, want)
		}
	}
	return a, b
}

// rmSharesRPM is the rpm scenario of TestFleetSharesKeyLimits: rpm 6,
// 4 on A leave B 2, and B's 3rd gets 429.
func rmSharesRPM(t *testing.T, a, b *relayProc) {
	t.Helper()
	a.chatOK(t, "sk-limited", "m", 4)
	b.awaitRPMRemaining(t, "sk-limited", 2)
	b.chatOK(t, "sk-limited", "m", 2)
	if st := b.chat(t, "sk-limited", "m"); st != 429 {
		t.Errorf("B's 3rd request after A's 4 of rpm 6: status %d, want 429", st)
	}
}

// rmNoSecret fails the test if a password shows in a status view or in
// an instance's logs.
func rmNoSecret(t *testing.T, secrets []string, procs ...*relayProc) {
	t.Helper()
	for _, p := range procs {
		body := p.statusBody(t)
		logs, _ := os.ReadFile(p.log)
		stderr, _ := os.ReadFile(filepath.Join(p.dir, "stderr.log"))
		for _, s := range secrets {
			for what, text := range map[string]string{"status view": body, "log": string(logs), "stderr": string(stderr)} {
				if strings.Contains(text, s) {
					t.Errorf("%s: the %s holds the password %q", p.dir, what, s)
				}
			}
		}
	}
}

// TestRedisClusterSharesState: two instances on a three-master Redis
// Cluster share a key's rpm. The relay's keys land on more than one
// node, so a round's pipeline spans nodes, and the shared state script
// must be on each (SCRIPT LOAD has no key: in a Cluster pipeline it
// reaches one node only, and the EVALSHA of a key on another node gets
// NOSCRIPT).
func TestRedisClusterSharesState(t *testing.T) {
	const password = "rm-cluster-secret"
	addrs := rmCluster(t, password)
	want := "redis cluster " + strings.Join(slices.Sorted(slices.Values(addrs)), ",") + ` prefix "llm_relay:"`
	a, b := rmFleet(t, "state redis cluster "+strings.Join(addrs, " "), "password "+password, want)
	rmSharesRPM(t, a, b)

	// Where the relay's keys are: at least two nodes hold some.
	ctx := context.Background()
	holding := 0
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr, Password: password})
		keys, err := c.Keys(ctx, "llm_relay:*").Result()
		c.Close()
		if err != nil {
			t.Fatalf("KEYS on %s: %v", addr, err)
		}
		if len(keys) > 0 {
			holding++
		}
	}
	if holding < 2 {
		t.Errorf("the relay's keys are on %d node(s) of 3; the test wants a round that spans nodes", holding)
	}
	// One stream's keys share a slot (streamKeyTag's form), by the
	// cluster's own count.
	c := redis.NewClient(&redis.Options{Addr: addrs[0], Password: password})
	defer c.Close()
	for _, id := range []string{"resp_6f1c0e2a9b", "chatcmpl-Zx9_-q"} {
		events, _ := c.ClusterKeySlot(ctx, "llm_relay:stream:{"+id+"}:events").Result()
		meta, _ := c.ClusterKeySlot(ctx, "llm_relay:stream:{"+id+"}:meta").Result()
		if events != meta || events == 0 {
			t.Errorf("stream %s: events in slot %d, meta in slot %d", id, events, meta)
		}
	}
	rmNoSecret(t, []string{password}, a, b)
	for _, p := range []*relayProc{a, b} {
		if n := countLines(t, "shared state entry skipped", p.log); n > 0 {
			t.Errorf("%s: %d keys skipped on the cluster (NOSCRIPT?); see its log", p.dir, n)
		}
	}
}

// TestRedisClusterScriptFlushed: a node that lost the script (SCRIPT
// FLUSH here; a restart or a promoted replica alike) answers NOSCRIPT;
// the relay loads it on every node again and the fleet keeps sharing,
// with no key named skipped.
func TestRedisClusterScriptFlushed(t *testing.T) {
	const password = "rm-cluster-secret"
	addrs := rmCluster(t, password)
	want := "redis cluster " + strings.Join(slices.Sorted(slices.Values(addrs)), ",") + ` prefix "llm_relay:"`
	a, b := rmFleet(t, "state redis cluster "+strings.Join(addrs, " "), "password "+password, want)
	a.chatOK(t, "sk-limited", "m", 1)
	b.awaitRPMRemaining(t, "sk-limited", 5)
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr, Password: password})
		if err := c.ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	a.chatOK(t, "sk-limited", "m", 3)
	b.awaitRPMRemaining(t, "sk-limited", 2)
	b.chatOK(t, "sk-limited", "m", 2)
	if st := b.chat(t, "sk-limited", "m"); st != 429 {
		t.Errorf("B's 3rd request after A's 4 of rpm 6: status %d, want 429", st)
	}
	for _, p := range []*relayProc{a, b} {
		if n := countLines(t, "shared state entry skipped", p.log); n > 0 {
			t.Errorf("%s: %d keys named skipped after SCRIPT FLUSH; want the script loaded again", p.dir, n)
		}
	}
}

// TestRedisClusterWithoutScripts: a Cluster whose user may not run
// scripts (an ACL without @scripting on every node): the relay says so
// once, is not down, and shares its state with plain commands.
func TestRedisClusterWithoutScripts(t *testing.T) {
	const password = "rm-cluster-secret"
	addrs := rmCluster(t, password)
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr, Password: password})
		if err := c.Do(context.Background(), "ACL", "SETUSER", "default", "-@scripting").Err(); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	want := "redis cluster " + strings.Join(slices.Sorted(slices.Values(addrs)), ",") + ` prefix "llm_relay:"`
	a, b := rmFleet(t, "state redis cluster "+strings.Join(addrs, " "), "password "+password, want)
	rmSharesRPM(t, a, b)
	for _, p := range []*relayProc{a, b} {
		raw, _ := os.ReadFile(p.log)
		if n := strings.Count(string(raw), "Redis refuses scripts"); n != 1 {
			t.Errorf("%s: %d lines saying Redis refuses scripts, want 1", p.dir, n)
		}
		if n := countLines(t, "shared state unreachable; serving from this instance's view (spend is kept and written when it is back)", p.log); n != 0 {
			t.Errorf("%s: the refused script was taken for an outage (%d lines)", p.dir, n)
		}
	}
}

// TestRedisSentinelSharesState: two instances on a master found through
// a sentinel (which has a password of its own) share a key's rpm.
func TestRedisSentinelSharesState(t *testing.T) {
	const password, sentinelPassword = "rm-master-secret", "rm-sentinel-secret"
	s := rmStartSentinel(t, password, sentinelPassword, false)
	want := "redis sentinel mymaster via " + s.sentinel.addr + ` db 0 prefix "llm_relay:"`
	a, b := rmFleet(t, "state redis sentinel mymaster "+s.sentinel.addr,
		"password "+password+"\n\t\t\tsentinel_password "+sentinelPassword, want)
	rmSharesRPM(t, a, b)
	c := redis.NewClient(&redis.Options{Addr: s.master.addr, Password: password})
	defer c.Close()
	if n, err := c.Exists(context.Background(), "llm_relay:limits:limited").Result(); err != nil || n != 1 {
		t.Errorf("the master has no llm_relay:limits:limited (%d, %v)", n, err)
	}
	rmNoSecret(t, []string{password, sentinelPassword}, a, b)
}

// TestRedisSentinelFailover: the master is killed; the sentinel promotes
// the replica, and the fleet follows it: what A takes after the failover
// reaches B.
func TestRedisSentinelFailover(t *testing.T) {
	const password, sentinelPassword = "rm-master-secret", "rm-sentinel-secret"
	s := rmStartSentinel(t, password, sentinelPassword, true)
	want := "redis sentinel mymaster via " + s.sentinel.addr + ` db 0 prefix "llm_relay:"`
	a, b := rmFleet(t, "state redis sentinel mymaster "+s.sentinel.addr,
		"password "+password+"\n\t\t\tsentinel_password "+sentinelPassword, want)
	a.chatOK(t, "sk-limited", "m", 2)
	b.awaitRPMRemaining(t, "sk-limited", 4)

	s.master.kill()
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.sentinel.addr, Password: sentinelPassword})
	defer sc.Close()
	waitFor(t, 20*time.Second, "the sentinel promoting the replica", func() bool {
		a, err := sc.GetMasterAddrByName(context.Background(), "mymaster").Result()
		return err == nil && len(a) == 2 && a[0]+":"+a[1] == s.replica.addr
	})
	a.chatOK(t, "sk-limited", "m", 2)
	b.awaitRPMRemaining(t, "sk-limited", 2)
	b.chatOK(t, "sk-limited", "m", 2)
	if st := b.chat(t, "sk-limited", "m"); st != 429 {
		t.Errorf("B's 3rd request after A's 4 of rpm 6 (2 before the failover, 2 after): status %d, want 429", st)
	}
	c := redis.NewClient(&redis.Options{Addr: s.replica.addr, Password: password})
	defer c.Close()
	if n, err := c.Exists(context.Background(), "llm_relay:limits:limited").Result(); err != nil || n != 1 {
		t.Errorf("the promoted replica has no llm_relay:limits:limited (%d, %v)", n, err)
	}
	for _, p := range []*relayProc{a, b} {
		waitFor(t, 10*time.Second, "the instance's shared state up after the failover", func() bool {
			st := p.rmState(t)
			return st.Up != nil && *st.Up
		})
	}
}
