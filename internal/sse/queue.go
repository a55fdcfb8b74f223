package sse

// Queue holds events a translator has made and not yet handed on: one
// upstream event may become several (a role chunk and the first content;
// a block's end and the next block's start). The zero Queue is empty and
// ready; its storage is reused once drained.
type Queue struct {
	evs  []Event
	head int
}

// Push appends ev.
func (q *Queue) Push(ev Event) { q.evs = append(q.evs, ev) }

// Pop removes and returns the oldest event; ok is false when the queue is
// empty.
func (q *Queue) Pop() (ev Event, ok bool) {
	if q.head == len(q.evs) {
		return Event{}, false
	}
	ev = q.evs[q.head]
	q.evs[q.head] = Event{} // let the bytes go
	q.head++
	if q.head == len(q.evs) {
		q.evs, q.head = q.evs[:0], 0
	}
	return ev, true
}
