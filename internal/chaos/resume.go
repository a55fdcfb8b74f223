package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The resume cases (issue 31): a client of a journaled stream (the relay
// with `resume { }`) disconnects at random points and comes back (at the
// stream URL with Last-Event-ID, by a Responses starting_after cursor, or
// by sending the same request again), while the upstream breaks as the
// continuation cases make it. What it ends up with must be the stream an
// uninterrupted client got: every event once, in order, none lost, and
// the upstream asked for one generation. ResumeLog assembles and checks
// the events; the upstream counts each request's generations by a nonce
// in the prompt (Hits).

// NoncePrefix starts a resume case's nonce in its prompt: the upstream
// finds it in any dialect's translation of the request.
const NoncePrefix = "chaos-nonce-"

// nonceLen is the nonce's length after NoncePrefix (hex digits).
const nonceLen = 16

// Nonce is the nonce a resume case puts in its prompt for r.
func Nonce(r uint64) string { return NoncePrefix + fmt.Sprintf("%016x", r) }

// findNonce returns the first nonce in body, or "".
func findNonce(body []byte) string {
	i := bytes.Index(body, []byte(NoncePrefix))
	if i < 0 || len(body) < i+len(NoncePrefix)+nonceLen {
		return ""
	}
	return string(body[i : i+len(NoncePrefix)+nonceLen])
}

// Hit is one request the upstream received for a nonce.
type Hit struct {
	Path string // the request's URL path (its upstream: /a/v1/…, /r/v1/…)
	// Fresh: no answer so far in the request, a generation from the
	// start (a continuation carries the answer so far).
	Fresh bool
}

// PacedSuffix ends a continuation behaviour's tag whose answer comes a
// piece every ContPacedGap, as a model writes, so that a client can
// disconnect (and resume) while it is being generated: "cont-drop@x+paced".
const PacedSuffix = "+paced"

// ContPacedGap is the time between a paced answer's pieces.
const ContPacedGap = 10 * time.Millisecond

// REvent is one event of a journaled stream as its client keeps it.
type REvent struct {
	ID     string // the id: field, "<stream>.<n>"
	Stream string // its stream part
	N      uint64 // its position (0: no parseable id)
	Seq    int64  // a Responses event's sequence_number (-1: none)
	Fields string // its other lines but retry: and comments, as sent
	Event  Event  // as an LF client dispatches it (for CheckStream)
}

// RParser reads a journaled stream's events: lines end at "\n" (a
// trailing "\r" dropped), comments skipped, an event dispatched at a
// blank line when it has fields. The zero value is ready.
type RParser struct {
	line []byte
	cur  REvent
	has  bool
}

// Feed parses p and returns the events it completed.
func (ps *RParser) Feed(p []byte) []REvent {
	var out []REvent
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			ps.line = append(ps.line, p...)
			return out
		}
		ps.line = append(ps.line, p[:i]...)
		p = p[i+1:]
		line := string(bytes.TrimSuffix(ps.line, []byte{'\r'}))
		ps.line = ps.line[:0]
		if ev, ok := ps.processLine(line); ok {
			out = append(out, ev)
		}
	}
	return out
}

func (ps *RParser) processLine(line string) (REvent, bool) {
	switch {
	case line == "":
		if !ps.has {
			ps.cur = REvent{}
			return REvent{}, false
		}
		ev := ps.cur
		ev.Seq = responsesSeq(ev.Event.Data)
		ps.cur, ps.has = REvent{}, false
		return ev, true
	case line[0] == ':':
		return REvent{}, false
	}
	name, value, _ := strings.Cut(line, ":")
	value = strings.TrimPrefix(value, " ")
	switch name {
	case "id":
		ps.cur.ID = value
		if i := strings.LastIndexByte(value, '.'); i > 0 {
			if n, err := strconv.ParseUint(value[i+1:], 10, 64); err == nil {
				ps.cur.Stream, ps.cur.N = value[:i], n
			}
		}
		return REvent{}, false
	case "retry":
		return REvent{}, false
	case "data":
		if ps.cur.Event.HasData {
			ps.cur.Event.Data = append(ps.cur.Event.Data, '\n')
		}
		ps.cur.Event.Data = append(ps.cur.Event.Data, value...)
		ps.cur.Event.HasData = true
	case "event":
		ps.cur.Event.Type = value
	}
	ps.cur.Fields += line + "\n"
	ps.has = true
	return REvent{}, false
}

