package llmrelay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/llmrelay/caddy-llm-relay/internal/canary"
	"github.com/llmrelay/caddy-llm-relay/internal/health"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// State that outlives the process. Reloads keep everything already (the
// ledger is process-wide, health and canaries live in UsagePools); a
// restart would not. So the relay saves, in Caddy's own storage (the
// `storage` global option, the file system by default), what a restart
// must not forget: each key's spend and the budget alerts already raised,
// each canary's roll-out (its step, or its rollback and why) and each
// ejected target with the end of its cooldown. It is read at the first
// Provision of the process and written once a second when it changed, and
// at Cleanup (a reload or the process stopping).
//
// The file is per instance (llm_relay/state/<Caddy's instance ID>.json),
// as several Caddy instances may share one storage (a fleet that keeps
// its certificates in one place); a fleet's shared state is the Redis
// backend's (fleet.go).

// durableEvery is how often the state is checked for changes and saved.
const durableEvery = time.Second

// durableVersion is the state file's format version.
const durableVersion = 1

// durableFile is the saved state.
type durableFile struct {
	Version   int                         `json:"version"`
	SavedAt   time.Time                   `json:"saved_at"`
	Instance  string                      `json:"instance"`
	Spend     []usage.KeyState            `json:"spend"`
	Canaries  map[string]canary.Persisted `json:"canaries,omitempty"`  // by the canary's pool key
	Ejections map[string]health.Ejection  `json:"ejections,omitempty"` // by the target's health key
	Names     map[string]string           `json:"names,omitempty"`     // pool key → the name people read, for the file's readers
}

// durableStore is the process's saved state.
type durableStore struct {
	mu       sync.Mutex
	loaded   bool
	storage  certmagic.Storage
	path     string
	instance string
	logger   *zap.Logger
	users    int    // provisioned handlers not yet cleaned up
	last     []byte // the last state saved (without its time)
	stop     chan struct{}
	done     chan struct{}
	canaries map[string]canary.Persisted // restored, not yet adopted
	ejects   map[string]health.Ejection
}

var durable = &durableStore{}

// instanceID names this Caddy instance: its instance ID (a UUID in
// Caddy's data directory, kept across restarts).
func instanceID() string {
	id, err := caddy.InstanceID()
	if err != nil {
		return "unknown"
	}
	return id.String()
}

// attach is called at each Provision: the first one of the process reads
// the saved state and starts the saver. off (`state off` in the config
// provisioned first) turns saving off for the process.
func (d *durableStore) attach(ctx caddy.Context, logger *zap.Logger, off bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.users++
	if d.loaded {
		return
	}
	storage := contextStorage(ctx)
	if storage == nil {
		return // a context without a config (unit tests): nothing to load into
	}
	d.loaded = true
	d.logger = logger
	d.instance = instanceID()
	if off {
		return
	}
	d.storage = storage
	d.path = "llm_relay/state/" + d.instance + ".json"
	d.load()
	d.stop, d.done = make(chan struct{}), make(chan struct{})
	go d.saver(d.stop, d.done)
}

// contextStorage is the config's storage, or nil for a caddy.Context
// made without a config, whose Storage panics.
func contextStorage(ctx caddy.Context) (s certmagic.Storage) {
	defer func() {
		if recover() != nil {
			s = nil
		}
	}()
	return ctx.Storage()
}

// detach is called at each Cleanup: the state is saved now, and the saver
// stops with the last handler.
func (d *durableStore) detach() {
	d.mu.Lock()
	d.users--
	last := d.users <= 0
	stop, done := d.stop, d.done
	if last {
		d.loaded, d.stop, d.done = false, nil, nil
	}
	d.mu.Unlock()
	if stop == nil {
		return
	}
	if last {
		close(stop)
		<-done
	}
	d.save()
}

