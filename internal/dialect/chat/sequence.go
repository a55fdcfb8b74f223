package chat

import "fmt"

// ItemKind is the kind of an output item (a Messages content block, a
// Responses output item) a Sequencer orders. The text kinds have the
// values of the Channel they carry: ItemKind(ch) is the item of a piece.
type ItemKind uint8

const (
	ItemText               = ItemKind(ChanText)
	ItemReasoning          = ItemKind(ChanReasoning)
	ItemRefusal            = ItemKind(ChanRefusal)
	ItemCall      ItemKind = 4
)

// Item is one output item: a run of one kind of text, or one tool call.
// A Sink reads its members; the Sequencer owns it.
type Item struct {
	Kind ItemKind
	// Tool calls: Call numbers them in order of first appearance from 0,
	// which is also their order in the output; Index is the Chat index
	// they came under; ID and Name are the first non-empty ones given
	// ("" if none came before the call was opened).
	Call     int
	Index    int
	ID, Name string

	open, closed bool
	held         []byte // what came before the item could be written
	args         jsonEnd
}

// Sink writes the items of the client's dialect. The Sequencer calls
// OpenItem once per item, then WriteItem any number of times (b is only
// valid during the call), then CloseItem once, one
// item at a time: an item is opened only after the one before it is
// closed. next is the item the Sequencer opens right after (nil when none
// is known yet): a Responses message item holds a text and a refusal part
// when they follow one another.
type Sink interface {
	OpenItem(it *Item)
	WriteItem(it *Item, b []byte)
	CloseItem(it, next *Item)
}

// MaxHeld bounds what a Sequencer holds back (see Sequencer): beyond it
// the upstream's interleaving cannot be translated, and the stream ends.
const MaxHeld = 32 << 20

// Sequencer turns the content of a Chat stream into the one-item-at-a-time
// order the Messages and Responses formats require. A Chat stream may
// interleave everything: the OpenAI SDKs accumulate tool call fragments
// by index, so a provider may announce several calls and then send each
// one's arguments in any order, and text may come between two fragments
// of one call. A Messages stream has one content block open at a time, a
// Responses stream one output item, and neither reopens one once closed.
//
// Items are kept in the order they first appeared. The first one not yet
// closed is the head: it is open, and whatever comes for it is written at
// once (the common case: nothing interleaved, everything streams as it
// arrives). Whatever comes for a later item is held, and released when
// that item becomes the head. The head is closed, and the next one
// opened, as soon as nothing more can come for it:
//
//   - a run of text, when any other item follows it (text that comes
//     after that starts a new run);
//   - a tool call, when another item follows it and its arguments so far
//     are a complete JSON object or array (arguments go on only as
//     whitespace after that, or as invalid JSON);
//   - every item, at Flush (the finish_reason, or the end of the stream).
//
// A call is opened once it has a name (at Flush without one). A tool call
// fragment is the call of the same index and id; one without an id is the
// latest call of its index; one with an id new at its index is a new call
// (providers that omit the index send every call as index 0, each with its
// own id), except when the latest call of that index has no id yet, which
// takes it. A fragment for a call already closed is dropped when it is
// only whitespace, and is an *UnreadableError otherwise; so is holding
// back more than MaxHeld bytes.
type Sequencer struct {
	Sink Sink

	queue []*Item // not closed, in output order; queue[0] is the head
	calls int     // calls seen
	// latest is the latest call of each Chat index; byID the call of
	// each (index, id).
	latest map[int]*Item
	byID   map[callKey]*Item
	held   int
}

type callKey struct {
	index int
	id    string
}

// Streaming reports whether text of kind k would be written at once: the
// head is open, of that kind, and nothing is queued after it. The
// translators' fast path checks it and writes the text itself.
func (s *Sequencer) Streaming(k ItemKind) bool {
	return len(s.queue) == 1 && s.queue[0].Kind == k && s.queue[0].open
}

// Text adds text of kind k (ItemText, ItemReasoning or ItemRefusal).
func (s *Sequencer) Text(k ItemKind, text []byte) error {
	if len(text) == 0 {
		return nil
	}
	var it *Item
	if n := len(s.queue); n > 0 && s.queue[n-1].Kind == k {
		it = s.queue[n-1]
	} else {
		it = &Item{Kind: k}
		s.queue = append(s.queue, it)
	}
	return s.write(it, text)
}

