// Package jsonobj splits a JSON object into its top-level members and
// renders it back, as pieces, with some members replaced, removed or
// added, every untouched member the very bytes it was.
//
// A relay changes a few top-level fields of a request body (model, a
// `set` edit, an injected option) and must leave the rest alone. Decoding
// the body into a map and encoding it again costs two full scans and a
// copy of every byte, a megabyte prompt included, and reorders the keys;
// splicing costs one validating scan and a copy.
package jsonobj

import (
	"encoding/json"
	"errors"
	"slices"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
)

// Member is one top-level member of an object.
type Member struct {
	Key   string // decoded
	Name  []byte // the key's literal as written, quotes included
	Value []byte // the value as written
	// Start and End delimit the member (Name to Value) in the object's
	// bytes, so a run of members can be copied as one piece.
	Start, End int
}

// ErrNotObject is returned for input that is not one valid JSON object.
var ErrNotObject = errors.New("jsonobj: not a JSON object")

// Split validates b as one JSON object and returns its members in order.
// Names and values point into b. A key that occurs more than once is
// returned each time. It accepts exactly what encoding/json accepts as an
// object.
func Split(b []byte) ([]Member, error) {
	if members, ok := scan(b); ok {
		return members, nil
	}
	// jsonscan caps nesting at 64 levels, encoding/json at 10000: a
	// document it refuses may still be valid. Only then pay for
	// encoding/json's slower validation.
	if !json.Valid(b) {
		return nil, ErrNotObject
	}
	return split(b)
}

// scan splits b in one validating pass with jsonscan.
func scan(b []byte) ([]Member, bool) {
	it := jsonscan.NewObjIter(b, jsonscan.SkipWS(b, 0), 1)
	members := make([]Member, 0, 8) // most requests' and chunks' members: no regrowing
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			break
		}
		it.Skip()
		if it.Err {
			return nil, false
		}
		key, err := decodeKey(b[ks:ke])
		if err != nil {
			return nil, false
		}
		members = append(members, Member{Key: key, Name: b[ks:ke], Value: b[vs:it.Pos], Start: ks, End: it.Pos})
	}
	if it.Err || jsonscan.SkipWS(b, it.Pos) != len(b) {
		return nil, false
	}
	return members, true
}

// split splits b, which is valid JSON, without validating it again.
func split(b []byte) ([]Member, error) {
	i := jsonscan.SkipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, ErrNotObject
	}
	var members []Member
	i = jsonscan.SkipWS(b, i+1)
	if b[i] == '}' {
		return members, nil
	}
	for {
		ks := i
		i, _ = jsonscan.ScanString(b, i)
		name := b[ks:i]
		key, err := decodeKey(name)
		if err != nil {
			return nil, err
		}
		i = jsonscan.SkipWS(b, i)
		i = jsonscan.SkipWS(b, i+1) // past ':'
		vs := i
		i = endOfValue(b, i)
		members = append(members, Member{Key: key, Name: name, Value: b[vs:i], Start: ks, End: i})
		i = jsonscan.SkipWS(b, i)
		if b[i] == '}' {
			return members, nil
		}
		i = jsonscan.SkipWS(b, i+1) // past ','
	}
}

// Map returns the members as a map, the last of equal keys winning, as
// encoding/json decodes an object.
func Map(members []Member) map[string]json.RawMessage {
	m := make(map[string]json.RawMessage, len(members))
	for _, mb := range members {
		m[mb.Key] = mb.Value
	}
	return m
}

// An Edit replaces or adds (Value not nil) or removes (Value nil) one
// top-level member.
type Edit struct {
	Key   string
	Value []byte // valid JSON, or nil to remove the member
}

