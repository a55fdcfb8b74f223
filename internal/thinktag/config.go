package thinktag

import (
	"errors"
	"fmt"
	"slices"
)

// Tag is one family of reasoning tags: the opening and the closing tag,
// matched byte for byte (case matters, no whitespace inside is allowed
// for).
type Tag struct {
	Open, Close string
}

// The tag families the package knows by name. Think and Thinking are the
// default ([Config.Tags] nil); Kimi and Seed are configured by name.
var (
	// Think is DeepSeek-R1 and its distills, QwQ, Qwen3, MiniMax, GLM,
	// Kimi K2: <think>…</think>.
	Think = Tag{"<think>", "</think>"}
	// Thinking is what some fine-tunes and prompt-taught models write.
	Thinking = Tag{"<thinking>", "</thinking>"}
	// Kimi is Kimi k1.5 and Kimi-VL-Thinking: ◁think▷…◁/think▷.
	Kimi = Tag{"◁think▷", "◁/think▷"}
	// Seed is ByteDance Seed-OSS: <seed:think>…</seed:think>.
	Seed = Tag{"<seed:think>", "</seed:think>"}
)

// DefaultTags are the families recognised when Config.Tags is nil.
var DefaultTags = []Tag{Think, Thinking}

// Qwen35ToolCall is the end marker for Qwen3.5 (and Qwen3-Coder-style
// templates): the bytes that open a tool call in its XML format, which the
// model may write inside its thinking without closing it first. The
// marker includes the "<function=" that follows, as vLLM's qwen3 parser
// requires it before it takes a <tool_call> for a real one: a reasoning
// that merely mentions "<tool_call>" stays reasoning.
const Qwen35ToolCall = "<tool_call>\n<function="

// MaxTagLen bounds a tag's or marker's length in bytes, and so what the
// parser ever holds back (MaxTagLen-1 bytes).
const MaxTagLen = 64

// Config says how a model writes its reasoning into the answer text. The
// zero Config recognises <think> and <thinking> blocks anywhere.
type Config struct {
	// Tags are the tag families recognised; nil means DefaultTags. The
	// first opening tag of a block decides its closing tag.
	Tags []Tag

	// StartsInReasoning is for chat templates that end the prompt with
	// the opening tag (DeepSeek-R1 and its distills, QwQ, Qwen3.5, the
	// Qwen3 Thinking-2507 models, MiniMax-M2): the text begins inside a
	// block whose opening tag never comes. An opening tag that the model
	// writes anyway as the first thing (after newlines) is taken as that
	// block's tag, not as reasoning text, as vLLM's and SGLang's parsers
	// do; until one is seen, the closing tag of every family ends the
	// block.
	StartsInReasoning bool

	// AtStart recognises the first opening tag only at the start of the
	// text, after optional ASCII whitespace (space, tab, CR, LF); an
	// answer that mentions <think> later is left whole. Once a block has
	// been seen, later blocks are recognised anywhere. This is the tag
	// half of the relay's reasoning_format auto. Without it, an opening
	// tag is recognised anywhere. StartsInReasoning makes it moot (a
	// block is open from the start).
	AtStart bool

	// EndMarkers end a reasoning block without its closing tag: the
	// marker is answer text (a tool call the model opened inside its
	// thinking, Qwen35ToolCall), not swallowed, and no newline after it
	// is dropped. Only inside a block; outside one a marker is plain
	// answer text.
	EndMarkers []string

	// KeepNewlines keeps the newlines that follow an opening tag (the
	// start of the reasoning) and a closing tag (the start of the answer)
	// instead of dropping them; see the package doc.
	KeepNewlines bool
}

// candKind is what a candidate does when it matches.
type candKind uint8

const (
	candOpen   candKind = iota // opens a block of family fam
	candClose                  // closes the current block
	candMarker                 // ends the block; its bytes are answer text
)

// cand is one string the parser looks for.
type cand struct {
	b    []byte
	kind candKind
	fam  int
}

// set is the strings expected in one state, shortest first so that the
// first full match at a position is the shortest one.
type set struct {
	cands  []cand
	first  [256]bool // the first bytes of cands
	single bool      // every cand starts with the byte one
	one    byte
}

