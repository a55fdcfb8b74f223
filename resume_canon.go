package llmrelay

import (
	"bytes"
	"encoding/json"
)

// canonicalBody is a request body as requestHash sees it: a JSON body
// decoded and encoded again, so that the members of every object come
// in key order and whitespace is gone. Two sends of one request by a
// client that builds its body from a hash map (Codex CLI's
// client_metadata changes order from one send to the next) hash alike.
// A body that is not JSON is its own bytes.
func canonicalBody(raw []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers keep their literal: 1.0 and 1 stay two bodies
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return raw
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return raw
	}
	return out.Bytes()
}
