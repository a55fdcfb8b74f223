package journal

import (
	"errors"
	"math"
	"testing"
)

// TestReadCursorBeyondEnd: a cursor past the journal's end (a client's
// Last-Event-ID or ?after= is any number it likes) reads nothing and,
// once the stream ended, says so; a cursor of 2^63 or more must not
// become a negative index.
func TestReadCursorBeyondEnd(t *testing.T) {
	b := NewBuffer(0)
	for i := 0; i < 3; i++ {
		b.Append([]byte("data: x\n\n"), -1)
	}
	for _, after := range []uint64{3, 4, 1 << 40, 1 << 63, math.MaxUint64 - 1} {
		es, ended, _, err := b.Read(after, 10, nil)
		if err != nil || len(es) != 0 || ended {
			t.Fatalf("Read(%d) of a running journal of 3: %d events, ended %v, %v", after, len(es), ended, err)
		}
	}
	b.End()
	for _, after := range []uint64{3, 1 << 63, math.MaxUint64} {
		es, ended, _, err := b.Read(after, 10, nil)
		if err != nil || len(es) != 0 || !ended {
			t.Fatalf("Read(%d) of an ended journal of 3: %d events, ended %v, %v", after, len(es), ended, err)
		}
	}
}

// TestReadMaxCountsNewEvents: max bounds the events one Read adds, not
// the length of what dst already held (Follow with a non-empty dst
// would otherwise wait forever with events to read).
func TestReadMaxCountsNewEvents(t *testing.T) {
	b := NewBuffer(0)
	for i := 0; i < 5; i++ {
		b.Append([]byte("data: x\n\n"), -1)
	}
	dst := make([]Entry, 3)
	es, _, _, err := b.Read(0, 2, dst)
	if err != nil || len(es) != 5 || es[3].N != 1 || es[4].N != 2 {
		t.Fatalf("Read(0, 2) onto 3 entries: %d entries, %v", len(es), err)
	}
}

// TestAfterSeqTrimmed: with max_bytes, a starting_after whose next event
// is still held resumes; one whose next event went is ErrTrimmed.
func TestAfterSeqTrimmed(t *testing.T) {
	b := NewBuffer(30)
	for seq := int64(0); seq < 6; seq++ {
		b.Append([]byte("data: 0123456789\n\n"), seq) // 18 bytes: one held at a time
	}
	if _, err := b.AfterSeq(3); !errors.Is(err, ErrTrimmed) {
		t.Fatalf("AfterSeq(3) with only seq 5 held: %v", err)
	}
	if after, err := b.AfterSeq(4); err != nil || after != 5 {
		t.Fatalf("AfterSeq(4) = %d, %v; want 5", after, err)
	}
	if after, err := b.AfterSeq(5); err != nil || after != 6 {
		t.Fatalf("AfterSeq(5) = %d, %v; want 6", after, err)
	}
}
