package splice

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
)

// The Messages recorder's byte scans: its hot path reads a few fields of
// Anthropic's events without parsing them. A key is found as `"key"`
// followed by optional whitespace and ':', which cannot occur inside a
// JSON string (its quotes are escaped there); Anthropic writes "index"
// and a content block's or delta's "type" before any nested object, so
// the first match is the field.

// keyValue returns the offset of the value of the first `"key":` in data
// at or after from, or -1.
func keyValue(data []byte, key string, from int) int {
	for from <= len(data) {
		i := bytes.Index(data[from:], []byte(key))
		if i < 0 {
			return -1
		}
		j := skipSpace(data, from+i+len(key))
		if j < len(data) && data[j] == ':' {
			return skipSpace(data, j+1)
		}
		from += i + 1
	}
	return -1
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// stringAt returns the raw (still escaped) content of the JSON string
// starting at data[i], or false.
func stringAt(data []byte, i int) ([]byte, bool) {
	if i < 0 || i >= len(data) || data[i] != '"' {
		return nil, false
	}
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return data[i+1 : j], true
		}
	}
	return nil, false
}

// blockType returns the type of a content_block_start's block.
func blockType(data []byte) string {
	i := keyValue(data, `"content_block"`, 0)
	if i < 0 {
		return ""
	}
	s, _ := stringAt(data, keyValue(data, `"type"`, i))
	return string(s)
}

// topIndex returns an event's index.
func topIndex(data []byte) (int, bool) {
	i := keyValue(data, `"index"`, 0)
	if i < 0 {
		return 0, false
	}
	n, digits := 0, 0
	for ; i < len(data) && data[i] >= '0' && data[i] <= '9' && digits < 9; i++ {
		n = n*10 + int(data[i]-'0')
		digits++
	}
	return n, digits > 0
}

// deltaString returns the raw content of a delta's string field key, if
// the event is of delta type typ (both quoted).
func deltaString(data []byte, typ, key string) ([]byte, bool) {
	if !bytes.Contains(data, []byte(typ)) {
		return nil, false
	}
	d := keyValue(data, `"delta"`, 0)
	if d < 0 {
		return nil, false
	}
	return stringAt(data, keyValue(data, key, d))
}

// jsonString decodes the concatenated raw contents of JSON strings;
// malformed input (a stream the scan misread) is returned as it is.
func jsonString(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	var s string
	if json.Unmarshal(q, &s) != nil {
		return string(raw)
	}
	return s
}

// setTopLevel returns data, a JSON object, with the value of its
// top-level key replaced by value, or value added last when key is
// absent; the rest of data is kept byte for byte. False when data is not
// one JSON object.
func setTopLevel(data []byte, key string, value []byte) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	found, start, end, n := false, 0, 0, 0
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		k, _ := t.(string)
		keyEnd := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		n++
		if k == key && !found {
			found, end = true, int(dec.InputOffset())
			start = keyEnd
			for start < end && (data[start] == ':' || data[start] == ' ' || data[start] == '\t' || data[start] == '\n' || data[start] == '\r') {
				start++
			}
		}
	}
	last := int(dec.InputOffset())
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	if len(bytes.TrimSpace(data[dec.InputOffset():])) != 0 {
		return nil, false
	}
	out := make([]byte, 0, len(data)+len(value)+len(key)+4)
	if found {
		out = append(out, data[:start]...)
		out = append(out, value...)
		return append(out, data[end:]...), true
	}
	out = append(out, data[:last]...)
	if n > 0 {
		out = append(out, ',')
	}
	out = append(out, quote(key)...)
	out = append(out, ':')
	out = append(out, value...)
	return append(out, data[last:]...), true
}

func sortedKeys(m map[string]json.RawMessage) []string { return slices.Sorted(maps.Keys(m)) }
