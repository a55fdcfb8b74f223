package llmrelay

import (
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmrelay/caddy-llm-relay/internal/ratelimit"
)

// Per-key rate limits (`rpm`, `tpm` on a key): a token bucket a minute per
// key name and kind, in a process-wide pool keyed by the name and the
// limit, so a reload keeps what a key has used and a changed limit starts
// afresh. They are per instance.

var keyLimitPool = caddy.NewUsagePool()

// keyLimits are one key name's buckets (nil: no such limit).
type keyLimits struct {
	requests, tokens *ratelimit.Bucket
}

// limitHeaders are the canonical names of the x-ratelimit-* headers, per
// kind: set straight into the header map, without canonicalising them on
// every request.
var limitHeaders = map[string][3]string{
	"requests": {"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"},
	"tokens":   {"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"},
}

// compileKeyLimits gives every key name with an rpm or tpm its buckets.
func (h *Relay) compileKeyLimits() error {
	limits, err := keyRateLimits(h.Keys)
	if err != nil {
		return err
	}
	h.keyLimits = make(map[string]*keyLimits, len(limits))
	for name, l := range limits {
		kl := &keyLimits{}
		for i, b := range []**ratelimit.Bucket{&kl.requests, &kl.tokens} {
			if l[i] == 0 {
				continue
			}
			pk := name + "|" + [2]string{"rpm", "tpm"}[i] + "|" + strconv.Itoa(l[i])
			v, _, err := keyLimitPool.LoadOrNew(pk, func() (caddy.Destructor, error) {
				return pooled[*ratelimit.Bucket]{ratelimit.NewBucket(l[i], time.Now())}, nil
			})
			if err != nil {
				return err
			}
			h.poolKeys = append(h.poolKeys, poolKey{keyLimitPool, pk})
			*b = v.(pooled[*ratelimit.Bucket]).v
		}
		h.keyLimits[name] = kl
	}
	return nil
}

// takeRequest takes one request from the key's rpm and sets the request
// headers OpenAI sends; it returns the 429 when the key has no room.
func (kl *keyLimits) takeRequest(w http.ResponseWriter, key string, now time.Time) *apiError {
	if kl == nil || kl.requests == nil {
		return nil
	}
	ok, wait := kl.requests.Take(1, now)
	setLimitHeaders(w.Header(), "requests", kl.requests, now)
	if !ok {
		return errKeyRateLimited(key, "requests", kl.requests.Limit(), wait)
	}
	return nil
}

// takeTokens takes a request's estimated tokens from the key's tpm, as
// takeRequest does.
func (kl *keyLimits) takeTokens(w http.ResponseWriter, key string, estimate int, now time.Time) *apiError {
	if kl == nil || kl.tokens == nil {
		return nil
	}
	ok, wait := kl.tokens.Take(estimate, now)
	setLimitHeaders(w.Header(), "tokens", kl.tokens, now)
	if !ok {
		return errKeyRateLimited(key, "tokens", kl.tokens.Limit(), wait)
	}
	return nil
}

// settleTokens sets the tpm right once a request's usage is known.
func (kl *keyLimits) settleTokens(estimate, used int, now time.Time) {
	if kl != nil && kl.tokens != nil && estimate > 0 {
		kl.tokens.Adjust(used-estimate, now)
	}
}

// setLimitHeaders writes x-ratelimit-limit-<what>, -remaining- and
// -reset- (a Go duration such as "1s" or "6m0s", as OpenAI writes them).
func setLimitHeaders(h http.Header, what string, b *ratelimit.Bucket, now time.Time) {
	remaining, reset := b.State(now)
	names := limitHeaders[what]
	v := make([]string, 3) // one allocation for the three values' slices
	v[0], v[1], v[2] = strconv.Itoa(b.Limit()), strconv.Itoa(remaining), reset.Round(time.Millisecond).String()
	h[names[0]], h[names[1]], h[names[2]] = v[0:1:1], v[1:2:2], v[2:3:3]
}
