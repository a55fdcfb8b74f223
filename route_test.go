package llmrelay

import (
	"encoding/json"
	"reflect"
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
	body, err := rb.forTarget(tg, exchange{})
	if err != nil {
		t.Fatal(err)
	}
	out := body.Bytes()
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
	body, err := rb.forTarget(tg, exchange{})
	if err != nil {
		t.Fatal(err)
	}
	out := body.Bytes()
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
	if out, _ := rb.forTarget(&target{}, exchange{}); string(out.Bytes()) != `{"model":"chat","n":2}` {
		t.Fatalf("repeated key: %s", out.Bytes())
	}
}

// The splice (same dialect) gives the body the map gives, whatever the
// relay changed before (effort, thinking, stream_options) and whatever
// the target edits, nested ones included.
func TestBodyForTargetSpliceMatchesMap(t *testing.T) {
	bodies := []string{
		`{"model":"chat","messages":[{"role":"user","content":"hi"}],"stream":true}`,
		`{"relay":{"mode":"off"},"model":"chat","n":1}`,
		`{"n":1,"model":"chat","relay":{"mode":"pace"},"reasoning":{"effort":"low"},"temperature":1}`,
		` { "model" : "caf\u00e9" , "x" : [ 1 , 2 ] , "reasoning" : null } `,
		`{"model":"chat","thinking":{"type":"enabled","budget_tokens":5000},"max_tokens":10}`,
	}
	changes := map[string]func(rb *requestBody){
		"none":     func(*requestBody) {},
		"effort":   func(rb *requestBody) { rb.set("reasoning_effort", json.RawMessage(`"high"`)) },
		"nested":   func(rb *requestBody) { _ = rb.setPath([]string{"reasoning", "effort"}, json.RawMessage(`"minimal"`)) },
		"thinking": func(rb *requestBody) { rb.del("thinking"); rb.set("max_tokens", json.RawMessage(`4096`)) },
		"usage": func(rb *requestBody) {
			rb.set("stream_options", json.RawMessage(`{"include_usage":true}`))
			rb.set("stream_options", json.RawMessage(`{"include_usage":false}`))
		},
	}
	targets := [][]bodyEdit{
		nil,
		{{path: []string{"temperature"}}},
		{{path: []string{"temperature"}, value: json.RawMessage(`0.5`)}, {path: []string{"temperature"}}},
		{{path: []string{"reasoning", "max_tokens"}, value: json.RawMessage(`2000`)}, {path: []string{"reasoning", "effort"}}},
		{{path: []string{"a", "b", "c"}, value: json.RawMessage(`1`)}, {path: []string{"a", "b", "d"}, value: json.RawMessage(`2`)}},
		{{path: []string{"relay"}, value: json.RawMessage(`{"x":1}`)}, {path: []string{"budget"}, value: json.RawMessage(budgetPlaceholder)}},
		{{path: []string{"x", "y"}, value: json.RawMessage(`1`)}}, // an error where x is an array
	}
	for _, body := range bodies {
		for name, change := range changes {
			for i, edits := range targets {
				for _, model := range []string{"", "gpt-x", `we"ird`} {
					rb, err := parseRequestBody([]byte(body))
					if err != nil {
						t.Fatalf("%s: %v", body, err)
					}
					rb.budget = 700
					change(rb)
					tg := newTarget(nil, model)
					tg.edits = edits
					splice, errS := rb.forTarget(tg, exchange{})
					byMap, errM := rb.forTargetByMap(tg, exchange{})
					if (errS == nil) != (errM == nil) {
						t.Fatalf("%s, %s, target %d: splice error %v, map error %v", body, name, i, errS, errM)
					}
					if errS != nil {
						continue
					}
					var a, b any
					if json.Unmarshal(splice.Bytes(), &a) != nil || json.Unmarshal(byMap.Bytes(), &b) != nil || !reflect.DeepEqual(a, b) {
						t.Errorf("%s, %s, target %d, model %q:\nsplice %s\nmap    %s", body, name, i, model, splice.Bytes(), byMap.Bytes())
					}
				}
			}
		}
	}
}

// jsonString decodes a model name as encoding/json does.
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{`"chat"`, `"caf\u00e9"`, `"\ud800"`, "\"\xff\"", `1`, `null`, `""`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // parseRequestBody hands jsonString valid values only
		}
		var want string
		_ = json.Unmarshal(raw, &want)
		if got := jsonString(raw); got != want {
			t.Fatalf("jsonString(%q) = %q, encoding/json %q", raw, got, want)
		}
	})
}
