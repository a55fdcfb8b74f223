package llmrelay

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/llmrelay/caddy-llm-relay/internal/canary"
	"github.com/llmrelay/caddy-llm-relay/internal/health"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// A fleet's shared state, on Redis (`state redis`). Every instance that
// names the same Redis (address, db and prefix) shares:
//
//   - spend: each instance writes its own spend per key and period as an
//     absolute figure (a hash per key and period, one field per instance,
//     expiring after the period) and reads the others'. Writing absolute
//     figures makes every write idempotent: a write lost to an outage is
//     made again, whole, when Redis is back, and a write retried after a
//     timeout counts nothing twice. The request path never waits for
//     Redis: it checks the budget against the ledger, which holds this
//     instance's own spend and the others' as last read.
//   - budget alerts: an instance that raises one claims it in Redis
//     (SET NX); only the claimant logs it, so it is logged once per fleet.
//   - canary roll-outs: a step or a rollback decided anywhere is adopted
//     everywhere (canary.Adopt only moves forward). The guard's samples
//     stay per instance: they are this instance's own measurements, and
//     sharing them would put Redis on the path of every canary attempt;
//     the decision they lead to is what is shared.
//   - ejections (share_health on): a target ejected anywhere is skipped
//     everywhere until its cooldown ends; then each instance's own trial
//     decides.
//   - key limits (rpm, tpm, max_concurrent): each instance writes what
//     its buckets took, ever, and its requests in flight, per key name
//     (one hash field per instance); each drains its own buckets by what
//     the others' counters grew since it last read them, and counts the
//     others' requests in flight against max_concurrent. The fleet keeps
//     to a limit within about a sync interval of traffic.
//
// One goroutine per Redis does all of it, every fleetTick, in one
// pipelined round trip with a short timeout. When Redis is down or slow
// the relay keeps serving from its local view; the outage is logged once,
// and the state metric and the status view show it.

// fleetTick is how often canary roll-outs and ejections are pushed and
// read: a rollback decided on one instance is obeyed by the others within
// about two ticks.
const fleetTick = 250 * time.Millisecond

// fleetTimeout bounds one round trip to Redis.
const fleetTimeout = time.Second

// defaultSyncInterval is how often spend is written and read.
const defaultSyncInterval = 500 * time.Millisecond

// fleetPool holds one fleetState per Redis (address, db, prefix), shared by
// every handler naming it and kept across reloads.
var fleetPool = caddy.NewUsagePool()

// fleetState is one Redis's shared state, as this process sees it.
type fleetState struct {
	name        string // address, db and prefix, for logs and status (no password)
	prefix      string
	client      *redis.Client
	instance    string
	syncEvery   time.Duration
	shareHealth bool
	logger      *zap.Logger

	mu       sync.Mutex
	keys     map[string]bool           // key names whose spend is shared
	canaries map[string]*canary.Canary // by pool key
	targets  map[string]*health.Target // by health key
	pushed   map[string]string         // field → the JSON last written (canaries, ejections)
	alerts   []usage.Alert             // raised here, not claimed yet
	limits   map[string]*keyLimits     // key names with an rpm, tpm or max_concurrent
	// limitSeen is each other instance's counters (requests and tokens
	// taken) per key name as last read: what grew since is drained. Only
	// the run goroutine touches it.
	limitSeen map[string][2]int64
	lastSync  time.Time // spend's last successful round trip
	lastErr   string
	down      atomic.Bool

	stop chan struct{}
	done chan struct{}
}

func (f *fleetState) Destruct() error {
	close(f.stop)
	<-f.done
	return f.client.Close()
}

// fleetKeyOf names a Redis state in fleetPool.
func fleetKeyOf(c *StateConfig) string {
	return c.Address + "|" + strconv.Itoa(c.DB) + "|" + fleetPrefix(c)
}

func fleetPrefix(c *StateConfig) string {
	if c.Prefix == "" {
		return "llm_relay:"
	}
	return c.Prefix
}

// attachFleet gives the handler its shared state (state redis).
func (h *Relay) attachFleet(repl *caddy.Replacer) error {
	c := h.State
	if c == nil || c.Backend != "redis" {
		return nil
	}
	password, err := repl.ReplaceOrErr(c.Password, true, true)
	if err != nil {
		return fmt.Errorf("state redis: password: %w", err)
	}
	key := fleetKeyOf(c)
	v, _, err := fleetPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		return newFleetState(c, password, h.logger), nil
	})
	if err != nil {
		return err
	}
	h.fleet, h.fleetKey = v.(*fleetState), key
	return nil
}

