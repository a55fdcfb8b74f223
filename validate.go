package llmrelay

import (
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"

	"cmp"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// Every semantic check of the configuration lives here (or in a resolve
// function it calls), and runs at Provision: a JSON config loaded with
// `caddy run --config x.json`, POSTed to the admin API or checked with
// `caddy validate` gets the same answer as a Caddyfile. The Caddyfile
// parser calls the same functions line by line, so its errors also name
// the line. Each error names the field and says how to fix it.

// checkConfig checks the settings of every block before anything is
// built. Checks that need the compiled state (unknown upstreams,
// duplicate aliases) run in compileRoutes with the helpers below.
func (h *Relay) checkConfig() error {
	if h.MaxBody < 0 {
		return fmt.Errorf("max_body %d is negative; give a size such as 16MiB (JSON: bytes), or leave it out for 16MiB", h.MaxBody)
	}
	for i, k := range h.Keys {
		if err := k.check(keyName(h.Keys, i)); err != nil {
			return err
		}
		if err := k.checkReasoningBudget(keyName(h.Keys, i)); err != nil {
			return err
		}
	}
	if _, err := keyBudgets(h.Keys); err != nil {
		return err
	}
	if _, err := keyReasoningBudgets(h.Keys); err != nil {
		return err
	}
	if _, err := keyRateLimits(h.Keys); err != nil {
		return err
	}
	if err := h.Failover.check(); err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	if err := h.ReasoningBudget.check(); err != nil {
		return err
	}
	if err := h.AdaptiveEffort.check(); err != nil {
		return err
	}
	if err := checkReasoningField(h.ReasoningField); err != nil {
		return err
	}
	if err := h.SLO.check(); err != nil {
		return fmt.Errorf("slo: %w", err)
	}
	if err := h.State.check(); err != nil {
		return err
	}
	if h.Resume != nil {
		if err := h.Resume.check(); err != nil {
			return err
		}
	}
	if _, err := resolveCapacity(h.Capacity); err != nil {
		return err
	}
	for model, p := range h.Prices {
		if err := checkPrice(model, p); err != nil {
			return err
		}
	}
	for _, u := range h.Upstreams {
		if u != nil {
			if err := checkMaxConcurrent(u.MaxConcurrent); err != nil {
				return fmt.Errorf("upstream %q: %w", u.Name, err)
			}
			if err := u.InlineReasoning.check(); err != nil {
				return fmt.Errorf("upstream %q: %w", u.Name, err)
			}
			if err := checkContinueWith(u.ContinueWith); err != nil {
				return fmt.Errorf("upstream %q: %w", u.Name, err)
			}
		}
		if u != nil && u.HealthCheck != nil {
			if err := checkAPI(u.API); err != nil {
				return fmt.Errorf("upstream %q: %w", u.Name, err)
			}
			if err := u.HealthCheck.check(); err != nil {
				return fmt.Errorf("upstream %q: health_check: %w", u.Name, err)
			}
		}
	}
	if err := h.checkRegionPins(); err != nil {
		return err
	}
	for _, m := range h.Models {
		if m == nil {
			continue
		}
		if err := m.check(); err != nil {
			return fmt.Errorf("model %q: %w", m.Alias, err)
		}
		if err := m.checkHandoff(); err != nil {
			return err // its errors name the model (the Caddyfile's too)
		}
		if err := m.Failover.checkModelLevel(); err != nil {
			return fmt.Errorf("model %q: failover: %w", m.Alias, err)
		}
	}
	return nil
}

// keyName is the name of the i-th configured key.
func keyName(keys []ClientKey, i int) string {
	if keys[i].Name != "" {
		return keys[i].Name
	}
	return defaultKeyName(i)
}

// check checks one key line's own budget.
func (k ClientKey) check(name string) error {
	switch {
	case math.IsNaN(k.Budget) || k.Budget < 0:
		return fmt.Errorf("key %q: budget %v is negative; give a positive amount of US dollars, or leave it out for no budget", name, k.Budget)
	case k.BudgetPeriod != "" && k.BudgetPeriod != "day" && k.BudgetPeriod != "month":
		return fmt.Errorf("key %q: budget_period %q is not a period; write day or month (Caddyfile: `budget <usd> per day|month`)", name, k.BudgetPeriod)
	case k.BudgetPeriod != "" && k.Budget == 0:
		return fmt.Errorf("key %q: budget_period %q without a budget; give budget in US dollars, or remove budget_period", name, k.BudgetPeriod)
	case k.RPM < 0 || k.TPM < 0 || k.MaxConcurrent < 0:
		return fmt.Errorf("key %q: rpm, tpm and max_concurrent must be positive (or absent for no limit)", name)
	}
	if _, err := parsePrefixes(k.AllowIP); err != nil {
		return fmt.Errorf("key %q: allow_ip: %w", name, err)
	}
	nb, err := parseKeyTime(k.NotBefore)
	if err != nil {
		return fmt.Errorf("key %q: not_before: %w", name, err)
	}
	ex, err := parseKeyTime(k.Expires)
	if err != nil {
		return fmt.Errorf("key %q: expires: %w", name, err)
	}
	if !nb.IsZero() && !ex.IsZero() && !ex.After(nb) {
		return fmt.Errorf("key %q: expires %s is not after not_before %s", name, k.Expires, k.NotBefore)
	}
	return nil
}

// parsePrefixes reads allow_ip: CIDR ranges, or addresses alone (a /32 or
// /128).
func parsePrefixes(ss []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(ss))
	for _, s := range ss {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a CIDR range (such as 10.0.0.0/8 or 2001:db8::/32)", s)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// parseKeyTime reads a not_before or expires: a date (00:00 UTC) or an
// RFC 3339 time; "" is no bound.
func parseKeyTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a date; write 2027-03-01 (00:00 UTC) or 2027-03-01T12:00:00Z", s)
	}
	return t, nil
}

