package jsonscan

import (
	"bytes"
	"encoding/json"
	"github.com/llmrelay/caddy-llm-relay/internal/jsontest"
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
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("Valid(%q) = %v, json.Valid = %v", s, got, want)
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
			if got, want := Valid(b), json.Valid(b); got != want {
				t.Errorf("Valid(%q) = %v, json.Valid = %v", b, got, want)
			}
		}
	}
}

func TestScanDepth(t *testing.T) {
	for _, d := range []int{1, MaxDepth - 1, MaxDepth, MaxDepth + 1, 1000} {
		doc := strings.Repeat("[", d) + strings.Repeat("]", d)
		if got, want := Valid([]byte(doc)), d <= MaxDepth; got != want {
			t.Errorf("depth %d: valid = %v, want %v", d, got, want)
		}
		doc = strings.Repeat(`{"a":`, d) + "1" + strings.Repeat("}", d)
		if got, want := Valid([]byte(doc)), d <= MaxDepth; got != want {
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
		end, esc := ScanString([]byte(tc.s), 0)
		if end != tc.end || (end >= 0 && esc != tc.esc) {
			t.Errorf("ScanString(%q) = %d, %v; want %d, %v", tc.s, end, esc, tc.end, tc.esc)
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
		// replacement, and CountRunes agrees.
		got, n, ok := AppendUnquote([]byte("p"), lit, false)
		if !ok || string(got) != "p"+want || n != utf8.RuneCountInString(want) {
			t.Errorf("lenient %s = %q %d %v, want %q %d", tc.lit, got, n, ok, want, utf8.RuneCountInString(want))
		}
		if c := CountRunes(lit); c != utf8.RuneCountInString(want) {
			t.Errorf("CountRunes(%s) = %d, want %d", tc.lit, c, utf8.RuneCountInString(want))
		}
		got, n, ok = AppendUnquote([]byte("p"), lit, true)
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
	// Malformed literals (not validated by ScanString) never panic.
	for _, s := range []string{``, `"`, `x`, `"\"`, `"\u"`, `"\u12"`, `"\q"`, `"\ud800\u"`} {
		AppendUnquote(nil, []byte(s), true)
		AppendUnquote(nil, []byte(s), false)
		CountRunes([]byte(s))
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
		{`"errors"`, KeyOther},
		{`"id"`, KeyOther},
		{`""`, KeyOther},
		{`"\u0063hoices"`, 0},
		{`"us\u0061ge"`, 1},
		{`"\u0063hoice"`, KeyOther},
		{`"Choices"`, KeyAmbiguous},
		{`"USAGE"`, KeyAmbiguous},
		{`"\u0055sage"`, KeyAmbiguous},
		{"\"choice\u017f\"", KeyAmbiguous}, // long s
		{"\"choice\u017f\u017f\"", KeyOther},
		{`"usag"`, KeyOther},
		{`"usagee"`, KeyOther},
		{`"` + strings.Repeat(`\u0061`, 100) + `"`, KeyOther},
	} {
		if got := MatchKey([]byte(tc.key), names); got != tc.want {
			t.Errorf("MatchKey(%s) = %d, want %d", tc.key, got, tc.want)
		}
	}
	if !KeyIs([]byte(`"a\u0062c"`), "abc") || KeyIs([]byte(`"ABC"`), "abc") || !KeyIs([]byte(`"abc"`), "abc") {
		t.Error("KeyIs")
	}
	// The Kelvin sign folds to k.
	if !foldEq([]byte("\u212Aey"), "key") || foldEq([]byte("kex"), "key") || foldEq([]byte("ke"), "key") {
		t.Error("foldEq")
	}
}

func TestIterators(t *testing.T) {
	doc := []byte(` { "a" : 1 , "b\n" : [ 1 , "x" , { } ] , "c":null } `)
	var keys, vals []string
	it := NewObjIter(doc, 1, 1)
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			break
		}
		it.Skip()
		keys = append(keys, string(doc[ks:ke]))
		vals = append(vals, string(doc[vs:it.Pos]))
	}
	if it.Err || string(doc[it.Pos:]) != " " {
		t.Fatalf("err %v at %d", it.Err, it.Pos)
	}
	if strings.Join(keys, "|") != `"a"|"b\n"|"c"` || strings.Join(vals, "|") != `1|[ 1 , "x" , { } ]|null` {
		t.Errorf("keys %q vals %q", keys, vals)
	}
	arr := []byte(`[ 1 , "x" , { } ]`)
	ai := NewArrIter(arr, 0, 1)
	var elems []string
	for {
		vs, ok := ai.Next()
		if !ok {
			break
		}
		ai.Skip()
		elems = append(elems, string(arr[vs:ai.Pos]))
	}
	if ai.Err || ai.Pos != len(arr) || strings.Join(elems, "|") != `1|"x"|{ }` {
		t.Errorf("elements %q err %v", elems, ai.Err)
	}
	// Errors are sticky and reported.
	bad := []byte(`{"a":1,}`)
	it = NewObjIter(bad, 0, 1)
	for {
		if _, _, _, ok := it.Next(); !ok {
			break
		}
		it.Skip()
	}
	if !it.Err {
		t.Error("trailing comma accepted")
	}
	if _, _, _, ok := it.Next(); ok {
		t.Error("next after error")
	}
}

func FuzzScan(f *testing.F) {
	for _, s := range scanCases {
		f.Add([]byte(s))
	}
	f.Add([]byte(`"\ud83d\ude00\ud800\u0041\"\\"`))
	f.Add([]byte("\"\xed\xa0\x80\xff\""))
	f.Fuzz(func(t *testing.T, data []byte) {
		got := Valid(data)
		want := json.Valid(data)
		if want {
			if depth, _ := jsontest.Shape(data); depth > MaxDepth {
				want = false
			}
		}
		if got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", data, got, want)
		}
		lit := bytes.TrimSpace(data) // JSON whitespace is a subset of TrimSpace's
		if !got || lit[0] != '"' {
			return
		}
		var s string
		if err := json.Unmarshal(lit, &s); err != nil {
			t.Fatal(err)
		}
		dec, n, ok := AppendUnquote(nil, lit, false)
		if !ok || string(dec) != s || n != utf8.RuneCountInString(s) || CountRunes(lit) != n {
			t.Fatalf("lenient decode of %q = %q (%d runes, ok %v, count %d), want %q", lit, dec, n, ok, CountRunes(lit), s)
		}
		dec, n, ok = AppendUnquote(nil, lit, true)
		if ok && (string(dec) != s || !utf8.Valid(dec) || n != utf8.RuneCount(dec)) {
			t.Fatalf("strict decode of %q = %q, want %q", lit, dec, s)
		}
		if !ok && !strings.ContainsRune(s, utf8.RuneError) {
			t.Fatalf("strict decode of %q failed without replacement characters", lit)
		}
		MatchKey(lit, []string{"choices", "usage", "error", "object"}) // must not panic
	})
}

