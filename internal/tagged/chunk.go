package tagged

import (
	"bytes"
	"slices"

	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
)

// A chunk read whole, without encoding/json: positions, so that what is
// rewritten keeps every other byte of the chunk (members in their order,
// numbers and strings as the upstream wrote them) and a text that is not
// valid UTF-8 keeps its bytes.

// span is a range of a chunk's bytes.
type span struct{ s, e int }

// Kinds of top-level member.
const (
	memberOther = iota
	memberChoices
	memberUsage
)

// named is a member named as the reasoning field: its key and value.
type named struct{ key, val span }

// member is a top-level member of a chunk: its key's start to its
// value's end.
type member struct {
	s, e int
	kind uint8
}

// locator finds choice 0 of a chunk and the parts of it a Source
// rewrites. Choice 0 is the first choice whose index is 0, null or absent
// (choices[].index, not the position). Its slices are reused from one
// chunk to the next.
type locator struct {
	members []member // the top-level members, in order
	choice  int      // choice 0's position in choices; -1: none
	index   [2]int   // its index value ({0,0}: none)
	key     [2]int   // its delta's content key ({0,0}: none)
	lit     [2]int   // the content's value when a string ({0,0}: none)
	del     [2]int   // what removing the content member removes (a comma too)
	fields  []named  // its delta's members named as the field
	sorted  []span   // key and fields' keys, in order (keys)
	finish  bool     // its finish_reason is not null
	role    bool     // its delta carries a string role
	// plain is that the chunk is a text delta of choice 0 but for its
	// text's bytes: one choice, nothing non-null in it but its index and
	// a delta of content and role, no usage.
	plain bool
}

// run locates the parts of chunk d, whose reasoning field is field; part
// is "delta" (a stream's chunk) or "message" (a whole chat.completion,
// whose message is read as a delta). It is false when d is not a JSON
// object, or its choice 0 has two content members or two parts.
func (l *locator) run(d []byte, part, field string) bool {
	*l = locator{members: l.members[:0], fields: l.fields[:0], sorted: l.sorted[:0], choice: -1}
	it := jsonscan.NewObjIter(d, jsonscan.SkipWS(d, 0), 1)
	nChoices, usage, ok := 0, false, true
	for {
		ks, ke, vs, more := it.Next()
		if !more {
			break
		}
		kind := uint8(memberOther)
		switch key := d[ks:ke]; {
		case jsonscan.KeyIs(key, "choices"):
			kind = memberChoices
			nChoices++
			if nChoices == 1 && d[vs] == '[' {
				end, n, good := l.choices(d, vs, part, field)
				it.SetEnd(end)
				ok = good
				l.plain = l.plain && n == 1
			} else {
				it.Skip()
			}
		case jsonscan.KeyIs(key, "usage"):
			kind = memberUsage
			usage = usage || !jsonscan.IsNull(d, vs)
			it.Skip()
		default:
			it.Skip()
		}
		if it.Err {
			return false
		}
		l.members = append(l.members, member{ks, it.Pos, kind})
	}
	if it.Err || !ok || jsonscan.SkipWS(d, it.Pos) != len(d) {
		return false
	}
	l.plain = l.plain && nChoices == 1 && !usage
	return true
}

// choices reads the choices array at d[i]: its end, its length, and false
// when choice 0 is unreadable.
func (l *locator) choices(d []byte, i int, part, field string) (end, n int, ok bool) {
	it := jsonscan.NewArrIter(d, i, 2)
	ok = true
	for {
		vs, more := it.Next()
		if !more {
			break
		}
		if d[vs] != '{' || l.choice >= 0 {
			it.Skip()
			continue
		}
		e, good := l.choiceAt(d, vs, part, field, it.N-1)
		it.SetEnd(e)
		ok = ok && good
	}
	if it.Err {
		return -1, 0, false
	}
	return it.Pos, it.N, ok
}

