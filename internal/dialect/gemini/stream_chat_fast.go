package gemini

import (
	"bytes"
	"strconv"

	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
)

// The hot path of ToChatStream: a chunk of text and thought parts, with
// or without a finishReason and the running usage (nearly every chunk of
// a Gemini stream), read with jsonscan, which allocates nothing. Anything
// else, or anything it is not sure of (a key named twice, or like a known
// one in another case, which encoding/json would take for it), goes to
// the slow path, encoding/json, which reads everything.

// slowOnly turns the hot path off, for the test that compares both.
var slowOnly = false

// fastChunk is what the hot path read of a chunk.
type fastChunk struct {
	cands     int
	index     int // -1: none
	finish    []byte
	model, id []byte // string literals, quotes included; nil when absent
	hasUsage  bool
	usage     UsageMetadata
	segs      []fastSeg
}

// fastSeg is one text part: its decoded text, scratch[start:end].
type fastSeg struct {
	thought    bool
	start, end int
}

var (
	topKeys   = []string{"candidates", "usageMetadata", "modelVersion", "responseId", "error", "promptFeedback"}
	candKeys  = []string{"content", "finishReason", "index"}
	contKeys  = []string{"parts", "role"}
	partKeys  = []string{"text", "thought", "thoughtSignature"}
	usageKeys = []string{"promptTokenCount", "candidatesTokenCount", "totalTokenCount", "cachedContentTokenCount", "toolUsePromptTokenCount", "thoughtsTokenCount"}
)

// fastKey matches a key literal against names exactly; a key with an
// escape, or equal to a name but for case, is ambiguous
// (jsonscan.KeyAmbiguous); another is jsonscan.KeyOther. Gemini's
// names are camelCase, which jsonscan.MatchKey (lower-case names) does
// not take.
func fastKey(lit []byte, names []string) int {
	raw := lit[1 : len(lit)-1]
	for i, n := range names {
		if string(raw) == n {
			return i
		}
	}
	if bytes.IndexByte(raw, '\\') >= 0 {
		return jsonscan.KeyAmbiguous
	}
	for _, n := range names {
		if bytes.EqualFold(raw, []byte(n)) {
			return jsonscan.KeyAmbiguous
		}
	}
	return jsonscan.KeyOther
}

// fastObject walks the object at b[i], calling f for each member named in
// keys (f returns the value's end, -1 to give up); a key named twice or
// ambiguous gives up. It returns the object's end, or -1. Gemini's keys
// are matched by fastKey.
func fastObject(b []byte, i, depth int, keys []string, f func(k, vs int) int) int {
	return walkObject(b, i, depth, keys, fastKey, f)
}

// walkObject is fastObject with the key matcher match (fastKey, or
// jsonscan.MatchKey for Chat's lower-case keys).
func walkObject(b []byte, i, depth int, keys []string, match func([]byte, []string) int, f func(k, vs int) int) int {
	it := jsonscan.NewObjIter(b, i, depth)
	var seen uint32
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			break
		}
		k := match(b[ks:ke], keys)
		switch {
		case k == jsonscan.KeyAmbiguous:
			return -1
		case k < 0:
			it.Skip()
			continue
		case seen&(1<<k) != 0:
			return -1
		}
		seen |= 1 << k
		end := f(k, vs)
		if end < 0 {
			return -1
		}
		it.SetEnd(end)
	}
	if it.Err {
		return -1
	}
	return it.Pos
}