// responsesSeq is a Responses event's sequence_number, or -1.
func responsesSeq(data []byte) int64 {
	if !bytes.Contains(data, []byte(`"sequence_number"`)) {
		return -1
	}
	var e struct {
		Seq *int64 `json:"sequence_number"`
	}
	if json.Unmarshal(data, &e) != nil || e.Seq == nil {
		return -1
	}
	return *e.Seq
}

// ResumeLog is what a client of one journaled stream has, over all its
// connections to it.
type ResumeLog struct {
	Stream string   // the stream's id, from the first event
	Events []REvent // by position: Events[i] is position i+1
}

// Add takes the events one connection delivered, a connection that asked
// for the events after position after (0: from the start). They must be
// the positions after+1, after+2, … of the log's stream, each equal to
// the log's event at that position when it has one: an event again is a
// duplicate, a position skipped a loss, another stream a second
// generation. It returns the first problem, or "".
func (l *ResumeLog) Add(after uint64, evs []REvent) string {
	if after > uint64(len(l.Events)) {
		return fmt.Sprintf("asked for the events after %d, holding only %d", after, len(l.Events))
	}
	want := after + 1
	for _, ev := range evs {
		if ev.N == 0 {
			return fmt.Sprintf("an event without a journal id (id %q): %.80s", ev.ID, ev.Fields)
		}
		if l.Stream == "" {
			l.Stream = ev.Stream
		}
		switch {
		case ev.Stream != l.Stream:
			return fmt.Sprintf("event %s is of another stream than %s: a second generation", ev.ID, l.Stream)
		case ev.N < want:
			return fmt.Sprintf("event %d again after event %d: duplicated", ev.N, want-1)
		case ev.N > want:
			return fmt.Sprintf("event %d after event %d: events %d to %d lost", ev.N, want-1, want, ev.N-1)
		}
		if int(ev.N) <= len(l.Events) {
			if have := l.Events[ev.N-1]; have.ID != ev.ID || have.Fields != ev.Fields {
				return fmt.Sprintf("event %d differs from its first delivery: %.80q, then %.80q", ev.N, have.Fields, ev.Fields)
			}
		} else {
			l.Events = append(l.Events, ev)
		}
		want++
	}
	return ""
}

// Last is the position of the last event held (0: none).
func (l *ResumeLog) Last() uint64 { return uint64(len(l.Events)) }

// AfterSeq is the position of the event with sequence_number seq, which
// a starting_after=seq cursor resumes after; false when none has it.
func (l *ResumeLog) AfterSeq(seq int64) (uint64, bool) {
	for i, ev := range l.Events {
		if ev.Seq == seq {
			return uint64(i + 1), true
		}
	}
	return 0, false
}

// Same reports how the log differs from full, the stream as a client
// reading it whole from its first event got it (a replay from 0 of the
// ended journal): "" when every event is there once, equal, in order.
func (l *ResumeLog) Same(full []REvent) string {
	for i := range min(len(l.Events), len(full)) {
		a, b := l.Events[i], full[i]
		if a.ID != b.ID || a.Fields != b.Fields {
			return fmt.Sprintf("event %d: the resuming client has %s %.80q, the whole stream %s %.80q", i+1, a.ID, a.Fields, b.ID, b.Fields)
		}
	}
	if len(l.Events) != len(full) {
		return fmt.Sprintf("the resuming client has %d events, the whole stream %d", len(l.Events), len(full))
	}
	return ""
}

// Dispatched is the log's events as an LF client dispatched them.
func (l *ResumeLog) Dispatched() []Event {
	out := make([]Event, len(l.Events))
	for i, ev := range l.Events {
		out[i] = ev.Event
	}
	return out
}

// Generations counts the hits that started a generation on the upstream
// whose paths start with prefix: the requests without an answer so far.
func Generations(hits []Hit, prefix string) int {
	n := 0
	for _, h := range hits {
		if h.Fresh && strings.HasPrefix(h.Path, prefix) {
			n++
		}
	}
	return n
}
