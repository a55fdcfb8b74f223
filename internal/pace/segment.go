package pace

import (
	"unicode"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

const (
	// wordSlack is how many runes a piece may be shorter or longer than
	// wanted to end at a word boundary (see cutPoint).
	wordSlack = 3
	// minTail is the fewest runes worth keeping back: a smaller rest is
	// sent with the piece before it.
	minTail = 3
)

// cutPoint chooses where the next piece of text ends. The piece ends on a
// grapheme cluster boundary (UAX #29), so no UTF-8 sequence, emoji ZWJ
// sequence, flag or combining sequence is ever split, and it holds about
// want runes: it ends at the word boundary nearest to want within
// wordSlack runes either way, preferring the end of a word and the space
// after it (a cut elsewhere, between CJK characters or before
// punctuation, counts as one rune further). Without a word boundary that
// near it ends at the first grapheme boundary at or past want, inside a
// word if need be, as the upstream's own subword tokens do. It never
// leaves a rest of fewer than minTail runes. total is the rune count of
// text.
//
// Near, not at the next word: a pacer that sends int(credit) runes per
// tick and rounds up to the next word end overshoots by half a word on
// average, and the ticks after an overshoot send less; every 100 ms of
// output then carries a few runes more or less than the rate, which a
// reader sees (and the windowed rate CV counts) as unevenness.
//
// It returns the piece's length in bytes and in runes.
func cutPoint(text []byte, total, want int) (nbytes, nrunes int) {
	if want < 1 {
		want = 1
	}
	if total <= want+minTail {
		return len(text), total
	}
	lo := minPiece(want)
	// Most text is ASCII: a byte followed by another ASCII byte (but not
	// CR LF) ends a grapheme cluster, so skip those without segmenting
	// up to just before the candidates. Segmenting every rune (word and
	// line break rules included) was a fifth of the pacer's cost.
	pos, runes := 0, 0
	for runes < lo-1 && pos+1 < len(text) && text[pos] < utf8.RuneSelf && text[pos+1] < utf8.RuneSelf &&
		(text[pos] != '\r' || text[pos+1] != '\n') {
		pos++
		runes++
	}
	state := -1
	rest := text[pos:]
	bestBytes, bestRunes, bestCost := -1, 0, 0
	graphBytes, graphRunes := -1, 0 // first grapheme boundary at or past want
	for len(rest) > 0 {
		var cluster []byte
		var b int
		cluster, rest, b, state = uniseg.Step(rest, state)
		pos += len(cluster)
		runes += utf8.RuneCount(cluster)
		if runes == total {
			// The whole text, when it is near enough.
			if cost := runes - want; cost <= wordSlack && (bestBytes < 0 || cost <= bestCost) {
				bestBytes, bestRunes = pos, runes
			}
			break
		}
		if total-runes < minTail {
			continue // too little would be left; the whole text may still do
		}
		if runes >= want && graphBytes < 0 {
			graphBytes, graphRunes = pos, runes
		}
		if runes > want+wordSlack {
			break
		}
		if runes < lo || b&uniseg.MaskWord == 0 {
			continue
		}
		cost := max(want-runes, runes-want)
		if !endsWithSpace(cluster) {
			cost++
		}
		if bestBytes < 0 || cost <= bestCost {
			bestBytes, bestRunes, bestCost = pos, runes, cost
		}
	}
	switch {
	case bestBytes >= 0:
		return bestBytes, bestRunes
	case graphBytes >= 0:
		return graphBytes, graphRunes
	}
	return len(text), total
}

// minPiece is the smallest piece cutPoint makes for a budget of want
// runes.
func minPiece(want int) int { return max(1, want-wordSlack) }

// endsWithSpace reports whether a grapheme cluster is white space.
func endsWithSpace(cluster []byte) bool {
	r, _ := utf8.DecodeLastRune(cluster)
	return unicode.IsSpace(r)
}
