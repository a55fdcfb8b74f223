// Package jsonscan is a small, strict JSON scanner (RFC 8259) that works
// on byte offsets and never allocates. It validates structure, string
// escapes, numbers and literals, caps nesting at MaxDepth, and can decode
// a string literal while checking that it is valid UTF-8 without lone
// surrogates. Strings are scanned eight bytes at a time, which makes it
// several times faster than encoding/json's validation on text-heavy
// documents. The re-pacer classifies every upstream event with it; the
// relay splits request bodies with it (internal/jsonobj).
//
// Raw (unescaped) bytes inside strings are not checked for UTF-8 validity
// when a value is merely skipped, like encoding/json; they are checked when a
// string is decoded strictly (AppendUnquote with strict set).
//
// Offsets: every function takes the whole document b and a position i, and
// returns an end position (just past the value) or -1 on a syntax error.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"unicode"
	"unicode/utf8"
)

// MaxDepth caps the nesting of objects and arrays.
const MaxDepth = 64

// StrPlain[c] is true for the bytes that may appear unescaped in a string
// and need no special handling: everything except '"', '\\' and controls.
var StrPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipWS returns the position of the first non-whitespace byte at or after i.
func SkipWS(b []byte, i int) int {
	if i < len(b) && b[i] > ' ' {
		return i // compact JSON: the common case
	}
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

// ScanString scans the string literal starting at b[i] == '"'. It returns
// the position just past the closing quote and whether the literal contains
// escapes, or -1 if the literal is malformed.
func ScanString(b []byte, i int) (end int, esc bool) {
	if i >= len(b) || b[i] != '"' {
		return -1, false
	}
	i++
	for {
		// Eight bytes at a time while none of them needs a look.
		for i+8 <= len(b) && !specialIn8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && StrPlain[b[i]] {
			i++
		}
		if i >= len(b) {
			return -1, false
		}
		switch b[i] {
		case '"':
			return i + 1, esc
		case '\\':
			esc = true
			if i+1 >= len(b) {
				return -1, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || hex4(b[i+2:i+6]) < 0 {
					return -1, false
				}
				i += 6
			default:
				return -1, false
			}
		default: // control character
			return -1, false
		}
	}
}

// specialIn8 reports whether one of the eight bytes in w is '"', '\\' or a
// control character (< 0x20). It may report true spuriously only when one of
// them really is (the usual borrow caveat affects only which byte), so false
// means all eight are plain.
func specialIn8(w uint64) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	q := w ^ (ones * '"')
	bs := w ^ (ones * '\\')
	return ((q-ones)&^q|(bs-ones)&^bs|(w-ones*0x20)&^w)&highs != 0
}

// hex4 decodes four hex digits, or returns -1.
func hex4(h []byte) rune {
	if len(h) < 4 {
		return -1
	}
	var r rune
	for _, c := range h[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// scanNumber scans the number starting at b[i].
func scanNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return -1
	}
	switch {
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// scanLiteral checks that b[i:] starts with lit.
func scanLiteral(b []byte, i int, lit string) int {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit)
	}
	return -1
}

// IsNull reports whether the value at b[i] is the literal null. The caller
// still has to check what follows it (the iterators do).
func IsNull(b []byte, i int) bool { return scanLiteral(b, i, "null") >= 0 }

// SkipValue skips the value starting at b[i] (no leading whitespace) and
// returns the position just past it, or -1. depth is the number of
// containers already open around the value.
func SkipValue(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; c {
	case '"':
		end, _ := ScanString(b, i)
		return end
	case '{':
		it := NewObjIter(b, i, depth+1)
		for {
			if _, _, _, ok := it.Next(); !ok {
				break
			}
			it.Skip()
		}
		if it.Err {
			return -1
		}
		return it.Pos
	case '[':
		it := NewArrIter(b, i, depth+1)
		for {
			if _, ok := it.Next(); !ok {
				break
			}
			it.Skip()
		}
		if it.Err {
			return -1
		}
		return it.Pos
	case 't':
		return scanLiteral(b, i, "true")
	case 'f':
		return scanLiteral(b, i, "false")
	case 'n':
		return scanLiteral(b, i, "null")
	default:
		if c == '-' || '0' <= c && c <= '9' {
			return scanNumber(b, i)
		}
		return -1
	}
}

// Valid reports whether b is exactly one JSON value, with optional
// surrounding whitespace.
func Valid(b []byte) bool {
	i := SkipWS(b, 0)
	end := SkipValue(b, i, 0)
	return end >= 0 && SkipWS(b, end) == len(b)
}

// ObjIter iterates over the members of an object. Usage:
//
//	it := NewObjIter(b, i, depth) // b[i] == '{'
//	for {
//		ks, ke, vs, ok := it.Next()
//		if !ok {
//			break
//		}
//		// the value starts at b[vs]; either it.Skip(), or scan it
//		// yourself and set it.Pos to its end (it.Err = true on failure).
//	}
//	if it.Err { ... } // else it.Pos is just past the '}'
type ObjIter struct {
	B     []byte
	Pos   int  // where the iteration is: after next, the value's start; after the end, just past the object
	Depth int  // nesting depth of this object (the top-level value is 1)
	N     int  // members returned so far
	Err   bool // a syntax error was found
}

