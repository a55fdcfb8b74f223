package shadow

import (
	"slices"
	"sync"
	"unicode"
)

// SimilarityRunes is how much of each text Similarity reads.
const SimilarityRunes = 4096

// Similarity returns a figure in [0, 1] comparing two answers: 1 identical,
// 0 nothing in common. It is the Jaccard similarity (|A∩B| / |A∪B|) of the
// sets of word bigrams of the two texts, where:
//
//   - only the first SimilarityRunes runes of each text are read;
//   - a word is a run of letters and digits (combining marks stay with their
//     letter), lower-cased; everything else (spaces, punctuation, symbols,
//     emoji) only separates words, so case and punctuation do not count;
//   - scripts written without spaces (Han, Hiragana, Katakana, Thai, Lao,
//     Khmer, Myanmar) make one word per character, so their bigrams are
//     character bigrams, and mixed text works the same way;
//   - when either text has fewer than two words, single words are compared
//     instead of bigrams;
//   - two texts without any word compare as 1, one without words as 0.
//
// Words and bigrams are 64-bit hashes (collisions are negligible), sorted
// and merged: O(n log n) time, no maps, buffers pooled. Symmetric.
func Similarity(a, b string) float64 {
	if a == b {
		return 1
	}
	fa, fb := bufPool.Get().(*buf), bufPool.Get().(*buf)
	defer bufPool.Put(fa)
	defer bufPool.Put(fb)
	fa.toks = tokens(a, fa.toks[:0])
	fb.toks = tokens(b, fb.toks[:0])
	na, nb := len(fa.toks), len(fb.toks)
	switch {
	case na == 0 && nb == 0:
		return 1
	case na == 0 || nb == 0:
		return 0
	}
	bigrams := na >= 2 && nb >= 2
	sa := features(fa, bigrams)
	sb := features(fb, bigrams)
	inter, i, j := 0, 0, 0
	for i < len(sa) && j < len(sb) {
		switch {
		case sa[i] < sb[j]:
			i++
		case sa[i] > sb[j]:
			j++
		default:
			inter++
			i++
			j++
		}
	}
	return float64(inter) / float64(len(sa)+len(sb)-inter)
}

type buf struct{ toks, set []uint64 }

var bufPool = sync.Pool{New: func() any { return new(buf) }}

// features fills f.set with the sorted, deduplicated word (or bigram)
// hashes of f.toks.
func features(f *buf, bigrams bool) []uint64 {
	s := f.set[:0]
	if bigrams {
		for i := 1; i < len(f.toks); i++ {
			s = append(s, mix(f.toks[i-1]*0x9e3779b97f4a7c15+f.toks[i]))
		}
	} else {
		s = append(s, f.toks...)
	}
	slices.Sort(s)
	s = slices.Compact(s)
	f.set = s
	return s
}

// mix is the splitmix64 finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// tokens appends the hashes of the words of the first SimilarityRunes runes
// of s to dst.
func tokens(s string, dst []uint64) []uint64 {
	var h uint64
	in := false      // inside a word
	perChar := false // the current word is one unspaced-script character
	n := 0
	for _, r := range s {
		if n == SimilarityRunes {
			break
		}
		n++
		if r < 0x80 { // ASCII fast path
			switch {
			case 'a' <= r && r <= 'z', '0' <= r && r <= '9':
			case 'A' <= r && r <= 'Z':
				r += 'a' - 'A'
			default:
				if in {
					dst = append(dst, mix(h))
					in = false
				}
				continue
			}
			if in && perChar {
				dst = append(dst, mix(h))
				in = false
			}
			if !in {
				h, in, perChar = fnvOffset, true, false
			}
			h = (h ^ uint64(r)) * fnvPrime
			continue
		}
		switch {
		case 0x4e00 <= r && r <= 0x9fff: // CJK Unified Ideographs (Han) fast path
			if in {
				dst = append(dst, mix(h))
			}
			h, in, perChar = (fnvOffset^uint64(r))*fnvPrime, true, true
		case unicode.IsMark(r):
			if in {
				h = (h ^ uint64(r)) * fnvPrime
			}
		case unspaced(r):
			if in {
				dst = append(dst, mix(h))
			}
			h, in, perChar = (fnvOffset^uint64(r))*fnvPrime, true, true
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if in && perChar {
				dst = append(dst, mix(h))
				in = false
			}
			if !in {
				h, in, perChar = fnvOffset, true, false
			}
			h = (h ^ uint64(unicode.ToLower(r))) * fnvPrime
		default:
			if in {
				dst = append(dst, mix(h))
				in = false
			}
		}
	}
	if in {
		dst = append(dst, mix(h))
	}
	return dst
}

var unspacedScripts = []*unicode.RangeTable{
	unicode.Han, unicode.Hiragana, unicode.Katakana,
	unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar,
}

// unspaced reports whether r belongs to a script written without spaces
// between words.
func unspaced(r rune) bool {
	if r < 0x1000 && !(0x0e00 <= r && r < 0x0f00) { // Thai and Lao; Myanmar starts at 0x1000
		return false
	}
	return unicode.IsOneOf(unspacedScripts, r)
}
