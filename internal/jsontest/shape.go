// Package jsontest holds helpers for tests that check JSON scanners
// against encoding/json.
package jsontest

import (
	"bytes"
	"encoding/json"
	"io"
)

// Shape reports, for valid JSON, the maximum nesting depth and whether
// any object has a duplicate (decoded) key.
func Shape(data []byte) (depth int, dups bool) {
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
