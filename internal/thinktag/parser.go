package thinktag

import (
	"bytes"
)

// Kind says which lane a segment's text belongs to.
type Kind uint8

const (
	// Answer is the answer text (content), tool-call markers included.
	Answer Kind = iota
	// Reasoning is the text between an opening and a closing tag.
	Reasoning
)

func (k Kind) String() string {
	if k == Reasoning {
		return "reasoning"
	}
	return "answer"
}

// Segment is a run of text of one kind, never empty. Text points into the
// piece given to the Feed call that returned it, or into the Syntax (bytes
// held back by an earlier call that turned out not to be a tag are the
// tag's own bytes): it is valid as long as that piece is, and must not be
// modified. Two segments in a row may have the same kind.
type Segment struct {
	Kind Kind
	Text []byte
}

// State is what a Parser has seen so far.
type State struct {
	// Reasoning reports that the text now is inside a block: the next
	// byte would be reasoning.
	Reasoning bool
	// Blocks is how many reasoning blocks began: by an opening tag, or
	// the implicit one of StartsInReasoning. An empty block counts.
	Blocks int
	// Unclosed is set by Flush when the text ended inside a block that
	// had begun with a tag or had any reasoning text: the reasoning was
	// cut short (max_tokens, a broken stream) and never closed.
	Unclosed bool
	// Held is how many bytes are held back, waiting for the next piece
	// to say whether they begin a tag (at most MaxTagLen-1).
	Held int
}

// Parser splits one text (an answer's content, in pieces as they arrive)
// into reasoning and answer segments. The zero Parser is not usable: get
// one from Syntax.Parser. A Parser is a value with no pointers into the
// caller's memory between calls, and allocates nothing itself: it may be
// embedded in per-stream state. It is not safe for concurrent use.
type Parser struct {
	syn *Syntax

	// held is the text held back: a proper prefix of one of the expected
	// strings, as a slice of that string in syn, so that it costs no copy
	// and stays valid after the piece it came from is gone.
	held []byte

	reasoning bool // inside a block
	fam       int  // the block's family, -1 when not known (implicit block)
	blockHas  bool // the block began with a tag or has reasoning text
	lead      bool // AtStart, no block yet, only whitespace so far
	plain     bool // AtStart failed: no tag is ever recognised
	skip      bool // at the start of a block or of the answer after one: newlines are dropped
	swallow   bool // at the start of the implicit block: an opening tag is its own
	blocks    int
	unclosed  bool

	// Per call: where segments go and how scan positions map to bytes
	// (see emit).
	dst  []Segment
	a, b []byte

	scratch [2 * MaxTagLen]byte
}

// Parser returns a Parser at the start of a text.
func (s *Syntax) Parser() Parser {
	p := Parser{syn: s}
	p.Reset()
	return p
}

// Reset makes p ready for a new text, with the same Syntax.
func (p *Parser) Reset() {
	s := p.syn
	*p = Parser{syn: s, fam: -1}
	if s.startIn {
		p.reasoning, p.skip, p.swallow, p.blocks = true, true, true, 1
	} else if s.atStart {
		p.lead = true
	}
}

// State reports what p has seen so far.
func (p *Parser) State() State {
	return State{Reasoning: p.reasoning, Blocks: p.blocks, Unclosed: p.unclosed, Held: len(p.held)}
}

// Plain reports that p will never split its text again: with AtStart,
// the text began with something other than an opening tag, so the rest is
// answer. A caller may then stop feeding it and take the text as it is.
func (p *Parser) Plain() bool { return p.plain && p.held == nil }

func (p *Parser) kind() Kind {
	if p.reasoning {
		return Reasoning
	}
	return Answer
}

// set is what may match at the current position, past its start.
func (p *Parser) set() *set {
	switch {
	case !p.reasoning:
		return &p.syn.open
	case p.fam >= 0:
		return &p.syn.closeFam[p.fam]
	default:
		return &p.syn.closeAny
	}
}

// Feed takes the next piece of the text and appends to dst the segments
// that can be told now; it returns dst. Everything is emitted at once but
// the longest suffix of the text so far that could begin the next
// expected tag (or marker), which is held back until a later piece or
// Flush decides it. A piece with no byte that could begin a tag, when
// nothing is held, is one segment, the piece itself.
func (p *Parser) Feed(dst []Segment, text []byte) []Segment {
	if len(text) == 0 {
		return dst
	}
	// The fast path: the piece is all of one kind.
	if p.held == nil && !p.skip && !p.lead && !p.swallow {
		if p.plain {
			return append(dst, Segment{Answer, text})
		}
		if st := p.set(); st.single && bytes.IndexByte(text, st.one) < 0 {
			if p.reasoning {
				p.blockHas = true
			}
			return append(dst, Segment{p.kind(), text})
		}
	}
	p.dst = dst
	i, run := 0, 0
	if h := p.held; h != nil {
		// Decide the held bytes with the new ones after them, in a
		// window long enough for any match that begins in the held part
		// (it ends before len(h)+maxLen). The scan decides positions up
		// to len(h) only, and goes on in the piece itself.
		p.held = nil
		n := copy(p.scratch[:], h)
		m := copy(p.scratch[n:n+min(len(text), p.syn.maxLen)], text)
		p.a, p.b = h, text
		q, r, held := p.scan(p.scratch[:n+m], 0, 0, n)
		if held {
			// A hold found before position n reaches the window's end,
			// so the window had all of text (n+m < n+maxLen).
			p.a = nil
			return p.finish()
		}
		// The pending run: its held part now, the rest with the piece's.
		if r < n {
			p.emit(r, n)
			r = n
		}
		p.a = nil
		i, run = q-n, r-n
	}
	p.b = text
	if i, run, held := p.scan(text, i, run, len(text)); !held {
		p.emit(run, i)
	}
	return p.finish()
}