// Pieces appends to parts the object of members with edits applied in
// order (a later edit of a key wins), as pieces to be written one after
// the other, without copying the members no edit names. A run of such
// members is one piece of raw, as written (the whitespace between them
// included); an edited member keeps its place, a removed one goes, and
// added ones follow in sorted key order. Decoded, it is the edited
// Map(members) (FuzzSplitRender checks it against a reference render).
// raw is the object Split returned members from; members must not repeat
// a key (see Unique). The pieces point into raw and edits.
func Pieces(parts [][]byte, raw []byte, members []Member, edits []Edit) [][]byte {
	parts = append(parts, openBrace)
	n := 0 // members or runs written
	sep := func() {
		if n > 0 {
			parts = append(parts, comma)
		}
		n++
	}
	run := -1 // where the current run of untouched members starts in raw
	end := 0
	for _, mb := range members {
		v, edited := LastEdit(edits, mb.Key)
		if !edited {
			if run < 0 {
				run = mb.Start
			}
			end = mb.End
			continue
		}
		if run >= 0 {
			sep()
			parts = append(parts, raw[run:end])
			run = -1
		}
		if v == nil {
			continue
		}
		sep()
		parts = append(parts, mb.Name, colon, v)
	}
	if run >= 0 {
		sep()
		parts = append(parts, raw[run:end])
	}
	var added []string
	for i, e := range edits {
		if e.Value == nil || slices.ContainsFunc(members, func(mb Member) bool { return mb.Key == e.Key }) {
			continue
		}
		if slices.ContainsFunc(edits[i+1:], func(later Edit) bool { return later.Key == e.Key }) {
			continue // the last edit of the key decides
		}
		added = append(added, e.Key)
	}
	slices.Sort(added)
	for _, k := range added {
		sep()
		name, _ := json.Marshal(k)
		v, _ := LastEdit(edits, k)
		parts = append(parts, name, colon, v)
	}
	return append(parts, closeBrace)
}

// The punctuation Pieces puts between pieces. Read only.
var (
	openBrace  = []byte("{")
	closeBrace = []byte("}")
	comma      = []byte(",")
	colon      = []byte(":")
)

// LastEdit is the value the last of edits that names key sets (nil:
// removed), and whether any does.
func LastEdit(edits []Edit, key string) ([]byte, bool) {
	for i := len(edits) - 1; i >= 0; i-- {
		if edits[i].Key == key {
			return edits[i].Value, true
		}
	}
	return nil, false
}

// Unique reports whether no key occurs twice among members.
func Unique(members []Member) bool {
	for i := range members {
		for j := range i {
			if members[i].Key == members[j].Key {
				return false
			}
		}
	}
	return true
}

func decodeKey(name []byte) (string, error) {
	inner := name[1 : len(name)-1]
	if k, ok := commonKey(inner); ok {
		return k, nil
	}
	if !slices.Contains(inner, '\\') && utf8.Valid(inner) {
		return string(inner), nil
	}
	// Escapes, or invalid UTF-8 that encoding/json turns into U+FFFD:
	// decode as it does, so the keys are the ones it would see.
	var k string
	if err := json.Unmarshal(name, &k); err != nil {
		return "", ErrNotObject
	}
	return k, nil
}

// commonKey returns the keys most request bodies have as constants, so
// splitting a body does not allocate a string for each of them.
func commonKey(k []byte) (string, bool) {
	switch string(k) { // no allocation: the compiler compares the bytes
	case "model":
		return "model", true
	case "messages":
		return "messages", true
	case "stream":
		return "stream", true
	case "temperature":
		return "temperature", true
	case "max_tokens":
		return "max_tokens", true
	case "input":
		return "input", true
	case "system":
		return "system", true
	case "tools":
		return "tools", true
	case "stream_options":
		return "stream_options", true
	case "reasoning_effort":
		return "reasoning_effort", true
	case "reasoning":
		return "reasoning", true
	case "thinking":
		return "thinking", true
	case "instructions":
		return "instructions", true
	case "max_completion_tokens":
		return "max_completion_tokens", true
	case "top_p":
		return "top_p", true
	case "metadata":
		return "metadata", true
	}
	return "", false
}

// endOfValue returns the position past the value at b[i]. b is valid
// JSON, so only strings and nesting need tracking.
func endOfValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			end, _ := jsonscan.ScanString(b, i)
			i = end - 1
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		case ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}
