package llmrelay

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// Concurrency caps and the capacity stages. A `max_concurrent` on an
// upstream (every model that routes to it) or on a `to` line (that target
// only) caps the requests in flight there; a stream counts until its end.
// A provider's concurrency limit is met by sending the excess elsewhere
// first, not by queueing it behind the busy target while the next one
// sits idle:
//
//   - spill_at (default 70 %): a request prefers the next target of its
//     chain that is below it (orderTargets);
//   - degrade_at (85 %): a request sent to the target is made cheaper
//     (the `degrade` edit, by default one reasoning effort step down);
//   - shed_at (95 %): the target takes no new request; when no target of
//     the chain has room, the request waits up to queue_timeout for one,
//     then gets 503 overloaded.
//
// The counters are process-wide (capPool), keyed by what they cap, so a
// reload keeps counting the streams the old config still serves.

// Defaults of the capacity block, in percent.
const (
	defaultSpillAt   = 70
	defaultDegradeAt = 85
	defaultShedAt    = 95
)

// capPool holds the in-flight counters, shared across reloads.
var capPool = caddy.NewUsagePool()

// capacityPolicy is the resolved capacity block.
type capacityPolicy struct {
	spill, degrade, shed float64       // occupancy fractions
	queue                time.Duration // queue_timeout
	edits                []bodyEdit    // the degrade edit; nil: one effort step down
}

// resolveCapacity checks a capacity block and fills in its defaults.
func resolveCapacity(c *Capacity) (capacityPolicy, error) {
	p := capacityPolicy{spill: defaultSpillAt, degrade: defaultDegradeAt, shed: defaultShedAt}
	if c == nil {
		p.spill, p.degrade, p.shed = p.spill/100, p.degrade/100, p.shed/100
		return p, nil
	}
	for _, s := range []struct {
		name string
		v    float64
		dst  *float64
	}{{"spill_at", c.SpillAt, &p.spill}, {"degrade_at", c.DegradeAt, &p.degrade}, {"shed_at", c.ShedAt, &p.shed}} {
		if s.v < 0 || s.v > 100 || math.IsNaN(s.v) {
			return p, fmt.Errorf("capacity: %s %v is not a percentage; give one above 0 and at most 100, such as %s 80%%", s.name, s.v, s.name)
		}
		if s.v > 0 {
			*s.dst = s.v
		}
	}
	if p.spill > p.degrade || p.degrade > p.shed {
		return p, fmt.Errorf("capacity: the stages must rise: spill_at %v%% <= degrade_at %v%% <= shed_at %v%%", p.spill, p.degrade, p.shed)
	}
	if c.QueueTimeout < 0 {
		return p, fmt.Errorf("capacity: queue_timeout %v is negative; give a duration such as 2s, or 0 not to wait", time.Duration(c.QueueTimeout))
	}
	p.spill, p.degrade, p.shed, p.queue = p.spill/100, p.degrade/100, p.shed/100, time.Duration(c.QueueTimeout)
	if d := c.Degrade; d != nil {
		p.edits = []bodyEdit{} // an empty degrade block: degrade does nothing
		for _, field := range slices.Sorted(maps.Keys(d.Set)) {
			val := d.Set[field]
			if !json.Valid(val) {
				return p, fmt.Errorf("capacity: degrade: set %s: value is not valid JSON", field)
			}
			if err := checkFieldPath(field); err != nil {
				return p, fmt.Errorf("capacity: degrade: set %s: %w", field, err)
			}
			p.edits = append(p.edits, bodyEdit{path: strings.Split(field, "."), value: val})
		}
		for _, field := range d.Unset {
			if err := checkFieldPath(field); err != nil {
				return p, fmt.Errorf("capacity: degrade: unset %s: %w", field, err)
			}
			p.edits = append(p.edits, bodyEdit{path: strings.Split(field, ".")})
		}
	}
	return p, nil
}

// checkMaxConcurrent checks a max_concurrent setting.
func checkMaxConcurrent(n int) error {
	if n < 0 {
		return fmt.Errorf("max_concurrent %d is negative; give the most requests in flight at once, such as 20, or leave it out for no cap", n)
	}
	return nil
}

// capCounter is one cap: its requests in flight (shared across reloads)
// and this config's limit.
type capCounter struct {
	inFlight *atomic.Int64
	max      int64 // max_concurrent
	admit    int64 // the most in flight before the target is at shed_at: ceil(max * shed), at least 1
}

// newCapCounter gives the cap named key its shared counter.
func (h *Relay) newCapCounter(key string, limit int) (*capCounter, error) {
	v, _, err := capPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		return pooled[*atomic.Int64]{new(atomic.Int64)}, nil
	})
	if err != nil {
		return nil, err
	}
	h.poolKeys = append(h.poolKeys, poolKey{capPool, key})
	return &capCounter{inFlight: v.(pooled[*atomic.Int64]).v, max: int64(limit), admit: admitted(int64(limit), h.capacity.shed)}, nil
}