func NewObjIter(b []byte, i, depth int) ObjIter {
	return ObjIter{B: b, Pos: i + 1, Depth: depth, Err: depth > MaxDepth || i >= len(b) || b[i] != '{'}
}

// Next moves to the next member and returns its key literal b[ks:ke]
// (quotes included) and the start of its value vs (< len(b)). It returns
// ok == false at the end of the object or on error (it.Err).
func (it *ObjIter) Next() (ks, ke, vs int, ok bool) {
	if it.Err {
		return 0, 0, 0, false
	}
	b := it.B
	i := SkipWS(b, it.Pos)
	if i >= len(b) {
		it.Err = true
		return 0, 0, 0, false
	}
	if b[i] == '}' {
		it.Pos = i + 1
		return 0, 0, 0, false
	}
	if it.N > 0 {
		if b[i] != ',' {
			it.Err = true
			return 0, 0, 0, false
		}
		i = SkipWS(b, i+1)
	}
	ke, _ = ScanString(b, i)
	if ke < 0 {
		it.Err = true
		return 0, 0, 0, false
	}
	j := SkipWS(b, ke)
	if j >= len(b) || b[j] != ':' {
		it.Err = true
		return 0, 0, 0, false
	}
	vs = SkipWS(b, j+1)
	if vs >= len(b) {
		it.Err = true
		return 0, 0, 0, false
	}
	it.N++
	it.Pos = vs
	return i, ke, vs, true
}

// skip skips the value at it.Pos.
func (it *ObjIter) Skip() {
	it.SetEnd(SkipValue(it.B, it.Pos, it.Depth))
}

// SetEnd records the end of the current value (-1: error).
func (it *ObjIter) SetEnd(end int) {
	if end < 0 {
		it.Err = true
		return
	}
	it.Pos = end
}

// ArrIter iterates over the elements of an array, like ObjIter.
type ArrIter struct {
	B     []byte
	Pos   int
	Depth int
	N     int
	Err   bool
}

func NewArrIter(b []byte, i, depth int) ArrIter {
	return ArrIter{B: b, Pos: i + 1, Depth: depth, Err: depth > MaxDepth || i >= len(b) || b[i] != '['}
}

// Next moves to the next element and returns its start vs (< len(b)).
func (it *ArrIter) Next() (vs int, ok bool) {
	if it.Err {
		return 0, false
	}
	b := it.B
	i := SkipWS(b, it.Pos)
	if i >= len(b) {
		it.Err = true
		return 0, false
	}
	if b[i] == ']' {
		it.Pos = i + 1
		return 0, false
	}
	if it.N > 0 {
		if b[i] != ',' {
			it.Err = true
			return 0, false
		}
		i = SkipWS(b, i+1)
		if i >= len(b) {
			it.Err = true
			return 0, false
		}
	}
	it.N++
	it.Pos = i
	return i, true
}

func (it *ArrIter) Skip() {
	it.SetEnd(SkipValue(it.B, it.Pos, it.Depth))
}

func (it *ArrIter) SetEnd(end int) {
	if end < 0 {
		it.Err = true
		return
	}
	it.Pos = end
}

// AppendUnquote appends the decoded value of the string literal lit (quotes
// included, as validated by ScanString) to dst and returns it with the
// number of runes decoded. With strict set, invalid UTF-8 bytes and lone
// surrogate escapes are errors (ok == false, dst returned unchanged);
// otherwise each is replaced by U+FFFD, as encoding/json does.
func AppendUnquote(dst, lit []byte, strict bool) (out []byte, runes int, ok bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return dst, 0, false
	}
	n0 := len(dst)
	s := lit[1 : len(lit)-1]
	for len(s) > 0 {
		run := s
		k := bytes.IndexByte(s, '\\')
		if k >= 0 {
			run = s[:k]
		}
		if len(run) > 0 {
			if utf8.Valid(run) {
				dst = append(dst, run...)
				runes += utf8.RuneCount(run)
			} else {
				if strict {
					return dst[:n0], 0, false
				}
				for len(run) > 0 {
					r, size := utf8.DecodeRune(run)
					dst = utf8.AppendRune(dst, r)
					run = run[size:]
					runes++
				}
			}
		}
		if k < 0 {
			break
		}
		s = s[k:]
		if len(s) < 2 {
			return dst[:n0], 0, false
		}
		var r rune
		switch s[1] {
		case '"', '\\', '/':
			r, s = rune(s[1]), s[2:]
		case 'b':
			r, s = '\b', s[2:]
		case 'f':
			r, s = '\f', s[2:]
		case 'n':
			r, s = '\n', s[2:]
		case 'r':
			r, s = '\r', s[2:]
		case 't':
			r, s = '\t', s[2:]
		case 'u':
			if r = hex4(s[2:]); r < 0 {
				return dst[:n0], 0, false
			}
			s = s[6:]
			if utf16IsSurrogate(r) {
				r2 := rune(-1)
				if len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
					r2 = hex4(s[2:6])
				}
				if r < 0xDC00 && 0xDC00 <= r2 && r2 < 0xE000 {
					r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
					s = s[6:]
				} else if strict {
					return dst[:n0], 0, false
				} else {
					r = utf8.RuneError
				}
			}
		default:
			return dst[:n0], 0, false
		}
		dst = utf8.AppendRune(dst, r)
		runes++
	}
	return dst, runes, true
}

