package llmrelay

import (
	"encoding/json"
	"testing"
)

func TestBodyForTarget(t *testing.T) {
	rb, err := parseRequestBody([]byte(`{"model":"chat","stream":true,"temperature":0.7,"relay":{"mode":"off"},"reasoning":{"effort":"high"},"messages":[{"role":"user","content":"héllo 你好"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if rb.model != "chat" || !rb.stream {
		t.Fatalf("parsed %+v", rb)
	}
	tg := &target{model: "gpt-x", edits: []bodyEdit{
		{path: []string{"reasoning", "max_tokens"}, value: json.RawMessage(`2000`)},
		{path: []string{"thinking", "budget_tokens"}, value: json.RawMessage(`512`)},
		{path: []string{"temperature"}},
		{path: []string{"absent", "deep"}},
	}}
	out, err := rb.forTarget(tg, exchange{})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := `{"messages":[{"content":"héllo 你好","role":"user"}],"model":"gpt-x","reasoning":{"effort":"high","max_tokens":2000},"stream":true,"thinking":{"budget_tokens":512}}`
	if w, _ := json.Marshal(got); string(w) != want {
		t.Errorf("body\n%s\nwant\n%s", w, want)
	}
	// The client's body is untouched for the next target.
	if _, ok := rb.fields["relay"]; !ok {
		t.Errorf("forTarget mutated the shared body")
	}
	// Setting inside a non-object is an error, not a silent overwrite.
	bad := &target{edits: []bodyEdit{{path: []string{"temperature", "x"}, value: json.RawMessage(`1`)}}}
	if _, err := rb.forTarget(bad, exchange{}); err == nil {
		t.Errorf("set inside a number succeeded")
	}
}

func TestParseRequestBodyErrors(t *testing.T) {
	for in, want := range map[string]error{
		`{`:              errInvalidJSON,
		`null`:           errInvalidJSON,
		`"x"`:            errInvalidJSON,
		`{"model":""}`:   errMissingModel,
		`{"model":3}`:    errMissingModel,
		`{"messages":1}`: errMissingModel,
	} {
		if _, err := parseRequestBody([]byte(in)); err != want {
			t.Errorf("parseRequestBody(%s) = %v, want %v", in, err, want)
		}
	}
}

// A body for a target of the client's own dialect is the client's bytes
// with only the changed fields spliced in: key order, spacing inside
// values, escapes and number spellings stay as written, and a field the
// operator adds goes at the end.
func TestBodyForTargetSplices(t *testing.T) {
	in := `{"z":1.50,"model":"chat","messages":[ {"role":"user","content":"caf\u00e9 \"x\""} ],"relay":{"mode":"off"},"a":[1, 2]}`
	rb, err := parseRequestBody([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	tg := &target{model: "gpt-x", edits: []bodyEdit{{path: []string{"max_tokens"}, value: json.RawMessage(`64`)}}}
	out, err := rb.forTarget(tg, exchange{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"z":1.50,"model":"gpt-x","messages":[ {"role":"user","content":"caf\u00e9 \"x\""} ],"a":[1, 2],"max_tokens":64}`
	if string(out) != want {
		t.Fatalf("body\n%s\nwant\n%s", out, want)
	}
	// A body with a repeated key is encoded as encoding/json reads it:
	// the last value wins.
	rb, err = parseRequestBody([]byte(`{"model":"chat","n":1,"n":2}`))
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := rb.forTarget(&target{}, exchange{}); string(out) != `{"model":"chat","n":2}` {
		t.Fatalf("repeated key: %s", out)
	}
}
