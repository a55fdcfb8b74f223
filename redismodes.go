package llmrelay

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/llmrelay/caddy-llm-relay/internal/sharedstate"
)

// Redis as operators run it (`state redis`): one server (or a proxy) at
// an address, a master found through Redis Sentinel (`state redis
// sentinel <master_name> <sentinel_address...>`), or a Redis Cluster
// (`state redis cluster <node_address...>`). Valkey speaks the same
// protocol in each mode.
//
// The fleet works the same in each (fleet.go): every key is a command of
// its own in a round (the shared state script reads and writes KEYS[1]
// only), so under Cluster each command goes to the node holding its key,
// and go-redis splits a round's pipeline by node. Two things differ:
//
//   - SCRIPT LOAD has no key: a Cluster's pipeline sends it to one node,
//     not to the node of each EVALSHA. So under Cluster the script is
//     loaded on every node before the first round (go-redis sends
//     ClusterClient.ScriptLoad to each), and again after a node answers
//     NOSCRIPT (a node restarted, a replica promoted, SCRIPT FLUSH); that
//     round is not counted and the next one, a tick later, goes through.
//   - Under Sentinel the client asks the sentinels for the master and
//     follows a failover (go-redis's failover client); the script is
//     loaded at the head of every round, as with one server, so a master
//     newly promoted has it.

// checkRedisMode validates a sentinel or cluster state (s.Mode set).
func (s *StateConfig) checkRedisMode() error {
	what := map[string]string{"sentinel": "sentinels", "cluster": "cluster nodes"}[s.Mode]
	if what == "" {
		return fmt.Errorf("state redis: unknown mode %q; expected sentinel or cluster, or none for one server at an address (JSON: state.mode)", s.Mode)
	}
	if s.Address != "" {
		return fmt.Errorf("state redis %s: address %q is for one server; list the %s in addresses (Caddyfile: state redis %s; JSON: state.addresses)",
			s.Mode, s.Address, what, redisModeGrammar(s.Mode))
	}
	switch s.Mode {
	case "sentinel":
		if s.MasterName == "" {
			return fmt.Errorf("state redis sentinel: the master's name is required, as the sentinels monitor it (Caddyfile: state redis %s; JSON: state.master_name)", redisModeGrammar(s.Mode))
		}
		if _, port, err := net.SplitHostPort(s.MasterName); err == nil && isDigits(port) {
			return fmt.Errorf("state redis sentinel: master name %q looks like a sentinel's address; name the master first, as the sentinels monitor it (Caddyfile: state redis %s; JSON: state.master_name)", s.MasterName, redisModeGrammar(s.Mode))
		}
	case "cluster":
		switch {
		case s.MasterName != "":
			return fmt.Errorf("state redis cluster: master_name %q is a setting of state redis sentinel; a cluster finds its masters itself", s.MasterName)
		case s.SentinelPassword != "":
			return fmt.Errorf("state redis cluster: sentinel_password is a setting of state redis sentinel; the nodes' password is password")
		case s.DB != 0:
			return fmt.Errorf("state redis cluster: db %d: a Redis Cluster has only database 0; remove db (or use a prefix to keep fleets apart)", s.DB)
		}
	}
	if len(s.Addresses) == 0 {
		return fmt.Errorf("state redis %s: expected the address of one or more %s (Caddyfile: state redis %s; JSON: state.addresses)", s.Mode, what, redisModeGrammar(s.Mode))
	}
	for i, a := range s.Addresses {
		if host, port, err := net.SplitHostPort(a); err != nil || host == "" || port == "" {
			return fmt.Errorf("state redis %s: address %q: want host:port (e.g. 127.0.0.1:%s); %s are reached over TCP", s.Mode, a,
				map[string]string{"sentinel": "26379", "cluster": "7000"}[s.Mode], what)
		}
		if slices.Contains(s.Addresses[:i], a) {
			return fmt.Errorf("state redis %s: address %q is listed twice", s.Mode, a)
		}
	}
	return nil
}

