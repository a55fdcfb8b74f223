package handoff

import (
	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
)

// The Splicer reads every chunk of both legs. Decoding each with
// encoding/json (a struct, then its choices, then each delta as a map,
// then each member) was half of a hand-off stream's CPU and most of its
// allocations: the garbage collector then ran often enough to stop the
// relay in the middle of one hand-off in a hundred. The two chunks that
// make nearly all of a stream, a reasoning leg's reasoning text and an
// answer leg's answer text, are read here with jsonscan instead, without
// a map or a string but the text; anything else (a tool call, a finish,
// a usage chunk, a role, a member named twice or in another case, an
// error) is left to the encoding/json readers, which define what a chunk
// means: for every chunk these accept they give the same result
// (FuzzSplicerFast checks it).

// fastChunks turns the readers below on; tests turn it off to compare.
var fastChunks = true

// reasoningChunk reads a reasoning leg's chunk whose first choice is
// index 0 with no finish and a delta that carries reasoning text (or
// none) and nothing that answers. text is the reasoning (reasoning_content,
// else reasoning, as reasoningOf reads it), decoded into buf. ok false:
// the chunk is not of that kind, or not read here.
func reasoningChunk(data, buf []byte) (id, text []byte, ok bool) {
	it, ok := topObject(data)
	if !ok {
		return nil, nil, false
	}
	var sawID, sawChoices bool
	for {
		ks, ke, vs, more := it.Next()
		if !more {
			break
		}
		// The chunk is decoded into a struct: encoding/json matches its
		// fields' names in any case, which the fast path leaves to it.
		switch jsonscan.MatchKey(data[ks:ke], []string{"id", "choices"}) {
		case jsonscan.KeyAmbiguous:
			return nil, nil, false
		case 0:
			end, _ := jsonscan.ScanString(data, vs)
			if sawID || end < 0 {
				return nil, nil, false // twice, or not a string
			}
			sawID = true
			id = data[vs:end]
			it.SetEnd(end)
		case 1:
			if sawChoices {
				return nil, nil, false
			}
			sawChoices = true
			var end int
			text, buf, end, ok = reasoningChoices(data, vs, buf)
			if !ok {
				return nil, nil, false
			}
			it.SetEnd(end)
		default:
			it.Skip()
		}
	}
	if !sawChoices || !endOfTop(&it) {
		return nil, nil, false
	}
	if id != nil {
		var idOK bool
		if id, _, idOK = jsonscan.AppendUnquote(buf[len(buf):], id, false); !idOK {
			return nil, nil, false
		}
	}
	return id, text, true
}

// reasoningChoices reads the choices array at data[i] for reasoningChunk:
// its first element must be the choice, the others are only checked to
// be JSON (Reason reads the first index-0 choice only).
func reasoningChoices(data []byte, i int, buf []byte) (text, outBuf []byte, end int, ok bool) {
	arr := jsonscan.NewArrIter(data, i, 2)
	first := true
	for {
		vs, more := arr.Next()
		if !more {
			break
		}
		if !first {
			arr.Skip()
			continue
		}
		first = false
		var e int
		text, buf, e, ok = reasoningChoice(data, vs, buf)
		if !ok {
			return nil, buf, -1, false
		}
		arr.SetEnd(e)
	}
	if arr.Err || first {
		return nil, buf, -1, false // not an array, or an empty one
	}
	return text, buf, arr.Pos, true
}

