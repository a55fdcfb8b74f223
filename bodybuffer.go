package llmrelay

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// bodyBuffer is a pooled buffer holding one large request body. Reading a
// 1 MB prompt into a fresh buffer costs a zeroed megabyte and, later, its
// collection and its return to the OS: a third of the relay's CPU for such
// a request. The buffer is counted: the handler holds it, and so does every
// upstream request sent from its bytes (until the transport closes that
// request's body, which may come after RoundTrip returns) and every shadow
// copy. The last to let go puts it back.
type bodyBuffer struct {
	b     []byte // len 0, cap 1<<(class+minBodyShift); readBody reads into a copy of the header
	class int
	refs  atomic.Int32
}

// Pooled sizes: powers of two from 64 KiB (smaller bodies are copied for
// the upstream anyway, see joinBelow) to 32 MiB.
const (
	minBodyShift = 16
	bodyClasses  = 10
)

var bodyPools [bodyClasses]sync.Pool

// getBodyBuffer returns a buffer with room for size bytes, held once, or
// nil for a size outside the pooled ones.
func getBodyBuffer(size int64) *bodyBuffer {
	if size < 1<<minBodyShift || size > 1<<(minBodyShift+bodyClasses-1) {
		return nil
	}
	class := bits.Len64(uint64(size-1)) - minBodyShift
	buf, _ := bodyPools[class].Get().(*bodyBuffer)
	if buf == nil {
		buf = &bodyBuffer{b: make([]byte, 0, 1<<(class+minBodyShift)), class: class}
	}
	buf.refs.Store(1)
	return buf
}

// hold takes one more hold on b and returns its release, which does
// something the first time only. A nil b holds nothing.
func (b *bodyBuffer) hold() func() {
	if b == nil {
		return func() {}
	}
	b.refs.Add(1)
	return sync.OnceFunc(b.release)
}

// release lets go of one hold; the last one puts b back in its pool.
func (b *bodyBuffer) release() {
	if b == nil {
		return
	}
	switch n := b.refs.Add(-1); {
	case n == 0:
		bodyPools[b.class].Put(b)
	case n < 0:
		panic("llmrelay: body buffer released more often than held")
	}
}