// load reads the saved state (d.mu held). A state it cannot read is a
// warning and an empty start, never a failed load.
func (d *durableStore) load() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	raw, err := d.storage.Load(ctx, d.path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var f durableFile
	if err == nil {
		err = json.Unmarshal(raw, &f)
		if err == nil && f.Version != durableVersion {
			err = fmt.Errorf("format version %d, this relay reads %d", f.Version, durableVersion)
		}
	}
	if err != nil {
		d.logger.Warn("saved relay state unreadable; starting without it (it is overwritten at the next save)",
			zap.String("storage_key", d.path), zap.Error(err))
		return
	}
	now := time.Now()
	ledger.Restore(f.Spend, now)
	d.canaries, d.ejects = f.Canaries, f.Ejections
	d.logger.Info("relay state restored", zap.String("storage_key", d.path), zap.Time("saved_at", f.SavedAt),
		zap.Int("keys", len(f.Spend)), zap.Int("canaries", len(f.Canaries)), zap.Int("ejections", len(f.Ejections)))
}

// restoredCanary returns (once) the saved state of a canary being created.
func (d *durableStore) restoredCanary(key string) (canary.Persisted, bool) {
	return takeRestored(d, d.canaries, key)
}

// restoredEjection returns (once) the saved ejection of a target being
// created.
func (d *durableStore) restoredEjection(key string) (health.Ejection, bool) {
	return takeRestored(d, d.ejects, key)
}

// takeRestored removes and returns m[key], under d.mu: a piece of saved
// state is adopted by the first value made for it, and saved again from
// that value from then on.
func takeRestored[T any](d *durableStore, m map[string]T, key string) (T, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := m[key]
	delete(m, key)
	return v, ok
}

func (d *durableStore) saver(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(durableEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			d.save()
		}
	}
}

// snapshot gathers the process's state at now.
func snapshotState(now time.Time) durableFile {
	f := durableFile{Version: durableVersion, Spend: ledger.Export(now),
		Canaries: map[string]canary.Persisted{}, Ejections: map[string]health.Ejection{}, Names: map[string]string{}}
	canaryPool.Range(func(k, v any) bool {
		c := v.(pooled[*canary.Canary]).v
		// Every canary, at its first phase too: a restart keeps when
		// the phase began, so it ends when it would have.
		f.Canaries[k.(string)] = c.Persist()
		f.Names[k.(string)] = c.Name()
		return true
	})
	targetPool.Range(func(k, v any) bool {
		t := v.(pooled[*healthEntry]).v.t
		if e, ok := t.Ejection(now); ok {
			f.Ejections[k.(string)] = e
			f.Names[k.(string)] = t.Name()
		}
		return true
	})
	return f
}

// save writes the state if it changed since the last save.
//
// The pools are read before d.mu is taken, never under it: a target or a
// canary being created holds its pool entry while its constructor takes
// d.mu (takeRestored), and the pools' Range waits for an entry under
// construction, so a save holding d.mu while reading them deadlocked
// with a Provision creating one (durable_lock_test.go). A piece adopted
// between the snapshot and the lock is in neither and waits for the next
// save, a second later.
func (d *durableStore) save() {
	d.mu.Lock()
	on := d.storage != nil
	d.mu.Unlock()
	if !on {
		return
	}
	now := time.Now()
	f := snapshotState(now)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.storage == nil {
		return // detached meanwhile
	}
	// The pieces restored but not adopted yet (a canary or target no
	// config has named again) are kept, so a restart that loads a
	// smaller config first loses nothing.
	for k, p := range d.canaries {
		f.Canaries[k] = p
	}
	for k, e := range d.ejects {
		if now.Before(e.Until) {
			f.Ejections[k] = e
		}
	}
	f.Instance = d.instance
	body, err := json.Marshal(f)
	if err != nil || bytes.Equal(body, d.last) {
		return
	}
	f.SavedAt = now
	raw, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.storage.Store(ctx, d.path, raw); err != nil {
		d.logger.Warn("saving relay state", zap.String("storage_key", d.path), zap.Error(err))
		return
	}
	d.last = body
}
