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

// Pump is the pull loop of a Source made from another, such as a
// translator into another dialect: the blocks already made (Q) go first,
// then the next block of Src is handed to the Handler, which pushes what
// it makes on Q, or ends the stream by setting Err (after what is queued).
// Once Src failed or ended, its error (io.EOF included) is returned for
// good; ErrPending (a fed Src with nothing more for now) is returned but
// not kept, so the next Pull reads Src again. Embedded in the Source, it gives it BeforeRead, forwarded to Src.
type Pump struct {
	Src Source
	Q   Queue
	// Err is returned once Q is empty: Src's, the handler's, or io.EOF
	// after the stream's end.
	Err error
	// cur is the block being handled; kept here so that handing it to the
	// handler (through an interface) allocates nothing.
	cur Event
}

// Handler turns one block of a Pump's Src into blocks on its Q.
type Handler interface{ Handle(ev *Event) }

// BeforeRead forwards the relay's per-read hook to Src.
func (p *Pump) BeforeRead(f func()) { ForwardBeforeRead(p.Src, f) }

// Pull returns the next block, reading Src through h as needed.
func (p *Pump) Pull(h Handler) (Event, error) {
	for {
		if ev, ok := p.Q.Pop(); ok {
			return ev, nil
		}
		if p.Err != nil {
			return Event{}, p.Err
		}
		var err error
		p.cur, err = p.Src.Next()
		if err == ErrPending {
			return Event{}, err
		}
		if err != nil {
			p.Err = err
			continue
		}
		h.Handle(&p.cur)
	}
}
