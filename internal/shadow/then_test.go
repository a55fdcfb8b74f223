package shadow

import (
	"testing"
	"time"
)

// TestGoThenCountsTheComparison: the then step of a copy holds no slot
// but is counted (Stats.Comparing) and waited for by Wait.
func TestGoThenCountsTheComparison(t *testing.T) {
	r := NewRunner(1)
	release := make(chan struct{})
	entered := make(chan struct{})
	if !r.GoThen(func() func() {
		return func() { close(entered); <-release }
	}) {
		t.Fatal("GoThen refused the first copy")
	}
	<-entered
	if s := r.Stats(); s.Running != 0 || s.Comparing != 1 {
		t.Fatalf("while comparing: running %d comparing %d, want 0 and 1", s.Running, s.Comparing)
	}
	// The slot is free: a second copy runs.
	ran := make(chan struct{})
	if !r.Go(func() { close(ran) }) {
		t.Fatal("a comparing copy kept the max_concurrent slot")
	}
	<-ran

	waited := make(chan struct{})
	go func() { r.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Wait returned while a copy was still comparing")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after the comparison ended")
	}
	if s := r.Stats(); s.Running != 0 || s.Comparing != 0 || s.Sent != 2 {
		t.Fatalf("after: %+v", s)
	}
}

// TestGoThenPanicInThen: a panic in the then step is recovered and
// counted, and the count goes back to 0.
func TestGoThenPanicInThen(t *testing.T) {
	r := NewRunner(1)
	r.GoThen(func() func() { return func() { panic("boom") } })
	r.Wait()
	if s := r.Stats(); s.Panics != 1 || s.Comparing != 0 || s.Running != 0 {
		t.Fatalf("%+v", s)
	}
}
