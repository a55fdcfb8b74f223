package pace

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

var scanCases = []string{
	// Valid.
	`{}`, `[]`, `""`, `0`, `-0`, `1.5`, `-1e10`, `1E+2`, `1e-2`, `0.0`, `true`, `false`, `null`,
	` { "a" : [ 1 , 2 , { } , [ ] ] , "b" : "c" } `,
	"\t\r\n[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00\"]",
	`{"a":{"b":{"c":[null,true,false]}}}`,
	`"\ud800"`, // valid JSON (lone surrogates are allowed by the grammar)
	"\"\xff\"", // raw invalid UTF-8 is tolerated when skipping, like encoding/json
	// Invalid.
	``, ` `, `{`, `}`, `[`, `]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a":1 "b":2}`,
	`{a:1}`, `{'a':1}`, `[1 2]`, `01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x1`, `NaN`, `Infinity`,
	`tru`, `nul`, `nulll`, `truefalse`, `"abc`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"a\x01\"", "\"\t\"",
	`{} {}`, `{}x`, `[1]]`, `"\`, `{"a":1}}`, `{"a" 1}`,
}

func TestScanMatchesEncodingJSON(t *testing.T) {
	for _, s := range scanCases {
		if got, want := validDocument([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("validDocument(%q) = %v, json.Valid = %v", s, got, want)
		}
	}
}

// TestScanStringWide puts each kind of special byte at every position of a
// long string, so that the eight-bytes-at-a-time path sees it in every lane.
func TestScanStringWide(t *testing.T) {
	specials := []byte{0x00, 0x01, 0x0a, 0x1f, '"', '\\', 0x20, 0x7f, 0x80, 0xff}
	for _, c := range specials {
		for pos := range 24 {
			b := []byte(`"` + strings.Repeat("abcdefgh", 4) + `"`)
			b[1+pos] = c
			if got, want := validDocument(b), json.Valid(b); got != want {
				t.Errorf("validDocument(%q) = %v, json.Valid = %v", b, got, want)
			}
		}
	}
}

func TestScanDepth(t *testing.T) {
	for _, d := range []int{1, maxDepth - 1, maxDepth, maxDepth + 1, 1000} {
		doc := strings.Repeat("[", d) + strings.Repeat("]", d)
		if got, want := validDocument([]byte(doc)), d <= maxDepth; got != want {
			t.Errorf("depth %d: valid = %v, want %v", d, got, want)
		}
		doc = strings.Repeat(`{"a":`, d) + "1" + strings.Repeat("}", d)
		if got, want := validDocument([]byte(doc)), d <= maxDepth; got != want {
			t.Errorf("object depth %d: valid = %v, want %v", d, got, want)
		}
	}
}

func TestScanStringEscapeFlag(t *testing.T) {
	for _, tc := range []struct {
		s   string
		end int
		esc bool
	}{
		{`"abc"x`, 5, false},
		{`"a\nc"`, 6, true},
		{`"a\u0041"`, 9, true},
		{`""`, 2, false},
		{`"`, -1, false},
		{`x`, -1, false},
	} {
		end, esc := scanString([]byte(tc.s), 0)
		if end != tc.end || (end >= 0 && esc != tc.esc) {
			t.Errorf("scanString(%q) = %d, %v; want %d, %v", tc.s, end, esc, tc.end, tc.esc)
		}
	}
}

func TestAppendUnquote(t *testing.T) {
	for _, tc := range []struct {
		lit    string
		strict bool // strict decoding succeeds
	}{
		{`""`, true},
		{`"abc"`, true},
		{`"\u4f60\u597d"`, true},
		{`"\uD83D\uDE00 \ud83d\ude00"`, true},
		{`"\"\\\/\b\f\n\r\t"`, true},
		{`"\u0000"`, true},
		{`"\uffff\ufffd"`, true},
		{"\"é😀\"", true},
		{`"\ud800"`, false},
		{`"\ud800x"`, false},
		{`"\udfff"`, false},
		{`"\ud800\u0041"`, false},
		{`"\ud800\ud800"`, false},
		{`"\ude00\ud83d"`, false},
		{`"\ud83d\ud83d\ude00"`, false},
		{"\"a\xffb\"", false},
		{"\"\xed\xa0\x80\"", false},
		{"\"\xc0\xaf\"", false},
		{"\"\xe4\xbd\"", false},
		{"\"\xf4\x90\x80\x80\"", false},
	} {
		lit := []byte(tc.lit)
		var want string
		if err := json.Unmarshal(lit, &want); err != nil {
			t.Fatalf("%s: %v", tc.lit, err)
		}
		// Lenient decoding matches encoding/json, including U+FFFD
		// replacement, and countRunes agrees.
		got, n, ok := appendUnquote([]byte("p"), lit, false)
		if !ok || string(got) != "p"+want || n != utf8.RuneCountInString(want) {
			t.Errorf("lenient %s = %q %d %v, want %q %d", tc.lit, got, n, ok, want, utf8.RuneCountInString(want))
		}
		if c := countRunes(lit); c != utf8.RuneCountInString(want) {
			t.Errorf("countRunes(%s) = %d, want %d", tc.lit, c, utf8.RuneCountInString(want))
		}
		got, n, ok = appendUnquote([]byte("p"), lit, true)
		if ok != tc.strict {
			t.Errorf("strict %s: ok = %v, want %v", tc.lit, ok, tc.strict)
			continue
		}
		if !ok {
			if string(got) != "p" || n != 0 {
				t.Errorf("strict %s failed but returned %q %d", tc.lit, got, n)
			}
			continue
		}
		if string(got) != "p"+want {
			t.Errorf("strict %s = %q, want %q", tc.lit, got, want)
		}
	}
	// Malformed literals (not validated by scanString) never panic.
	for _, s := range []string{``, `"`, `x`, `"\"`, `"\u"`, `"\u12"`, `"\q"`, `"\ud800\u"`} {
		appendUnquote(nil, []byte(s), true)
		appendUnquote(nil, []byte(s), false)
		countRunes([]byte(s))
	}
}

