package pace

import (
	"testing"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// graphemeBoundary reports whether byte offset off of s is a boundary
// between grapheme clusters (UAX #29), per uniseg.
func graphemeBoundary(s string, off int) bool {
	if off == 0 || off == len(s) {
		return true
	}
	pos := 0
	g := uniseg.NewGraphemes(s)
	for g.Next() {
		_, to := g.Positions()
		pos = to
		if pos == off {
			return true
		}
		if pos > off {
			return false
		}
	}
	return false
}

func TestCutPoint(t *testing.T) {
	cases := []struct {
		text string
		want int
		cut  string
	}{
		{"Hello world, how are you", 3, "Hello "},
		{"Hello world, how are you", 7, "Hello "},       // nearer than "Hello world, "
		{"Hello world, how are you", 10, "Hello world"}, // a word end one short of "Hello world, "
		{"one two three four", 5, "one "},
		{"ab", 1, "ab"},         // too short to leave a tail
		{"abcde", 2, "abcde"},   // the rest would be < minTail
		{"abcdef", 2, "ab"},     // no word boundary near: inside the word
		{"abcdef", 4, "abcdef"}, // the whole text is near enough
		{"这是一个没有空格的中文句子", 3, "这是一"},
		{"👨‍👩‍👧‍👦👨‍👩‍👧‍👦👨‍👩‍👧‍👦👨‍👩‍👧‍👦👨‍👩‍👧‍👦", 1, "👨‍👩‍👧‍👦"},
		{"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0", 4, "QUJD"}, // no word boundary: at want
	}
	for _, c := range cases {
		nb, nr := cutPoint([]byte(c.text), utf8.RuneCountInString(c.text), c.want)
		if got := c.text[:nb]; got != c.cut {
			t.Errorf("cutPoint(%q, %d) = %q, want %q", c.text, c.want, got, c.cut)
		}
		if nr != utf8.RuneCountInString(c.text[:nb]) {
			t.Errorf("cutPoint(%q, %d): rune count %d is wrong", c.text, c.want, nr)
		}
	}
}

// Fuzz: any cut of any text lands on a grapheme boundary, holds at least
// the runes asked for less a third (or everything), and never more than asked plus the
// slack unless that is the whole text.
func FuzzCutPoint(f *testing.F) {
	f.Add("Hello world", 3)
	f.Add("👨‍👩‍👧‍👦🇯🇵🇫🇷e\u0301\u0302 नमस्ते 한국어", 2)
	f.Add("\r\n\r\nabc", 1)
	f.Fuzz(func(t *testing.T, s string, want int) {
		if !utf8.ValidString(s) || want < -5 || want > 1000 {
			t.Skip()
		}
		total := utf8.RuneCountInString(s)
		nb, nr := cutPoint([]byte(s), total, want)
		if nb < 0 || nb > len(s) || nr != utf8.RuneCountInString(s[:nb]) {
			t.Fatalf("cutPoint(%q, %d) = %d bytes, %d runes", s, want, nb, nr)
		}
		if !graphemeBoundary(s, nb) {
			t.Fatalf("cutPoint(%q, %d) = %d: not a grapheme boundary", s, want, nb)
		}
		if nb < len(s) && nr < minPiece(max(want, 1)) {
			t.Fatalf("cutPoint(%q, %d): piece of %d runes is smaller than asked", s, want, nr)
		}
	})
}