// keyRateLimits merges the key lines' rpm, tpm and max_concurrent by
// name, as keyBudgets merges budgets: a limit on one line applies to the
// name; two different ones fail.
func keyRateLimits(keys []ClientKey) (map[string][3]int, error) {
	limits := map[string][3]int{}
	for i, k := range keys {
		name := keyName(keys, i)
		cur := limits[name]
		for j, v := range [3]int{k.RPM, k.TPM, k.MaxConcurrent} {
			switch {
			case v == 0:
			case cur[j] == 0:
				cur[j] = v
			case cur[j] != v:
				return nil, fmt.Errorf("key %q: %s %d conflicts with %d on an earlier key of the same name; keys of one name share one limit: give the same on each line, or on one line only",
					name, [3]string{"rpm", "tpm", "max_concurrent"}[j], v, cur[j])
			}
		}
		if cur != [3]int{} {
			limits[name] = cur
		}
	}
	return limits, nil
}

// keyBudgets merges the key lines' budgets by name: one name is one
// principal (a team rotating its token has two lines of one name, both
// valid for a while), with one budget and one spend. A budget on one line
// applies to the name; two different budgets for one name fail.
func keyBudgets(keys []ClientKey) (map[string]usage.Budget, error) {
	budgets := make(map[string]usage.Budget, len(keys))
	for i, k := range keys {
		name := keyName(keys, i)
		b := usage.Budget{Limit: k.Budget, Period: usage.Day}
		if k.BudgetPeriod == "month" {
			b.Period = usage.Month
		}
		prev, seen := budgets[name]
		switch {
		case !seen || prev.Limit == 0:
			budgets[name] = b
		case b.Limit == 0:
			// keeps the budget of an earlier line of this name
		case b != prev:
			return nil, fmt.Errorf("key %q: budget %s conflicts with %s on an earlier key of the same name; keys of one name share one budget and one spend: give the same budget on each line, or on one line only", name, b, prev)
		}
	}
	return budgets, nil
}

// check checks the failover block (nil: the defaults).
func (f *Failover) check() error {
	if f == nil {
		return nil
	}
	if len(f.On) > 0 {
		if _, err := parseTriggers(f.On); err != nil {
			return fmt.Errorf("on: %w", err)
		}
	}
	if f.Attempts < 0 {
		return fmt.Errorf("attempts %d is negative; give a positive whole number, or leave it out for the chain's length", f.Attempts)
	}
	if err := checkAttempts(f.Attempts); err != nil {
		return err
	}
	if err := f.checkContinuation(); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		v    caddy.Duration
	}{{"backoff_base", f.BackoffBase}, {"backoff_max", f.BackoffMax}, {"first_byte_timeout", f.FirstByteTimeout},
		{"try_duration", f.TryDuration}, {"stream_idle_timeout", f.StreamIdleTimeout}} {
		if err := checkDuration(d.name, d.v); err != nil {
			return err
		}
	}
	for _, d := range []struct {
		f floor
		v caddy.Duration
	}{{floorFirstByte, f.FirstByteTimeout}, {floorTryDuration, f.TryDuration}, {floorStreamIdle, f.StreamIdleTimeout}} {
		if err := d.f.check(d.v); err != nil {
			return err
		}
	}
	_, err := resolveBackoff(f)
	return err
}

