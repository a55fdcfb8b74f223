package llmrelay

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
)

// keyring maps the SHA-256 of each client token to its name. Tokens are
// compared by digest, so the lookup never branches on the secret's bytes
// and `sha256:<hex>` keys need no plaintext at all.
type keyring map[[sha256.Size]byte]string

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
			return nil, fmt.Errorf("key %q: same token as key %q", name, other)
		}
		kr[digest] = name
	}
	return kr, nil
}

// open reports whether no keys are configured, so every client is let in.
func (kr keyring) open() bool { return len(kr) == 0 }

// authenticate returns the name of the key the request presents, or ok=false.
// An open relay accepts every request under the name "anonymous".
func (kr keyring) authenticate(r *http.Request) (name string, ok bool) {
	if kr.open() {
		return "anonymous", true
	}
	tok := clientToken(r)
	if tok == "" {
		return "", false
	}
	name, ok = kr[sha256.Sum256([]byte(tok))]
	return name, ok
}

// clientToken extracts the bearer token (OpenAI SDKs) or x-api-key
// (Anthropic-style clients) from the request.
func clientToken(r *http.Request) string {
	if auth := r.Header.Get("Authorization"); auth != "" {
		if len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
			return strings.TrimSpace(auth[7:])
		}
		return ""
	}
	return strings.TrimSpace(r.Header.Get("X-Api-Key"))
}

// defaultKeyName names the i-th configured key (from 0) that has no name.
func defaultKeyName(i int) string { return fmt.Sprintf("key-%d", i+1) }
