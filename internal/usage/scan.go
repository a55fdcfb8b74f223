package usage

import (
	"strconv"

	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
)

// The request path reads a usage object from every answer, and a
// non-stream answer's usage from its whole body. encoding/json's
// reflection made that 6-8 µs per request, the largest part of the relay's
// own cost after its log line (issue 12); these scanners read the same
// values in one pass of jsonscan, and hand whatever they do not take on
// to encoding/json, so the results stay exactly encoding/json's (the fuzz
// targets compare the two).

// Member returns the raw value of the top-level member "usage" of the
// JSON object b (the last one, as encoding/json keeps), or nil if there is
// none. ok is false when b is not a valid JSON object, or has a key that
// encoding/json would take for "usage" only case-insensitively: the caller
// then decodes b itself.
func Member(b []byte) (raw []byte, ok bool) {
	i := jsonscan.SkipWS(b, 0)
	it := jsonscan.NewObjIter(b, i, 1)
	for {
		ks, ke, vs, more := it.Next()
		if !more {
			break
		}
		it.Skip()
		switch jsonscan.MatchKey(b[ks:ke], usageKey) {
		case 0:
			if !it.Err {
				raw = b[vs:it.Pos]
			}
		case jsonscan.KeyAmbiguous:
			return nil, false
		}
	}
	if it.Err || jsonscan.SkipWS(b, it.Pos) != len(b) {
		return nil, false
	}
	return raw, true
}

var usageKey = []string{"usage"}

// rawUsage's member names, in the order of usageFields.
var usageNames = [...]string{
	"prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details",
	"prompt_cache_hit_tokens", "input_tokens", "output_tokens", "input_tokens_details",
	"output_tokens_details", "cache_creation_input_tokens", "cache_read_input_tokens",
	"cached_tokens",
}

var (
	cachedKey    = []string{"cached_tokens"}
	reasoningKey = []string{"reasoning_tokens"}
)

// scanRawUsage decodes raw as json.Unmarshal(raw, &rawUsage{}) would, for
// the usage objects providers send: an object whose members are integers,
// null, or the details objects of integers; keys spelled exactly. ok is
// false for anything else (including an error encoding/json would
// report), and the caller asks encoding/json.
func scanRawUsage(raw []byte) (r rawUsage, ok bool) {
	var vals *[len(usageNames)]int // what r's pointers point to: one allocation
	i := jsonscan.SkipWS(raw, 0)
	it := jsonscan.NewObjIter(raw, i, 1)
	for {
		ks, ke, vs, more := it.Next()
		if !more {
			break
		}
		var end int
		switch k := jsonscan.MatchKey(raw[ks:ke], usageNames[:]); k {
		case jsonscan.KeyAmbiguous:
			return rawUsage{}, false
		case jsonscan.KeyOther:
			end = jsonscan.SkipValue(raw, vs, 1)
		case 0, 1, 5, 6, 9, 10: // *int
			p := r.intField(k)
			var n int
			var isNull bool
			if n, isNull, end = scanInt(raw, vs); end < 0 {
				return rawUsage{}, false
			}
			if isNull {
				*p = nil // encoding/json sets a pointer to nil for null
				break
			}
			if vals == nil {
				vals = new([len(usageNames)]int)
			}
			vals[k] = n
			*p = &vals[k]
		case 4, 11: // int
			n, isNull, e := scanInt(raw, vs)
			if e < 0 {
				return rawUsage{}, false
			}
			if !isNull && k == 4 {
				r.PromptCacheHitTokens = n
			} else if !isNull {
				r.CachedTokens = n
			}
			end = e
		case 2:
			end = scanDetails(raw, vs, cachedKey, &r.PromptTokensDetails.CachedTokens)
		case 3:
			end = scanDetails(raw, vs, reasoningKey, &r.CompletionTokensDetails.ReasoningTokens)
		case 7:
			end = scanDetails(raw, vs, cachedKey, &r.InputTokensDetails.CachedTokens)
		case 8:
			end = scanDetails(raw, vs, reasoningKey, &r.OutputTokensDetails.ReasoningTokens)
		}
		if end < 0 {
			return rawUsage{}, false
		}
		it.SetEnd(end)
	}
	if it.Err || jsonscan.SkipWS(raw, it.Pos) != len(raw) {
		return rawUsage{}, false
	}
	return r, true
}

// scanDetails decodes a details object (or null: no change) at raw[i] whose
// one member of interest, names[0], goes to dst. It returns the end of the
// value, or -1 where encoding/json must decide.
func scanDetails(raw []byte, i int, names []string, dst *int) int {
	if jsonscan.IsNull(raw, i) {
		return i + len("null")
	}
	it := jsonscan.NewObjIter(raw, i, 2)
	for {
		ks, ke, vs, more := it.Next()
		if !more {
			break
		}
		switch jsonscan.MatchKey(raw[ks:ke], names) {
		case 0:
			n, isNull, end := scanInt(raw, vs)
			if end < 0 {
				return -1
			}
			if !isNull {
				*dst = n
			}
			it.SetEnd(end)
		case jsonscan.KeyAmbiguous:
			return -1
		default:
			it.Skip()
		}
	}
	if it.Err {
		return -1
	}
	return it.Pos
}

// scanInt reads the integer or null at raw[i]. end is -1 for any other
// value, or a number encoding/json would not put in an int.
func scanInt(raw []byte, i int) (n int, isNull bool, end int) {
	if jsonscan.IsNull(raw, i) {
		return 0, true, i + len("null")
	}
	j := i
	if j < len(raw) && raw[j] == '-' {
		j++
	}
	start := j
	for j < len(raw) && raw[j] >= '0' && raw[j] <= '9' {
		j++
	}
	if j == start || j-start > 1 && raw[start] == '0' {
		return 0, false, -1 // not a number, or a leading zero
	}
	if j < len(raw) && (raw[j] == '.' || raw[j] == 'e' || raw[j] == 'E') {
		return 0, false, -1 // a fraction or an exponent: encoding/json's error
	}
	v, err := strconv.Atoi(string(raw[i:j]))
	if err != nil {
		return 0, false, -1 // out of range
	}
	return v, false, j
}

// intField is the *int member of r named usageNames[k].
func (r *rawUsage) intField(k int) **int {
	switch k {
	case 0:
		return &r.PromptTokens
	case 1:
		return &r.CompletionTokens
	case 5:
		return &r.InputTokens
	case 6:
		return &r.OutputTokens
	case 9:
		return &r.CacheCreationInputTokens
	default:
		return &r.CacheReadInputTokens
	}
}
