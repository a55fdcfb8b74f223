package llmrelay

import (
	"fmt"
	"strings"
	"testing"
)

// rmSlot is Redis Cluster's hash slot of a key (CRC16-XMODEM of the key,
// or of its hash tag: what lies between the first "{" and the first "}"
// after it, when that is not empty, modulo 16384), as the cluster
// specification gives it.
func rmSlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// TestRMSlot holds rmSlot to the specification's example and to Redis's
// own answers (CLUSTER KEYSLOT on Redis 7.0).
func TestRMSlot(t *testing.T) {
	for key, want := range map[string]int{"123456789": 12739, "foo": 12182, "{user1000}.following": 3443,
		"{user1000}.followers": 3443, "foo{}{bar}": 8363, "foo{{bar}}zap": 4015, "foo{bar}{zap}": 5061} {
		if got := rmSlot(key); got != want {
			t.Errorf("rmSlot(%q) = %d, want %d", key, got, want)
		}
	}
}

// FuzzStreamKeyTag: the keys of one stream share a slot, whatever the id
// and the prefix; ids without braces are their own tag.
func FuzzStreamKeyTag(f *testing.F) {
	for _, s := range []string{"resp_0123abcd", "", "a}b", "{x}", "}{", "chatcmpl-Zx9_-", "a{b}c"} {
		f.Add("llm_relay:", s)
		f.Add("edge{1}:", s)
		f.Add("a{b:", s)
	}
	f.Fuzz(func(t *testing.T, prefix, id string) {
		tag := streamKeyTag(id)
		if !strings.HasPrefix(tag, "{") || !strings.HasSuffix(tag, "}") || strings.ContainsAny(tag[1:len(tag)-1], "{}") || len(tag) < 3 {
			t.Fatalf("streamKeyTag(%q) = %q: want {non-empty, brace-free}", id, tag)
		}
		if id != "" && !strings.ContainsAny(id, "{}") && tag != "{"+id+"}" {
			t.Fatalf("streamKeyTag(%q) = %q, want {%s}", id, tag, id)
		}
		events, meta := prefix+"stream:"+tag+":events", prefix+"stream:"+tag+":meta"
		if rmSlot(events) != rmSlot(meta) {
			t.Fatalf("prefix %q, id %q: %s in slot %d, %s in slot %d", prefix, id, events, rmSlot(events), meta, rmSlot(meta))
		}
		if !strings.ContainsAny(prefix, "{}") && rmSlot(events) != rmSlot(tag[1:len(tag)-1]) {
			t.Fatalf("prefix %q, id %q: the slot of %s is not its tag's", prefix, id, events)
		}
	})
}

// TestStreamKeyTagSpreads: different streams land on different slots
// (so on the nodes of a cluster), and a digest stands in for an id with
// braces, the same each time.
func TestStreamKeyTagSpreads(t *testing.T) {
	slots := map[int]bool{}
	for i := range 1000 {
		slots[rmSlot("llm_relay:stream:"+streamKeyTag(fmt.Sprintf("resp_%08x", i*2654435761))+":events")] = true
	}
	if len(slots) < 900 {
		t.Errorf("1000 streams over %d slots; want them spread", len(slots))
	}
	if a, b := streamKeyTag("a}b"), streamKeyTag("a}b"); a != b || a == streamKeyTag("a{b") {
		t.Errorf("streamKeyTag(a}b) = %s then %s; streamKeyTag(a{b) = %s", a, b, streamKeyTag("a{b"))
	}
}

// TestRedisNames: the pool key, the name and the log field give the
// mode and the addresses (sorted), never a password.
func TestRedisNames(t *testing.T) {
	for _, c := range []struct {
		cfg  StateConfig
		name string
	}{
		{StateConfig{Backend: "redis", Address: "10.0.0.1:6379", Password: "pw-1", DB: 2},
			`redis 10.0.0.1:6379 db 2 prefix "llm_relay:"`},
		{StateConfig{Backend: "redis", Mode: "sentinel", MasterName: "mymaster", Addresses: []string{"10.0.0.2:26379", "10.0.0.1:26379"},
			Password: "pw-1", SentinelPassword: "pw-2", Prefix: "edge:"},
			`redis sentinel mymaster via 10.0.0.1:26379,10.0.0.2:26379 db 0 prefix "edge:"`},
		{StateConfig{Backend: "redis", Mode: "cluster", Addresses: []string{"10.0.0.3:7000", "10.0.0.1:7000"}, Password: "pw-1"},
			`redis cluster 10.0.0.1:7000,10.0.0.3:7000 prefix "llm_relay:"`},
	} {
		if got := redisName(&c.cfg); got != c.name {
			t.Errorf("redisName = %q, want %q", got, c.name)
		}
		for _, s := range []string{redisName(&c.cfg), fleetKeyOf(&c.cfg), redisTarget(&c.cfg)} {
			if strings.Contains(s, "pw-") {
				t.Errorf("%q holds a password", s)
			}
		}
	}
	one := StateConfig{Backend: "redis", Mode: "cluster", Addresses: []string{"10.0.0.1:7000", "10.0.0.2:7000"}}
	other := StateConfig{Backend: "redis", Mode: "cluster", Addresses: []string{"10.0.0.2:7000", "10.0.0.1:7000"}}
	sentinel := StateConfig{Backend: "redis", Mode: "sentinel", MasterName: "m", Addresses: one.Addresses}
	if fleetKeyOf(&one) != fleetKeyOf(&other) || fleetKeyOf(&one) == fleetKeyOf(&sentinel) {
		t.Errorf("pool keys: %q, %q (same nodes, another order), %q (sentinel)", fleetKeyOf(&one), fleetKeyOf(&other), fleetKeyOf(&sentinel))
	}
}
