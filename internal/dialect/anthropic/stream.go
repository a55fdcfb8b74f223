package anthropic

import (
	"bytes"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// Source yields SSE blocks: an *sse.Reader, or a translator wrapping one.
// It has the shape of pace.Source, so either converts to the other.
type Source interface {
	Next() (sse.Event, error)
}

// beforeReader is the optional hook of a Source (see sse.Reader.BeforeRead
// and pace.Run): called right before each read of the upstream.
type beforeReader interface {
	BeforeRead(f func())
}

// forwardBeforeRead hands f to src when src has the hook. A translator
// yields its events while reading src, so src's reads are the stream's.
func forwardBeforeRead(src Source, f func()) {
	if br, ok := src.(beforeReader); ok {
		br.BeforeRead(f)
	}
}

// newStreamEvent is sse.NewEvent(typ, data) at a fraction of the cost: NewEvent
// parses through a Reader with a 4 KiB buffer (about 3.7 µs per event here,
// more than the whole per-event budget of a translator), while a Reader
// capped at the block's own size allocates only that. The result is the
// same Event (stream_test.go checks it with reflect.DeepEqual), and its
// slices belong to it alone.
func newStreamEvent(typ string, data []byte) sse.Event {
	raw := make([]byte, 0, len(typ)+len(data)+16)
	if typ != "" {
		raw = append(raw, "event: "...)
		raw = append(raw, typ...)
		raw = append(raw, '\n')
	}
	raw = sse.AppendData(raw, data)
	ev, err := sse.NewReader(bytes.NewReader(raw), len(raw)).Next()
	if err != nil {
		// Unreachable for the events built here (one complete block, no
		// line break in typ); fall back to the reference.
		return sse.NewEvent(typ, data)
	}
	return ev
}

// streamQueue holds the events a translator has made and not yet returned: one
// upstream event may become several (a role chunk and the first content; a
// block stop and the next block's start and delta).
type streamQueue struct {
	evs  []sse.Event
	head int
}

func (q *streamQueue) push(ev sse.Event) { q.evs = append(q.evs, ev) }

func (q *streamQueue) pop() (sse.Event, bool) {
	if q.head == len(q.evs) {
		return sse.Event{}, false
	}
	ev := q.evs[q.head]
	q.evs[q.head] = sse.Event{}
	q.head++
	if q.head == len(q.evs) {
		q.evs, q.head = q.evs[:0], 0
	}
	return ev, true
}
