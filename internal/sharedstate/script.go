package sharedstate

import (
	"fmt"
	"strconv"
	"time"
)

// The bounds of what is read from one key. A relay's own hashes are far
// inside them: a spend or key limits field is an instance ID and under
// 80 bytes of figures, a canary or ejection a 24-character digest and a
// JSON object of a few hundred bytes; a hash has one field per instance
// (spend, key limits) or per canary or target. So they leave room for a
// fleet of a thousand instances or targets, and stop a stray 30 MB value
// from being read at every sync: a hash beyond MaxFields or MaxKeyBytes
// is skipped whole, a field beyond MaxName or MaxValue is skipped alone,
// and in both cases only their sizes cross the network.
const (
	MaxValue    = 4 << 10   // bytes of one value
	MaxName     = 256       // bytes of one field name
	MaxFields   = 2048      // fields of one hash
	MaxKeyBytes = 512 << 10 // bytes of one hash's names and values together
	MaxClaim    = 64        // bytes of an alert claim's value (an instance ID is 36)
)

// Script is the Lua script every key of the shared state goes through,
// in one of two modes (ARGV[1]):
//
//	hash  KEYS[1] a hash; ARGV: value, name, field and byte bounds, then
//	      "at" or "in" and milliseconds (an expiry, with a write), then
//	      field and value pairs to write. Reply: {"type", t} for a key
//	      of another type (nothing written); {"fields", n} or
//	      {"bytes", n} for one past the bounds (written, not read);
//	      else {"hash", {name, value, ...}, {name, name bytes, value
//	      bytes, ...}}, the second list the fields past their bounds
//	      (names cut to the bound).
//	claim KEYS[1] a string; ARGV: the claimant, milliseconds to keep
//	      it, the bytes of the holder to read back. Reply: {"type", t},
//	      or {"won"|"lost", holder}.
//
// A key of another type is never written (no HSET, no expiry), so another
// application's key keeps its value and its TTL.
const Script = `
local key, mode = KEYS[1], ARGV[1]
local t = redis.call('TYPE', key)['ok']
if mode == 'claim' then
	if t ~= 'string' and t ~= 'none' then return {'type', t} end
	local won = redis.call('SET', key, ARGV[2], 'NX', 'PX', ARGV[3])
	local by = redis.call('GETRANGE', key, 0, tonumber(ARGV[4]) - 1)
	if won then return {'won', by} end
	return {'lost', by}
end
if t ~= 'hash' and t ~= 'none' then return {'type', t} end
if #ARGV > 7 then
	for i = 8, #ARGV, 2 do redis.call('HSET', key, ARGV[i], ARGV[i + 1]) end
	if ARGV[6] == 'at' then redis.call('PEXPIREAT', key, ARGV[7])
	elseif ARGV[6] == 'in' then redis.call('PEXPIRE', key, ARGV[7]) end
end
local vmax, nmax, fmax, bmax = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local n = redis.call('HLEN', key)
if n > fmax then return {'fields', n} end
local out, skipped, total = {}, {}, 0
for _, f in ipairs(redis.call('HKEYS', key)) do
	local vl = redis.call('HSTRLEN', key, f)
	if #f > nmax or vl > vmax then
		skipped[#skipped + 1] = string.sub(f, 1, nmax)
		skipped[#skipped + 1] = #f
		skipped[#skipped + 1] = vl
	else
		total = total + #f + vl
		if total > bmax then return {'bytes', total} end
		out[#out + 1] = f
		out[#out + 1] = redis.call('HGET', key, f)
	end
end
return {'hash', out, skipped}
`

// HashArgs are the script's arguments for a hash: write the pairs (field,
// value, ...), with an expiry at expireAt or after expireIn (neither:
// none), and read it back within the bounds.
func HashArgs(pairs []string, expireAt time.Time, expireIn time.Duration) []any {
	args := []any{"hash", MaxValue, MaxName, MaxFields, MaxKeyBytes, "", 0}
	switch {
	case !expireAt.IsZero():
		args[5], args[6] = "at", expireAt.UnixMilli()
	case expireIn > 0:
		args[5], args[6] = "in", expireIn.Milliseconds()
	}
	for _, p := range pairs {
		args = append(args, p)
	}
	return args
}

// ClaimArgs are the script's arguments to claim a key for instance, kept
// for ttl.
func ClaimArgs(instance string, ttl time.Duration) []any {
	return []any{"claim", instance, max(ttl.Milliseconds(), 1), MaxClaim}
}

// Problem is what is wrong with a key (Field "") or one of its fields:
// why it was skipped, in words for the log and the status view. What
// stays the same while the problem does, so it is logged once.
type Problem struct {
	Field string
	What  string
}

// Hash is one hash as read: its fields within the bounds, and the
// fields skipped.
type Hash struct {
	Fields  map[string]string
	Skipped []Problem
}