// choiceAt reads the choice object at d[i], at position n: when its
// index is 0, null or absent, it is choice 0.
func (l *locator) choiceAt(d []byte, i int, part, field string, n int) (end int, ok bool) {
	var idx, delta [2]int
	finish, extra, deltas := false, false, 0
	it := jsonscan.NewObjIter(d, i, 3)
	for {
		ks, ke, vs, more := it.Next()
		if !more {
			break
		}
		it.Skip()
		if it.Err {
			return -1, false
		}
		switch key := d[ks:ke]; {
		case jsonscan.KeyIs(key, "index"):
			idx = [2]int{vs, it.Pos}
		case jsonscan.KeyIs(key, part):
			delta = [2]int{vs, it.Pos}
			deltas++
		case jsonscan.KeyIs(key, "finish_reason"):
			finish = !jsonscan.IsNull(d, vs)
		default:
			extra = extra || !jsonscan.IsNull(d, vs)
		}
	}
	if it.Err {
		return -1, false
	}
	if v := d[idx[0]:idx[1]]; idx[1] > 0 && string(v) != "0" && string(v) != "null" {
		return it.Pos, true // another choice
	}
	l.choice, l.index, l.finish = n, idx, finish
	l.plain = !extra && !finish && deltas == 1
	if deltas > 1 {
		return it.Pos, false
	}
	if delta[1] == 0 || d[delta[0]] != '{' {
		l.plain = false
		return it.Pos, true
	}
	return it.Pos, l.delta(d, delta[0], field)
}

// delta reads choice 0's delta object at d[i]; false when it has two
// content members.
func (l *locator) delta(d []byte, i int, field string) bool {
	it := jsonscan.NewObjIter(d, i, 4)
	prev, next := -1, false
	for {
		ks, ke, vs, more := it.Next()
		if !more {
			break
		}
		if next {
			l.del[1], next = ks, false // "content":"…", and the comma after it
		}
		it.Skip()
		if it.Err {
			return false
		}
		null := jsonscan.IsNull(d, vs)
		switch key := d[ks:ke]; {
		case jsonscan.KeyIs(key, "content"):
			if l.key[1] > 0 {
				return false
			}
			l.key = [2]int{ks, ke}
			if d[vs] == '"' {
				l.lit = [2]int{vs, it.Pos}
			} else if !null {
				l.plain = false
			}
			if prev >= 0 {
				l.del = [2]int{prev, it.Pos} // the comma before it, and "content":"…"
			} else {
				l.del, next = [2]int{ks, it.Pos}, true
			}
		case jsonscan.KeyIs(key, "role"):
			l.role = d[vs] == '"'
			l.plain = l.plain && (l.role || null)
		case jsonscan.KeyIs(key, field):
			l.fields = append(l.fields, named{span{ks, ke}, span{vs, it.Pos}})
			l.plain = l.plain && null
		default:
			l.plain = l.plain && null
		}
		prev = it.Pos
	}
	return !it.Err
}

// keys is the content key of choice 0's delta and the keys named as the
// field, in order.
func (l *locator) keys() []span {
	l.sorted = append(l.sorted[:0], span{l.key[0], l.key[1]})
	for _, f := range l.fields {
		l.sorted = append(l.sorted, f.key)
	}
	slices.SortFunc(l.sorted, func(a, b span) int { return a.s - b.s })
	return l.sorted
}

// unquote appends the text of the JSON string literal lit (as scanned by
// jsonscan.ScanString) to dst. Bytes that are not valid UTF-8 (a delta
// cut inside a character, the rest of which comes with the next) are kept
// as they are, not made U+FFFD as encoding/json does: the parser sees the
// text the upstream sent, and a tag cut there is still found. A lone
// surrogate escape is U+FFFD.
func unquote(dst, lit []byte) ([]byte, bool) {
	if out, _, ok := jsonscan.AppendUnquote(dst, lit, true); ok {
		return out, true
	}
	if len(lit) < 2 {
		return dst, false
	}
	n0 := len(dst)
	s := lit[1 : len(lit)-1]
	for len(s) > 0 {
		k := bytes.IndexByte(s, '\\')
		if k < 0 {
			dst = append(dst, s...)
			break
		}
		dst = append(dst, s[:k]...)
		s = s[k:]
		// One escape; two \u escapes at once, which may be a surrogate
		// pair.
		n := 2
		if len(s) >= 2 && s[1] == 'u' {
			n = 6
			if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
				n = 12
			}
		}
		if n > len(s) {
			return dst[:n0], false
		}
		var b [14]byte
		esc := append(append(append(b[:0], '"'), s[:n]...), '"')
		var ok bool
		if dst, _, ok = jsonscan.AppendUnquote(dst, esc, false); !ok {
			return dst[:n0], false
		}
		s = s[n:]
	}
	return dst, true
}
