package llmrelay

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmrelay/caddy-llm-relay/internal/ratelimit"
)

// Per-key rate limits (`rpm`, `tpm` on a key): a token bucket a minute per
// key name and kind, in a process-wide pool keyed by the name and the
// limit, so a reload keeps what a key has used and a changed limit starts
// afresh. They are per instance; with `state redis` each instance also
// drains its buckets by what the fleet's others took, and counts their
// requests in flight (fleet.go's applyLimits, every figure checked), so
// the limits hold for the fleet within a sync interval.

var keyLimitPool = caddy.NewUsagePool()

// keyLimits are one key name's buckets (nil: no such limit) and its cap
// on requests in flight.
type keyLimits struct {
	requests, tokens *ratelimit.Bucket
	maxInFlight      int64         // 0: no cap
	inFlight         *atomic.Int64 // shared across reloads, like the buckets
	// othersInFlight is the fleet's other instances' requests in flight
	// for the name, as last read (state redis; else 0).
	othersInFlight *atomic.Int64
}

// keyInFlight is a name's requests in flight, here and (as last read)
// on the fleet's other instances.
type keyInFlight struct{ own, others atomic.Int64 }

// requestHeaders and tokenHeaders are the canonical names of the
// x-ratelimit-* headers (limit, remaining, reset): set straight into the
// header map, without canonicalising them on every request.
var (
	requestHeaders = [3]string{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"}
	tokenHeaders   = [3]string{"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"}
)

// compileKeyLimits gives every key name with an rpm or tpm its buckets.
func (h *Relay) compileKeyLimits() error {
	limits, err := keyRateLimits(h.Keys)
	if err != nil {
		return err
	}
	h.keyLimits = make(map[string]*keyLimits, len(limits))
	for name, l := range limits {
		kl := &keyLimits{maxInFlight: int64(l[2])}
		if l[2] > 0 {
			pk := name + "|inflight"
			v, _, err := keyLimitPool.LoadOrNew(pk, func() (caddy.Destructor, error) {
				return pooled[*keyInFlight]{new(keyInFlight)}, nil
			})
			if err != nil {
				return err
			}
			h.poolKeys = append(h.poolKeys, poolKey{keyLimitPool, pk})
			c := v.(pooled[*keyInFlight]).v
			kl.inFlight, kl.othersInFlight = &c.own, &c.others
		}
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

// enter admits one more request in flight, or answers 429 when the key's
// cap is reached; leave (only after an admitted enter) lets it go.
func (kl *keyLimits) enter(key string) *apiError {
	if kl == nil || kl.maxInFlight == 0 {
		return nil
	}
	if kl.inFlight.Add(1)+kl.othersInFlight.Load() > kl.maxInFlight {
		kl.inFlight.Add(-1)
		return errKeyConcurrency(key, kl.maxInFlight)
	}
	return nil
}

func (kl *keyLimits) leave() {
	if kl != nil && kl.maxInFlight > 0 {
		kl.inFlight.Add(-1)
	}
}

// takeRequest takes one request from the key's rpm and sets the request
// headers OpenAI sends; it returns the 429 when the key has no room.
func (kl *keyLimits) takeRequest(w http.ResponseWriter, key string, now time.Time) *apiError {
	if kl == nil || kl.requests == nil {
		return nil
	}
	ok, wait := kl.requests.Take(1, now)
	setLimitHeaders(w.Header(), &requestHeaders, kl.requests, now)
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
	setLimitHeaders(w.Header(), &tokenHeaders, kl.tokens, now)
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

// setLimitHeaders writes a bucket's limit, remaining and reset (a Go
// duration such as "1s" or "6m0s", as OpenAI writes them) under names.
func setLimitHeaders(h http.Header, names *[3]string, b *ratelimit.Bucket, now time.Time) {
	remaining, reset := b.State(now)
	v := make([]string, 3) // one allocation for the three values' slices
	v[0], v[1], v[2] = strconv.Itoa(b.Limit()), strconv.Itoa(remaining), reset.Round(time.Millisecond).String()
	h[names[0]], h[names[1]], h[names[2]] = v[0:1:1], v[1:2:2], v[2:3:3]
}

// balanceView is GET /v1/balance: the calling key's budget, spend and
// limits, so a client can see what it has left.
type balanceView struct {
	Object string `json:"object"` // "balance"
	Key    string `json:"key"`    // the key's name
	// Budget is the key's budget this period (absent without one).
	Budget *budgetView `json:"budget,omitempty"`
	// Spend is what the key spent today and this month (UTC).
	Spend struct {
		TodayUSD     float64 `json:"today_usd"`
		ThisMonthUSD float64 `json:"this_month_usd"`
	} `json:"spend"`
	// ReasoningBudget is the key's reasoning token budget this period
	// (absent without one; cost.go).
	ReasoningBudget *reasoningBudgetView `json:"reasoning_budget,omitempty"`
	// Limits are the key's rpm, tpm and max_concurrent (absent: none).
	Limits struct {
		RPM           *limitView `json:"rpm,omitempty"`
		TPM           *limitView `json:"tpm,omitempty"`
		MaxConcurrent *limitView `json:"max_concurrent,omitempty"`
	} `json:"limits"`
}

// budgetView is a key's budget in its current period.
type budgetView struct {
	USD          float64   `json:"usd"`
	Period       string    `json:"period"` // day or month (UTC)
	SpentUSD     float64   `json:"spent_usd"`
	RemainingUSD float64   `json:"remaining_usd"`
	ResetsAt     time.Time `json:"resets_at"`
}

// limitView is one limit: its size, what is left now, and (a bucket)
// how long until it is whole again.
type limitView struct {
	Limit     int64  `json:"limit"`
	Remaining int64  `json:"remaining"`
	Reset     string `json:"reset,omitempty"`
}

func bucketView(b *ratelimit.Bucket, now time.Time) *limitView {
	if b == nil {
		return nil
	}
	rem, reset := b.State(now)
	return &limitView{Limit: int64(b.Limit()), Remaining: int64(rem), Reset: reset.Round(time.Millisecond).String()}
}

// serveBalance answers GET /v1/balance for the calling key.
func (h *Relay) serveBalance(w http.ResponseWriter, req *requestState, key string, kl *keyLimits, now time.Time) {
	h.applyBudgets()
	v := balanceView{Object: "balance", Key: key}
	if ks, ok := ledger.Spend(key, now); ok {
		v.Spend.TodayUSD, v.Spend.ThisMonthUSD = ks.Today.Cost, ks.ThisMonth.Cost
		if ks.Budget.Limit > 0 {
			v.Budget = &budgetView{USD: ks.Budget.Limit, Period: ks.Budget.Period.String(), SpentUSD: ks.Spent,
				RemainingUSD: ks.Remaining, ResetsAt: ks.End}
		}
	}
	v.ReasoningBudget = reasoningBalance(key, now)
	if kl != nil {
		v.Limits.RPM, v.Limits.TPM = bucketView(kl.requests, now), bucketView(kl.tokens, now)
		if kl.maxInFlight > 0 {
			// This request is not one of those in flight (see serve).
			v.Limits.MaxConcurrent = &limitView{Limit: kl.maxInFlight, Remaining: max(kl.maxInFlight-kl.inFlight.Load()-kl.othersInFlight.Load(), 0)}
		}
	}
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	req.status = http.StatusOK
	_, _ = w.Write(append(b, '\n'))
}