// Call adds a tool call fragment.
func (s *Sequencer) Call(cd *CallDelta) error {
	it := s.lookup(cd)
	if it == nil {
		it = &Item{Kind: ItemCall, Call: s.calls, Index: cd.Index, ID: cd.ID, Name: cd.Name}
		s.calls++
		if s.latest == nil {
			s.latest, s.byID = make(map[int]*Item), make(map[callKey]*Item)
		}
		s.latest[cd.Index] = it
		if cd.ID != "" {
			s.byID[callKey{cd.Index, cd.ID}] = it
		}
		s.queue = append(s.queue, it)
	}
	if it.closed {
		if !isBlank(cd.Args) {
			return &UnreadableError{Reason: fmt.Sprintf("arguments for tool call %d (index %d) after it ended", it.Call, it.Index)}
		}
		return nil
	}
	if it.Name == "" {
		it.Name = cd.Name
	}
	if cd.Args == "" {
		s.advance() // a name may have made the head openable
		return s.over()
	}
	it.args.feed(cd.Args)
	return s.write(it, []byte(cd.Args))
}

// lookup finds the call a fragment continues, nil for a new one.
func (s *Sequencer) lookup(cd *CallDelta) *Item {
	cur := s.latest[cd.Index]
	if cd.ID == "" || cur == nil {
		return cur
	}
	if it := s.byID[callKey{cd.Index, cd.ID}]; it != nil {
		return it
	}
	if cur.ID == "" {
		cur.ID = cd.ID // the id came after the call's first fragment
		s.byID[callKey{cd.Index, cd.ID}] = cur
		return cur
	}
	return nil
}

// Flush opens and closes every item left, in order: the upstream ended
// the answer.
func (s *Sequencer) Flush() {
	for i, it := range s.queue {
		if !it.open {
			s.open(it)
		}
		var next *Item
		if i+1 < len(s.queue) {
			next = s.queue[i+1]
		}
		s.close(it, next)
	}
	clear(s.queue)
	s.queue = s.queue[:0]
}

// write writes b to it now if it is the open head, else holds it; then
// closes what can be closed.
func (s *Sequencer) write(it *Item, b []byte) error {
	if it == s.queue[0] && !it.open && s.openable(it) {
		s.open(it)
	}
	if it == s.queue[0] && it.open {
		s.Sink.WriteItem(it, b)
	} else {
		it.held = append(it.held, b...)
		s.held += len(b)
	}
	s.advance()
	return s.over()
}

func (s *Sequencer) over() error {
	if s.held > MaxHeld {
		return &UnreadableError{Reason: fmt.Sprintf("the stream interleaves more than %d MiB that the client's format must receive in another order", MaxHeld>>20)}
	}
	return nil
}

// advance closes the head while it can be, opening the next.
func (s *Sequencer) advance() {
	for len(s.queue) > 0 {
		h := s.queue[0]
		if !h.open {
			if !s.openable(h) {
				return
			}
			s.open(h)
		}
		if len(s.queue) == 1 || h.Kind == ItemCall && !h.args.complete() {
			return
		}
		s.close(h, s.queue[1])
		s.queue[0] = nil
		s.queue = s.queue[1:]
	}
}

func (s *Sequencer) openable(it *Item) bool { return it.Kind != ItemCall || it.Name != "" }

func (s *Sequencer) open(it *Item) {
	it.open = true
	s.Sink.OpenItem(it)
	if len(it.held) > 0 {
		s.held -= len(it.held)
		s.Sink.WriteItem(it, it.held)
		it.held = nil
	}
}

func (s *Sequencer) close(it, next *Item) {
	it.closed = true
	s.Sink.CloseItem(it, next)
}

func isBlank(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// jsonEnd follows a call's arguments as they come, just enough to tell
// when they are a complete JSON object or array: brackets balanced, outside
// strings. (Whether they are valid JSON is the client's concern; a
// translator only needs to know that nothing but whitespace can follow.)
type jsonEnd struct {
	state uint8
	depth int
}

const (
	jeStart  = iota // nothing but whitespace yet
	jeIn            // in the top-level object or array
	jeString        // in a string in it
	jeEscape        // after a backslash in that string
	jeDone          // balanced, whitespace since
	jeNever         // not an object or array, or more after its end
)

func (j *jsonEnd) complete() bool { return j.state == jeDone }

func (j *jsonEnd) feed(s string) {
	for i := 0; i < len(s) && j.state != jeNever; i++ {
		c := s[i]
		switch j.state {
		case jeStart:
			switch c {
			case ' ', '\t', '\n', '\r':
			case '{', '[':
				j.state, j.depth = jeIn, 1
			default:
				j.state = jeNever
			}
		case jeIn:
			switch c {
			case '"':
				j.state = jeString
			case '{', '[':
				j.depth++
			case '}', ']':
				if j.depth--; j.depth == 0 {
					j.state = jeDone
				}
			}
		case jeString:
			switch c {
			case '\\':
				j.state = jeEscape
			case '"':
				j.state = jeIn
			}
		case jeEscape:
			j.state = jeString
		case jeDone:
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				j.state = jeNever
			}
		}
	}
}