func newFleetState(c *StateConfig, password string, logger *zap.Logger) *fleetState {
	opts := &redis.Options{
		Addr: c.Address, Password: password, DB: c.DB,
		DialTimeout: fleetTimeout, ReadTimeout: fleetTimeout, WriteTimeout: fleetTimeout,
		PoolSize: 2, MaxRetries: -1, // the next tick is the retry
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
	f := &fleetState{
		name:        fmt.Sprintf("redis %s db %d prefix %q", c.Address, c.DB, fleetPrefix(c)),
		prefix:      fleetPrefix(c),
		client:      redis.NewClient(opts),
		instance:    instanceID(),
		syncEvery:   durationOr(c.SyncInterval, defaultSyncInterval),
		shareHealth: c.ShareHealth == nil || *c.ShareHealth,
		logger:      logger.With(zap.String("state", "redis "+c.Address)),
		keys:        map[string]bool{},
		canaries:    map[string]*canary.Canary{},
		targets:     map[string]*health.Target{},
		pushed:      map[string]string{},
		limits:      map[string]*keyLimits{},
		limitSeen:   map[string][2]int64{},
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	go f.run()
	return f
}

// register shares a handler's keys, canaries and targets.
func (f *fleetState) register(h *Relay) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name := range h.keyBudgets {
		f.keys[name] = true
	}
	for name, kl := range h.keyLimits {
		f.limits[name] = kl
	}
	canaryPool.Range(func(k, v any) bool {
		f.canaries[k.(string)] = v.(pooled[*canary.Canary]).v
		return true
	})
	targetPool.Range(func(k, v any) bool {
		f.targets[k.(string)] = v.(pooled[*healthEntry]).v.t
		return true
	})
}

// noteKey shares the spend of a key that served a request.
func (f *fleetState) noteKey(key string) {
	f.mu.Lock()
	f.keys[key] = true
	f.mu.Unlock()
}

// claimAlert queues a budget alert raised here; the next round trip claims
// it for the fleet and logs it if this instance is the first.
func (f *fleetState) claimAlert(a usage.Alert) {
	f.mu.Lock()
	f.alerts = append(f.alerts, a)
	f.mu.Unlock()
}

func (f *fleetState) run() {
	defer close(f.done)
	t := time.NewTicker(fleetTick)
	defer t.Stop()
	var lastSpend time.Time
	for {
		now := time.Now()
		spend := now.Sub(lastSpend) >= f.syncEvery-fleetTick/2
		if f.sync(now, spend) && spend {
			lastSpend = now
		}
		select {
		case <-f.stop:
			f.sync(time.Now(), true) // this instance's last figures
			return
		case <-t.C:
		}
	}
}

// field names a canary or target in the shared hashes: a digest of its pool
// key, which holds base URLs and config details that need not leave the
// process.
func field(poolKey string) string {
	sum := sha256.Sum256([]byte(poolKey))
	return hex.EncodeToString(sum[:12])
}

// sharedCanary and sharedEjection are the shared hashes' values.
type sharedCanary struct {
	Name string `json:"name"`
	canary.Persisted
}

type sharedEjection struct {
	Name string `json:"name"`
	By   string `json:"by"` // the instance that ejected it
	health.Ejection
}

// round is one round trip's work: what was queued in the pipeline, and
// what to do with the answers.
type round struct {
	now       time.Time
	canaries  map[string]*canary.Canary // by field
	targets   map[string]*health.Target // by field
	alerts    []usage.Alert             // being claimed
	claims    []*redis.BoolCmd
	pushes    map[string]string // hash+field → value written
	canaryGet *redis.MapStringStringCmd
	ejectGet  *redis.MapStringStringCmd // nil with share_health off
	keys      []string                  // key names whose spend is shared
	spend     []spendRead               // queued reads: empty in a round without spend
	limits    []limitRead               // queued reads: empty in a round without spend
}

// limitRead is one key name's limits as this round wrote them, and every
// instance's read back.
type limitRead struct {
	name string
	kl   *keyLimits
	get  *redis.MapStringStringCmd
}

// spendRead is one key's period as this instance wrote it, and the
// fleet's figures read back.
type spendRead struct {
	key    string
	period usage.Period
	start  time.Time
	own    int64
	get    *redis.MapStringStringCmd
}

// sync makes one round trip: it pushes what changed here, reads what the
// fleet holds and adopts it (spend too when spend is set). It reports
// whether Redis answered.
func (f *fleetState) sync(now time.Time, spend bool) bool {
	r := f.newRound(now, spend)
	ctx, cancel := context.WithTimeout(context.Background(), fleetTimeout)
	defer cancel()
	pipe := f.client.Pipeline()
	f.queueRollouts(ctx, pipe, r)
	if spend {
		f.queueSpend(ctx, pipe, r)
		f.queueLimits(ctx, pipe, r)
	}
	f.queueClaims(ctx, pipe, r)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		f.failed(err)
		return false
	}
	f.recovered(now, spend)
	f.mu.Lock()
	for k, v := range r.pushes {
		f.pushed[k] = v
	}
	f.alerts = f.alerts[len(r.alerts):] // claimed; newer ones wait for the next round
	f.mu.Unlock()
	f.applyClaims(r)
	f.applyRollouts(ctx, r)
	f.applySpend(r)
	f.applyLimits(r)
	return true
}