func (p *Parser) finish() []Segment {
	dst := p.dst
	p.dst, p.b = nil, nil
	return dst
}

// Flush ends the text: bytes still held back were not a tag and are
// emitted as text of the current kind. It sets State.Unclosed when the
// text ended inside a block. Reset p before feeding it another text.
func (p *Parser) Flush(dst []Segment) []Segment {
	if p.held != nil {
		if p.reasoning {
			p.blockHas = true
		}
		dst = append(dst, Segment{p.kind(), p.held})
		p.held = nil
	}
	p.unclosed = p.reasoning && p.blockHas
	return dst
}

// emit appends the text between scan positions s and e as a segment of
// the current kind. Positions index a ++ b: a is the held part of a
// window (nil when scanning a piece itself), b the piece.
func (p *Parser) emit(s, e int) {
	if s >= e {
		return
	}
	k := p.kind()
	if k == Reasoning {
		p.blockHas = true
	}
	na := len(p.a)
	if s < na {
		p.dst = append(p.dst, Segment{k, p.a[s:min(e, na)]})
		s = na
	}
	if s < e {
		p.dst = append(p.dst, Segment{k, p.b[s-na : e-na]})
	}
}

// match is the result of looking for a set's strings at one position.
type match uint8

const (
	none    match = iota
	full          // c matches here
	partial       // the text ends here inside c: it could still match
)

// at looks for the shortest string of st that the text begins with; if
// none and the text is a proper prefix of one, that is a partial match
// (only the text's end can leave a match undecided).
func (st *set) at(text []byte) (*cand, match) {
	for i := range st.cands {
		c := &st.cands[i]
		if len(text) >= len(c.b) {
			if bytes.HasPrefix(text, c.b) {
				return c, full
			}
			continue
		}
		// c and every later (longer) cand run past the text's end.
		if bytes.HasPrefix(c.b, text) {
			return c, partial
		}
	}
	return nil, none
}

// next returns the first position in [k, limit) whose byte begins a
// string of st, or -1.
func (st *set) next(src []byte, k, limit int) int {
	if st.single {
		if j := bytes.IndexByte(src[k:limit], st.one); j >= 0 {
			return k + j
		}
		return -1
	}
	for ; k < limit; k++ {
		if st.first[src[k]] {
			return k
		}
	}
	return -1
}

// scan decides the positions of src from i before limit, emitting
// segments; a match that begins before limit may run past it. run is
// where the pending segment of the current kind begins. It returns the
// position it stopped at and the pending run, not emitted (the caller
// goes on from there), or held true when it ended holding back the rest
// of src, everything before emitted.
func (p *Parser) scan(src []byte, i, run, limit int) (int, int, bool) {
	for i < limit {
		if p.skip {
			j := i
			for j < limit && isNewline(src[j]) {
				j++
			}
			if !p.syn.keep {
				p.emit(run, i)
				run = j
			}
			i = j
			if i == limit {
				break
			}
			p.skip = false
		}
		if p.plain {
			i = limit
			break
		}
		if p.lead {
			for i < limit && isSpace(src[i]) {
				i++
			}
			if i == limit {
				break
			}
			c, m := p.syn.open.at(src[i:])
			switch m {
			case full:
				p.emit(run, i)
				p.open(c)
				i += len(c.b)
				run = i
				continue
			case partial:
				p.emit(run, i)
				p.held = c.b[:len(src)-i]
				return len(src), len(src), true
			}
			p.lead, p.plain = false, true
			i = limit
			break
		}
		if p.swallow {
			c, m := p.syn.swallow.at(src[i:])
			if m == partial {
				p.emit(run, i)
				p.held = c.b[:len(src)-i]
				return len(src), len(src), true
			}
			p.swallow = false
			if m == full && c.kind == candOpen {
				// The model wrote the opening tag the template had
				// already put in the prompt: it is this block's.
				p.emit(run, i)
				p.fam, p.blockHas, p.skip = c.fam, true, true
				i += len(c.b)
				run = i
				continue
			}
			// A closing tag or marker here is found again below.
		}
		st := p.set()
		k := i
		for {
			if k = st.next(src, k, limit); k < 0 {
				i = limit
				break
			}
			c, m := st.at(src[k:])
			if m == none {
				k++
				continue
			}
			p.emit(run, k)
			if m == partial {
				p.held = c.b[:len(src)-k]
				return len(src), len(src), true
			}
			i = k + len(c.b)
			run = i
			switch c.kind {
			case candOpen:
				p.open(c)
			case candClose:
				p.reasoning, p.fam, p.blockHas, p.skip = false, -1, false, true
			case candMarker:
				// The marker is the answer's first text.
				p.reasoning, p.fam, p.blockHas = false, -1, false
				run = k
			}
			break
		}
	}
	return i, run, false
}

// open begins a block of c's family.
func (p *Parser) open(c *cand) {
	p.reasoning, p.fam, p.blockHas, p.skip, p.lead = true, c.fam, true, true, false
	p.blocks++
}

// Split parses a whole text (a non-stream answer's content) and returns
// its reasoning and its answer, each the concatenation of its segments,
// and the final state.
func Split(s *Syntax, text []byte) (reasoning, answer []byte, st State) {
	p := s.Parser()
	var buf [8]Segment
	segs := p.Feed(buf[:0], text)
	segs = p.Flush(segs)
	for _, sg := range segs {
		if sg.Kind == Reasoning {
			reasoning = append(reasoning, sg.Text...)
		} else {
			answer = append(answer, sg.Text...)
		}
	}
	return reasoning, answer, p.State()
}
