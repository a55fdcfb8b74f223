package chaos

import (
	"testing"
)

func events(s string) []Event {
	var ps LFParser
	return ps.Feed([]byte(s))
}

const sseType = "text/event-stream"

func TestClassify(t *testing.T) {
	chunk := `data: {"choices":[{"delta":{"content":"hi"}}]}` + "\n\n"
	relayErr := `data: {"error":{"message":"x","type":"server_error","code":"upstream_timeout"}}` + "\n\n"
	tests := []struct {
		name string
		o    Observation
		want Class
	}{
		{"hang wins", Observation{Hung: true, Status: 200, Stream: true, Events: events(chunk + "data: [DONE]\n\n")}, Hang},
		{"reset before response during reload", Observation{PreResponseErr: true, ReloadOverlap: true}, ReloadFailure},
		{"reset before response, no reload", Observation{PreResponseErr: true}, Abort},
		{"error JSON", Observation{Status: 502, Body: []byte(`{"error":{"message":"x"}}`)}, ExplicitError},
		{"vLLM error object", Observation{Status: 500, Body: []byte(`{"object":"error","message":"x"}`)}, ExplicitError},
		{"error status, empty body", Observation{Status: 502}, Malformed},
		{"error status, null error", Observation{Status: 500, Body: []byte(`{"error":null}`)}, Malformed},
		{"error body broke", Observation{Status: 500, ReadErr: true}, Abort},
		{"3xx", Observation{Status: 302, Location: "http://10.0.0.1/"}, Malformed},
		{"1xx", Observation{Status: 103}, Malformed},

		{"stream complete", Observation{Stream: true, Status: 200, ContentType: sseType, Events: events(": hb\n\n" + chunk + "data: [DONE]\n\n")}, Complete},
		{"stream complete, break after DONE", Observation{Stream: true, Status: 200, ContentType: sseType, ReadErr: true, Events: events(chunk + "data: [DONE]\n\n")}, Complete},
		{"in-band error", Observation{Stream: true, Status: 200, ContentType: sseType, Events: events(chunk + relayErr)}, ExplicitError},
		{"event: error", Observation{Stream: true, Status: 200, ContentType: sseType, Events: events(chunk + "event: error\ndata: {}\n\n")}, ExplicitError},
		{"clean end without DONE", Observation{Stream: true, Status: 200, ContentType: sseType, Events: events(chunk)}, Truncation},
		{"broken stream without error", Observation{Stream: true, Status: 200, ContentType: sseType, ReadErr: true, Events: events(chunk)}, Abort},
		{"CR-only stream", Observation{Stream: true, Status: 200, ContentType: sseType, Events: events("data: {}\r\rdata: [DONE]\r\r")}, Truncation},
		{"error glued after a bare CR", Observation{Stream: true, Status: 200, ContentType: sseType, Events: events(chunk + "data: {}\n\r" + relayErr)}, Truncation},
		{"error on a fresh line after a bare CR", Observation{Stream: true, Status: 200, ContentType: sseType, Events: events(chunk + "data: {}\n\r\n" + relayErr)}, ExplicitError},
		{"non-SSE 200 to a stream request", Observation{Stream: true, Status: 200, ContentType: "application/json", Events: events(`{"choices":[]}`)}, Truncation},
		{"data not JSON", Observation{Stream: true, Status: 200, ContentType: sseType, Events: events("data: nope\n\ndata: [DONE]\n\n")}, Malformed},

		{"responses complete", Observation{Stream: true, Responses: true, Status: 200, ContentType: sseType,
			Events: events("event: response.created\ndata: {}\n\nevent: response.completed\ndata: {\"type\":\"response.completed\"}\n\n")}, Complete},
		{"responses completed then a truncation error", Observation{Stream: true, Responses: true, Status: 200, ContentType: sseType,
			Events: events("event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n" + relayErr)}, ExplicitError},
		{"responses failed", Observation{Stream: true, Responses: true, Status: 200, ContentType: sseType,
			Events: events(`data: {"type":"response.failed"}` + "\n\n")}, ExplicitError},
		{"responses cut short", Observation{Stream: true, Responses: true, Status: 200, ContentType: sseType,
			Events: events("event: response.created\ndata: {}\n\n")}, Truncation},

		{"JSON answer", Observation{Status: 200, Body: []byte(`{"choices":[]}`)}, Complete},
		{"200 with error object", Observation{Status: 200, Body: []byte(`{"error":{"message":"x"}}`)}, ExplicitError},
		{"half a body, clean close", Observation{Status: 200, Body: []byte(`{"choices":[`)}, Truncation},
		{"empty 200", Observation{Status: 200}, Truncation},
		{"JSON that is not an object", Observation{Status: 200, Body: []byte(`[1]`)}, Truncation},
		{"body broke after 200", Observation{Status: 200, ReadErr: true, Body: []byte(`{"cho`)}, Abort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(&tt.o); got.Class != tt.want {
				t.Fatalf("got %v (%s), want %v", got.Class, got.Detail, tt.want)
			}
		})
	}
}

func TestWantCheck(t *testing.T) {
	rl := Want{ErrorStatus: 429, RetryAfter: true}
	tests := []struct {
		name string
		w    Want
		o    Observation
		bad  bool
	}{
		{"429 with Retry-After", rl, Observation{Status: 429, RetryAfter: "1", Body: []byte(`{"error":{}}`)}, false},
		{"502 instead of 429", rl, Observation{Status: 502, Body: []byte(`{"error":{}}`)}, true},
		{"429 without Retry-After", rl, Observation{Status: 429, Body: []byte(`{"error":{}}`)}, true},
		{"a complete answer is fine", rl, Observation{Status: 200, Body: []byte(`{}`)}, false},
		{"complete wanted, got error", Want{Complete: true}, Observation{Status: 502, Body: []byte(`{"error":{}}`)}, true},
		{"complete wanted, reload failure excused", Want{Complete: true}, Observation{PreResponseErr: true, ReloadOverlap: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			why := tt.w.Check(&tt.o, Classify(&tt.o))
			if (why != "") != tt.bad {
				t.Fatalf("Check = %q, want bad=%v", why, tt.bad)
			}
		})
	}
}

func TestClassNames(t *testing.T) {
	for c := range NumClasses {
		if Class(c).String() == "unknown" || Class(c).String() == "" {
			t.Fatalf("class %d has no name", c)
		}
	}
	if Class(-1).String() != "unknown" {
		t.Fatal("out of range class has a name")
	}
}
