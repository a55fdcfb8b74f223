package sharedstate

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startRedis starts a redis-server on a unix socket in a temp dir; it
// skips where redis-server is absent, unless RELAY_REQUIRE_REDIS=1 (CI).
func startRedis(t *testing.T) *redis.Client {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("RELAY_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server not installed (RELAY_REQUIRE_REDIS=1)")
		}
		t.Skip("redis-server not installed (Debian: apt-get install redis-server)")
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: sock})
	t.Cleanup(func() { c.Close() })
	for end := time.Now().Add(10 * time.Second); c.Ping(context.Background()).Err() != nil; {
		if time.Now().After(end) {
			t.Fatal("redis-server not answering")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c
}

func runHash(t *testing.T, c *redis.Client, key string, pairs []string, expireIn time.Duration) (Hash, error) {
	t.Helper()
	v, err := c.Eval(context.Background(), Script, []string{key}, HashArgs(pairs, time.Time{}, expireIn)...).Result()
	if err != nil {
		t.Fatalf("script on %s: %v", key, err)
	}
	return DecodeHash(v)
}

// TestScriptAgainstRedis: the script on a real redis-server writes and
// reads a hash within the bounds, skips what is past them (and sends no
// more than their sizes), and leaves a key of another type as it was.
func TestScriptAgainstRedis(t *testing.T) {
	c, ctx := startRedis(t), context.Background()

	h, err := runHash(t, c, "p:limits:k", []string{"me", "1 2 3 1780000000000"}, time.Minute)
	if err != nil || h.Fields["me"] != "1 2 3 1780000000000" || len(h.Skipped) != 0 {
		t.Fatalf("a new hash: %+v, %v", h, err)
	}
	if ttl := c.PTTL(ctx, "p:limits:k").Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("expiry after a write: %s", ttl)
	}

	// A string of another application, with its own TTL: untouched.
	c.Set(ctx, "p:canary", "x", time.Hour)
	_, err = runHash(t, c, "p:canary", []string{"f", "v"}, time.Minute)
	var kp KeyProblem
	if !errors.As(err, &kp) || !strings.Contains(err.Error(), "a string, not a hash") {
		t.Errorf("a string key: %v", err)
	}
	if v, ttl := c.Get(ctx, "p:canary").Val(), c.TTL(ctx, "p:canary").Val(); v != "x" || ttl < 59*time.Minute {
		t.Errorf("the string key after the script: %q, TTL %s; want x and its own hour", v, ttl)
	}
	for _, typ := range []string{"list", "set", "zset"} {
		key := "p:eject:" + typ
		switch typ {
		case "list":
			c.RPush(ctx, key, "x")
		case "set":
			c.SAdd(ctx, key, "x")
		case "zset":
			c.ZAdd(ctx, key, redis.Z{Member: "x"})
		}
		if _, err := runHash(t, c, key, nil, 0); err == nil || !strings.Contains(err.Error(), "a "+typ+",") {
			t.Errorf("a %s key: %v", typ, err)
		}
	}

	// A value and a name past their bounds: skipped, the rest read.
	c.HSet(ctx, "p:spend:k", "big", strings.Repeat("x", 4<<20), strings.Repeat("n", MaxName+1), "1", "ok", "5")
	before := netOut(t, c)
	h, err = runHash(t, c, "p:spend:k", nil, 0)
	if sent := netOut(t, c) - before; sent > 64<<10 {
		t.Errorf("Redis sent %d bytes for a hash with a 4 MB value: the value crossed", sent)
	}
	if err != nil || h.Fields["ok"] != "5" || len(h.Fields) != 1 || len(h.Skipped) != 2 {
		t.Fatalf("a hash with fields past the bounds: %+v, %v", h, err)
	}
	for _, p := range h.Skipped {
		if len(p.Field) > MaxName || !strings.Contains(p.What, "skipped") {
			t.Errorf("skipped: %q %q", p.Field[:min(20, len(p.Field))], p.What)
		}
	}
	// FromMap (no script) skips the same.
	fm, err := FromMap(c.HGetAll(ctx, "p:spend:k").Val())
	if err != nil || len(fm.Fields) != 1 || len(fm.Skipped) != 2 {
		t.Errorf("FromMap: %d fields, %d skipped, %v", len(fm.Fields), len(fm.Skipped), err)
	}

	// Too many fields, or too many bytes: the key is skipped whole, after
	// this instance's own field was written.
	args := []any{}
	for i := range MaxFields + 1 {
		args = append(args, "f"+strconv.Itoa(i), "1")
	}
	c.HSet(ctx, "p:limits:many", args...)
	if _, err := runHash(t, c, "p:limits:many", []string{"me", "x"}, 0); err == nil || !strings.Contains(err.Error(), "fields") {
		t.Errorf("%d fields: %v", MaxFields+1, err)
	}
	if c.HGet(ctx, "p:limits:many", "me").Val() != "x" {
		t.Errorf("this instance's field not written to a hash too large to read")
	}
	args = args[:0]
	for i := range 200 {
		args = append(args, "f"+strconv.Itoa(i), strings.Repeat("v", 4000))
	}
	c.HSet(ctx, "p:limits:bytes", args...)
	if _, err := runHash(t, c, "p:limits:bytes", nil, 0); err == nil || !strings.Contains(err.Error(), "KiB") {
		t.Errorf("800 KB of fields: %v", err)
	}

	// Claims: the first wins, the next reads who holds it; a key of
	// another type is no claim.
	const a, b = "0b7c2c1e-5e8a-4a52-9a3e-3f1f2d6c7b10", "1b7c2c1e-5e8a-4a52-9a3e-3f1f2d6c7b10"
	claim := func(key, who string) (Claim, error) {
		v, err := c.Eval(ctx, Script, []string{key}, ClaimArgs(who, time.Hour)...).Result()
		if err != nil {
			t.Fatal(err)
		}
		return DecodeClaim(v)
	}
	if cl, err := claim("p:alert:1", a); err != nil || !cl.Won || cl.Holder != a {
		t.Errorf("first claim: %+v, %v", cl, err)
	}
	if cl, err := claim("p:alert:1", b); err != nil || cl.Won || cl.Holder != a || CheckHolder(cl.Holder) != nil {
		t.Errorf("second claim: %+v, %v", cl, err)
	}
	c.Set(ctx, "p:alert:2", strings.Repeat("z", 1000), 0)
	if cl, err := claim("p:alert:2", a); err != nil || cl.Won || len(cl.Holder) != MaxClaim || CheckHolder(cl.Holder) == nil {
		t.Errorf("a claim key with another application's value: %d bytes read, %v", len(cl.Holder), err)
	}
	c.HSet(ctx, "p:alert:3", "x", "y")
	if _, err := claim("p:alert:3", a); err == nil || !strings.Contains(err.Error(), "a hash, not a string") {
		t.Errorf("a hash as a claim key: %v", err)
	}
}

func netOut(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	for _, l := range strings.Split(c.Info(context.Background(), "stats").Val(), "\r\n") {
		if v, ok := strings.CutPrefix(l, "total_net_output_bytes:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatal("no total_net_output_bytes")
	return 0
}

func TestDecodeUnexpected(t *testing.T) {
	for _, v := range []any{nil, "x", []any{"what", 1}, []any{"hash"}} {
		if _, err := DecodeHash(v); err == nil {
			t.Errorf("DecodeHash(%#v) accepted", v)
		}
		if _, err := DecodeClaim(v); err == nil {
			t.Errorf("DecodeClaim(%#v) accepted", v)
		}
	}
}
