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
	lastSync time.Time                 // spend's last successful round trip
	lastErr  string
	down     atomic.Bool

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

// sync makes one round trip: it pushes what changed here, reads what the
// fleet holds and adopts it. It reports whether Redis answered.
func (f *fleetState) sync(now time.Time, spend bool) bool {
	f.mu.Lock()
	keys := make([]string, 0, len(f.keys))
	for k := range f.keys {
		keys = append(keys, k)
	}
	canaries := make(map[string]*canary.Canary, len(f.canaries))
	for k, c := range f.canaries {
		canaries[field(k)] = c
	}
	targets := make(map[string]*health.Target, len(f.targets))
	for k, t := range f.targets {
		targets[field(k)] = t
	}
	alerts := f.alerts
	f.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), fleetTimeout)
	defer cancel()
	canaryHash, ejectHash := f.prefix+"canary", f.prefix+"eject"
	pushes := map[string]string{}
	pipe := f.client.Pipeline()
	for fld, c := range canaries {
		p := c.Persist()
		if p.Step == 0 && p.State != canary.StateRolledBack {
			continue
		}
		b, _ := json.Marshal(sharedCanary{Name: c.Name(), Persisted: p})
		if f.pushedValue(canaryHash+fld) != string(b) {
			pipe.HSet(ctx, canaryHash, fld, b)
			pushes[canaryHash+fld] = string(b)
		}
	}
	if f.shareHealth {
		for fld, t := range targets {
			e, ok := t.Ejection(now)
			if !ok {
				continue
			}
			b, _ := json.Marshal(sharedEjection{Name: t.Name(), By: f.instance, Ejection: e})
			if !strings.HasPrefix(e.Reason, fleetReasonPrefix) && f.pushedValue(ejectHash+fld) != string(b) {
				pipe.HSet(ctx, ejectHash, fld, b)
				pushes[ejectHash+fld] = string(b)
			}
		}
	}
	canaryRead := pipe.HGetAll(ctx, canaryHash)
	var ejectRead *redis.MapStringStringCmd
	if f.shareHealth {
		ejectRead = pipe.HGetAll(ctx, ejectHash)
	}
	type spendRead struct {
		key    string
		period usage.Period
		start  time.Time
		own    int64
		cmd    *redis.MapStringStringCmd
	}
	var reads []spendRead
	if spend {
		for _, k := range keys {
			own, _ := ledger.Own(k, now)
			if own.Day.Start.IsZero() { // a key with no request here yet: read the fleet's
				own.Day.Start, own.Month.Start = usage.Day.Start(now), usage.Month.Start(now)
			}
			for p, w := range map[usage.Period]usage.WindowState{usage.Day: own.Day, usage.Month: own.Month} {
				hk := f.spendKey(k, p, w.Start)
				if w.NanoUSD > 0 {
					pipe.HSet(ctx, hk, f.instance, w.NanoUSD)
					pipe.ExpireAt(ctx, hk, p.Next(w.Start).Add(time.Hour))
				}
				reads = append(reads, spendRead{key: k, period: p, start: w.Start, own: w.NanoUSD, cmd: pipe.HGetAll(ctx, hk)})
			}
		}
	}
	claims := make([]*redis.BoolCmd, len(alerts))
	for i, a := range alerts {
		p, _ := usage.ParsePeriod(a.Period)
		start := p.Start(a.At)
		ak := fmt.Sprintf("%salert:%s:%s:%s:%d", f.prefix, a.Key, a.Period, start.Format("2006-01-02"), a.Threshold)
		claims[i] = pipe.SetNX(ctx, ak, f.instance, p.Next(start).Add(time.Hour).Sub(now))
	}
	_, err := pipe.Exec(ctx)
	if err != nil && !errors.Is(err, redis.Nil) {
		f.failed(err)
		return false
	}
	f.recovered(now, spend)

	f.mu.Lock()
	for k, v := range pushes {
		f.pushed[k] = v
	}
	f.alerts = f.alerts[len(alerts):]
	f.mu.Unlock()

	for i, a := range alerts {
		if won, _ := claims[i].Result(); won {
			logBudgetAlert(f.logger, a, true)
		}
	}
	for fld, raw := range canaryRead.Val() {
		c := canaries[fld]
		var sc sharedCanary
		if c == nil || json.Unmarshal([]byte(raw), &sc) != nil {
			continue
		}
		if ev := c.Adopt(sc.Persisted); ev != nil {
			f.logger.Warn("canary "+map[string]string{canary.EventRollback: "rolled back", canary.EventPromote: "promoted"}[ev.Kind]+" by the fleet",
				zap.String("canary", c.Name()), zap.Float64("from_percent", ev.From), zap.Float64("to_percent", ev.To), zap.String("reason", ev.Reason))
		}
	}
	if ejectRead != nil {
		var stale []string
		for fld, raw := range ejectRead.Val() {
			var se sharedEjection
			if json.Unmarshal([]byte(raw), &se) != nil || now.Sub(se.Until) > time.Minute {
				stale = append(stale, fld)
				continue
			}
			t := targets[fld]
			if t == nil || se.By == f.instance {
				continue
			}
			se.Reason = strings.TrimPrefix(se.Reason, fleetReasonPrefix)
			if c := t.Adopt(se.Ejection, strings.TrimSuffix(fleetReasonPrefix, ": "), now, health.SLO{}, defaultPolicy); c != nil {
				f.logger.Warn("target ejected by the fleet", zap.String("target", c.Target), zap.String("reason", se.Reason),
					zap.Time("until", se.Until))
			}
		}
		if len(stale) > 0 {
			f.client.HDel(ctx, ejectHash, stale...)
		}
	}
	for _, r := range reads {
		var others, ownThere int64
		for inst, v := range r.cmd.Val() {
			n, _ := strconv.ParseInt(v, 10, 64)
			if inst == f.instance {
				ownThere = n
			} else {
				others += n
			}
		}
		if ownThere > r.own {
			// Our own figure from before a restart that lost the local
			// state: count from it, or the next write would lower it.
			ledger.RaiseOwn(r.key, r.period, r.start, ownThere, now)
		}
		if al := ledger.SetOthers(r.key, r.period, r.start, others, now); len(al) > 0 {
			f.mu.Lock()
			f.alerts = append(f.alerts, al...) // claimed at the next round trip
			f.mu.Unlock()
		}
	}
	return true
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