// checkRedisSingle refuses the settings of a mode on a state without one.
func (s *StateConfig) checkRedisSingle() error {
	switch {
	case s.MasterName != "":
		return fmt.Errorf("state redis: master_name %q is a setting of state redis sentinel (Caddyfile: state redis %s; JSON: state.mode \"sentinel\")", s.MasterName, redisModeGrammar("sentinel"))
	case len(s.Addresses) > 0:
		return fmt.Errorf("state redis: addresses are the servers of a sentinel or cluster mode (JSON: state.mode); one server's goes in address")
	case s.SentinelPassword != "":
		return fmt.Errorf("state redis: sentinel_password is a setting of state redis sentinel (Caddyfile: state redis %s)", redisModeGrammar("sentinel"))
	}
	return nil
}

// redisModeGrammar is a mode's state line, after `state redis`.
func redisModeGrammar(mode string) string {
	if mode == "sentinel" {
		return "sentinel <master_name> <sentinel_address...>"
	}
	return "cluster <node_address...>"
}

// redisTarget names the Redis a state reaches, never its passwords: the
// address of one server; the mode, master name and addresses otherwise
// (sorted: the same deployment listed in another order is the same).
func redisTarget(c *StateConfig) string {
	switch c.Mode {
	case "":
		return c.Address
	case "sentinel":
		return "sentinel " + c.MasterName + " via " + strings.Join(sortedAddresses(c), ",")
	default:
		return c.Mode + " " + strings.Join(sortedAddresses(c), ",")
	}
}

func sortedAddresses(c *StateConfig) []string {
	a := slices.Clone(c.Addresses)
	slices.Sort(a)
	return a
}

// redisName is a state's name in logs, the status view and the state
// metric's label: the Redis it reaches, its database (not in cluster
// mode, which has only 0) and prefix.
func redisName(c *StateConfig) string {
	if c.Mode == "cluster" {
		return fmt.Sprintf("redis %s prefix %q", redisTarget(c), fleetPrefix(c))
	}
	return fmt.Sprintf("redis %s db %d prefix %q", redisTarget(c), c.DB, fleetPrefix(c))
}

// newRedisClient connects to the Redis of a state, in its mode, with the
// fleet's settings: short timeouts, a small pool, no retries (the next
// tick is the retry; under Cluster, go-redis still follows a MOVED or
// ASK within the round).
func newRedisClient(c *StateConfig, password, sentinelPassword string) redis.UniversalClient {
	return newRedisClientPool(c, password, sentinelPassword, 2)
}

// newRedisClientPool is newRedisClient with a pool of poolSize
// connections per node.
func newRedisClientPool(c *StateConfig, password, sentinelPassword string, poolSize int) redis.UniversalClient {
	var tlsConfig *tls.Config
	if c.TLS {
		// Without a ServerName, each connection checks the name of the
		// host it dials (crypto/tls), whichever node or sentinel it is.
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	switch c.Mode {
	case "sentinel":
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: c.MasterName, SentinelAddrs: c.Addresses, SentinelPassword: sentinelPassword,
			Password: password, DB: c.DB, TLSConfig: tlsConfig,
			DialTimeout: fleetTimeout, ReadTimeout: fleetTimeout, WriteTimeout: fleetTimeout,
			PoolSize: poolSize, MaxRetries: -1, ContextTimeoutEnabled: true,
		})
	case "cluster":
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: c.Addresses, Password: password, TLSConfig: tlsConfig,
			DialTimeout: fleetTimeout, ReadTimeout: fleetTimeout, WriteTimeout: fleetTimeout,
			PoolSize: poolSize, MaxRetries: -1, ContextTimeoutEnabled: true,
		})
	}
	opts := &redis.Options{
		Addr: c.Address, Password: password, DB: c.DB,
		DialTimeout: fleetTimeout, ReadTimeout: fleetTimeout, WriteTimeout: fleetTimeout,
		PoolSize: poolSize, MaxRetries: -1, // the next tick is the retry
		ContextTimeoutEnabled: true,
	}
	if path, ok := strings.CutPrefix(c.Address, "unix:"); ok || strings.HasPrefix(c.Address, "/") {
		if !ok {
			path = c.Address
		}
		opts.Network, opts.Addr = "unix", path
	}
	if c.TLS {
		host := c.Address
		if i := strings.LastIndexByte(host, ':'); i > 0 {
			host = host[:i]
		}
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
	}
	return redis.NewClient(opts)
}

