package llmrelay

import (
	"encoding/json"
	"testing"
)

// TestReturnReasoningTraceParsed: the field is read as a boolean, refused
// otherwise, and never rendered for a target, on the splice path and the
// map path (a repeated key) alike.
func TestReturnReasoningTraceParsed(t *testing.T) {
	for body, want := range map[string]bool{
		`{"model":"m","return_reasoning_trace":true}`:               true,
		`{"model":"m","return_reasoning_trace":false}`:              false,
		`{"model":"m","return_reasoning_trace":null}`:               false,
		`{"model":"m","return_reasoning_trace":true,"model":"m"}`:   true,
		`{"model":"m","stream":true,"return_reasoning_trace":true}`: true,
	} {
		rb, err := parseRequestBody([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if rb.trace != want || !rb.traced {
			t.Errorf("%s: trace %v traced %v", body, rb.trace, rb.traced)
		}
		p, err := rb.forTarget(newTarget(&upstreamRuntime{}, "up"), exchange{})
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]json.RawMessage
		if err := json.Unmarshal(p.Bytes(), &out); err != nil {
			t.Fatalf("%s: rendered %s: %v", body, p.Bytes(), err)
		}
		if _, ok := out[fieldTrace]; ok {
			t.Errorf("%s: rendered for the upstream: %s", body, p.Bytes())
		}
	}
	for _, body := range []string{`{"model":"m","return_reasoning_trace":"yes"}`, `{"model":"m","return_reasoning_trace":1}`} {
		if _, err := parseRequestBody([]byte(body)); err != errInvalidTrace {
			t.Errorf("%s: err %v, want errInvalidTrace", body, err)
		}
	}
}

// TestAssembleFromStream: which requests are streamed to be assembled.
func TestAssembleFromStream(t *testing.T) {
	for _, tc := range []struct {
		body   string
		rest   string
		budget int
		want   bool
	}{
		{`{"model":"m","return_reasoning_trace":true}`, restChat, 0, true},
		{`{"model":"m","stream":false,"return_reasoning_trace":true}`, restChat, 0, true},
		{`{"model":"m"}`, restChat, 100, true},
		{`{"model":"m"}`, restChat, 0, false},
		{`{"model":"m","return_reasoning_trace":false}`, restChat, 0, false},
		{`{"model":"m","stream":true,"return_reasoning_trace":true}`, restChat, 100, false}, // a stream already
		{`{"model":"m","return_reasoning_trace":true}`, restCompletions, 100, false},
		{`{"model":"m","return_reasoning_trace":true}`, restMessages, 100, false},
	} {
		rb, err := parseRequestBody([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		client := rb.stream
		assembleFromStream(rb, testEndpoint(tc.rest), tc.budget)
		if rb.assemble != tc.want {
			t.Errorf("%s on %s, budget %d: assemble %v, want %v", tc.body, tc.rest, tc.budget, rb.assemble, tc.want)
		}
		if rb.clientStream() != client {
			t.Errorf("%s: clientStream %v, the client asked %v", tc.body, rb.clientStream(), client)
		}
		if tc.want && (!rb.stream || string(rb.fields["stream"]) != "true") {
			t.Errorf("%s: not sent as a stream", tc.body)
		}
	}
}
