package sharedstate

import (
	"fmt"
	"testing"
	"time"
)

func TestProblemsSettle(t *testing.T) {
	var ps Problems
	t0 := time.Unix(1_780_000_000, 0)
	bad := []Problem{{What: "a string, not a hash"}}
	added, over := ps.Settle("k", bad, t0)
	if len(added) != 1 || len(over) != 0 || added[0].Key != "k" || !added[0].Since.Equal(t0) {
		t.Fatalf("first: %+v %+v", added, over)
	}
	// The same again: nothing to log, since kept.
	for i := range 5 {
		if added, over := ps.Settle("k", bad, t0.Add(time.Duration(i+1)*time.Second)); len(added)+len(over) != 0 {
			t.Fatalf("round %d: %+v %+v", i, added, over)
		}
	}
	if l := ps.List(); len(l) != 1 || !l[0].Since.Equal(t0) {
		t.Fatalf("list: %+v", l)
	}
	// Changed: logged again.
	if added, _ := ps.Settle("k", []Problem{{What: "a list, not a hash"}}, t0.Add(time.Minute)); len(added) != 1 {
		t.Fatalf("changed: %+v", added)
	}
	// A field of another key: the first key's problem stays.
	ps.Settle("h", []Problem{{Field: "ghost", What: "negative"}}, t0.Add(time.Minute))
	if l := ps.List(); len(l) != 2 || l[0].Key != "h" || l[0].Field != "ghost" {
		t.Fatalf("two keys: %+v", l)
	}
	// Put right: over, once.
	if added, over := ps.Settle("k", nil, t0.Add(2*time.Minute)); len(added) != 0 || len(over) != 1 || over[0].Key != "k" {
		t.Fatalf("put right: %+v %+v", added, over)
	}
	if added, over := ps.Settle("k", nil, t0.Add(3*time.Minute)); len(added)+len(over) != 0 {
		t.Fatalf("still right: %+v %+v", added, over)
	}
	// Not read for a while: forgotten.
	ps.Prune(t0.Add(2 * time.Minute))
	if l := ps.List(); len(l) != 0 {
		t.Fatalf("after Prune: %+v", l)
	}
}

func TestProblemsNamedUpToMaxNamed(t *testing.T) {
	var ps Problems
	var found []Problem
	for i := range 100 {
		found = append(found, Problem{Field: fmt.Sprintf("f%03d", i), What: "junk"})
	}
	added, _ := ps.Settle("k", found, time.Unix(0, 0))
	more := 0
	for _, n := range added {
		if n.Field == "(more)" && n.What == "92 more fields skipped" {
			more++
		}
	}
	if len(added) != MaxNamed+1 || more != 1 {
		t.Fatalf("%d named, %d counting the rest: %+v", len(added), more, added)
	}
}