// streamKeyTag is the Cluster hash tag of one resumable stream's keys:
// every key of the stream puts it in its name (prefix + "stream:" +
// streamKeyTag(id) + ":events", ... + ":meta"), so Redis Cluster hashes
// only the tag and keeps them in one slot, on one node (a script or
// MULTI over them needs that; different streams spread over the nodes).
// The tag is "{" + id + "}"; an id holding a brace, which would end the
// tag early or start another, is replaced by a digest of itself.
//
// A prefix with braces of its own is a tag for every key of the fleet:
// they all stay in one slot, which is correct and puts them all on one
// node.
func streamKeyTag(id string) string {
	if id == "" || strings.ContainsAny(id, "{}") {
		sum := sha256.Sum256([]byte(id))
		id = hex.EncodeToString(sum[:16])
	}
	return "{" + id + "}"
}

// clusterScript is the script's state under Cluster, touched by the run
// goroutine only: whether every node has it, and whether the last round
// met a node without it.
type clusterScript struct {
	onEveryNode bool
	missedLast  bool
}

// loadScript queues the shared state script's load at the head of a
// round's pipeline (one server, Sentinel: r.load, checked after the
// round), or, under Cluster, loads it on every node unless that was
// done. It reports whether the round goes on: under Cluster a load that
// could not reach a node, or met a Cluster down, fails the round, and
// one refused (an ACL without @scripting) ends it with plain commands
// from the next round on.
func (f *fleetState) loadScript(ctx context.Context, pipe redis.Pipeliner, r *round) bool {
	cc, ok := f.client.(*redis.ClusterClient)
	if !ok {
		r.load = pipe.ScriptLoad(ctx, sharedstate.Script)
		return true
	}
	if f.script.onEveryNode {
		return true
	}
	switch err := cc.ScriptLoad(ctx, sharedstate.Script).Err(); {
	case err == nil:
		f.script.onEveryNode = true
		return true
	case !isReply(err) || transientReply(err):
		f.failed(err)
	default:
		f.refuseScripts(r.now, err)
	}
	return false
}

// transientReply reports whether a reply error says the server cannot
// serve now (a Cluster down, a node loading its data, a failover), rather
// than that it refuses the command.
func transientReply(err error) bool {
	for _, p := range []string{"CLUSTERDOWN", "LOADING", "TRYAGAIN", "MASTERDOWN", "BUSY"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// missedScript reports, under Cluster, whether a node answered NOSCRIPT
// this round: the script is loaded on every node again for the next
// round, and this round does not count. Twice in a row, the round
// counts, with those keys' problems named, so a Redis that keeps losing
// the script shows it.
func (f *fleetState) missedScript(cmds []redis.Cmder) bool {
	if _, ok := f.client.(*redis.ClusterClient); !ok {
		return false
	}
	missed := slices.ContainsFunc(cmds, func(c redis.Cmder) bool {
		return c.Err() != nil && redis.HasErrorPrefix(c.Err(), "NOSCRIPT")
	})
	if missed {
		f.script.onEveryNode = false
	}
	again := missed && f.script.missedLast
	f.script.missedLast = missed
	return missed && !again
}

// fleetKeyOf names a Redis state in fleetPool: the Redis it reaches
// (redisTarget), database and prefix.
func fleetKeyOf(c *StateConfig) string {
	return redisTarget(c) + "|" + strconv.Itoa(c.DB) + "|" + fleetPrefix(c)
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}
