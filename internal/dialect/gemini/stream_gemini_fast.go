package gemini

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
)

// The hot path of FromChatStream: a chunk's top-level members are read
// with jsonscan, which allocates nothing, instead of json.Unmarshal, and
// choices that are one text delta (nearly every chunk) by fastText, with
// the text decoded into a reused buffer; other choices (the role chunk's,
// the finish chunk's, a tool call's fragments) go to chat.ReadDelta.
// Anything it is not sure of (a key named twice, or like a known one in
// another case, a member of another type than expected, an escaped or
// invalid UTF-8 id or model, an error) goes to the slow path, which reads
// everything: FuzzFromChatStreamFastSlow checks that both agree.

// chunkKeys are the members of a Chat chunk FromChatStream reads.
var chunkKeys = []string{"id", "object", "model", "choices", "usage", "error", "message"}

// usageInKeys are chatUsageIn's members, then its details' one each.
var (
	usageInKeys       = []string{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details", "prompt_cache_hit_tokens"}
	cachedKeys        = []string{"cached_tokens"}
	reasoningCountKey = []string{"reasoning_tokens"}
)

// fastChunk reads data as json.Unmarshal would into c, and its usage into
// u (hasUsage: a usage object came); c.ID and c.Model only when named is
// false (once the chunks are named, nothing reads them). ok is false when
// the slow path must read data.
func (s *geminiStream) fastChunk(data []byte, c *chatChunk, u *chatUsageIn, named bool) (hasUsage, ok bool) {
	if slowOnly {
		return false, false
	}
	s.ft = fastTextDelta{}
	b := data
	i := jsonscan.SkipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false, false
	}
	end := matchObject(b, i, 1, chunkKeys, func(k, vs int) int {
		switch k {
		case 0, 1, 2: // id, object, model: strings
			e, esc := jsonscan.ScanString(b, vs)
			if e < 0 || esc {
				return -1
			}
			v := b[vs+1 : e-1]
			switch {
			case k == 1 && string(v) == "error":
				return -1 // vLLM's error object: the slow path fails it
			case k == 1 || named:
			case !utf8.Valid(v):
				return -1 // encoding/json would mend it
			case k == 0:
				c.ID = string(v)
			default:
				c.Model = string(v)
			}
			return e
		case 3: // choices: one text delta, else chat.ReadDelta reads them
			if e := s.fastText(b, vs); e >= 0 {
				return e
			}
			e := jsonscan.SkipValue(b, vs, 2)
			if e >= 0 {
				c.Choices = b[vs:e]
			}
			return e
		case 4: // usage: null on every chunk but the last with include_usage
			if jsonscan.IsNull(b, vs) {
				return vs + len("null")
			}
			if b[vs] != '{' {
				return -1
			}
			hasUsage = true
			return fastUsage(b, vs, u)
		case 5: // error: only null is not one
			if !jsonscan.IsNull(b, vs) {
				return -1
			}
			return vs + len("null")
		case 6: // message: read by nothing off the error path
			return jsonscan.SkipValue(b, vs, 2)
		}
		return -1
	})
	if end < 0 || jsonscan.SkipWS(b, end) != len(b) {
		return false, false
	}
	return hasUsage, true
}

// fastUsage reads the usage object at b[i] into u; it returns its end, or
// -1 for anything but whole numbers that fit an int and objects.
func fastUsage(b []byte, i int, u *chatUsageIn) int {
	*u = chatUsageIn{}
	return matchObject(b, i, 2, usageInKeys, func(k, vs int) int {
		switch k {
		case 3, 4: // the details: one count each
			if b[vs] != '{' {
				return -1
			}
			keys, n := cachedKeys, &u.PromptTokensDetails.CachedTokens
			if k == 4 {
				keys, n = reasoningCountKey, &u.CompletionTokensDetails.ReasoningTokens
			}
			return matchObject(b, vs, 3, keys, func(_, vs int) int { return fastInt(b, vs, 4, n) })
		}
		n := [...]*int{&u.PromptTokens, &u.CompletionTokens, &u.TotalTokens, 5: &u.PromptCacheHitTokens}[k]
		return fastInt(b, vs, 3, n)
	})
}

// fastInt reads the whole number at b[i] into n; it returns its end, or
// -1 for another value.
func fastInt(b []byte, i, depth int, n *int) int {
	e := jsonscan.SkipValue(b, i, depth)
	if e < 0 {
		return -1
	}
	v, err := strconv.Atoi(string(b[i:e]))
	if err != nil {
		return -1
	}
	*n = v
	return e
}