// checkDuration rejects a negative duration; 0 means the default.
func checkDuration(name string, d caddy.Duration) error {
	if d < 0 {
		return fmt.Errorf("%s %s is negative; give a positive duration such as 2s, or leave it out for the default", name, time.Duration(d))
	}
	return nil
}

// Floors and ceilings. Every interval a config may set has a floor and
// every count a ceiling, refused at load with the fix: a typo (1ns for 1s,
// a zero too many) must not become load on a provider (probes and
// attempts carry the provider's key), on a client (keep-alive lines) or
// on the relay itself (a window of a billion samples is gigabytes).
var (
	floorProbeInterval = floor{"interval", time.Second, "30s", "each probe is a request to the provider, with its key"}
	floorProbeTimeout  = floor{"timeout", 100 * time.Millisecond, "5s", "a probe cannot answer sooner"}
	floorHeartbeat     = floor{"heartbeat", 50 * time.Millisecond, "15s, or 0 to turn it off", "keep-alive lines more often than 20 a second keep no connection open any longer"}
	floorEarlyCommit   = floor{"early_commit", 50 * time.Millisecond, "no early commit", "it starts heartbeats; sooner than that, failover behind them has not begun"}
	floorMinInterval   = floor{"min_interval", time.Millisecond, "30ms", "emissions closer than that are one to any client"}
	floorFirstByte     = floor{"first_byte_timeout", 100 * time.Millisecond, "30s", "every attempt cut off sooner is a request the provider still works on"}
	floorTryDuration   = floor{"try_duration", 100 * time.Millisecond, "60s", "no chain can answer sooner"}
	floorStreamIdle    = floor{"stream_idle_timeout", 100 * time.Millisecond, "5m", "reasoning models pause for longer between events"}
)

// The ceilings of counts.
const (
	// maxAttempts bounds failover.attempts: each attempt is a request
	// to a provider.
	maxAttempts = 20
	// maxWindow bounds the samples an SLO or canary window keeps (each
	// target holds a ring of this many).
	maxWindow = 10000
)

// floor is the least value an interval may be set to.
type floor struct {
	name string
	min  time.Duration
	dflt string // what leaving it out means
	why  string // why less is refused
}

// check rejects d below the floor; 0 is "not set" (the default, or off).
func (f floor) check(d caddy.Duration) error {
	if d == 0 || time.Duration(d) >= f.min {
		return nil
	}
	return fmt.Errorf("%s %s is below its floor of %s (%s); give %s or more, or leave it out for %s", f.name, time.Duration(d), f.min, f.why, f.min, f.dflt)
}

// checkAttempts checks failover.attempts against its ceiling.
func checkAttempts(n int) error {
	if n > maxAttempts {
		return fmt.Errorf("attempts %d is above its ceiling of %d (each attempt is a request to a provider); give %d or fewer, or leave it out for the chain's length", n, maxAttempts, maxAttempts)
	}
	return nil
}

// checkWindow checks an SLO's or canary guard's window or min_samples
// against its ceiling.
func checkWindow(name string, n int) error {
	if n > maxWindow {
		return fmt.Errorf("%s %d is above its ceiling of %d samples (each target keeps a ring of them); give %d or fewer", name, n, maxWindow, maxWindow)
	}
	return nil
}

// resolveBackoff applies the backoff defaults and checks that the cap is
// not below the base (a base given alone may pass the default cap).
func resolveBackoff(f *Failover) (backoffPolicy, error) {
	b := backoffPolicy{base: defaultBackoffBase, max: defaultBackoffMax}
	if f != nil && f.BackoffBase > 0 {
		b.base = time.Duration(f.BackoffBase)
	}
	if f != nil && f.BackoffMax > 0 {
		b.max = time.Duration(f.BackoffMax)
	}
	if b.max < b.base {
		return b, fmt.Errorf("backoff: max %s is below base %s; give a max at least the base (Caddyfile: `backoff <base> <max>`; JSON: backoff_base, backoff_max)", b.max, b.base)
	}
	return b, nil
}

