package sse

import "testing"

func TestQueueOrderAndReuse(t *testing.T) {
	var q Queue
	if _, ok := q.Pop(); ok {
		t.Fatal("an empty queue popped")
	}
	for round := 0; round < 2; round++ {
		q.Push(NewEvent("a", []byte("1")))
		q.Push(NewEvent("b", []byte("2")))
		for _, want := range []string{"a", "b"} {
			ev, ok := q.Pop()
			if !ok || ev.Type != want {
				t.Fatalf("round %d: popped %q %v, want %q", round, ev.Type, ok, want)
			}
		}
		if _, ok := q.Pop(); ok || q.head != 0 || len(q.evs) != 0 {
			t.Fatalf("round %d: not reset when drained", round)
		}
	}
}
