package llmrelay

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRequestHashKeyOrder: two sends of one request whose objects list
// their keys in another order (Codex CLI's retries do: its
// client_metadata is a hash map) hash alike; a changed value, number
// literal, path or method does not.
func TestRequestHashKeyOrder(t *testing.T) {
	h := func(method, path, body string) string {
		return requestHash(httptest.NewRequest(method, path, strings.NewReader(body)), []byte(body))
	}
	a := `{"model":"m","input":[{"role":"user","content":"hi"}],"client_metadata":{"turn_id":"t","session_id":"s"},"n":1.0}`
	b := `{ "client_metadata": {"session_id":"s","turn_id":"t"}, "input":[{"content":"hi","role":"user"}], "model":"m","n":1.0 }`
	if h("POST", "/v1/responses", a) != h("POST", "/v1/responses", b) {
		t.Error("the same body with its keys in another order hashes differently")
	}
	for _, other := range []struct{ method, path, body string }{
		{"POST", "/v1/responses", strings.Replace(a, `"hi"`, `"ho"`, 1)},
		{"POST", "/v1/responses", strings.Replace(a, `1.0`, `1`, 1)},
		{"POST", "/v1/responses", `{"model":"m","input":[{"content":"hi","role":"user"}]}`},
		{"POST", "/v1/chat/completions", a},
		{"PUT", "/v1/responses", a},
	} {
		if h(other.method, other.path, other.body) == h("POST", "/v1/responses", a) {
			t.Errorf("%s %s %s hashes like the original", other.method, other.path, other.body)
		}
	}
	// Not JSON: the bytes themselves.
	if h("POST", "/v1/responses", "not json") == h("POST", "/v1/responses", "not  json") {
		t.Error("two different non-JSON bodies hash alike")
	}
	if h("POST", "/v1/responses", `{"a":1} {"b":2}`) == h("POST", "/v1/responses", `{"a":1}`) {
		t.Error("trailing data is ignored")
	}
}

// FuzzCanonicalBody: the canonical form is a fixed point (canonicalizing
// it again changes nothing), so equal requests stay equal.
func FuzzCanonicalBody(f *testing.F) {
	f.Add([]byte(`{"b":1,"a":[{"y":2,"x":"\u00e9"}]}`))
	f.Add([]byte(`not json`))
	f.Add([]byte(`[1, 2.50, -0, 1e3]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c := canonicalBody(raw)
		if string(canonicalBody(c)) != string(c) {
			t.Fatalf("not a fixed point: %q -> %q -> %q", raw, c, canonicalBody(c))
		}
	})
}
