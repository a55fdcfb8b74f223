package pace

import (
	"context"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// Output is the client side of a stream.
type Output interface {
	Write(p []byte) (int, error)
	Flush() error
}

// Source yields the upstream's SSE blocks: an *sse.Reader, or a
// translator wrapping one (see sse.Source).
type Source = sse.Source

// End says how a stream ended: the one classification of the relay's
// stream readers, Run (a stream relayed to the client) and the relay's
// answers assembled from a stream.
type End uint8

const (
	EndDone            End = iota // the end event was sent: [DONE] (Chat), message_stop (Messages), response.completed or .incomplete (Responses)
	EndEOF                        // the upstream closed the stream without its end event
	EndUnterminated               // the upstream closed the stream in the middle of an event
	EndBroken                     // reading the upstream failed (Result.Err)
	EndClientGone                 // the client went away; nothing more can be written
	EndReasoningBudget            // the reasoning budget ran out (action error or failover)
	// EndErrorEvent: the upstream's own in-band error event ended the
	// stream. Run forwards the event and reads on (Result.SawError); a
	// reader that assembles the answer stops at it.
	EndErrorEvent
	// EndTooLarge: the stream outgrew what its reader holds in memory
	// (an answer assembled whole); Run holds no answer and never ends so.
	EndTooLarge
)

// Result is how a stream ended, with its figures.
type Result struct {
	End      End
	Err      error // EndBroken: the read error
	SawError bool  // the upstream sent an in-band error event
	Stats    Stats
}

// HeartbeatEvent is an SSE comment: every SSE parser ignores it, unlike
// `event:`, `id:` or `retry:` lines, which crash some official SDKs. Do
// not modify it.
var HeartbeatEvent = []byte(": keep-alive\n\n")

// parsedDone is a well-formed [DONE] event, sent in place of one cut off
// by the upstream's EOF.
var parsedDone = func() sse.Event {
	ev, err := sse.NewReader(strings.NewReader("data: [DONE]\n\n"), 0).Next()
	if err != nil {
		panic(err)
	}
	return ev.Clone()
}()

// Run relays one committed stream from src to out through a Pacer, until
// the end event ([DONE], message_stop for FormatMessages,
// response.completed or .incomplete for FormatResponses), the
// upstream's end, or the client going away. first holds the blocks
// already read from src (up to its first data event).
//
// A reader goroutine reads the upstream and queues events; the calling
// goroutine owns out and writes paced emissions and heartbeats, waking on
// new events or one timer, armed only while there is a backlog or a
// heartbeat is due. When the backlog exceeds Config.QueueBytes the reader
// stops reading (back-pressure through TCP, never loss). When the client
// goes away (a write fails or ctx ends), Run calls abort, which must make
// src.Next return (by cancelling the upstream request), and waits for the
// reader to finish before returning.
func Run(ctx context.Context, cfg Config, first []sse.Event, src Source, out Output, abort func()) Result {
	cfg = cfg.withDefaults()
	if cfg.Mode == ModeOff {
		return runDirect(ctx, cfg, first, src, out, abort)
	}
	s := &stream{
		cfg:   cfg,
		p:     NewPacer(cfg),
		src:   src,
		wake:  make(chan struct{}, 1),
		space: make(chan struct{}, 1),
		stop:  make(chan struct{}),
		exit:  make(chan struct{}),
	}
	final := countedBy(src, &s.mu, s.p)
	now := time.Now()
	for i := range first {
		if s.push(&first[i], now) {
			break
		}
	}
	// Wake the writer once per upstream read, when every event of the
	// read is queued, not once per event: one handoff and one flush per
	// read.
	s.batched = sse.ForwardBeforeRead(src, s.wakeIfDue)
	if !s.ended {
		go s.read()
	} else {
		close(s.exit)
	}
	res := s.write(ctx, out)
	if res.End == EndClientGone {
		close(s.stop)
		abort()
	}
	<-s.exit
	s.mu.Lock()
	res.Stats = s.p.Stats()
	final()
	res.SawError = s.sawError
	if res.End != EndClientGone {
		res.End, res.Err = s.end, s.err
	}
	s.p.Release()
	s.mu.Unlock()
	return res
}

// RuneCounted is a Source that wants the pacer's count of the output it
// read (Pacer.OutputRunes) instead of counting it again: a usage meter
// right under the pacer. Run hands it a function that reads the count
// under the pacer's lock (call it only between Next calls, never from
// inside one of the pacer's), and at the end one that returns the final
// count, since the pacer is released.
type RuneCounted interface {
	CountedBy(func() int)
}

// countedBy gives src the pacer's count, if it wants it; the returned
// function gives it the final count when the stream is over.
func countedBy(src Source, mu *sync.Mutex, p *Pacer) (final func()) {
	rc, ok := src.(RuneCounted)
	if !ok {
		return func() {}
	}
	rc.CountedBy(func() int {
		mu.Lock()
		defer mu.Unlock()
		return p.OutputRunes()
	})
	return func() {
		n := p.OutputRunes() // under mu, before the pacer is released
		rc.CountedBy(func() int { return n })
	}
}

// stream is the shared state of Run's two goroutines; mu guards the Pacer
// and the end fields.
type stream struct {
	cfg Config
	src Source

	mu       sync.Mutex
	p        *Pacer
	ended    bool // no more pushes
	end      End
	err      error
	sawError bool

	waitsFor time.Time // the pacer's next wake, as the writer last saw it (zero: none); mu

	wake    chan struct{} // reader → writer: something due was queued, or it ended
	batched bool          // src signals wake before each read (see Run)
	space   chan struct{} // writer → reader: the backlog shrank
	stop    chan struct{} // closed when the writer gives up
	exit    chan struct{} // closed when the reader is done
}

// push queues one block (mu held, or before the reader starts) and
// reports whether the stream ended with it.
func (s *stream) push(ev *sse.Event, now time.Time) bool {
	if ev.Unterminated {
		if done, ok := s.p.finalEvent(ev); ok {
			// llama.cpp ends with "data: [DONE]" and no blank line.
			s.p.Push(&done, now)
			s.finish(EndDone, nil, now)
			return true
		}
		s.finish(EndUnterminated, nil, now)
		return true
	}
	switch s.p.Push(ev, now) {
	case KindDone:
		s.finish(EndDone, nil, now)
		return true
	case KindError:
		s.sawError = true
	}
	if s.p.OverBudget() {
		s.finish(EndReasoningBudget, nil, now)
		return true
	}
	return false
}

func (s *stream) finish(end End, err error, now time.Time) {
	s.ended, s.end, s.err = true, end, err
	s.p.End(now)
}

// read is the reader goroutine.
func (s *stream) read() {
	defer close(s.exit)
	for {
		ev, err := s.src.Next()
		now := time.Now()
		s.mu.Lock()
		var done, full bool
		switch {
		case err == io.EOF:
			s.finish(EndEOF, nil, now)
			done = true
		case err != nil:
			s.finish(EndBroken, err, now)
			done = true
		default:
			done = s.push(&ev, now)
			full = s.p.Held() > s.cfg.QueueBytes
		}
		s.mu.Unlock()
		if done || full {
			signal(s.wake)
		} else if !s.batched {
			s.wakeIfDue()
		}
		if done {
			return
		}
		for full {
			select {
			case <-s.space:
			case <-s.stop:
				return
			}
			s.mu.Lock()
			full = s.p.Held() > s.cfg.QueueBytes
			s.mu.Unlock()
		}
	}
}

// write is the writer loop, on the caller's goroutine.
func (s *stream) write(ctx context.Context, out Output) Result {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	lastWrite := time.Now()
	for {
		now := time.Now()
		s.mu.Lock()
		b, wake := s.p.Next(now)
		s.waitsFor = wake
		finished := s.ended && s.p.Empty()
		roomy := s.p.Held() <= s.cfg.QueueBytes
		s.mu.Unlock()
		if roomy {
			signal(s.space)
		}
		if len(b) > 0 {
			if err := writeFlush(out, b); err != nil {
				return Result{End: EndClientGone, Err: err}
			}
			lastWrite = now
		}
		if finished {
			return Result{}
		}

		due := wake
		if s.cfg.Heartbeat > 0 {
			if hb := lastWrite.Add(s.cfg.Heartbeat); due.IsZero() || hb.Before(due) {
				due = hb
			}
		}
		var tc <-chan time.Time
		if !due.IsZero() {
			d := time.Until(due)
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			tc = timer.C
		}
		select {
		case <-s.wake:
		case <-tc:
			if s.cfg.Heartbeat > 0 && time.Since(lastWrite) >= s.cfg.Heartbeat {
				if err := writeFlush(out, HeartbeatEvent); err != nil {
					return Result{End: EndClientGone, Err: err}
				}
				lastWrite = time.Now()
				s.mu.Lock()
				s.p.tl.add(lastWrite, true, LaneHeartbeat, 0)
				s.mu.Unlock()
			}
		case <-ctx.Done():
			return Result{End: EndClientGone, Err: ctx.Err()}
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

func writeFlush(out Output, b []byte) error {
	if _, err := out.Write(b); err != nil {
		return err
	}
	return out.Flush()
}

// wakeIfDue wakes the writer when what the reader queued is due before
// the time the writer already waits for: most reads of a burst only add
// to a backlog the next tick serves, and waking the writer for each costs
// a goroutine switch and a timer reset for nothing.
func (s *stream) wakeIfDue() {
	s.mu.Lock()
	due := s.p.Due(time.Now())
	wake := !due.IsZero() && (s.waitsFor.IsZero() || due.Before(s.waitsFor))
	s.mu.Unlock()
	if wake {
		signal(s.wake)
	}
}

// signal wakes the other goroutine without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