// admitted is how many requests a cap of limit takes at once: the target
// is at shed_at from ceil(limit * shed) in flight, and takes at least one.
func admitted(limit int64, shed float64) int64 {
	return max(1, int64(math.Ceil(float64(limit)*shed-1e-9)))
}

// attachCaps gives a target its caps: the upstream's and its own.
func (h *Relay) attachCaps(t *target, alias string, own int) error {
	if n := t.up.maxConcurrent; n > 0 {
		if t.up.cap == nil {
			c, err := h.newCapCounter("upstream|"+t.up.name+"|"+t.up.base, n)
			if err != nil {
				return err
			}
			t.up.cap = c
		}
		t.caps = append(t.caps, t.up.cap)
	}
	if own > 0 {
		c, err := h.newCapCounter("target|"+alias+"|"+healthKey(t.up, t.model), own)
		if err != nil {
			return err
		}
		t.caps = append(t.caps, c)
	}
	return nil
}

// occupancy is the fuller cap's requests in flight over its max (0
// without a cap).
func (t *target) occupancy() float64 {
	var o float64
	for _, c := range t.caps {
		o = max(o, c.occupancy())
	}
	return o
}

// occupancy is the cap's requests in flight over its max.
func (c *capCounter) occupancy() float64 { return float64(c.inFlight.Load()) / float64(c.max) }

// acquire counts one more request in flight on every cap of the target,
// or on none when one of them is at shed_at (ok false). occ is the
// occupancy the request found, which decides its stage.
func (t *target) acquire() (occ float64, ok bool) {
	for i, c := range t.caps {
		n := c.inFlight.Add(1) - 1
		if n >= c.admit {
			c.inFlight.Add(-1)
			for _, d := range t.caps[:i] {
				d.inFlight.Add(-1)
			}
			capacityFreed.broadcast() // what this one briefly held
			return float64(n) / float64(c.max), false
		}
		occ = max(occ, float64(n)/float64(c.max))
	}
	return occ, true
}

// release lets go of what acquire counted, and wakes requests waiting
// for room.
func (t *target) release() {
	for _, c := range t.caps {
		c.inFlight.Add(-1)
	}
	if len(t.caps) > 0 {
		capacityFreed.broadcast()
	}
}

// fullest is the target's fuller cap (nil: none).
func (t *target) fullest() *capCounter {
	var f *capCounter
	var fo float64
	for _, c := range t.caps {
		if o := c.occupancy(); f == nil || o > fo {
			f, fo = c, o
		}
	}
	return f
}

// hasRoom reports whether the target would take a request now.
func (t *target) hasRoom() bool {
	for _, c := range t.caps {
		if c.inFlight.Load() >= c.admit {
			return false
		}
	}
	return true
}

// hasRoom reports whether a target of the plan would take a request now.
func (p *plan) hasRoom() bool {
	return slices.ContainsFunc(p.targets, (*target).hasRoom)
}

// What the capacity counter counts.
const (
	capSpill   = "spill"   // a request went elsewhere: the target was at spill_at
	capDegrade = "degrade" // a request to the target was degraded
	capQueued  = "queued"  // a request waited for room (queue_timeout)
	capShed    = "shed"    // a request got 503 overloaded
)

// countCapacity counts a capacity event for the target of alias's chain.
func countCapacity(alias string, t *target, event string) {
	metricCapacity.WithLabelValues(alias, t.up.name, modelLabel(t.model), event).Inc()
}

// fullNote is the skip note of a target at shed_at.
func (t *target) fullNote() string {
	var b strings.Builder
	b.WriteString("skipped: at capacity (")
	for i, c := range t.caps {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(c.inFlight.Load(), 10) + " of max_concurrent " + strconv.FormatInt(c.max, 10) + " in flight")
	}
	b.WriteString(")")
	return b.String()
}

// spillOver moves the targets at or above spill_at behind those below it,
// each group in the order health gave it; the canary, when it leads,
// stays first (it is skipped when full). It reports the target the
// request spilled from: the one it would have gone to, now behind one
// with room (nil: no spill).
func (p *plan) spillOver(spill float64) (from *target) {
	start := 0
	if p.canaryFirst {
		start = 1
	}
	ts, ho := p.targets[start:], p.halfOpen[start:]
	var buf [16]bool // a chain's length: on the stack
	busy := buf[:0]
	first, room := -1, 0 // the first busy target; how many have room
	for i, t := range ts {
		b := t.occupancy() >= spill // a target without a cap is never busy
		busy = append(busy, b)
		switch {
		case !b:
			room++
		case first < 0:
			first = i
		}
	}
	if first < 0 || room == first {
		return nil // none busy, or nothing with room behind the first busy one
	}
	from = ts[first]
	// A stable partition: those with room first.
	moved := make([]*target, 0, len(ts)-room)
	movedH := make([]bool, 0, len(ts)-room)
	k := 0
	for i, t := range ts {
		if busy[i] {
			moved, movedH = append(moved, t), append(movedH, ho[i])
			continue
		}
		ts[k], ho[k] = t, ho[i]
		k++
	}
	copy(ts[k:], moved)
	copy(ho[k:], movedH)
	return from
}

