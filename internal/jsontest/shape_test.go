package jsontest

import "testing"

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
		d, dups := Shape([]byte(tc.doc))
		if d != tc.depth || dups != tc.dups {
			t.Errorf("Shape(%s) = %d %v, want %d %v", tc.doc, d, dups, tc.depth, tc.dups)
		}
	}
}
