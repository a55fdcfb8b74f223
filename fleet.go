package llmrelay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	"github.com/llmrelay/caddy-llm-relay/internal/sharedstate"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// A fleet's shared state, on Redis (`state redis`: one server, Sentinel
// or Cluster, redismodes.go). Every instance that names the same Redis
// (address or mode and addresses, db and prefix) shares:
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
//     everywhere (canary.Adopt only moves forward), and so is the earliest
//     start of a phase (the first phase began when the first instance
//     began it). The guard's samples
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
//
// Others write under the prefix too: another application, a relay of an
// older layout, an instance whose clock is off. So every key is a
// command of its own in the round trip (the shared state script of
// internal/sharedstate: it writes and reads a hash within size bounds and
// leaves a key of another type alone), and every value read is checked
// before it is used. A key or field that fails is skipped and named, in
// one WARN line and in the status view, until it changes or is put
// right; everything else keeps syncing.

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
	name   string // mode, addresses, db and prefix, for logs and status (no password)
	prefix string
	client redis.UniversalClient
	// dial connects another client to the same Redis, in the same mode,
	// with poolSize connections per node (the stream journal's).
	dial        func(poolSize int) redis.UniversalClient
	script      clusterScript // under Cluster (redismodes.go)
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
	// firstDue: a canary at its first phase whose field was, at the last
	// read, absent or behind this instance's (canary.Persisted.Ahead).
	// Only then is its first phase pushed: every instance starts there,
	// and a write from each would overwrite a roll-out further along
	// more often than it tells anyone anything.
	firstDue map[string]bool
	// limitSeen is each other instance's key limit figures per key name
	// and instance as last read: what the counters grew since is drained,
	// and when they last changed says whether its requests in flight
	// count. Only the run goroutine touches it.
	limitSeen map[string]map[string]sharedstate.Peer
	lastSync  time.Time // spend's last successful round trip
	lastErr   string    // the last failed round's error, until a round goes through
	down      atomic.Bool
	// problems are the keys and fields skipped, as last read.
	problems sharedstate.Problems
	// noScriptsUntil: Redis refused the shared state script; plain
	// commands until then. scriptsWarned: that was logged.
	noScriptsUntil time.Time
	scriptsWarned  bool

	stop chan struct{}
	done chan struct{}
}

func (f *fleetState) Destruct() error {
	close(f.stop)
	<-f.done
	return f.client.Close()
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
	sentinelPassword, err := repl.ReplaceOrErr(c.SentinelPassword, true, true)
	if err != nil {
		return fmt.Errorf("state redis: sentinel_password: %w", err)
	}
	key := fleetKeyOf(c)
	v, _, err := fleetPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		return newFleetState(c, password, sentinelPassword, h.logger), nil
	})
	if err != nil {
		return err
	}
	h.fleet, h.fleetKey = v.(*fleetState), key
	return nil
}