// reasoningChoice reads one choice object: index 0 (or none), no finish,
// a delta of reasoning only.
func reasoningChoice(data []byte, i int, buf []byte) (text, outBuf []byte, end int, ok bool) {
	obj := jsonscan.NewObjIter(data, i, 3)
	var seen [3]bool
	for {
		ks, ke, vs, more := obj.Next()
		if !more {
			break
		}
		// A struct again: names in any case are encoding/json's.
		k := jsonscan.MatchKey(data[ks:ke], []string{"index", "delta", "finish_reason"})
		if k == jsonscan.KeyAmbiguous || k >= 0 && seen[k] {
			return nil, buf, -1, false
		}
		switch k {
		case 0:
			seen[0] = true
			if vs+1 > len(data) || data[vs] != '0' {
				return nil, buf, -1, false
			}
			obj.SetEnd(vs + 1) // a 0 followed by more digits fails the next Next
		case 1:
			seen[1] = true
			var e int
			text, buf, e, ok = reasoningDelta(data, vs, buf)
			if !ok {
				return nil, buf, -1, false
			}
			obj.SetEnd(e)
		case 2:
			seen[2] = true
			if !jsonscan.IsNull(data, vs) {
				return nil, buf, -1, false // a finish: the hand-off point
			}
			obj.SetEnd(vs + len("null"))
		default:
			obj.Skip()
		}
	}
	if obj.Err || !seen[1] {
		return nil, buf, -1, false
	}
	return text, buf, obj.Pos, true
}

// reasoningDelta reads a delta (decoded into a map: names are exact, with
// escapes decoded) whose members answer nothing: content and refusal
// that are not strings or are "", tool_calls null or [], function_call
// null.
func reasoningDelta(data []byte, i int, buf []byte) (text, outBuf []byte, end int, ok bool) {
	obj := jsonscan.NewObjIter(data, i, 4)
	names := []string{"reasoning_content", "reasoning", "content", "refusal", "tool_calls", "function_call"}
	var seen [6]bool
	var reasoning [2][]byte // the string literals, undecoded
	for {
		ks, ke, vs, more := obj.Next()
		if !more {
			break
		}
		k := -1
		for j, n := range names {
			if jsonscan.KeyIs(data[ks:ke], n) {
				k = j
				break
			}
		}
		if k >= 0 && seen[k] {
			return nil, buf, -1, false // a map keeps the last: left to it
		}
		if k >= 0 {
			seen[k] = true
		}
		start := vs
		obj.Skip()
		if obj.Err {
			return nil, buf, -1, false
		}
		v := data[start:obj.Pos]
		switch k {
		case 0, 1:
			if v[0] == '"' {
				reasoning[k] = v
			}
		case 2, 3:
			if v[0] == '"' && string(v) != `""` {
				return nil, buf, -1, false // text or a refusal: it answers
			}
		case 4:
			if string(v) != "null" && string(v) != "[]" {
				return nil, buf, -1, false // a tool call
			}
		case 5:
			if string(v) != "null" {
				return nil, buf, -1, false
			}
		}
	}
	if obj.Err {
		return nil, buf, -1, false
	}
	// reasoningOf: reasoning_content when it has text, else reasoning.
	for _, lit := range reasoning {
		if lit == nil {
			continue
		}
		n := len(buf)
		var litOK bool
		if buf, _, litOK = jsonscan.AppendUnquote(buf, lit, false); !litOK {
			return nil, buf, -1, false
		}
		if len(buf) > n {
			return buf[n:], buf, obj.Pos, true
		}
	}
	return nil, buf, obj.Pos, true
}

// answerChunk reads an answer leg's chunk that is answer text only: one
// choice, no finish, no logprobs, a delta of one member, content, a
// non-empty string; no usage, no error. text is the content, decoded into
// buf. ok false: anything else (Answer reads it with encoding/json).
func answerChunk(data, buf []byte) (id, text []byte, ok bool) {
	it, ok := topObject(data)
	if !ok {
		return nil, nil, false
	}
	var sawID, sawChoices, sawUsage bool
	for {
		ks, ke, vs, more := it.Next()
		if !more {
			break
		}
		key := data[ks:ke]
		if jsonscan.KeyIs(key, "error") {
			return nil, nil, false // Answer passes an error on as it is
		}
		// id, choices and usage are read into a struct (any case).
		switch jsonscan.MatchKey(key, []string{"id", "choices", "usage"}) {
		case jsonscan.KeyAmbiguous:
			return nil, nil, false
		case 0:
			end, _ := jsonscan.ScanString(data, vs)
			if sawID || end < 0 {
				return nil, nil, false
			}
			sawID = true
			id = data[vs:end]
			it.SetEnd(end)
		case 1:
			if sawChoices {
				return nil, nil, false
			}
			sawChoices = true
			var end int
			text, buf, end, ok = answerChoices(data, vs, buf)
			if !ok {
				return nil, nil, false
			}
			it.SetEnd(end)
		case 2:
			if sawUsage || !jsonscan.IsNull(data, vs) {
				return nil, nil, false // a usage chunk: summed by Answer
			}
			sawUsage = true
			it.SetEnd(vs + len("null"))
		default:
			it.Skip()
		}
	}
	if !sawChoices || !endOfTop(&it) {
		return nil, nil, false
	}
	if id != nil {
		var idOK bool
		if id, _, idOK = jsonscan.AppendUnquote(buf[len(buf):], id, false); !idOK {
			return nil, nil, false
		}
	}
	return id, text, true
}