// KeyProblem is a key skipped whole.
type KeyProblem string

func (p KeyProblem) Error() string { return string(p) }

func wrongType(t string) KeyProblem {
	return KeyProblem(fmt.Sprintf("a %s, not a hash: another application's key or an older layout's; skipped, and not written", t))
}

func tooManyFields(n int64) KeyProblem {
	return KeyProblem(fmt.Sprintf("%d fields, more than the %d read from one key: skipped", n, MaxFields))
}

func tooManyBytes() KeyProblem {
	return KeyProblem(fmt.Sprintf("more than %d KiB in its fields, the most read from one key: skipped", MaxKeyBytes>>10))
}

func fieldTooLarge(nameLen, valueLen int64) string {
	if nameLen > MaxName {
		return fmt.Sprintf("a field name of %d bytes, more than %d: skipped", nameLen, MaxName)
	}
	return fmt.Sprintf("a value of %d bytes, more than %d: skipped", valueLen, MaxValue)
}

// DecodeHash reads the script's reply for a hash; a key skipped whole
// is a KeyProblem.
func DecodeHash(reply any) (Hash, error) {
	parts, ok := reply.([]any)
	if !ok || len(parts) < 2 {
		return Hash{}, fmt.Errorf("unexpected reply %T from the shared state script", reply)
	}
	kind, _ := parts[0].(string)
	switch kind {
	case "type":
		t, _ := parts[1].(string)
		return Hash{}, wrongType(t)
	case "fields":
		n, _ := parts[1].(int64)
		return Hash{}, tooManyFields(n)
	case "bytes":
		return Hash{}, tooManyBytes()
	case "hash":
	default:
		return Hash{}, fmt.Errorf("unexpected reply %q from the shared state script", kind)
	}
	h := Hash{Fields: map[string]string{}}
	kv, _ := parts[1].([]any)
	for i := 0; i+1 < len(kv); i += 2 {
		k, _ := kv[i].(string)
		v, _ := kv[i+1].(string)
		h.Fields[k] = v
	}
	if len(parts) > 2 {
		sk, _ := parts[2].([]any)
		for i := 0; i+2 < len(sk); i += 3 {
			name, _ := sk[i].(string)
			nl, _ := sk[i+1].(int64)
			vl, _ := sk[i+2].(int64)
			h.Skipped = append(h.Skipped, Problem{Field: name, What: fieldTooLarge(nl, vl)})
		}
	}
	return h, nil
}

// FromMap applies the script's bounds to a hash read whole (HGETALL),
// for a Redis that refuses scripts: what the bounds keep out is skipped
// as it would be, though it crossed the network.
func FromMap(m map[string]string) (Hash, error) {
	if len(m) > MaxFields {
		return Hash{}, tooManyFields(int64(len(m)))
	}
	h := Hash{Fields: make(map[string]string, len(m))}
	total := 0
	for k, v := range m {
		if len(k) > MaxName || len(v) > MaxValue {
			name := k
			if len(name) > MaxName {
				name = name[:MaxName]
			}
			h.Skipped = append(h.Skipped, Problem{Field: name, What: fieldTooLarge(int64(len(k)), int64(len(v)))})
			continue
		}
		if total += len(k) + len(v); total > MaxKeyBytes {
			return Hash{}, tooManyBytes()
		}
		h.Fields[k] = v
	}
	return h, nil
}

// WrongTypeError is the KeyProblem for a WRONGTYPE answer (without the
// script, the key's type is not known).
func WrongTypeError() KeyProblem { return wrongType("key of another type") }

// Claim is an alert claim's outcome.
type Claim struct {
	Won    bool
	Holder string // the claim's value as read back (at most MaxClaim bytes)
}

// DecodeClaim reads the script's reply for a claim.
func DecodeClaim(reply any) (Claim, error) {
	parts, ok := reply.([]any)
	if !ok || len(parts) < 2 {
		return Claim{}, fmt.Errorf("unexpected reply %T from the shared state script", reply)
	}
	kind, _ := parts[0].(string)
	v, _ := parts[1].(string)
	switch kind {
	case "type":
		return Claim{}, KeyProblem(fmt.Sprintf("a %s, not a string: another application's key or an older layout's; the alert is logged here, unclaimed", v))
	case "won", "lost":
		return Claim{Won: kind == "won", Holder: v}, nil
	}
	return Claim{}, fmt.Errorf("unexpected reply %q from the shared state script", kind)
}

// CheckHolder judges the holder of a claim this instance lost: another
// instance (an ID), or something no relay writes.
func CheckHolder(holder string) error {
	if IsInstanceID(holder) {
		return nil
	}
	return KeyProblem("holds " + strconv.Itoa(len(holder)) + " bytes that are not an instance's ID: another application's key; the alert is logged here, unclaimed")
}
