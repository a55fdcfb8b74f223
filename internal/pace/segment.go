package pace

import (
	"unicode"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

const (
	// cutSlack is how many runes past the wanted size a piece may grow to
	// end at a word boundary.
	cutSlack = 12
	// minTail is the fewest runes worth keeping back: a smaller rest is
	// sent with the piece before it.
	minTail = 3
)

// cutPoint chooses where the next piece of text ends. The piece holds at
// least want runes (or all of text) and ends on a grapheme cluster boundary
// (UAX #29), so no UTF-8 sequence, emoji ZWJ sequence, flag or combining
// sequence is ever split. Within cutSlack runes past want it prefers to end
// after a word and the space that follows it, then at any word boundary
// (between CJK characters, say); failing both (a base64 run) it ends at the
// grapheme boundary it reached. total is the rune count of text.
//
// It returns the piece's length in bytes and in runes.
func cutPoint(text []byte, total, want int) (nbytes, nrunes int) {
	if want < 1 {
		want = 1
	}
	if total <= want+minTail {
		return len(text), total
	}
	state := -1
	rest := text
	pos, runes := 0, 0
	fbBytes, fbRunes := -1, 0 // first word boundary at or past want
	for len(rest) > 0 {
		var cluster []byte
		var b int
		cluster, rest, b, state = uniseg.Step(rest, state)
		pos += len(cluster)
		runes += utf8.RuneCount(cluster)
		if runes < want {
			continue
		}
		if total-runes < minTail {
			break // too little would be left: end here or at the fallback
		}
		if b&uniseg.MaskWord != 0 {
			if endsWithSpace(cluster) {
				return pos, runes
			}
			if fbBytes < 0 {
				fbBytes, fbRunes = pos, runes
			}
		}
		if runes >= want+cutSlack {
			if fbBytes >= 0 {
				return fbBytes, fbRunes
			}
			return pos, runes
		}
	}
	if fbBytes >= 0 {
		return fbBytes, fbRunes
	}
	return len(text), total
}

// endsWithSpace reports whether a grapheme cluster is white space.
func endsWithSpace(cluster []byte) bool {
	r, _ := utf8.DecodeLastRune(cluster)
	return unicode.IsSpace(r)
}