// check checks a reasoning_budget (nil: none).
func (b *ReasoningBudget) check() error {
	if b == nil {
		return nil
	}
	if b.Tokens < 1 {
		return fmt.Errorf("reasoning_budget: %d is not a positive number of tokens; give tokens of 1 or more", b.Tokens)
	}
	if _, err := pace.ParseBudgetAction(b.Action); err != nil {
		return fmt.Errorf("reasoning_budget: unknown action %q; write truncate, failover or error", b.Action)
	}
	return nil
}

// efforts are the reasoning_effort values OpenAI-compatible APIs accept.
var efforts = map[string]bool{"none": true, "minimal": true, "low": true, "medium": true, "high": true}

const effortWords = "none, minimal, low, medium or high"

// check checks an adaptive_effort block (nil: none).
func (a *AdaptiveEffort) check() error {
	if a == nil {
		return nil
	}
	for i, r := range a.Rules {
		var prev *EffortRule
		if i > 0 {
			prev = &a.Rules[i-1]
		}
		if err := checkEffortRule(prev, r); err != nil {
			return err
		}
	}
	if a.Else != "" {
		if err := checkEffort("adaptive_effort else", a.Else); err != nil {
			return err
		}
	}
	if err := checkClientEffort(a.ClientEffort); err != nil {
		return err
	}
	if len(a.Rules) == 0 && a.Else == "" {
		return fmt.Errorf("adaptive_effort: no rules; add at least one `below <tokens> <effort>` or `else <effort>` (JSON: rules, else)")
	}
	return nil
}

// checkEffortRule checks one `below` rule against the one before it.
func checkEffortRule(prev *EffortRule, r EffortRule) error {
	if r.Below < 1 {
		return fmt.Errorf("adaptive_effort below %d: not a positive number of tokens; give 1 or more", r.Below)
	}
	if err := checkEffort(fmt.Sprintf("adaptive_effort below %d", r.Below), r.Effort); err != nil {
		return err
	}
	if prev != nil && prev.Below >= r.Below {
		return fmt.Errorf("adaptive_effort below %d: after below %d; list the rules in increasing order of tokens", r.Below, prev.Below)
	}
	return nil
}

func checkEffort(what, e string) error {
	if !efforts[e] {
		return fmt.Errorf("%s: unknown effort %q; write %s", what, e, effortWords)
	}
	return nil
}

func checkClientEffort(v string) error {
	if v != "" && v != "keep" && v != "override" {
		return fmt.Errorf("adaptive_effort client_effort %q: write keep or override", v)
	}
	return nil
}

