package gemini

import (
	"strconv"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
)

// The hot path of FromChatStream for the chunks that are not plain text
// deltas (which pace.Classify recognises): the role chunk, the finish
// chunk, the usage chunk, a tool call's fragments. Their top-level members
// are read with jsonscan, which allocates nothing, instead of
// json.Unmarshal; the choices go to chat.ReadDelta either way. Anything
// it is not sure of (a key named twice, or like a known one in another
// case, a member of another type than expected, an escaped or invalid
// UTF-8 id or model, an error) goes to the slow path, which reads
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
	b := data
	i := jsonscan.SkipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false, false
	}
	end := fastObject(b, i, 1, chunkKeys, func(k, vs int) int {
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
		case 3: // choices: chat.ReadDelta reads them
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
	return fastObject(b, i, 2, usageInKeys, func(k, vs int) int {
		switch k {
		case 3, 4: // the details: one count each
			if b[vs] != '{' {
				return -1
			}
			keys, n := cachedKeys, &u.PromptTokensDetails.CachedTokens
			if k == 4 {
				keys, n = reasoningCountKey, &u.CompletionTokensDetails.ReasoningTokens
			}
			return fastObject(b, vs, 3, keys, func(_, vs int) int { return fastInt(b, vs, 4, n) })
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