// newRound takes what the handlers registered, under the lock.
func (f *fleetState) newRound(now time.Time, spend bool) *round {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := &round{now: now, canaries: make(map[string]*canary.Canary, len(f.canaries)),
		targets: make(map[string]*health.Target, len(f.targets)), alerts: f.alerts, pushes: map[string]string{}}
	for k, c := range f.canaries {
		r.canaries[field(k)] = c
	}
	for k, t := range f.targets {
		r.targets[field(k)] = t
	}
	for k := range f.keys {
		r.keys = append(r.keys, k)
	}
	if spend { // limits go with spend, every sync_interval
		for name, kl := range f.limits {
			r.limits = append(r.limits, limitRead{name: name, kl: kl})
		}
	}
	return r
}

// queueRollouts pushes the canary steps and rollbacks and the ejections
// decided here that Redis does not have yet, and reads the fleet's.
func (f *fleetState) queueRollouts(ctx context.Context, pipe redis.Pipeliner, r *round) {
	canaryHash, ejectHash := f.prefix+"canary", f.prefix+"eject"
	for fld, c := range r.canaries {
		p := c.Persist()
		if p.Step == 0 && p.State != canary.StateRolledBack {
			continue // where every instance starts
		}
		b, _ := json.Marshal(sharedCanary{Name: c.Name(), Persisted: p})
		if f.pushedValue(canaryHash+fld) != string(b) {
			pipe.HSet(ctx, canaryHash, fld, b)
			r.pushes[canaryHash+fld] = string(b)
		}
	}
	r.canaryGet = pipe.HGetAll(ctx, canaryHash)
	if !f.shareHealth {
		return
	}
	for fld, t := range r.targets {
		e, ok := t.Ejection(r.now)
		if !ok || strings.HasPrefix(e.Reason, fleetReasonPrefix) {
			continue // not ejected, or ejected by another instance
		}
		b, _ := json.Marshal(sharedEjection{Name: t.Name(), By: f.instance, Ejection: e})
		if f.pushedValue(ejectHash+fld) != string(b) {
			pipe.HSet(ctx, ejectHash, fld, b)
			r.pushes[ejectHash+fld] = string(b)
		}
	}
	r.ejectGet = pipe.HGetAll(ctx, ejectHash)
}

// queueSpend writes this instance's own spend per key and period (an
// absolute figure: idempotent) and reads every instance's.
func (f *fleetState) queueSpend(ctx context.Context, pipe redis.Pipeliner, r *round) {
	for _, k := range r.keys {
		own, _ := ledger.Own(k, r.now)
		if own.Day.Start.IsZero() { // no request here yet: read the fleet's
			own.Day.Start, own.Month.Start = usage.Day.Start(r.now), usage.Month.Start(r.now)
		}
		for _, w := range []struct {
			p usage.Period
			usage.WindowState
		}{{usage.Day, own.Day}, {usage.Month, own.Month}} {
			hk := f.spendKey(k, w.p, w.Start)
			if w.NanoUSD > 0 {
				pipe.HSet(ctx, hk, f.instance, w.NanoUSD)
				pipe.ExpireAt(ctx, hk, w.p.Next(w.Start).Add(time.Hour))
			}
			r.spend = append(r.spend, spendRead{key: k, period: w.p, start: w.Start, own: w.NanoUSD, get: pipe.HGetAll(ctx, hk)})
		}
	}
}

