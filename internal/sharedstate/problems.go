package sharedstate

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// MaxNamed is how many fields of one key are named one by one; the rest
// are counted in one more problem.
const MaxNamed = 8

// Named is a problem as the status view shows it.
type Named struct {
	Key   string    `json:"key"`
	Field string    `json:"field,omitempty"`
	What  string    `json:"problem"`
	Since time.Time `json:"since"`
}

// Problems are the keys and fields skipped, as last read. Each key's
// problems are replaced whenever the key is read (Settle): a problem new
// or changed since is to be logged, one gone is to be logged as over, and
// one that stays is not logged again. Not safe for concurrent use.
type Problems struct {
	byKey map[string]*keyProblems
}

type keyProblems struct {
	read  time.Time // last Settle
	items map[string]Named
}

// Settle records the problems found in key at now (none: the key read
// well) and returns those to log: new or changed ones, and those over.
func (ps *Problems) Settle(key string, found []Problem, now time.Time) (added, over []Named) {
	if ps.byKey == nil {
		ps.byKey = map[string]*keyProblems{}
	}
	found = capNamed(found)
	kp := ps.byKey[key]
	if kp == nil {
		if len(found) == 0 {
			return nil, nil
		}
		kp = &keyProblems{items: map[string]Named{}}
		ps.byKey[key] = kp
	}
	kp.read = now
	next := make(map[string]Named, len(found))
	for _, p := range found {
		if old, ok := kp.items[p.Field]; ok && old.What == p.What {
			next[p.Field] = old
			continue
		}
		n := Named{Key: key, Field: p.Field, What: p.What, Since: now}
		next[p.Field] = n
		added = append(added, n)
	}
	for f, old := range kp.items {
		if _, ok := next[f]; !ok {
			over = append(over, old)
		}
	}
	kp.items = next
	if len(next) == 0 {
		delete(ps.byKey, key)
	}
	sortNamed(added)
	sortNamed(over)
	return added, over
}

// capNamed keeps the first MaxNamed problems (by field) and counts the
// rest in one; a field named twice keeps its first problem.
func capNamed(found []Problem) []Problem {
	seen := map[string]bool{}
	var out []Problem
	for _, p := range found {
		if !seen[p.Field] {
			seen[p.Field] = true
			out = append(out, p)
		}
	}
	if len(out) <= MaxNamed {
		return out
	}
	slices.SortFunc(out, func(a, b Problem) int { return cmp.Compare(a.Field, b.Field) })
	rest := len(out) - MaxNamed
	return append(out[:MaxNamed:MaxNamed], Problem{Field: "(more)", What: fmt.Sprintf("%d more fields skipped", rest)})
}

// Prune forgets the keys not read since before: keys the relay reads no
// more (yesterday's spend, an alert's claim, a key name gone from the
// config).
func (ps *Problems) Prune(before time.Time) {
	for k, kp := range ps.byKey {
		if kp.read.Before(before) {
			delete(ps.byKey, k)
		}
	}
}

// List returns every problem, by key and field.
func (ps *Problems) List() []Named {
	var out []Named
	for _, kp := range ps.byKey {
		for _, n := range kp.items {
			out = append(out, n)
		}
	}
	sortNamed(out)
	return out
}

func sortNamed(ns []Named) {
	slices.SortFunc(ns, func(a, b Named) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Field, b.Field))
	})
}