func TestMatchKey(t *testing.T) {
	names := []string{"choices", "usage", "error"}
	for _, tc := range []struct {
		key  string
		want int
	}{
		{`"choices"`, 0},
		{`"usage"`, 1},
		{`"error"`, 2},
		{`"errors"`, keyOther},
		{`"id"`, keyOther},
		{`""`, keyOther},
		{`"\u0063hoices"`, 0},
		{`"us\u0061ge"`, 1},
		{`"\u0063hoice"`, keyOther},
		{`"Choices"`, keyAmbiguous},
		{`"USAGE"`, keyAmbiguous},
		{`"\u0055sage"`, keyAmbiguous},
		{"\"choice\u017f\"", keyAmbiguous}, // long s
		{"\"choice\u017f\u017f\"", keyOther},
		{`"usag"`, keyOther},
		{`"usagee"`, keyOther},
		{`"` + strings.Repeat(`\u0061`, 100) + `"`, keyOther},
	} {
		if got := matchKey([]byte(tc.key), names); got != tc.want {
			t.Errorf("matchKey(%s) = %d, want %d", tc.key, got, tc.want)
		}
	}
	if !keyIs([]byte(`"a\u0062c"`), "abc") || keyIs([]byte(`"ABC"`), "abc") || !keyIs([]byte(`"abc"`), "abc") {
		t.Error("keyIs")
	}
	// The Kelvin sign folds to k.
	if !foldEq([]byte("\u212Aey"), "key") || foldEq([]byte("kex"), "key") || foldEq([]byte("ke"), "key") {
		t.Error("foldEq")
	}
}

func TestIterators(t *testing.T) {
	doc := []byte(` { "a" : 1 , "b\n" : [ 1 , "x" , { } ] , "c":null } `)
	var keys, vals []string
	it := newObjIter(doc, 1, 1)
	for {
		ks, ke, vs, ok := it.next()
		if !ok {
			break
		}
		it.skip()
		keys = append(keys, string(doc[ks:ke]))
		vals = append(vals, string(doc[vs:it.i]))
	}
	if it.err || string(doc[it.i:]) != " " {
		t.Fatalf("err %v at %d", it.err, it.i)
	}
	if strings.Join(keys, "|") != `"a"|"b\n"|"c"` || strings.Join(vals, "|") != `1|[ 1 , "x" , { } ]|null` {
		t.Errorf("keys %q vals %q", keys, vals)
	}
	arr := []byte(`[ 1 , "x" , { } ]`)
	ai := newArrIter(arr, 0, 1)
	var elems []string
	for {
		vs, ok := ai.next()
		if !ok {
			break
		}
		ai.skip()
		elems = append(elems, string(arr[vs:ai.i]))
	}
	if ai.err || ai.i != len(arr) || strings.Join(elems, "|") != `1|"x"|{ }` {
		t.Errorf("elements %q err %v", elems, ai.err)
	}
	// Errors are sticky and reported.
	bad := []byte(`{"a":1,}`)
	it = newObjIter(bad, 0, 1)
	for {
		if _, _, _, ok := it.next(); !ok {
			break
		}
		it.skip()
	}
	if !it.err {
		t.Error("trailing comma accepted")
	}
	if _, _, _, ok := it.next(); ok {
		t.Error("next after error")
	}
}

// jsonShape reports, for valid JSON, the maximum nesting depth and whether
// any object has a duplicate (decoded) key.
func jsonShape(data []byte) (depth int, dups bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		obj       bool
		expectKey bool
		keys      map[string]bool
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return depth, dups
		}
		if err != nil {
			return depth, dups
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if n := len(stack); n > 0 && stack[n-1].obj {
				stack[n-1].expectKey = true
			}
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].expectKey {
			k := tok.(string)
			if stack[n-1].keys[k] {
				dups = true
			}
			stack[n-1].keys[k] = true
			stack[n-1].expectKey = false
			continue
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, frame{obj: d == '{', expectKey: true, keys: map[string]bool{}})
			depth = max(depth, len(stack))
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].obj {
			stack[n-1].expectKey = true
		}
	}
}

func TestJSONShape(t *testing.T) {
	for _, tc := range []struct {
		doc   string
		depth int
		dups  bool
	}{
		{`1`, 0, false},
		{`{"a":1,"b":[{"a":2}]}`, 3, false},
		{`{"a":1,"b":{},"a":2}`, 2, true},
		{`[{"a":{"x":1,"x":2}}]`, 3, true},
		{`{"a":"x","\u0061":1}`, 1, true},
		{`{"a":{},"b":[],"c":{"d":[]}}`, 3, false},
	} {
		d, dups := jsonShape([]byte(tc.doc))
		if d != tc.depth || dups != tc.dups {
			t.Errorf("jsonShape(%s) = %d %v, want %d %v", tc.doc, d, dups, tc.depth, tc.dups)
		}
	}
}