func newFleetState(c *StateConfig, password, sentinelPassword string, logger *zap.Logger) *fleetState {
	f := &fleetState{
		name:   redisName(c),
		prefix: fleetPrefix(c),
		client: newRedisClient(c, password, sentinelPassword),
		dial: func(poolSize int) redis.UniversalClient {
			return newRedisClientPool(c, password, sentinelPassword, poolSize)
		},
		instance:    instanceID(),
		syncEvery:   durationOr(c.SyncInterval, defaultSyncInterval),
		shareHealth: c.ShareHealth == nil || *c.ShareHealth,
		logger:      logger.With(zap.String("state", "redis "+redisTarget(c))),
		keys:        map[string]bool{},
		canaries:    map[string]*canary.Canary{},
		targets:     map[string]*health.Target{},
		pushed:      map[string]string{},
		firstDue:    map[string]bool{},
		limits:      map[string]*keyLimits{},
		limitSeen:   map[string]map[string]sharedstate.Peer{},
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
// what to do with the answers. Every key is one command of its own (the
// shared state script, or plain commands where Redis refuses scripts),
// so a key that cannot be read or written is that key's problem, not the
// round's.
type round struct {
	now      time.Time
	canaries map[string]*canary.Canary // by field
	targets  map[string]*health.Target // by field
	alerts   []usage.Alert             // being claimed
	claims   []*claimOp
	canaryOp *hashOp
	ejectOp  *hashOp     // nil with share_health off
	keys     []string    // key names whose spend is shared
	spend    []spendRead // queued: empty in a round without spend
	limits   []limitRead // queued: empty in a round without spend
	load     *redis.StringCmd
	ops      []fleetOp
	problems map[string][]sharedstate.Problem // by key, for every key read

	// reasoning: the reasoning tokens of keys with a reasoning budget,
	// queued with spend (cost.go).
	reasoning []spendRead
}

// limitRead is one key name's limits as this round wrote them, and every
// instance's read back.
type limitRead struct {
	name string
	kl   *keyLimits
	op   *hashOp
}

// spendRead is one key's period as this instance wrote it, and the
// fleet's figures read back.
type spendRead struct {
	key    string
	period usage.Period
	start  time.Time
	own    int64
	op     *hashOp
}

// sync makes one round trip: it pushes what changed here, reads what the
// fleet holds and adopts it (spend too when spend is set). It reports
// whether the round went through.
func (f *fleetState) sync(now time.Time, spend bool) bool {
	r := f.newRound(now, spend)
	ctx, cancel := context.WithTimeout(context.Background(), fleetTimeout)
	defer cancel()
	pipe := f.client.Pipeline()
	scripted := f.scripted(now)
	if scripted && !f.loadScript(ctx, pipe, r) {
		return false
	}
	f.queueRollouts(ctx, pipe, r, scripted)
	if spend {
		f.queueSpend(ctx, pipe, r, scripted)
		f.queueReasoning(ctx, pipe, r, scripted)
		f.queueLimits(ctx, pipe, r, scripted)
	}
	f.queueClaims(ctx, pipe, r, scripted)
	cmds, _ := pipe.Exec(ctx)
	// Only a failed round trip fails the round: an error Redis answered
	// to one command is that key's problem, and the others go on.
	for _, c := range cmds {
		if err := c.Err(); err != nil && !isReply(err) {
			f.failed(err)
			return false
		}
	}
	if f.missedScript(cmds) {
		return false // the next round, a tick later, loads it on every node
	}
	if r.load != nil && r.load.Err() != nil {
		f.refuseScripts(now, r.load.Err())
		return false // the next round, at once, without the script
	}
	if err := everyOpRefused(r.ops); err != nil {
		f.failed(err) // READONLY, OOM, NOPERM...: Redis answers, but takes nothing
		return false
	}
	f.recovered(now, spend)
	r.problems = map[string][]sharedstate.Problem{}
	f.applyClaims(r)
	f.applyRollouts(ctx, r)
	f.applySpend(r)
	f.applyReasoning(r)
	f.applyLimits(r)
	f.settle(r)
	return true
}

// newRound takes what the handlers registered, under the lock.
func (f *fleetState) newRound(now time.Time, spend bool) *round {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := &round{now: now, canaries: make(map[string]*canary.Canary, len(f.canaries)),
		targets: make(map[string]*health.Target, len(f.targets)), alerts: f.alerts}
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
func (f *fleetState) queueRollouts(ctx context.Context, pipe redis.Pipeliner, r *round, scripted bool) {
	canaryHash, ejectHash := f.prefix+"canary", f.prefix+"eject"
	r.canaryOp = &hashOp{key: canaryHash}
	for fld, c := range r.canaries {
		// At its first phase too, when the fleet does not have it yet or
		// has a later start: the fleet's phase began when the first
		// instance began it.
		p := c.Persist()
		if p.Step == 0 && p.State != canary.StateRolledBack && !f.isFirstDue(canaryHash+fld) {
			continue
		}
		b, _ := json.Marshal(sharedCanary{Name: c.Name(), Persisted: p})
		if f.pushedValue(canaryHash+fld) != string(b) {
			r.canaryOp.pairs = append(r.canaryOp.pairs, fld, string(b))
		}
	}
	r.ops = append(r.ops, r.canaryOp.queue(ctx, pipe, scripted))
	if !f.shareHealth {
		return
	}
	r.ejectOp = &hashOp{key: ejectHash}
	for fld, t := range r.targets {
		e, ok := t.Ejection(r.now)
		if !ok || strings.HasPrefix(e.Reason, fleetReasonPrefix) {
			continue // not ejected, or ejected by another instance
		}
		b, _ := json.Marshal(sharedEjection{Name: t.Name(), By: f.instance, Ejection: e})
		if f.pushedValue(ejectHash+fld) != string(b) {
			r.ejectOp.pairs = append(r.ejectOp.pairs, fld, string(b))
		}
	}
	r.ops = append(r.ops, r.ejectOp.queue(ctx, pipe, scripted))
}

// queueSpend writes this instance's own spend per key and period (an
// absolute figure: idempotent) and reads every instance's.
func (f *fleetState) queueSpend(ctx context.Context, pipe redis.Pipeliner, r *round, scripted bool) {
	for _, k := range r.keys {
		r.spend = f.queueOwn(ctx, pipe, r, scripted, k, r.spend, f.spendKey, func(w usage.WindowState) int64 { return w.NanoUSD })
	}
}

// queueOwn writes this instance's own figure (of, from its ledger window)
// for key k, per period, in the hash hashKey names, and reads every
// instance's: each read is appended to reads. Spend and reasoning
// tokens (cost.go) are shared so.
func (f *fleetState) queueOwn(ctx context.Context, pipe redis.Pipeliner, r *round, scripted bool, k string, reads []spendRead,
	hashKey func(string, usage.Period, time.Time) string, of func(usage.WindowState) int64) []spendRead {
	own, _ := ledger.Own(k, r.now)
	if own.Day.Start.IsZero() { // no request here yet: read the fleet's
		own.Day.Start, own.Month.Start = usage.Day.Start(r.now), usage.Month.Start(r.now)
	}
	for _, w := range []struct {
		p usage.Period
		usage.WindowState
	}{{usage.Day, own.Day}, {usage.Month, own.Month}} {
		op, v := &hashOp{key: hashKey(k, w.p, w.Start)}, of(w.WindowState)
		if v > 0 {
			op.pairs = []string{f.instance, strconv.FormatInt(v, 10)}
			op.expireAt = w.p.Next(w.Start).Add(time.Hour)
		}
		r.ops = append(r.ops, op.queue(ctx, pipe, scripted))
		reads = append(reads, spendRead{key: k, period: w.p, start: w.Start, own: v, op: op})
	}
	return reads
}

// limitStale is how long another instance's requests in flight count
// after its figures last changed (by this instance's clock): an instance
// that stopped without a last write (killed) does not hold a key's slots
// for ever. At least three sync intervals, so a live instance is never
// taken for gone between two of its writes.
func (f *fleetState) limitStale() time.Duration {
	return max(10*time.Second, 3*f.syncEvery)
}

// queueLimits writes this instance's key limit counters (requests and
// tokens taken, ever; requests in flight; the time) and reads every
// instance's.
func (f *fleetState) queueLimits(ctx context.Context, pipe redis.Pipeliner, r *round, scripted bool) {
	for i := range r.limits {
		l := &r.limits[i]
		fig := sharedstate.Figures{At: r.now}
		if l.kl.requests != nil {
			fig.Requests, fig.Since = l.kl.requests.Taken(), l.kl.requests.Since()
		}
		if l.kl.tokens != nil {
			fig.Tokens = l.kl.tokens.Taken()
			if fig.Since.IsZero() || l.kl.tokens.Since().Before(fig.Since) {
				fig.Since = l.kl.tokens.Since()
			}
		}
		if l.kl.inFlight != nil {
			fig.InFlight = l.kl.inFlight.Load()
		}
		l.op = &hashOp{key: f.prefix + "limits:" + l.name, pairs: []string{f.instance, fig.String()}, expireIn: 10 * time.Minute}
		r.ops = append(r.ops, l.op.queue(ctx, pipe, scripted))
	}
}

// applyLimits drains this instance's buckets by what the others took
// since the last read, and sets the others' requests in flight. Every
// figure is checked (sharedstate.ParseFigures); an instance seen for the
// first time, or whose counters went down (it restarted), gives a new
// baseline, not a drain, and no drain is more than the limit. Another
// instance's requests in flight count while its figures keep changing
// (sharedstate.Observe), whatever its clock says.
func (f *fleetState) applyLimits(r *round) {
	stale, lag := f.limitStale(), f.syncEvery+fleetTick+fleetTimeout
	for _, l := range r.limits {
		h, err := l.op.result()
		if err != nil {
			// Unreadable, the key's limits are this instance's own: no
			// other's requests in flight are held against it.
			r.problems[l.op.key] = []sharedstate.Problem{{What: err.Error()}}
			delete(f.limitSeen, l.name)
			if l.kl.othersInFlight != nil {
				l.kl.othersInFlight.Store(0)
			}
			continue
		}
		probs := h.Skipped
		prev, next := f.limitSeen[l.name], map[string]sharedstate.Peer{}
		var others int64
		for inst, raw := range h.Fields {
			if inst == f.instance {
				continue
			}
			fig, err := sharedstate.ParseFigures(raw)
			if err != nil {
				probs = append(probs, sharedstate.Problem{Field: inst, What: err.Error()})
				continue
			}
			last, seen := prev[inst]
			p, note := sharedstate.Observe(last, seen, raw, fig, r.now, stale, lag)
			if note != "" {
				probs = append(probs, sharedstate.Problem{Field: inst, What: note})
			}
			switch {
			case seen:
				if b := l.kl.requests; b != nil {
					b.Drain(sharedstate.Drain(last.Figures.Requests, fig.Requests, b.Limit()), r.now)
				}
				if b := l.kl.tokens; b != nil {
					b.Drain(sharedstate.Drain(last.Figures.Tokens, fig.Tokens, b.Limit()), r.now)
				}
			case fig.Recent(r.now, time.Minute):
				// Seen for the first time, with counters that started
				// less than a minute ago (an instance just started, or
				// this one just did): all they counted is in the limits'
				// window, so it drains here too. Taking it as the
				// baseline instead let a fleet's first requests after a
				// start pass one instance's rpm unshared.
				if b := l.kl.requests; b != nil {
					b.Drain(sharedstate.Drain(0, fig.Requests, b.Limit()), r.now)
				}
				if b := l.kl.tokens; b != nil {
					b.Drain(sharedstate.Drain(0, fig.Tokens, b.Limit()), r.now)
				}
			}
			if p.Live(r.now, stale) {
				others += p.InFlight(l.kl.maxInFlight)
			}
			next[inst] = p
		}
		f.limitSeen[l.name] = next
		if l.kl.othersInFlight != nil {
			l.kl.othersInFlight.Store(min(others, l.kl.maxInFlight))
		}
		r.problems[l.op.key] = probs
	}
}

// queueClaims claims the budget alerts raised here for the fleet.
func (f *fleetState) queueClaims(ctx context.Context, pipe redis.Pipeliner, r *round, scripted bool) {
	r.claims = make([]*claimOp, len(r.alerts))
	for i, a := range r.alerts {
		p, _ := usage.ParsePeriod(a.Period)
		start := p.Start(a.At)
		o := &claimOp{key: fmt.Sprintf("%salert:%s:%s:%s:%d", f.prefix, a.Key, a.Period, start.Format("2006-01-02"), a.Threshold)}
		ttl := p.Next(start).Add(time.Hour).Sub(r.now)
		if scripted {
			o.script = pipe.EvalSha(ctx, fleetScript.Hash(), []string{o.key}, sharedstate.ClaimArgs(f.instance, ttl)...)
		} else {
			o.setNX = pipe.SetNX(ctx, o.key, f.instance, ttl)
			o.get = pipe.GetRange(ctx, o.key, 0, sharedstate.MaxClaim-1)
		}
		r.claims[i] = o
		r.ops = append(r.ops, o)
	}
}

// applyClaims logs the alerts this instance claimed first, and those
// whose claim key is not a relay's (another application's, another
// type): logged here, unclaimed, rather than by no one.
func (f *fleetState) applyClaims(r *round) {
	f.mu.Lock()
	f.alerts = f.alerts[len(r.alerts):] // answered; newer ones wait for the next round
	f.mu.Unlock()
	for i, a := range r.alerts {
		o := r.claims[i]
		c, err := o.result()
		if err == nil && !c.Won && c.Holder != f.instance {
			err = sharedstate.CheckHolder(c.Holder)
		}
		switch {
		case err != nil:
			r.problems[o.key] = []sharedstate.Problem{{What: err.Error()}}
			logBudgetAlert(f.logger, a, false)
		case c.Won || c.Holder == f.instance: // won now, or in a round whose answer was lost
			r.problems[o.key] = nil
			logBudgetAlert(f.logger, a, true)
		default:
			r.problems[o.key] = nil
		}
	}
}

// applyRollouts adopts the fleet's canary steps, rollbacks and ejections,
// each checked (sharedstate.CheckCanary, CheckEjection), and drops from
// Redis the ejections long over.
func (f *fleetState) applyRollouts(ctx context.Context, r *round) {
	f.applyCanaries(r)
	if r.ejectOp != nil {
		f.applyEjections(ctx, r)
	}
}

func (f *fleetState) applyCanaries(r *round) {
	op := r.canaryOp
	h, err := op.result()
	if err != nil {
		r.problems[op.key] = []sharedstate.Problem{{What: err.Error()}}
		return
	}
	f.notePushed(op)
	probs := h.Skipped
	for fld, raw := range h.Fields {
		var sc sharedCanary
		if err := json.Unmarshal([]byte(raw), &sc); err != nil {
			probs = append(probs, sharedstate.Problem{Field: fld, What: "not a canary's roll-out (JSON): skipped"})
			continue
		}
		p, note, err := sharedstate.CheckCanary(sc.Persisted, r.now)
		if err != nil {
			probs = append(probs, sharedstate.Problem{Field: fld, What: err.Error()})
			continue
		}
		if note != "" {
			probs = append(probs, sharedstate.Problem{Field: fld, What: note})
		}
		c := r.canaries[fld]
		if c == nil {
			continue // a canary of a config not loaded here
		}
		ev := c.Adopt(p)
		if c.Persist().Ahead(p) {
			// Another instance's write overwrote this one's further
			// roll-out (the hash keeps the last write): push it again.
			f.forgetPushed(op.key + fld)
		}
		f.setFirstDue(op.key+fld, c.Persist().Ahead(p))
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
	for fld := range r.canaries {
		if _, ok := h.Fields[fld]; !ok {
			f.setFirstDue(op.key+fld, true)
		}
	}
	r.problems[op.key] = probs
}

func (f *fleetState) applyEjections(ctx context.Context, r *round) {
	op := r.ejectOp
	h, err := op.result()
	if err != nil {
		r.problems[op.key] = []sharedstate.Problem{{What: err.Error()}}
		return
	}
	f.notePushed(op)
	probs := h.Skipped
	var over []string
	for fld, raw := range h.Fields {
		var se sharedEjection
		if err := json.Unmarshal([]byte(raw), &se); err != nil {
			// Not deleted: it may be a newer relay's, which this one
			// cannot read.
			probs = append(probs, sharedstate.Problem{Field: fld, What: "not an ejection (JSON): skipped"})
			continue
		}
		if r.now.Sub(se.Until) > time.Minute {
			over = append(over, fld)
			continue
		}
		if err := sharedstate.CheckEjection(se.Ejection, r.now, defaultPolicy.MaxCooldown); err != nil {
			probs = append(probs, sharedstate.Problem{Field: fld, What: err.Error()})
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
	r.problems[op.key] = probs
	if len(over) > 0 {
		f.client.HDel(ctx, op.key, over...)
	}
}

// notePushed records the fields a hash took (canaries, ejections), which
// are not pushed again until they change.
func (f *fleetState) notePushed(op *hashOp) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := 0; i+1 < len(op.pairs); i += 2 {
		f.pushed[op.key+op.pairs[i]] = op.pairs[i+1]
	}
}

// applySpend gives the ledger the other instances' spend, and takes back
// this instance's own where Redis holds more of it than the ledger does
// (a restart that lost the local state and kept the instance's ID). Each
// figure is checked (sharedstate.ParseSpend); a key that cannot be read
// keeps the others' spend as last read. Alerts the fleet's spend reached
// are claimed at the next round.
func (f *fleetState) applySpend(r *round) {
	for _, s := range r.spend {
		h, err := s.op.result()
		if err != nil {
			r.problems[s.op.key] = []sharedstate.Problem{{What: err.Error()}}
			continue
		}
		probs := h.Skipped
		var others, ownThere int64
		for inst, v := range h.Fields {
			n, err := sharedstate.ParseSpend(v)
			switch {
			case err != nil:
				probs = append(probs, sharedstate.Problem{Field: inst, What: err.Error()})
			case inst == f.instance:
				ownThere = n
			default:
				others = sharedstate.AddSpend(others, n)
			}
		}
		r.problems[s.op.key] = probs
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

func (f *fleetState) isFirstDue(k string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.firstDue[k]
}

func (f *fleetState) setFirstDue(k string, due bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if due {
		f.firstDue[k] = true
	} else {
		delete(f.firstDue, k)
	}
}

func (f *fleetState) forgetPushed(k string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pushed, k)
}

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

// recovered records a good round trip (the last error is over); the end
// of an outage is logged.
func (f *fleetState) recovered(now time.Time, spend bool) {
	f.mu.Lock()
	if spend {
		f.lastSync = now
	}
	f.lastErr = ""
	scriptsBack := f.scriptsWarned && now.After(f.noScriptsUntil) && f.noScriptsUntil.After(time.Time{})
	if scriptsBack {
		f.noScriptsUntil, f.scriptsWarned = time.Time{}, false
	}
	f.mu.Unlock()
	if scriptsBack {
		f.logger.Info("shared state: Redis runs the relay's script again; hashes are read within their bounds")
	}
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
	// Problems are the keys (and fields) under the prefix that the relay
	// skipped, and why; the rest syncs.
	Problems []sharedstate.Named `json:"problems,omitempty"`
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
		st.Problems = f.problems.List()
		f.mu.Unlock()
		st.SyncEvery, st.ShareHealth = f.syncEvery.String(), &share
	}
	return st
}
