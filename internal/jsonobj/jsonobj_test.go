package jsonobj

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

func TestSplitRender(t *testing.T) {
	in := []byte(` { "model" : "a", "messages":[{"role":"user","content":"x \"y\" \\ z"}],` +
		"\n\t" + `"n": 2.5e3, "nested":{"k":[1,{"a":null}]}, "t":true, "esc\u00e9": "v" } `)
	ms, err := Split(in)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, m := range ms {
		keys = append(keys, m.Key)
	}
	if want := []string{"model", "messages", "n", "nested", "t", "escé"}; !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	values := Map(ms)
	values["model"] = json.RawMessage(`"b"`)
	delete(values, "t")
	values["added"] = json.RawMessage(`{"x":1}`)
	got := string(Render(nil, ms, values))
	want := `{"model":"b","messages":[{"role":"user","content":"x \"y\" \\ z"}],"n":2.5e3,"nested":{"k":[1,{"a":null}]},"esc\u00e9":"v","added":{"x":1}}`
	if got != want {
		t.Fatalf("rendered\n%s\nwant\n%s", got, want)
	}
}

func TestSplitRejects(t *testing.T) {
	for _, in := range []string{``, `[]`, `"x"`, `{`, `{"a":1,}`, `{"a":1} {}`, `null`, `{"a" 1}`} {
		if _, err := Split([]byte(in)); err == nil {
			t.Errorf("Split(%q) accepted", in)
		}
	}
	if ms, err := Split([]byte(` {} `)); err != nil || len(ms) != 0 {
		t.Errorf("empty object: %v %v", ms, err)
	}
}

func TestUnique(t *testing.T) {
	ms, _ := Split([]byte(`{"a":1,"b":2,"a":3}`))
	if Unique(ms) || Map(ms)["a"][0] != '3' {
		t.Fatal("duplicate key: not reported, or the first one won")
	}
}

// Any object: split and rendered with its own values, it decodes to the
// same value; with a member replaced, one removed and one added, it
// decodes to the edited map; Split accepts exactly the valid objects.
func FuzzSplitRender(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":"\"}","b":[{"c":"]"}],"d":null}`, ` {"x" : { "y" : [ 1 , 2 ] } } `, `[1]`, `{"a":1,"a":2}`, `{"model":"a","relay":{"mode":"off"},"x":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var want map[string]any
		isObj := json.Unmarshal(in, &want) == nil && want != nil
		ms, err := Split(in)
		if (err == nil) != isObj {
			t.Fatalf("Split(%q) error %v, but encoding/json object: %v", in, err, isObj)
		}
		if err != nil || !Unique(ms) {
			return
		}
		out := Render(nil, ms, Map(ms))
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("Render(Split(%q)) = %q (%v)", in, out, err)
		}
		values := Map(ms)
		if len(ms) > 0 {
			values[ms[0].Key] = json.RawMessage(`"replaced"`)
			want[ms[0].Key] = "replaced"
		}
		if len(ms) > 1 {
			delete(values, ms[1].Key)
			delete(want, ms[1].Key)
		}
		values["zz added"] = json.RawMessage(`[1]`)
		want["zz added"] = []any{1.0}
		out = Render(nil, ms, values)
		got = nil
		if err := json.Unmarshal(out, &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("edited render of %q = %q (%v)", in, out, err)
		}

		var compact bytes.Buffer
		_ = json.Compact(&compact, in)
		// Pieces is Render of the map with the same edits applied in
		// order: replaced, removed, added, added then removed, set twice.
		edits := []Edit{{Key: "model", Value: []byte(`"m2"`)}, {Key: "relay"}, {Key: "zz new", Value: []byte(`{}`)}, {Key: "aa gone", Value: []byte(`1`)}, {Key: "aa gone"}, {Key: "model", Value: []byte(`"m3"`)}}
		if len(ms) > 0 {
			edits = append(edits, Edit{Key: ms[0].Key, Value: []byte(`true`)})
		}
		if len(ms) > 1 {
			edits = append(edits, Edit{Key: ms[len(ms)-1].Key})
		}
		for n := range len(edits) + 1 {
			values = Map(ms)
			for _, e := range edits[:n] {
				if e.Value == nil {
					delete(values, e.Key)
				} else {
					values[e.Key] = e.Value
				}
			}
			pieces := bytes.Join(Pieces(nil, in, ms, edits[:n]), nil)
			rendered := Render(nil, ms, values)
			var p, r any
			if json.Unmarshal(pieces, &p) != nil || json.Unmarshal(rendered, &r) != nil || !reflect.DeepEqual(p, r) {
				t.Fatalf("Pieces(%q, %d edits) = %q, Render %q", in, n, pieces, rendered)
			}
			// Without whitespace between members, the very same bytes.
			if compact.Len() == len(in) && string(pieces) != string(rendered) {
				t.Fatalf("Pieces(%q, %d edits) = %q, Render %q", in, n, pieces, rendered)
			}
		}
	})
}

// Nesting deeper than the fast scanner's cap is still a valid object.
func TestSplitDeep(t *testing.T) {
	deep := `{"model":"m","schema":` + strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 100) + `}`
	ms, err := Split([]byte(deep))
	if err != nil || len(ms) != 2 || ms[1].Key != "schema" || len(ms[1].Value) != len(deep)-len(`{"model":"m","schema":}`) {
		t.Fatalf("deep object: %v %v", ms, err)
	}
	if _, err := Split([]byte(deep[:len(deep)-1])); err == nil {
		t.Fatal("a truncated deep object was accepted")
	}
}

// Render, the reference Pieces is checked against, appends to dst the object whose members are those of values: a
// key that was among members keeps its place and, when its value is
// still the one Split returned, its bytes as written; a key missing from
// values is left out; keys new in values follow, in sorted order. Values
// are written as given and must be valid JSON. members must not repeat a
// key (see Unique).
func Render(dst []byte, members []Member, values map[string]json.RawMessage) []byte {
	dst = append(dst, '{')
	n := 0
	sep := func() {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
	}
	for _, mb := range members {
		v, ok := values[mb.Key]
		if !ok {
			continue
		}
		sep()
		dst = append(dst, mb.Name...)
		dst = append(dst, ':')
		if same(v, mb.Value) {
			dst = append(dst, mb.Value...)
		} else {
			dst = append(dst, v...)
		}
	}
	var added []string
	for k := range values {
		if !slices.ContainsFunc(members, func(mb Member) bool { return mb.Key == k }) {
			added = append(added, k)
		}
	}
	slices.Sort(added)
	for _, k := range added {
		sep()
		name, _ := json.Marshal(k)
		dst = append(dst, name...)
		dst = append(dst, ':')
		dst = append(dst, values[k]...)
	}
	return append(dst, '}')
}

// same reports whether v is the very slice Split returned (the common
// case, checked without reading the bytes), or equal to it.
func same(v, orig []byte) bool {
	if len(v) != len(orig) {
		return false
	}
	if len(v) == 0 || unsafe.SliceData(v) == unsafe.SliceData(orig) {
		return true
	}
	return string(v) == string(orig)
}
