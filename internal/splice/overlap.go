package splice

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MinOverlap is the shortest repeat Overlap drops, in runes: a shorter
// match ("1" after "1") is as likely the continuation's own text.
const MinOverlap = 8

// Overlap returns how many bytes at the start of next repeat the end of
// sent and are dropped at the seam:
//
//   - the longest repeat of MinOverlap..max runes (next starts with the
//     last k runes of sent), when next is not all of it (a continuation
//     that repeats everything it has so far may be longer: the caller
//     waits for more, see Decided);
//   - else, when sent ends with whitespace, the whitespace next starts
//     with (the seam's space sent once, not twice);
//   - else 0.
func Overlap(sent, next string, max int) int {
	if max == 0 {
		max = DefaultMaxOverlap
	}
	if max < 0 || sent == "" || next == "" {
		return 0
	}
	// Candidate lengths in bytes: suffixes of sent of MinOverlap..max runes.
	best := 0
	runes, i := 0, len(sent)
	for i > 0 && runes < max {
		_, size := utf8.DecodeLastRuneInString(sent[:i])
		i -= size
		runes++
		if runes < MinOverlap {
			continue
		}
		tail := sent[i:]
		if strings.HasPrefix(next, tail) {
			best = len(tail)
		}
	}
	if best > 0 {
		return best
	}
	last, _ := utf8.DecodeLastRuneInString(sent)
	if unicode.IsSpace(last) {
		return len(next) - len(strings.TrimLeftFunc(next, unicode.IsSpace))
	}
	return 0
}

// Decided reports whether next (the continuation's leading text so far)
// is long enough for Overlap's answer to stand: it holds more than max
// runes, or it is no longer a possible start of a repeat (no suffix of
// sent of MinOverlap..max runes starts with it, and it holds more than
// whitespace). A Splicer holds the continuation's text until then, or
// until a non-text event or the end.
func Decided(sent, next string, max int) bool {
	if max == 0 {
		max = DefaultMaxOverlap
	}
	if max < 0 || sent == "" {
		return true
	}
	if utf8.RuneCountInString(next) > max {
		return true
	}
	if strings.TrimLeftFunc(next, unicode.IsSpace) == "" {
		return false // whitespace only: the space rule needs what follows
	}
	runes, i := 0, len(sent)
	for i > 0 && runes < max {
		_, size := utf8.DecodeLastRuneInString(sent[:i])
		i -= size
		runes++
		if runes < MinOverlap {
			continue
		}
		if tail := sent[i:]; len(next) < len(tail) && strings.HasPrefix(tail, next) {
			return false // next may still grow into this repeat
		}
	}
	return true
}
