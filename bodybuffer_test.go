package llmrelay

import "testing"

// A buffer goes back to its pool only when every hold is released, and a
// size outside the pooled ones gets none.
func TestBodyBufferHolds(t *testing.T) {
	if getBodyBuffer(1000) != nil || getBodyBuffer(1<<40) != nil {
		t.Fatal("pooled a size outside the classes")
	}
	b := getBodyBuffer(100_000)
	if b == nil || cap(b.b) != 128<<10 || len(b.b) != 0 {
		t.Fatalf("buffer for 100,000 bytes: %v", b)
	}
	r1, r2 := b.hold(), b.hold()
	b.release() // the first holder's
	r1()
	r1() // a release func counts once
	if n := b.refs.Load(); n != 1 {
		t.Fatalf("%d holds left, want 1", n)
	}
	r2()
	if n := b.refs.Load(); n != 0 {
		t.Fatalf("%d holds left, want 0", n)
	}
	var nilBuf *bodyBuffer
	nilBuf.hold()()
	nilBuf.release()
}
