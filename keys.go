package llmrelay

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// keyring maps the SHA-256 of each client token to its entry. Tokens are
// compared by digest, so the lookup never branches on the secret's bytes
// and `sha256:<hex>` keys need no plaintext at all.
type keyring map[[sha256.Size]byte]*keyEntry

// keyEntry is one token's name and the bounds of this token (the limits
// are the name's: keyLimits).
type keyEntry struct {
	name      string
	allow     []netip.Prefix // empty: anywhere
	notBefore time.Time      // zero: no bound
	expires   time.Time      // zero: no bound
	warned    atomic.Int64   // the UTC day (Unix days) its coming expiry was last logged
}

// expiryWarning is how long before a token's expiry the relay warns, once
// a day, and the status view marks the key.
const expiryWarning = 14 * 24 * time.Hour

// expiresSoon reports, once per UTC day, that the token expires within
// expiryWarning of now.
func (e *keyEntry) expiresSoon(now time.Time) bool {
	if e.expires.IsZero() || e.expires.Sub(now) >= expiryWarning {
		return false
	}
	day := now.Unix() / 86400
	return e.warned.Swap(day) != day
}

// admits checks the token's own bounds for request r at now: its dates,
// and the client's address (as Caddy resolved it) only for a token with an
// allow_ip, so other requests do not pay for the lookup.
func (e *keyEntry) admits(r *http.Request, now time.Time) *apiError {
	if !e.notBefore.IsZero() && now.Before(e.notBefore) || !e.expires.IsZero() && !now.Before(e.expires) {
		return errKeyExpired
	}
	if len(e.allow) == 0 {
		return nil
	}
	ip := clientIP(r).Unmap()
	for _, p := range e.allow {
		if p.Contains(ip) {
			return nil
		}
	}
	return errIPNotAllowed
}

// clientIP is the client's address as Caddy resolved it (its
// trusted_proxies), else the connection's.
func clientIP(r *http.Request) netip.Addr {
	if s, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok {
		if a, err := netip.ParseAddr(s); err == nil {
			return a
		}
	}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return ap.Addr()
	}
	return netip.Addr{}
}

// newKeyring resolves placeholders in the configured keys and indexes them.
func newKeyring(keys []ClientKey, repl *caddy.Replacer) (keyring, error) {
	kr := make(keyring, len(keys))
	for i, k := range keys {
		name := k.Name
		if name == "" {
			name = defaultKeyName(i)
		}
		var digest [sha256.Size]byte
		if hexDigest, ok := strings.CutPrefix(k.Token, "sha256:"); ok {
			b, err := hex.DecodeString(hexDigest)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("key %q: sha256: needs 64 hex digits (the SHA-256 of the token, as printed by `printf %%s TOKEN | sha256sum`)", name)
			}
			copy(digest[:], b)
		} else {
			tok, err := repl.ReplaceOrErr(k.Token, true, true)
			if err != nil {
				return nil, fmt.Errorf("key %q: resolving token: %w", name, err)
			}
			if tok == "" {
				return nil, fmt.Errorf("key %q: token is empty", name)
			}
			digest = sha256.Sum256([]byte(tok))
		}
		if other, dup := kr[digest]; dup {
			return nil, fmt.Errorf("key %q: same token as key %q", name, other.name)
		}
		e := &keyEntry{name: name}
		e.allow, _ = parsePrefixes(k.AllowIP)      // checked at load
		e.notBefore, _ = parseKeyTime(k.NotBefore) // checked at load
		e.expires, _ = parseKeyTime(k.Expires)
		kr[digest] = e
	}
	return kr, nil
}

// open reports whether no keys are configured, so every client is let in.
func (kr keyring) open() bool { return len(kr) == 0 }

// credentialHeaders are the request headers a client key may come in, in
// the order they are looked at: `Authorization: Bearer` (OpenAI SDKs),
// `X-Api-Key` (Anthropic SDKs), `Api-Key` (Azure OpenAI SDKs) and
// `X-Goog-Api-Key` (Gemini SDKs). The first one present that yields a
// token is the client's key; an `Authorization` that is not Bearer (the
// Basic credentials of a `basic_auth` in front of the relay) yields none,
// so the next header is looked at.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key"}

// authenticate returns the name of the key the request presents, or ok=false.
// An open relay accepts every request under the name "anonymous".
//
// Once the request is let in (by any relay, open or keyed), the relay credential
// headers are removed from it, so that no later handler, placeholder
// (`{http.request.header.X-Api-Key}` in a deferred `header`, a
// `log_append`, an error route) or upstream sees the client's key.
// (Caddy's access log is not covered: it records a copy of the request
// taken before any handler runs; docs/configuration.md shows the log filter.)
func (kr keyring) authenticate(r *http.Request) (*keyEntry, bool) {
	if kr.open() {
		stripCredentials(r.Header)
		return anonymousKey, true
	}
	tok := clientToken(r)
	if tok == "" {
		return nil, false
	}
	e, ok := kr[sha256.Sum256([]byte(tok))]
	if ok {
		stripCredentials(r.Header)
	}
	return e, ok
}

// anonymousKey is every client of an open relay.
var anonymousKey = &keyEntry{name: "anonymous"}

// clientToken returns the client's key from the first credential header
// that yields one.
func clientToken(r *http.Request) string {
	for _, h := range credentialHeaders {
		v := strings.TrimSpace(r.Header.Get(h))
		if h == "Authorization" {
			if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
				v = strings.TrimSpace(v[7:])
			} else {
				v = ""
			}
		}
		if v != "" {
			return v
		}
	}
	return ""
}

// stripCredentials removes the relay credential headers. An Authorization
// header goes only when it is Bearer: Basic credentials belong to a
// `basic_auth` in front of the relay (Caddy already redacts that header in
// its logs, and the upstream never gets it).
func stripCredentials(h http.Header) {
	for _, k := range credentialHeaders {
		if k == "Authorization" {
			if v := h.Get(k); !(len(v) > 7 && strings.EqualFold(v[:7], "bearer ")) {
				continue
			}
		}
		delete(h, k)
	}
}

// defaultKeyName names the i-th configured key (from 0) that has no name.
func defaultKeyName(i int) string { return fmt.Sprintf("key-%d", i+1) }