// fastTextDelta is what fastText read: ok, the choices were one text
// delta, its text (decoded into s.scratch; "" says nothing) and channel.
type fastTextDelta struct {
	ok      bool
	thought bool
	text    []byte
	lit     [2]int // the text's string literal in the chunk: data[lit[0]:lit[1]]
}

// The text deltas of a stream differ in their text only: the chunk's
// bytes before its string literal and after it are the same each time
// (the id, the model, the key, the choice's other members). So once
// fastText read one, its bytes around the text are kept (memo), and a
// chunk that has the same bytes around one string literal is the same
// delta with that text: memoText reads just the literal. Whatever the
// literal holds, it is one JSON string in the same place, so the chunk
// parses as the kept one did.

// remember keeps the chunk fastText just read as the memo.
func (s *geminiStream) remember(data []byte) {
	s.memo.pre = append(s.memo.pre[:0], data[:s.ft.lit[0]]...)
	s.memo.suf = append(s.memo.suf[:0], data[s.ft.lit[1]:]...)
	s.memo.thought, s.memo.ok = s.ft.thought, true
}

// memoText reads data as the memo's delta with another text: ok is false
// when data is not one.
func (s *geminiStream) memoText(data []byte) (text []byte, thought, ok bool) {
	m := &s.memo
	i, j := len(m.pre), len(data)-len(m.suf)
	if !m.ok || j-i < 2 || !bytes.HasPrefix(data, m.pre) || !bytes.HasSuffix(data, m.suf) || data[i] != '"' {
		return nil, false, false
	}
	if e, _ := jsonscan.ScanString(data, i); e != j {
		return nil, false, false
	}
	s.scratch, _, ok = jsonscan.AppendUnquote(s.scratch[:0], data[i:j], false)
	return s.scratch, m.thought, ok
}

// The key lists of chat.ReadDelta's reader, in its order: a key is
// ambiguous (jsonscan.MatchKey) for the one as for the other.
var (
	choiceKeysFast = []string{"index", "delta", "message", "finish_reason"}
	deltaKeysFast  = []string{"content", "refusal", "reasoning_content", "reasoning", "tool_calls", "function_call"}
)

// fastText reads the choices at b[i] into s.ft when they are one text
// delta as chat.ReadDelta reads it: one choice, its index 0 or none, its
// finish_reason null or none, no message, and a delta with one text
// member (content, reasoning_content or reasoning: a string) and no
// other member ReadDelta reads. It returns their end, or -1 for
// ReadDelta to read them.
func (s *geminiStream) fastText(b []byte, i int) int {
	if b[i] != '[' {
		return -1
	}
	it := jsonscan.NewArrIter(b, i, 2)
	vs, ok := it.Next()
	if !ok || b[vs] != '{' {
		return -1
	}
	ft := fastTextDelta{}
	end := matchObject(b, vs, 3, choiceKeysFast, func(k, vs int) int {
		switch k {
		case 0: // index
			e := jsonscan.SkipValue(b, vs, 4)
			if e < 0 || string(b[vs:e]) != "0" {
				return -1
			}
			return e
		case 1: // delta
			if b[vs] != '{' {
				return -1
			}
			return matchObject(b, vs, 4, deltaKeysFast, func(k, vs int) int {
				if k != 0 && k != 2 && k != 3 || ft.ok || b[vs] != '"' {
					return -1 // refusal, calls, a second text, a text not a string
				}
				e, _ := jsonscan.ScanString(b, vs)
				if e < 0 {
					return -1
				}
				start := len(s.scratch)
				var ok bool
				s.scratch, _, ok = jsonscan.AppendUnquote(s.scratch, b[vs:e], false)
				if !ok {
					return -1
				}
				ft = fastTextDelta{ok: true, thought: k != 0, text: s.scratch[start:], lit: [2]int{vs, e}}
				return e
			})
		case 3: // finish_reason
			if !jsonscan.IsNull(b, vs) {
				return -1
			}
			return vs + len("null")
		}
		return -1 // message
	})
	if end < 0 || !ft.ok {
		return -1
	}
	it.SetEnd(end)
	if _, more := it.Next(); more || it.Err {
		return -1
	}
	s.ft = ft
	return it.Pos
}

// matchObject is fastObject (ToChatStream's) with jsonscan.MatchKey, as
// chat.ReadDelta matches keys, and encoding/json (a key that decodes to a
// name is that member; one equal to a name but for case, ambiguous).
func matchObject(b []byte, i, depth int, keys []string, f func(k, vs int) int) int {
	return walkObject(b, i, depth, keys, jsonscan.MatchKey, f)
}