// limitStale is how old an instance's figures may be before its requests
// in flight no longer count: an instance that stopped without a last
// write (killed) does not hold a key's slots for ever.
const limitStale = 10 * time.Second

// queueLimits writes this instance's key limit counters (requests and
// tokens taken, ever; requests in flight; the time) and reads every
// instance's.
func (f *fleetState) queueLimits(ctx context.Context, pipe redis.Pipeliner, r *round) {
	for i := range r.limits {
		l := &r.limits[i]
		var req, tok, inFlight int64
		if l.kl.requests != nil {
			req = l.kl.requests.Taken()
		}
		if l.kl.tokens != nil {
			tok = l.kl.tokens.Taken()
		}
		if l.kl.inFlight != nil {
			inFlight = l.kl.inFlight.Load()
		}
		hk := f.prefix + "limits:" + l.name
		pipe.HSet(ctx, hk, f.instance, fmt.Sprintf("%d %d %d %d", req, tok, inFlight, r.now.UnixMilli()))
		pipe.Expire(ctx, hk, 10*time.Minute)
		l.get = pipe.HGetAll(ctx, hk)
	}
}

// applyLimits drains this instance's buckets by what the others took
// since the last read, and sets the others' requests in flight. An
// instance seen for the first time, or whose counters went down (it
// restarted), gives a new baseline, not a drain.
func (f *fleetState) applyLimits(r *round) {
	for _, l := range r.limits {
		var others int64
		for inst, v := range l.get.Val() {
			if inst == f.instance {
				continue
			}
			var req, tok, inFlight, at int64
			if n, _ := fmt.Sscan(v, &req, &tok, &inFlight, &at); n != 4 {
				continue
			}
			k := l.name + "|" + inst
			if last, seen := f.limitSeen[k]; seen {
				if l.kl.requests != nil && req >= last[0] {
					l.kl.requests.Drain(req-last[0], r.now)
				}
				if l.kl.tokens != nil && tok >= last[1] {
					l.kl.tokens.Drain(tok-last[1], r.now)
				}
			}
			f.limitSeen[k] = [2]int64{req, tok}
			if r.now.Sub(time.UnixMilli(at)) < limitStale {
				others += inFlight
			}
		}
		if l.kl.othersInFlight != nil {
			l.kl.othersInFlight.Store(others)
		}
	}
}

// queueClaims claims the budget alerts raised here for the fleet.
func (f *fleetState) queueClaims(ctx context.Context, pipe redis.Pipeliner, r *round) {
	r.claims = make([]*redis.BoolCmd, len(r.alerts))
	for i, a := range r.alerts {
		p, _ := usage.ParsePeriod(a.Period)
		start := p.Start(a.At)
		ak := fmt.Sprintf("%salert:%s:%s:%s:%d", f.prefix, a.Key, a.Period, start.Format("2006-01-02"), a.Threshold)
		r.claims[i] = pipe.SetNX(ctx, ak, f.instance, p.Next(start).Add(time.Hour).Sub(r.now))
	}
}

// applyClaims logs the alerts this instance claimed first.
func (f *fleetState) applyClaims(r *round) {
	for i, a := range r.alerts {
		if won, _ := r.claims[i].Result(); won {
			logBudgetAlert(f.logger, a, true)
		}
	}
}