func utf16IsSurrogate(r rune) bool { return 0xD800 <= r && r < 0xE000 }

// CountRunes returns the number of runes the string literal lit decodes to,
// counting invalid bytes and lone surrogates as one U+FFFD each (as
// encoding/json decodes them). lit must have been validated by ScanString.
func CountRunes(lit []byte) int {
	if len(lit) < 2 {
		return 0
	}
	s := lit[1 : len(lit)-1]
	n := 0
	for len(s) > 0 {
		k := bytes.IndexByte(s, '\\')
		if k < 0 {
			return n + utf8.RuneCount(s)
		}
		n += utf8.RuneCount(s[:k]) + 1
		s = s[k:]
		if len(s) < 6 || s[1] != 'u' {
			s = s[min(2, len(s)):]
			continue
		}
		r := hex4(s[2:6])
		s = s[6:]
		if 0xD800 <= r && r < 0xDC00 && len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
			if r2 := hex4(s[2:6]); 0xDC00 <= r2 && r2 < 0xE000 {
				s = s[6:]
			}
		}
	}
	return n
}

// Key matching results besides an index into the name list.
const (
	KeyOther     = -1 // no match
	KeyAmbiguous = -2 // matches a name only case-insensitively
)

// MatchKey compares the decoded key literal lit with names (lower-case
// ASCII). It returns the index of the exact match, KeyAmbiguous if the key
// equals a name under Unicode case folding (encoding/json matches struct
// fields that way, so such keys must be treated conservatively), or
// KeyOther.
func MatchKey(lit []byte, names []string) int {
	raw := lit[1 : len(lit)-1]
	for i, n := range names {
		if string(raw) == n {
			return i
		}
	}
	// Only escapes, upper-case ASCII or non-ASCII bytes can make a key that
	// is not one of names equal to one of them.
	var class byte
	for _, c := range raw {
		class |= keyByteClass[c]
	}
	if class == 0 {
		return KeyOther
	}
	if class&classEscape != 0 {
		var buf [64]byte
		dec, _, ok := AppendUnquote(buf[:0], lit, false)
		if !ok {
			return KeyOther
		}
		for i, n := range names {
			if string(dec) == n {
				return i
			}
		}
		raw = dec
	}
	for _, n := range names {
		if foldEq(raw, n) {
			return KeyAmbiguous
		}
	}
	return KeyOther
}

const (
	classUpper = 1 << iota
	classNonASCII
	classEscape
)

var keyByteClass = func() (t [256]byte) {
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = classUpper
	}
	for c := 0x80; c < 256; c++ {
		t[c] = classNonASCII
	}
	t['\\'] = classEscape
	return t
}()

// KeyIs reports whether the string literal lit decodes exactly to name.
func KeyIs(lit []byte, name string) bool {
	raw := lit[1 : len(lit)-1]
	if string(raw) == name {
		return true
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return false
	}
	var buf [64]byte
	dec, _, ok := AppendUnquote(buf[:0], lit, false)
	return ok && string(dec) == name
}

// foldEq reports whether s equals the lower-case ASCII name under simple
// Unicode case folding (so that "ſ" matches 's' and the Kelvin sign 'k').
func foldEq(s []byte, name string) bool {
	j := 0
	for len(s) > 0 {
		if j >= len(name) {
			return false
		}
		want := rune(name[j])
		j++
		c := s[0]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if rune(c) != want {
				return false
			}
			s = s[1:]
			continue
		}
		r, size := utf8.DecodeRune(s)
		s = s[size:]
		if !foldsTo(r, want) {
			return false
		}
	}
	return j == len(name)
}

// foldsTo reports whether r and want are in the same case-folding orbit.
func foldsTo(r, want rune) bool {
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f == want {
			return true
		}
	}
	return r == want
}

// MayHaveMember is a quick look, without parsing, for a member named key
// (its literal, quotes included, e.g. `"usage"`) whose value starts with
// c: some occurrence of the literal followed by blanks, a colon, blanks
// and c. It may say yes wrongly (the literal inside a string), never no
// when there is such a member written without escapes: a caller that
// parses on yes loses nothing by it.
func MayHaveMember(b []byte, key string, c byte) bool {
	for rest := b; ; {
		i := bytes.Index(rest, []byte(key))
		if i < 0 {
			return false
		}
		rest = rest[i+len(key):]
		j := SkipWS(rest, 0)
		if j < len(rest) && rest[j] == ':' {
			if j = SkipWS(rest, j+1); j < len(rest) && rest[j] == c {
				return true
			}
		}
	}
}