// degraded returns the target with the degrade edit added after its own
// edits: a copy for this one attempt (the health, caps and counters are
// the target's own, shared by pointer).
func (t *target) degraded(p capacityPolicy, body *requestBody) *target {
	edits := p.edits
	if edits == nil {
		edits = effortStepDown(body)
	}
	if len(edits) == 0 {
		return t
	}
	d := *t
	d.edits = append(slices.Clip(t.edits), edits...)
	return &d
}

// effortSteps: each effort one step down. `minimal` and `none` stay.
var effortSteps = map[string]string{"xhigh": "high", "high": "medium", "medium": "low", "low": "minimal"}

// minThinkingBudget is the smallest thinking budget Anthropic accepts.
const minThinkingBudget = 1024

// effortStepDown is the default degrade edit: the effort the request
// states (as sent, or as adaptive_effort set it), one step down; for
// Anthropic Messages, half the thinking budget. A request that states no
// effort is left as it is: the relay does not guess a model's default.
func effortStepDown(body *requestBody) []bodyEdit {
	var edits []bodyEdit
	if e := jsonString(body.fields["reasoning_effort"]); effortSteps[e] != "" {
		edits = append(edits, bodyEdit{path: []string{"reasoning_effort"}, value: quoted(effortSteps[e])})
	}
	var nested struct {
		Effort string `json:"effort"`
	}
	if raw, ok := body.fields["reasoning"]; ok && json.Unmarshal(raw, &nested) == nil && effortSteps[nested.Effort] != "" {
		edits = append(edits, bodyEdit{path: []string{"reasoning", "effort"}, value: quoted(effortSteps[nested.Effort])})
	}
	var thinking struct {
		Type   string `json:"type"`
		Budget int    `json:"budget_tokens"`
	}
	if raw, ok := body.fields["thinking"]; ok && json.Unmarshal(raw, &thinking) == nil && thinking.Type == "enabled" && thinking.Budget > minThinkingBudget {
		edits = append(edits, bodyEdit{path: []string{"thinking", "budget_tokens"},
			value: json.RawMessage(strconv.Itoa(max(minThinkingBudget, thinking.Budget/2)))})
	}
	return edits
}

func quoted(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// notifier wakes every waiter at once, and costs a release nothing while
// nobody waits.
type notifier struct {
	waiters atomic.Int32
	mu      sync.Mutex
	ch      chan struct{}
}

// capacityFreed is signalled whenever a capped target lets a request go.
var capacityFreed notifier

// wait returns a channel closed at the next broadcast. Call it before
// looking for room again, so a release in between is not missed.
func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *notifier) broadcast() {
	if n.waiters.Load() == 0 {
		return
	}
	n.mu.Lock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.mu.Unlock()
}

// awaitRoom waits until a capped target lets a request go, until, or the
// client leaves. It reports whether there may be room now. room is
// asked once the wait is registered, so a release just before it is not
// missed.
func awaitRoom(ctx context.Context, until time.Time, room func() bool) bool {
	d := time.Until(until)
	if d <= 0 {
		return false
	}
	capacityFreed.waiters.Add(1)
	defer capacityFreed.waiters.Add(-1)
	ch := capacityFreed.wait()
	if room() {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// occupancyGauge is one capped target's figures, for the metrics.
type occupancyGauge struct {
	alias, upstream, model string
	inFlight               int64
	occupancy              float64
}

// occupancies are the capped targets of the live relays' chains (the
// newest config's, once per alias and target).
func occupancies() []occupancyGauge {
	liveRelays.Lock()
	relays := slices.Collect(maps.Keys(liveRelays.m))
	liveRelays.Unlock()
	slices.SortFunc(relays, func(a, b *Relay) int { return b.provisioned.Compare(a.provisioned) })
	var out []occupancyGauge
	seen := map[[3]string]bool{}
	for _, h := range relays {
		for _, rt := range h.routesInOrder() {
			for _, t := range rt.targets {
				c := t.fullest()
				k := [3]string{rt.alias, t.up.name, modelLabel(t.model)}
				if c == nil || seen[k] {
					continue
				}
				seen[k] = true
				n := c.inFlight.Load()
				out = append(out, occupancyGauge{k[0], k[1], k[2], n, float64(n) / float64(c.max)})
			}
		}
	}
	return out
}