// applyRollouts adopts the fleet's canary steps, rollbacks and ejections,
// and drops ejections long over from Redis.
func (f *fleetState) applyRollouts(ctx context.Context, r *round) {
	for fld, raw := range r.canaryGet.Val() {
		c := r.canaries[fld]
		var sc sharedCanary
		if c == nil || json.Unmarshal([]byte(raw), &sc) != nil {
			continue
		}
		ev := c.Adopt(sc.Persisted)
		if ev == nil {
			continue
		}
		fields := []zap.Field{zap.String("canary", c.Name()), zap.Float64("from_percent", ev.From),
			zap.Float64("to_percent", ev.To), zap.String("reason", ev.Reason)}
		if ev.Kind == canary.EventRollback {
			f.logger.Warn("canary rolled back by the fleet", fields...)
		} else {
			f.logger.Info("canary promoted by the fleet", fields...)
		}
	}
	if r.ejectGet == nil {
		return
	}
	var stale []string
	for fld, raw := range r.ejectGet.Val() {
		var se sharedEjection
		if json.Unmarshal([]byte(raw), &se) != nil || r.now.Sub(se.Until) > time.Minute {
			stale = append(stale, fld)
			continue
		}
		t := r.targets[fld]
		if t == nil || se.By == f.instance {
			continue
		}
		if c := t.Adopt(se.Ejection, strings.TrimSuffix(fleetReasonPrefix, ": "), r.now, health.SLO{}, defaultPolicy); c != nil {
			f.logger.Warn("target ejected by the fleet", zap.String("target", c.Target), zap.String("reason", se.Reason),
				zap.Time("until", se.Until))
		}
	}
	if len(stale) > 0 {
		f.client.HDel(ctx, f.prefix+"eject", stale...)
	}
}

// applySpend gives the ledger the other instances' spend, and takes back
// this instance's own where Redis holds more of it than the ledger does
// (a restart that lost the local state and kept the instance's ID). Alerts
// the fleet's spend reached are claimed at the next round.
func (f *fleetState) applySpend(r *round) {
	for _, s := range r.spend {
		var others, ownThere int64
		for inst, v := range s.get.Val() {
			n, _ := strconv.ParseInt(v, 10, 64)
			if inst == f.instance {
				ownThere = n
			} else {
				others += n
			}
		}
		if ownThere > s.own {
			ledger.RaiseOwn(s.key, s.period, s.start, ownThere, r.now)
		}
		if al := ledger.SetOthers(s.key, s.period, s.start, others, r.now); len(al) > 0 {
			f.mu.Lock()
			f.alerts = append(f.alerts, al...)
			f.mu.Unlock()
		}
	}
}

// fleetReasonPrefix marks an ejection adopted from the fleet, which is not
// pushed back.
const fleetReasonPrefix = "ejected by another instance: "

func (f *fleetState) pushedValue(k string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pushed[k]
}

func (f *fleetState) spendKey(key string, p usage.Period, start time.Time) string {
	return f.prefix + "spend:" + key + ":" + p.String() + ":" + start.Format("2006-01-02")
}

// failed records a failed round trip; the first of an outage is logged.
func (f *fleetState) failed(err error) {
	f.mu.Lock()
	f.lastErr = err.Error()
	f.mu.Unlock()
	metricStateErrors.Inc()
	if !f.down.Swap(true) {
		f.logger.Warn("shared state unreachable; serving from this instance's view (spend is kept and written when it is back)",
			zap.Error(err))
	}
}

// recovered records a good round trip; the end of an outage is logged.
func (f *fleetState) recovered(now time.Time, spend bool) {
	f.mu.Lock()
	if spend {
		f.lastSync = now
	}
	f.mu.Unlock()
	if f.down.Swap(false) {
		f.logger.Info("shared state reachable again; this instance's spend is written again")
	}
}

// fleetStatus is the status view's "state" object.
type fleetStatus struct {
	Backend     string    `json:"backend"` // "local", "redis" or "off"
	Redis       string    `json:"redis,omitempty"`
	Instance    string    `json:"instance"`
	Up          *bool     `json:"up,omitempty"`
	LastSync    time.Time `json:"last_sync,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	SyncEvery   string    `json:"sync_interval,omitempty"`
	ShareHealth *bool     `json:"share_health,omitempty"`
}

func (h *Relay) stateStatus() fleetStatus {
	st := fleetStatus{Backend: "local", Instance: instanceID()}
	if h.State != nil && h.State.Backend == "off" {
		st.Backend = "off"
	}
	if f := h.fleet; f != nil {
		up, share := !f.down.Load(), f.shareHealth
		f.mu.Lock()
		st.Backend, st.Redis, st.Up, st.LastSync, st.LastError = "redis", f.name, &up, f.lastSync, f.lastErr
		f.mu.Unlock()
		st.SyncEvery, st.ShareHealth = f.syncEvery.String(), &share
	}
	return st
}
