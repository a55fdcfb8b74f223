package llmrelay

// A lock-order inversion between the durable store and the pools' entries,
// found by the request loop's in-package tests (issue 26, item 6), which
// deadlocked a Provision against a save:
//
//   - Creating a target's health entry (attachHealth) runs its constructor
//     inside targetPool.LoadOrNew, which holds that entry's lock while the
//     constructor runs; the constructor calls durable.restoredEjection,
//     which takes durable.mu. (Canaries do the same: restoredCanary in
//     canaryPool.LoadOrNew.)
//   - durable.save held durable.mu while snapshotState ranged the pools,
//     which takes each entry's lock, waiting for one being constructed.
//
// So a save that started while a new target was being created waited for
// its entry, and the entry's constructor waited for the save's durable.mu:
// neither ever returned, and every later Provision (each needs durable.mu)
// hung behind them. save runs once a second (the saver) and at every
// Cleanup, once any config with storage was provisioned: a config reload
// that added a target could hang the admin API and the process's
// shutdown. save now reads the pools before it takes durable.mu.
//
// The test checks the two halves separately, each time releasing what it
// holds, so that it reports the defect instead of hanging: it fails when
// both hold.

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/llmrelay/caddy-llm-relay/internal/health"
)

// blockedFor is how long a call must go on to count as blocked: each one
// the test makes returns in microseconds unless it waits for a lock.
const blockedFor = 500 * time.Millisecond

func TestDurableSaveAndTargetCreationDoNotDeadlock(t *testing.T) {
	// save does nothing without storage: give it some, unless a Caddy of
	// the test binary attached the store already.
	durable.mu.Lock()
	if durable.storage == nil {
		durable.storage = &certmagic.FileStorage{Path: t.TempDir()}
		durable.path = "llm_relay/state/deadlock-test.json"
		if durable.logger == nil {
			durable.logger = zap.NewNop()
		}
		t.Cleanup(func() {
			durable.mu.Lock()
			durable.storage, durable.path, durable.last = nil, "", nil
			durable.mu.Unlock()
		})
	}
	durable.mu.Unlock()

	saveHolds := saveHoldsTheStoreWhileWaitingForAnEntry(t)
	creationNeeds := targetCreationWaitsForTheStoreWithItsEntryLocked(t)
	if saveHolds && creationNeeds {
		t.Errorf("durable.save holds durable.mu while it waits for a pool entry under construction, " +
			"and a target entry's constructor (attachHealth → durable.restoredEjection) waits for durable.mu: " +
			"a save during a Provision that creates a target deadlocks both (see this file's comment)")
	}
}

// saveHoldsTheStoreWhileWaitingForAnEntry reports whether durable.save,
// meeting a targetPool entry whose constructor has not returned, waits for
// it while holding durable.mu.
func saveHoldsTheStoreWhileWaitingForAnEntry(t *testing.T) bool {
	key := "deadlock-probe|save|" + t.Name()
	constructing, release, created := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(created)
		_, _, _ = targetPool.LoadOrNew(key, func() (caddy.Destructor, error) {
			close(constructing)
			<-release
			return pooled[*healthEntry]{&healthEntry{t: health.NewTarget("probe", 10)}}, nil
		})
	}()
	<-constructing
	saved := make(chan struct{})
	go func() { durable.save(); close(saved) }()
	holds := false
	select {
	case <-saved:
	case <-time.After(blockedFor):
		// save waits (for the entry): does it hold durable.mu meanwhile?
		if durable.mu.TryLock() {
			durable.mu.Unlock()
		} else {
			holds = true
		}
	}
	close(release)
	<-created
	<-saved
	_, _ = targetPool.Delete(key)
	return holds
}

// targetCreationWaitsForTheStoreWithItsEntryLocked reports whether
// creating a target's health entry, while durable.mu is held elsewhere,
// waits for it inside the entry's constructor, so that ranging the pool
// (as save does) waits too.
func targetCreationWaitsForTheStoreWithItsEntryLocked(t *testing.T) bool {
	h := &Relay{logger: zap.NewNop()}
	tg := &target{up: &upstreamRuntime{name: "probe", base: "http://deadlock-probe.invalid/" + t.Name()}}
	key := healthKey(tg.up, tg.model)

	durable.mu.Lock() // as a save holds it
	attached := make(chan error, 1)
	go func() { attached <- h.attachHealth(tg, health.SLO{Window: 10, MinSamples: 10}) }()
	for {
		if _, ok := targetPool.References(key); ok {
			break // the entry exists: its constructor runs, or ran
		}
		select {
		case err := <-attached:
			durable.mu.Unlock()
			if err != nil {
				t.Fatalf("attachHealth: %v", err)
			}
			releasePoolKeys(h)
			return false // it never needed durable.mu
		case <-time.After(time.Millisecond):
		}
	}
	ranged := make(chan struct{})
	go func() { snapshotState(time.Now()); close(ranged) }()
	waits := false
	select {
	case <-ranged:
	case <-time.After(blockedFor):
		waits = true
	}
	durable.mu.Unlock()
	if err := <-attached; err != nil {
		t.Fatalf("attachHealth: %v", err)
	}
	<-ranged
	releasePoolKeys(h)
	return waits
}

func releasePoolKeys(h *Relay) {
	for _, pk := range h.poolKeys {
		_, _ = pk.pool.Delete(pk.key)
	}
}