// A long prompt: words with an escape every twenty bytes or so, as a
// pasted file or a long conversation has.
func BenchmarkScanStringPrompt(b *testing.B) {
	var sb strings.Builder
	sb.WriteByte('"')
	words := []string{"the ", "relay ", "streams ", "tokens, ", "and ", `\n`, `\"quotes\" `, "caddy ", "50% ", "<tag> ", "naïve "}
	for i := 0; sb.Len() < 1<<20; i++ {
		sb.WriteString(words[i%len(words)])
	}
	sb.WriteByte('"')
	lit := []byte(sb.String())
	b.SetBytes(int64(len(lit)))
	for b.Loop() {
		if end, _ := ScanString(lit, 0); end != len(lit) {
			b.Fatal(end)
		}
	}
}

func TestMayHaveMember(t *testing.T) {
	for _, c := range []struct {
		data string
		want bool
	}{
		{`{"usage":null}`, false},
		{`{"usage":{"a":1}}`, true},
		{`{"usage" :` + "\n\t" + ` {"a":1}}`, true},
		{`{"x":"usage","usage":{}}`, true},
		{`{"usage_x":{}}`, false},
		{`{"a":"\"usage\" is a word"}`, false},
		{`{}`, false},
	} {
		if got := MayHaveMember([]byte(c.data), `"usage"`, '{'); got != c.want {
			t.Errorf("%s: %v", c.data, got)
		}
	}
}
