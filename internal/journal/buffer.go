package journal

import (
	"crypto/rand"
	"errors"
	"sync"
)

// ErrTrimmed is returned for a cursor before the oldest event a journal
// still holds: the events after it were dropped for max_bytes, and a
// replay from there would have a gap.
var ErrTrimmed = errors.New("journal: the events after this cursor were dropped (max_bytes)")

// idPrefix marks the relay's stream ids.
const idPrefix = "rs_"

// NewID returns an unguessable stream id: 128 random bits, base 62.
func NewID() string {
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	out := make([]byte, 0, len(idPrefix)+22)
	out = append(out, idPrefix...)
	// 22 base-62 digits hold 128 bits; each takes 6 bits and the rejected
	// values are drawn again, so every digit is uniform.
	var pool [64]byte
	_, _ = rand.Read(pool[:]) // crypto/rand never fails on Linux
	for i := 0; len(out) < cap(out); i++ {
		if i == len(pool) {
			_, _ = rand.Read(pool[:])
			i = 0
		}
		if v := pool[i] & 63; v < 62 {
			out = append(out, digits[v])
		}
	}
	return string(out)
}

// ValidID reports whether s has the shape of a stream id, so a lookup
// with anything else is refused before it reaches a store.
func ValidID(s string) bool {
	if len(s) != len(idPrefix)+22 || s[:len(idPrefix)] != idPrefix {
		return false
	}
	for _, c := range []byte(s[len(idPrefix):]) {
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z') {
			return false
		}
	}
	return true
}

// Entry is one journaled event.
type Entry struct {
	N    uint64 // its position in the stream, from 1
	Seq  int64  // the Responses sequence_number it carries, or -1
	Data []byte // the block (see Block.Raw); never changed once appended
}

// Buffer is one stream's journal in memory. It is safe for one writer
// and any number of readers.
type Buffer struct {
	mu       sync.Mutex
	entries  []Entry // positions first .. next-1
	first    uint64
	next     uint64
	bytes    int
	maxBytes int
	dropped  int
	ended    bool
	// wake is closed by the next Append or End; it is made only when a
	// reader asks for it (most journals are never read while written).
	wake chan struct{}
	// page is where Append copies event data: entries are slices of
	// it, never written again, so a stream's events cost a few
	// allocations, not one each.
	page []byte
}

// closed is the wake channel of an ended journal.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Page sizes: the first page of a journal, the largest it grows to.
const (
	minPage = 1 << 10
	maxPage = 32 << 10
)

// NewBuffer returns an empty journal that keeps at most maxBytes of
// event data (0: no bound).
func NewBuffer(maxBytes int) *Buffer {
	return &Buffer{first: 1, next: 1, maxBytes: maxBytes}
}

// Append journals a copy of block and returns its position. Beyond
// maxBytes the oldest events go (a single event larger than maxBytes is
// kept alone).
func (b *Buffer) Append(block []byte, seq int64) uint64 {
	b.mu.Lock()
	if cap(b.page)-len(b.page) < len(block) {
		size := min(max(2*cap(b.page), minPage), maxPage)
		b.page = make([]byte, 0, max(size, len(block)))
	}
	at := len(b.page)
	b.page = append(b.page, block...)
	e := Entry{N: b.next, Seq: seq, Data: b.page[at:len(b.page):len(b.page)]}
	b.next++
	if b.entries == nil {
		b.entries = make([]Entry, 0, 16)
	}
	b.entries = append(b.entries, e)
	b.bytes += len(e.Data)
	for b.maxBytes > 0 && b.bytes > b.maxBytes && len(b.entries) > 1 {
		b.bytes -= len(b.entries[0].Data)
		b.entries[0] = Entry{}
		b.entries = b.entries[1:]
		b.first++
		b.dropped++
	}
	w := b.wake
	b.wake = nil
	b.mu.Unlock()
	if w != nil && w != closed {
		close(w)
	}
	return e.N
}

// End marks the journal complete: readers that caught up stop waiting.
func (b *Buffer) End() {
	b.mu.Lock()
	if b.ended {
		b.mu.Unlock()
		return
	}
	b.ended = true
	w := b.wake
	b.wake = closed
	b.mu.Unlock()
	if w != nil {
		close(w)
	}
}

// waker is the channel the next Append or End closes; b.mu is held.
func (b *Buffer) waker() chan struct{} {
	if b.wake == nil {
		b.wake = make(chan struct{})
	}
	return b.wake
}

// Read returns up to max events after position after (0: from the
// start), whether the journal has ended, and a channel closed when there
// is more to read. It appends to dst.
func (b *Buffer) Read(after uint64, max int, dst []Entry) (es []Entry, ended bool, more <-chan struct{}, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if after >= b.next-1 {
		// Nothing after it yet. A cursor past the end is a number the
		// client chose: it reads nothing (and must not wrap around).
		return dst, b.ended, b.waker(), nil
	}
	if after+1 < b.first {
		return dst, b.ended, b.waker(), ErrTrimmed
	}
	i, had := int(after+1-b.first), len(dst)
	for ; i < len(b.entries) && (max <= 0 || len(dst)-had < max); i++ {
		dst = append(dst, b.entries[i])
	}
	ended = b.ended && i >= len(b.entries)
	return dst, ended, b.waker(), nil
}

// AfterSeq is the position to resume after for a Responses client's
// starting_after: the last event whose sequence_number is at most seq
// (0 when none is). ErrTrimmed: the event after seq was dropped.
func (b *Buffer) AfterSeq(seq int64) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return afterSeq(b.entries, b.first, seq)
}

func afterSeq(entries []Entry, first uint64, seq int64) (uint64, error) {
	after := first - 1
	for _, e := range entries {
		if e.Seq < 0 || e.Seq > seq {
			break
		}
		after = e.N
	}
	if after == first-1 && first > 1 && (len(entries) == 0 || entries[0].Seq != seq+1) {
		return 0, ErrTrimmed
	}
	return after, nil
}

// Len is the number of events journaled (dropped ones included), and
// Size the bytes held.
func (b *Buffer) Len() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.next - 1
}

// Size is the bytes of event data held.
func (b *Buffer) Size() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bytes
}

// Dropped is the number of events dropped for max_bytes.
func (b *Buffer) Dropped() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped
}

// Ended reports whether End was called.
func (b *Buffer) Ended() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ended
}