// Syntax is a Config checked and prepared: build it once per upstream
// (New) and start a Parser per text from it (Syntax.Parser). It is
// immutable and safe for concurrent use. Segments a Parser emits may point
// into it, so they stay valid as long as it does.
type Syntax struct {
	startIn, atStart, keep bool
	maxLen                 int
	open                   set   // outside a block: every opening tag
	closeAny               set   // inside a block of no known family: every closing tag and marker
	closeFam               []set // inside a block of family i: its closing tag and the markers
	swallow                set   // at the start of an implicit block: open ∪ closeAny
}

// New checks cfg and prepares it. A tag or marker must be 1 to MaxTagLen
// bytes, must not start with ASCII whitespace (the parser skips
// whitespace before looking for one), two families must not share an
// opening tag, and a marker must not equal a tag.
func New(cfg Config) (*Syntax, error) {
	tags := cfg.Tags
	if tags == nil {
		tags = DefaultTags
	}
	if len(tags) == 0 {
		return nil, errors.New("thinktag: no tag family")
	}
	check := func(what, s string) error {
		switch {
		case s == "":
			return fmt.Errorf("thinktag: empty %s", what)
		case len(s) > MaxTagLen:
			return fmt.Errorf("thinktag: %s %q is longer than %d bytes", what, s, MaxTagLen)
		case isSpace(s[0]):
			return fmt.Errorf("thinktag: %s %q starts with whitespace", what, s)
		}
		return nil
	}
	s := &Syntax{startIn: cfg.StartsInReasoning, atStart: cfg.AtStart, keep: cfg.KeepNewlines}
	var opens, closes, markers []cand
	for i, t := range tags {
		if err := check("opening tag", t.Open); err != nil {
			return nil, err
		}
		if err := check("closing tag", t.Close); err != nil {
			return nil, err
		}
		for _, o := range opens {
			if string(o.b) == t.Open {
				return nil, fmt.Errorf("thinktag: two tag families open with %q", t.Open)
			}
		}
		opens = append(opens, cand{[]byte(t.Open), candOpen, i})
		closes = append(closes, cand{[]byte(t.Close), candClose, i})
		s.maxLen = max(s.maxLen, len(t.Open), len(t.Close))
	}
	for _, m := range cfg.EndMarkers {
		if err := check("end marker", m); err != nil {
			return nil, err
		}
		for _, t := range tags {
			if m == t.Open || m == t.Close {
				return nil, fmt.Errorf("thinktag: end marker %q is also a tag", m)
			}
		}
		if !slices.ContainsFunc(markers, func(c cand) bool { return string(c.b) == m }) {
			markers = append(markers, cand{[]byte(m), candMarker, -1})
		}
		s.maxLen = max(s.maxLen, len(m))
	}
	// Families may share a closing tag; one entry does for the block of
	// unknown family.
	var closeAny []cand
	for _, c := range closes {
		if !slices.ContainsFunc(closeAny, func(d cand) bool { return string(d.b) == string(c.b) }) {
			closeAny = append(closeAny, c)
		}
	}
	closeAny = append(closeAny, markers...)
	s.open = newSet(opens)
	s.closeAny = newSet(closeAny)
	s.swallow = newSet(append(slices.Clone(opens), closeAny...))
	for _, c := range closes {
		s.closeFam = append(s.closeFam, newSet(append([]cand{c}, markers...)))
	}
	return s, nil
}

// MustNew is New for a Config known to be valid; it panics on an error.
func MustNew(cfg Config) *Syntax {
	s, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return s
}

func newSet(cands []cand) set {
	// Stable, so that among equal lengths the earlier family wins; equal
	// strings of different kinds were refused by New.
	slices.SortStableFunc(cands, func(a, b cand) int { return len(a.b) - len(b.b) })
	st := set{cands: cands, single: true}
	for i, c := range cands {
		st.first[c.b[0]] = true
		if i == 0 {
			st.one = c.b[0]
		} else if c.b[0] != st.one {
			st.single = false
		}
	}
	return st
}

// isSpace reports ASCII whitespace: space, tab, CR, LF (and VT, FF, which
// no model writes but which are whitespace to a reader).
func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f'
}

// isNewline reports the bytes dropped after a tag.
func isNewline(b byte) bool { return b == '\n' || b == '\r' }