// fast reads data into s.fc, the decoded texts into s.scratch; ok is
// false when the slow path must read it.
func (s *chatStream) fast(data []byte) bool {
	if slowOnly {
		return false
	}
	fc := &s.fc
	fc.cands, fc.index, fc.finish, fc.model, fc.id, fc.hasUsage, fc.segs = 0, 0, nil, nil, nil, false, fc.segs[:0]
	s.scratch = s.scratch[:0]
	b := data
	i := jsonscan.SkipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	end := fastObject(b, i, 1, topKeys, func(k, vs int) int {
		switch k {
		case 0: // candidates
			if b[vs] != '[' {
				return -1
			}
			it := jsonscan.NewArrIter(b, vs, 2)
			for {
				cs, ok := it.Next()
				if !ok {
					break
				}
				fc.cands++
				if fc.cands > 1 || b[cs] != '{' {
					return -1
				}
				it.SetEnd(s.fastCandidate(b, cs))
			}
			if it.Err {
				return -1
			}
			return it.Pos
		case 1: // usageMetadata
			if b[vs] != '{' {
				return -1
			}
			fc.hasUsage = true
			fc.usage = UsageMetadata{}
			return fastObject(b, vs, 2, usageKeys, func(k, vs int) int {
				e := jsonscan.SkipValue(b, vs, 3)
				if e < 0 {
					return -1
				}
				n, err := strconv.Atoi(string(b[vs:e]))
				if err != nil {
					return -1
				}
				switch k {
				case 0:
					fc.usage.PromptTokenCount = n
				case 1:
					fc.usage.CandidatesTokenCount = n
				case 2:
					fc.usage.TotalTokenCount = n
				case 3:
					fc.usage.CachedContentTokenCount = n
				case 4:
					fc.usage.ToolUsePromptTokenCount = n
				case 5:
					fc.usage.ThoughtsTokenCount = n
				}
				return e
			})
		case 2, 3: // modelVersion, responseId
			e, _ := jsonscan.ScanString(b, vs)
			if e < 0 {
				return -1
			}
			if k == 2 {
				fc.model = b[vs:e]
			} else {
				fc.id = b[vs:e]
			}
			return e
		}
		return -1 // error, promptFeedback: the slow path
	})
	return end >= 0 && jsonscan.SkipWS(b, end) == len(b)
}

// fastCandidate reads the candidate at b[i]; it returns its end, or -1.
func (s *chatStream) fastCandidate(b []byte, i int) int {
	fc := &s.fc
	return fastObject(b, i, 3, candKeys, func(k, vs int) int {
		switch k {
		case 0: // content
			if b[vs] != '{' {
				return -1
			}
			return fastObject(b, vs, 4, contKeys, func(k, vs int) int {
				if k == 1 { // role
					e, _ := jsonscan.ScanString(b, vs)
					return e
				}
				if b[vs] != '[' {
					return -1
				}
				it := jsonscan.NewArrIter(b, vs, 5)
				for {
					ps, ok := it.Next()
					if !ok {
						break
					}
					it.SetEnd(s.fastPart(b, ps))
				}
				if it.Err {
					return -1
				}
				return it.Pos
			})
		case 1: // finishReason
			e, esc := jsonscan.ScanString(b, vs)
			if e < 0 || esc {
				return -1
			}
			fc.finish = b[vs+1 : e-1]
			return e
		case 2: // index
			e := jsonscan.SkipValue(b, vs, 4)
			if e < 0 {
				return -1
			}
			n, err := strconv.Atoi(string(b[vs:e]))
			if err != nil {
				return -1
			}
			fc.index = n
			return e
		}
		return -1
	})
}

// fastPart reads a text part at b[i]; any other part gives up.
func (s *chatStream) fastPart(b []byte, i int) int {
	if b[i] != '{' {
		return -1
	}
	seg := fastSeg{}
	hasText := false
	it := jsonscan.NewObjIter(b, i, 6)
	var seen uint32
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			break
		}
		k := fastKey(b[ks:ke], partKeys)
		if k < 0 || seen&(1<<k) != 0 {
			return -1 // another kind of part, or one the slow path must judge
		}
		seen |= 1 << k
		switch k {
		case 0: // text
			e, _ := jsonscan.ScanString(b, vs)
			if e < 0 {
				return -1
			}
			seg.start = len(s.scratch)
			var ok bool
			s.scratch, _, ok = jsonscan.AppendUnquote(s.scratch, b[vs:e], false)
			if !ok {
				return -1
			}
			seg.end = len(s.scratch)
			hasText = true
			it.SetEnd(e)
		case 1: // thought
			switch {
			case bytes.HasPrefix(b[vs:], []byte("true")):
				seg.thought = true
				it.SetEnd(vs + 4)
			case bytes.HasPrefix(b[vs:], []byte("false")):
				it.SetEnd(vs + 5)
			default:
				return -1
			}
		case 2: // thoughtSignature: dropped on text (see ToChatStream)
			e, _ := jsonscan.ScanString(b, vs)
			it.SetEnd(e)
		}
	}
	if it.Err || !hasText && !seg.thought && seen&(1<<2) == 0 {
		return -1
	}
	if hasText {
		s.fc.segs = append(s.fc.segs, seg)
	}
	return it.Pos
}
