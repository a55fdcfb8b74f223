package thinktag

import (
	"strings"
	"testing"
)

// result is a whole text's split, as the tests compare it.
type result struct {
	Reasoning, Answer string
	Blocks            int
	Unclosed          bool
}

// reference splits a whole text by the rules of the package doc, written
// as plainly as possible: one position at a time, every expected string
// tried at every position, no holding back. The parser must agree with it
// whatever the cuts.
func reference(cfg Config, text string) result {
	tags := cfg.Tags
	if tags == nil {
		tags = DefaultTags
	}
	type want struct {
		s    string
		kind candKind
		fam  int
	}
	// shortest returns the shortest of ws that text[i:] begins with; among
	// equal lengths the first.
	shortest := func(i int, ws []want) (want, bool) {
		var best want
		found := false
		for _, w := range ws {
			if strings.HasPrefix(text[i:], w.s) && (!found || len(w.s) < len(best.s)) {
				best, found = w, true
			}
		}
		return best, found
	}
	var opens []want
	for f, t := range tags {
		opens = append(opens, want{t.Open, candOpen, f})
	}
	closers := func(fam int) []want {
		var ws []want
		for f, t := range tags {
			if fam < 0 || f == fam {
				ws = append(ws, want{t.Close, candClose, f})
			}
		}
		for _, m := range cfg.EndMarkers {
			ws = append(ws, want{m, candMarker, -1})
		}
		return ws
	}

	var r, a strings.Builder
	var res result
	in := cfg.StartsInReasoning
	fam, has := -1, false
	skip, swallow := in, in
	lead := cfg.AtStart && !in
	if in {
		res.Blocks = 1
	}
	emit := func(s string) {
		if in {
			r.WriteString(s)
			has = true
		} else {
			a.WriteString(s)
		}
	}
	for i := 0; i < len(text); {
		if skip {
			if c := text[i]; c == '\n' || c == '\r' {
				if cfg.KeepNewlines {
					emit(text[i : i+1])
				}
				i++
				continue
			}
			skip = false
		}
		if !in {
			if lead {
				if isSpace(text[i]) {
					emit(text[i : i+1])
					i++
					continue
				}
				lead = false
				if _, ok := shortest(i, opens); !ok {
					a.WriteString(text[i:]) // never a tag again
					break
				}
			}
			if w, ok := shortest(i, opens); ok {
				in, fam, has, skip = true, w.fam, true, true
				res.Blocks++
				i += len(w.s)
				continue
			}
			emit(text[i : i+1])
			i++
			continue
		}
		ws := closers(fam)
		if swallow {
			ws = append(opens[:len(opens):len(opens)], ws...)
			swallow = false
		}
		w, ok := shortest(i, ws)
		switch {
		case !ok:
			emit(text[i : i+1])
			i++
			continue
		case w.kind == candOpen:
			fam, has, skip = w.fam, true, true
		case w.kind == candClose:
			in, fam, has, skip = false, -1, false, true
		case w.kind == candMarker:
			in, fam, has = false, -1, false
			a.WriteString(w.s)
		}
		i += len(w.s)
	}
	res.Reasoning, res.Answer = r.String(), a.String()
	res.Unclosed = in && has
	return res
}

// feed runs a parser over pieces and returns the split, checking on the
// way what holds for every call: no empty segment, at most MaxTagLen-1
// bytes held, the held bytes the end of the text so far and the start of
// a string expected there, and everything before them emitted (what the
// calls emitted so far is the reference's split of the text without the
// held bytes).
func feed(t testing.TB, s *Syntax, pieces ...[]byte) result {
	t.Helper()
	return feedCfg(t, s, nil, pieces...)
}

// feedCfg is feed, checking promptness against the reference when cfg is
// not nil.
func feedCfg(t testing.TB, s *Syntax, cfg *Config, pieces ...[]byte) result {
	t.Helper()
	p := s.Parser()
	var r, a strings.Builder
	var seen []byte
	var segs []Segment
	add := func() {
		for _, sg := range segs {
			if len(sg.Text) == 0 {
				t.Fatalf("empty %v segment", sg.Kind)
			}
			if sg.Kind == Reasoning {
				r.Write(sg.Text)
			} else {
				a.Write(sg.Text)
			}
		}
	}
	for _, pc := range pieces {
		segs = p.Feed(segs[:0], pc)
		add()
		seen = append(seen, pc...)
		st := p.State()
		if st.Held > s.maxLen-1 {
			t.Fatalf("%d bytes held, more than the longest tag less one (%d)", st.Held, s.maxLen-1)
		}
		if !strings.HasSuffix(string(seen), string(p.held)) || !isPrefixOf(p.expected(), p.held) {
			t.Fatalf("held %q: not the end of %q and the start of a string expected there", p.held, seen)
		}
		if cfg != nil {
			ref := reference(*cfg, string(seen[:len(seen)-st.Held]))
			if ref.Reasoning != r.String() || ref.Answer != a.String() {
				t.Fatalf("after %q (held %q): emitted reasoning %q answer %q, want %q and %q",
					seen, p.held, r.String(), a.String(), ref.Reasoning, ref.Answer)
			}
		}
	}
	segs = p.Flush(segs[:0])
	add()
	st := p.State()
	if st.Held != 0 {
		t.Fatalf("%d bytes held after Flush", st.Held)
	}
	return result{r.String(), a.String(), st.Blocks, st.Unclosed}
}

// expected is the set whose strings p looks for at its current position.
func (p *Parser) expected() *set {
	switch {
	case p.plain:
		return &set{}
	case p.lead:
		return &p.syn.open
	case p.swallow:
		return &p.syn.swallow
	}
	return p.set()
}

func isPrefixOf(st *set, held []byte) bool {
	if len(held) == 0 {
		return true
	}
	for _, c := range st.cands {
		if strings.HasPrefix(string(c.b), string(held)) && len(held) < len(c.b) {
			return true
		}
	}
	return false
}

// pieces cuts text at the given offsets (sorted, within the text).
func cut(text string, at ...int) [][]byte {
	var out [][]byte
	last := 0
	for _, i := range at {
		out = append(out, []byte(text[last:i]))
		last = i
	}
	return append(out, []byte(text[last:]))
}