// checkPrice checks one price table entry.
func checkPrice(model string, p Price) error {
	if model == "" {
		return fmt.Errorf("price: a model name is required; use the model sent upstream, or a prefix ending in *")
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"input", p.Input}, {"output", p.Output}, {"cached_input", p.CachedInput}, {"cache_write", p.CacheWrite}} {
		if err := checkPriceField(model, f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

func checkPriceField(model, field string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return fmt.Errorf("price %s: %s %v is not an amount; give US dollars per million tokens, 0 or more", model, field, v)
	}
	return nil
}

// check checks an slo block (nil: none). 0 leaves a setting unjudged or
// at its default.
func (s *SLO) check() error {
	if s == nil {
		return nil
	}
	if err := checkDuration("ttft", s.TTFT); err != nil {
		return err
	}
	if s.Success != 0 {
		if err := checkRatio("success", s.Success); err != nil {
			return err
		}
	}
	if err := s.checkReasoning(); err != nil {
		return err
	}
	if s.Window < 0 || s.MinSamples < 0 {
		return fmt.Errorf("window %d, min_samples %d: give positive whole numbers, or leave them out for 50 and 10", s.Window, s.MinSamples)
	}
	if err := checkWindow("window", s.Window); err != nil {
		return err
	}
	if err := checkWindow("min_samples", s.MinSamples); err != nil {
		return err
	}
	return nil
}

// checkSLOSamples checks a resolved SLO: a window smaller than
// min_samples would never be judged.
func checkSLOSamples(window, minSamples int) error {
	if minSamples > window {
		return fmt.Errorf("slo: min_samples %d is larger than window %d, so the SLO is never judged; lower min_samples or raise window", minSamples, window)
	}
	return nil
}

// checkRatio checks a share in (0, 1].
func checkRatio(what string, f float64) error {
	if math.IsNaN(f) || f <= 0 || f > 1 {
		return fmt.Errorf("%s %v is not a ratio; write it like 0.95 (Caddyfile: also 95%%)", what, f)
	}
	return nil
}

// checkPercent checks a share of requests in [0, 100].
func checkPercent(what string, f float64) error {
	if math.IsNaN(f) || f < 0 || f > 100 {
		return fmt.Errorf("%s %v is not a percentage; give a number between 0 and 100", what, f)
	}
	return nil
}

// check checks a health_check block.
func (hc *HealthCheck) check() error {
	if err := checkHealthURI(hc.URI); err != nil {
		return err
	}
	if err := checkDuration("interval", hc.Interval); err != nil {
		return err
	}
	if err := checkDuration("timeout", hc.Timeout); err != nil {
		return err
	}
	if err := floorProbeInterval.check(hc.Interval); err != nil {
		return err
	}
	return floorProbeTimeout.check(hc.Timeout)
}

func checkHealthURI(uri string) error {
	if uri != "" && !strings.HasPrefix(uri, "/") {
		return fmt.Errorf("uri %q: write a path relative to the base URL, such as /models", uri)
	}
	return nil
}

// checkUpstreamName checks an upstream's name against those before it.
func checkUpstreamName(name string, seen map[string]bool) error {
	if name == "" {
		return fmt.Errorf("upstream: a name is required; give each upstream a unique name")
	}
	if seen[name] {
		return fmt.Errorf("upstream %q is defined twice; give each upstream a unique name", name)
	}
	return nil
}

// checkModelAlias checks a model's alias against those before it.
func checkModelAlias(alias string, seen map[string]bool) error {
	if alias == "" {
		return fmt.Errorf("model: an alias is required; give the model name clients use, or * for any")
	}
	if seen[alias] {
		return fmt.Errorf("model %q is defined twice; list all its targets in one block", alias)
	}
	return nil
}

// errNoTargets is a model without `to` lines.
func errNoTargets(alias string) error {
	return fmt.Errorf("model %q has no targets; add `to <upstream> [<upstream_model>]` in its block (JSON: targets)", alias)
}

// errUnknownUpstream is a `to`, `canary` or `shadow` naming no upstream;
// what is "" for `to`.
func errUnknownUpstream(alias, what, up string) error {
	if what != "" {
		what += ": "
	}
	return fmt.Errorf("model %q: %sunknown upstream %q; define it with `upstream %s <base_url>`", alias, what, up, up)
}

// check checks a model's own blocks (not its upstream names).
func (m *ModelRoute) check() error {
	for j, t := range m.Targets {
		if err := t.check(); err != nil {
			return fmt.Errorf("target %d: %w", j+1, err)
		}
	}
	for j, t := range m.Reason {
		if err := t.check(); err != nil {
			return fmt.Errorf("reason target %d: %w", j+1, err)
		}
	}
	if err := m.ReasoningBudget.check(); err != nil {
		return err
	}
	if err := m.AdaptiveEffort.check(); err != nil {
		return err
	}
	if err := checkReasoningField(m.ReasoningField); err != nil {
		return err
	}
	if err := m.SLO.check(); err != nil {
		return fmt.Errorf("slo: %w", err)
	}
	if err := m.Canary.check(); err != nil {
		return fmt.Errorf("canary: %w", err)
	}
	if err := m.Shadow.check(); err != nil {
		return fmt.Errorf("shadow: %w", err)
	}
	return nil
}

// check checks a target's rank, weight and max_concurrent (0: the default).
func (t Target) check() error {
	if err := checkMaxConcurrent(t.MaxConcurrent); err != nil {
		return err
	}
	if err := t.InlineReasoning.check(); err != nil {
		return err
	}
	if t.Rank < 0 {
		return fmt.Errorf("rank %d is negative; give a positive whole number", t.Rank)
	}
	if t.Weight < 0 {
		return fmt.Errorf("weight %d is negative; give a positive whole number", t.Weight)
	}
	for _, field := range t.Unset {
		if err := checkFieldPath(field); err != nil {
			return fmt.Errorf("unset %s: %w", field, err)
		}
	}
	return nil
}

// check checks what compileCanaryShadow does not: a canary keyed on a
// client credential header would put every request in one bucket, since
// the relay removes those headers once the client is authenticated.
func (c *Canary) check() error {
	if c == nil {
		return nil
	}
	if name, ok := strings.CutPrefix(c.Key, "header:"); ok {
		if err := checkCanaryHeader(name); err != nil {
			return err
		}
	}
	if err := checkWindow("guard window", c.Guard.Window); err != nil {
		return err
	}
	if err := checkWindow("guard min_samples", c.Guard.MinSamples); err != nil {
		return err
	}
	return c.checkRollout()
}

func checkCanaryHeader(name string) error {
	for _, h := range credentialHeaders {
		if http.CanonicalHeaderKey(name) == h {
			return fmt.Errorf("key header %s: the relay removes client credentials once it has authenticated the request, so every request would land in one bucket; use `key client_ip`, `key body user` or another header", name)
		}
	}
	return nil
}

// check checks a shadow line.
func (s *Shadow) check() error {
	if s == nil {
		return nil
	}
	if err := checkPercent("percent", s.Percent); err != nil {
		return err
	}
	if s.Percent == 0 {
		return fmt.Errorf("percent 0 sends it nothing; give a percentage above 0")
	}
	if s.MaxConcurrent < 0 {
		return fmt.Errorf("max_concurrent %d is negative; give a positive whole number, or leave it out for 4", s.MaxConcurrent)
	}
	if s.WarnSimilarity != 0 {
		if err := checkRatio("warn_similarity", s.WarnSimilarity); err != nil {
			return fmt.Errorf("%w (or leave it out: no similarity warning)", err)
		}
	}
	return nil
}

// checkReasoningField validates a reasoning_field.
func checkReasoningField(f string) error {
	switch f {
	case "", chat.FieldReasoningContent, chat.FieldReasoning, chat.ReasoningBoth, chat.ReasoningInline:
		return nil
	}
	return fmt.Errorf("reasoning_field %q is not known; use reasoning_content (DeepSeek's and SGLang's name), reasoning (vLLM's, OpenRouter's and Ollama's), both (the two names, same text) or inline (<think> tags in content)", f)
}

// check validates the state setting, for both config forms.
func (s *StateConfig) check() error {
	if s == nil {
		return nil
	}
	switch s.Backend {
	case "", "local", "off":
		if s.Address != "" || s.Password != "" || s.DB != 0 || s.Prefix != "" || s.TLS || s.SyncInterval != 0 || s.ShareHealth != nil {
			return fmt.Errorf("state %s: address, password, db, prefix, tls, sync_interval and share_health are settings of state redis", cmp.Or(s.Backend, "local"))
		}
		if s.Mode != "" || s.MasterName != "" || len(s.Addresses) > 0 || s.SentinelPassword != "" {
			return fmt.Errorf("state %s: mode, master_name, addresses and sentinel_password are settings of state redis", cmp.Or(s.Backend, "local"))
		}
		return nil
	case "redis":
	default:
		return fmt.Errorf("state: unknown backend %q; expected off, local or redis (JSON: state.backend)", s.Backend)
	}
	if s.Mode != "" {
		if err := s.checkRedisMode(); err != nil {
			return err
		}
	} else if err := s.checkRedisSingle(); err != nil {
		return err
	}
	switch {
	case s.Mode == "" && s.Address == "":
		return fmt.Errorf("state redis: an address is required (host:port, or unix:/path/to/redis.sock)")
	case s.DB < 0:
		return fmt.Errorf("state redis: db %d is negative; Redis databases are numbered from 0", s.DB)
	case s.SyncInterval < 0:
		return fmt.Errorf("state redis: sync_interval %s is negative; leave it out for %s", time.Duration(s.SyncInterval), defaultSyncInterval)
	case s.SyncInterval > 0 && time.Duration(s.SyncInterval) < fleetTick:
		return fmt.Errorf("state redis: sync_interval %s is shorter than %s, the shared state's tick; give %s or more", time.Duration(s.SyncInterval), fleetTick, fleetTick)
	}
	if s.Mode != "" {
		return nil // checkRedisMode checked the addresses
	}
	if strings.HasPrefix(s.Address, "unix:") || strings.HasPrefix(s.Address, "/") {
		return nil
	}
	if _, port, err := net.SplitHostPort(s.Address); err != nil || port == "" {
		return fmt.Errorf("state redis: address %q: want host:port (e.g. 127.0.0.1:6379) or unix:/path/to/redis.sock", s.Address)
	}
	return nil
}
