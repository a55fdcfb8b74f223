package llmrelay

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestExtraBodyMerged: extra_body's members land at the top level, over
// members of the same name (shallow, as the Python SDKs merge it), before
// the relay reads the body; extra_body itself is gone.
func TestExtraBodyMerged(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"model":"chat","extra_body":{"reasoning_dispersion":true}}`, `{"model":"chat","reasoning_dispersion":true}`},
		{`{"model":"chat","relay":{"mode":"pace","split_ratio":0.9},"extra_body":{"relay":{"mode":"split-reasoning"}}}`, `{"model":"chat","relay":{"mode":"split-reasoning"}}`},
		{`{"extra_body":{"model":"chat"},"model":"other"}`, `{"model":"chat"}`},
		{`{"model":"chat","extra_body":null}`, `{"model":"chat"}`},
		{`{"model":"chat","extra_body":{}}`, `{"model":"chat"}`},
		{`{"model":"chat","extra_body":{"a":1,"a":2}}`, `{"model":"chat","a":2}`},
		// A repeated key at the top level: the map's reading, the last wins.
		{`{"model":"x","model":"chat","extra_body":{"n":1}}`, `{"model":"chat","n":1}`},
		{`{"model":"chat","extra_body":{"extra_body":{"top_p":0.5},"n":2}}`, `{"model":"chat","n":2,"top_p":0.5}`},
	} {
		rb, err := parseRequestBody([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		var got, want any
		if err := json.Unmarshal(rb.raw, &got); err != nil {
			t.Fatalf("%s: merged body %s: %v", tc.in, rb.raw, err)
		}
		_ = json.Unmarshal([]byte(tc.want), &want)
		if !reflect.DeepEqual(got, want) || !rb.merged {
			t.Errorf("%s: merged %s, want %s", tc.in, rb.raw, tc.want)
		}
		if _, ok := rb.fields[fieldExtraBody]; ok {
			t.Errorf("%s: extra_body is still a field", tc.in)
		}
	}
	rb, err := parseRequestBody([]byte(`{"model":"chat","extra_body":{"reasoning_dispersion":true,"relay":{"split_ratio":0.35}}}`))
	if err != nil || rb.relayMode != "split-reasoning" || !rb.dispersed || rb.splitRatio == nil || *rb.splitRatio != 0.35 {
		t.Errorf("the relay's knobs in extra_body were not read: %+v, %v", rb, err)
	}
	plain := []byte(`{"model":"chat","n":1}`)
	if rb, _ := parseRequestBody(plain); rb.merged || &rb.raw[0] != &plain[0] {
		t.Errorf("a body without extra_body was copied")
	}
}

// TestExtraBodyErrors: an extra_body that is not an object is a 400
// naming it, as is one nested too deep; the relay's knobs it carries are
// checked as at the top level.
func TestExtraBodyErrors(t *testing.T) {
	deep := `{"model":"chat","extra_body":` + strings.Repeat(`{"extra_body":`, 5) + `{}` + strings.Repeat(`}`, 5) + `}`
	for in, want := range map[string]string{
		`{"model":"chat","extra_body":"x"}`: "not a string",
		`{"model":"chat","extra_body":[1]}`: "not an array",
		`{"model":"chat","extra_body":1}`:   "not a number",
		deep:                                "nested more than 4 deep",
		`{"model":"chat","extra_body":{"relay":{"split_ratio":2}}}`:    "relay.split_ratio must be a number from 0 to 1",
		`{"model":"chat","extra_body":{"reasoning_dispersion":"yes"}}`: "'reasoning_dispersion' field must be true or false",
	} {
		_, err := parseRequestBody([]byte(in))
		e, ok := asAPIError(err)
		if !ok || e.Status != 400 || !strings.Contains(e.Message, want) {
			t.Errorf("%s: %v, want a 400 saying %q", in, err, want)
		}
		if ok && strings.Contains(want, "not a") && (e.Param != "extra_body" || e.Code != "invalid_extra_body") {
			t.Errorf("%s: param %q code %q, want extra_body, invalid_extra_body", in, e.Param, e.Code)
		}
	}
}

// TestSplitRatioParsed: relay.split_ratio is a number from 0 to 1; null is
// none; anything else is a 400 naming relay.split_ratio.
func TestSplitRatioParsed(t *testing.T) {
	for in, want := range map[string]float64{`0`: 0, `0.35`: 0.35, `1`: 1, `1e-1`: 0.1} {
		rb, err := parseRequestBody([]byte(`{"model":"m","relay":{"mode":"split-reasoning","split_ratio":` + in + `}}`))
		if err != nil || rb.splitRatio == nil || *rb.splitRatio != want {
			t.Errorf("split_ratio %s: %v, %v", in, rb, err)
		}
	}
	if rb, err := parseRequestBody([]byte(`{"model":"m","relay":{"split_ratio":null}}`)); err != nil || rb.splitRatio != nil {
		t.Errorf("split_ratio null: %v", err)
	}
	for _, in := range []string{`-0.1`, `1.01`, `"0.35"`, `true`, `[0.3]`, `{}`, `1e400`} {
		_, err := parseRequestBody([]byte(`{"model":"m","relay":{"split_ratio":` + in + `}}`))
		e, ok := asAPIError(err)
		if !ok || e.Status != 400 || e.Param != "relay.split_ratio" || !strings.Contains(e.Message, "relay.split_ratio must be a number from 0 to 1") {
			t.Errorf("split_ratio %s: %v", in, err)
		}
	}
}

// FuzzExtraBody: whatever the body and its extra_body, a body that parses
// has no extra_body left, and reads as the top-level members with
// extra_body's laid over them (encoding/json's reading of both).
func FuzzExtraBody(f *testing.F) {
	f.Add(`{"model":"m","a":1}`, `{"a":2,"b":[1]}`)
	f.Add(`{"model":"m","model":"n"}`, `{"model":"x","model":"y"}`)
	f.Add(`{"model":"m"}`, `null`)
	f.Add(`{"model":"m","extra_body":3}`, `{"extra_body":{"model":"z"}}`)
	f.Fuzz(func(t *testing.T, top, extra string) {
		var topMap, extraMap map[string]json.RawMessage
		if json.Unmarshal([]byte(top), &topMap) != nil || topMap == nil || !json.Valid([]byte(extra)) {
			t.Skip()
		}
		body := strings.TrimSuffix(strings.TrimSpace(top), "}")
		if len(topMap) > 0 {
			body += ","
		}
		body += `"extra_body":` + extra + "}"
		rb, err := parseRequestBody([]byte(body))
		if err != nil {
			return // a 400 (not an object, no model...) is an answer
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(rb.raw, &got); err != nil {
			t.Fatalf("%s: merged body %s does not decode: %v", body, rb.raw, err)
		}
		if _, ok := got[fieldExtraBody]; ok {
			t.Fatalf("%s: extra_body left in %s", body, rb.raw)
		}
		if json.Unmarshal([]byte(extra), &extraMap) != nil || extraMap == nil {
			return
		}
		if _, nested := extraMap[fieldExtraBody]; nested {
			return
		}
		delete(topMap, fieldExtraBody)
		for k, v := range extraMap {
			topMap[k] = v
		}
		if len(got) != len(topMap) {
			t.Fatalf("%s: merged %s, want the members of %v", body, rb.raw, topMap)
		}
		for k, v := range topMap {
			var a, b any
			_ = json.Unmarshal(v, &a)
			_ = json.Unmarshal(got[k], &b)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("%s: member %q is %s, want %s", body, k, got[k], v)
			}
		}
	})
}