// answerChoices reads a choices array of exactly one choice.
func answerChoices(data []byte, i int, buf []byte) (text, outBuf []byte, end int, ok bool) {
	arr := jsonscan.NewArrIter(data, i, 2)
	vs, more := arr.Next()
	if !more {
		return nil, buf, -1, false
	}
	var e int
	if text, buf, e, ok = answerChoice(data, vs, buf); !ok {
		return nil, buf, -1, false
	}
	arr.SetEnd(e)
	if _, more := arr.Next(); more || arr.Err {
		return nil, buf, -1, false // more than one choice
	}
	return text, buf, arr.Pos, true
}

// answerChoice reads a choice (decoded into a map: exact names) whose
// delta is {"content": non-empty text}, finish_reason and logprobs
// absent or null.
func answerChoice(data []byte, i int, buf []byte) (text, outBuf []byte, end int, ok bool) {
	obj := jsonscan.NewObjIter(data, i, 3)
	names := []string{"delta", "finish_reason", "logprobs"}
	var seen [3]bool
	for {
		ks, ke, vs, more := obj.Next()
		if !more {
			break
		}
		k := -1
		for j, n := range names {
			if jsonscan.KeyIs(data[ks:ke], n) {
				k = j
				break
			}
		}
		if k >= 0 && seen[k] {
			return nil, buf, -1, false
		}
		switch k {
		case 0:
			seen[0] = true
			d := jsonscan.NewObjIter(data, vs, 4)
			dks, dke, dvs, dmore := d.Next()
			if !dmore || !jsonscan.KeyIs(data[dks:dke], "content") {
				return nil, buf, -1, false
			}
			dend, _ := jsonscan.ScanString(data, dvs)
			if dend < 0 || dend-dvs == 2 {
				return nil, buf, -1, false // not a string, or ""
			}
			d.SetEnd(dend)
			if _, _, _, dmore = d.Next(); dmore || d.Err {
				return nil, buf, -1, false // another member
			}
			n := len(buf)
			var litOK bool
			if buf, _, litOK = jsonscan.AppendUnquote(buf, data[dvs:dend], false); !litOK || len(buf) == n {
				return nil, buf, -1, false
			}
			text = buf[n:]
			obj.SetEnd(d.Pos)
		case 1, 2:
			seen[k] = true
			if !jsonscan.IsNull(data, vs) {
				return nil, buf, -1, false
			}
			obj.SetEnd(vs + len("null"))
		default:
			obj.Skip()
		}
	}
	if obj.Err || !seen[0] {
		return nil, buf, -1, false
	}
	return text, buf, obj.Pos, true
}

// topObject starts reading data as one JSON object.
func topObject(data []byte) (jsonscan.ObjIter, bool) {
	i := jsonscan.SkipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return jsonscan.ObjIter{}, false
	}
	return jsonscan.NewObjIter(data, i, 1), true
}

// endOfTop reports that the object ended well, with nothing after it.
func endOfTop(it *jsonscan.ObjIter) bool {
	return !it.Err && jsonscan.SkipWS(it.B, it.Pos) == len(it.B)
}
