package llmrelay

import (
	"net/http"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// Every shape an upstream describes its failure in becomes the error the
// client gets, with the status it means.
func TestUpstreamErrorOf(t *testing.T) {
	for _, c := range []struct {
		name, body         string
		status             int
		typ, code, message string
		noRetry            bool
	}{
		{"response.failed (recorded, vercel/ai)", `{"type":"response.failed","sequence_number":1,"response":{"id":"resp_test_failed_001","status":"failed","error":{"code":"rate_limit_exceeded","message":"Request too large for gpt-4o-mini in organization on tokens per min (TPM): Limit 30000, Requested 35364."}}}`,
			http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded", "Request too large for gpt-4o-mini in organization on tokens per min (TPM): Limit 30000, Requested 35364.", false},
		{"response.failed server_error", `{"type":"response.failed","response":{"error":{"code":"server_error","message":"The model failed."}}}`,
			http.StatusBadGateway, "server_error", "server_error", "The model failed.", false},
		{"responses error event", `{"type":"error","code":"invalid_prompt","message":"Flagged.","param":null,"sequence_number":3}`,
			http.StatusBadGateway, "server_error", "invalid_prompt", "Flagged.", false},
		{"openai insufficient_quota", `{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
			http.StatusTooManyRequests, "insufficient_quota", "insufficient_quota", "You exceeded your current quota.", true},
		{"openai chunk, numeric code", `{"error":{"message":"bad","type":"invalid_request_error","code":400}}`,
			http.StatusBadRequest, "invalid_request_error", "400", "bad", false},
		{"vllm", `{"object":"error","message":"too long","type":"BadRequestError","code":400}`,
			http.StatusBadRequest, "BadRequestError", "400", "too long", false},
		{"anthropic overloaded", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			529, "server_error", "overloaded_error", "Overloaded", false},
		{"anthropic rate limit", `{"type":"error","error":{"type":"rate_limit_error","message":"slow"},"request_id":"req_1"}`,
			http.StatusTooManyRequests, "rate_limit_error", "rate_limit_error", "slow", false},
		{"no message", `{"error":{"type":"server_error","code":null}}`,
			http.StatusBadGateway, "server_error", "upstream_error", "The upstream failed without a message (upstream_error).", false},
	} {
		e := upstreamErrorOf([]byte(c.body))
		if e == nil {
			t.Errorf("%s: not read", c.name)
			continue
		}
		if e.Status != c.status || e.Type != c.typ || e.Code != c.code || e.Message != c.message || e.NoRetry != c.noRetry {
			t.Errorf("%s: %+v", c.name, *e)
		}
	}
	for _, b := range []string{`{"id":"msg_1","type":"message"}`, `{}`, `not json`, `{"type":"response.completed","response":{"error":null}}`} {
		if e := upstreamErrorOf([]byte(b)); e != nil {
			t.Errorf("%s: read as an error: %+v", b, *e)
		}
	}
}

// TestIsErrorEvent: an upstream's error before any data, in every shape,
// is recognised (and fails the attempt over), its `event:` line or not.
func TestIsErrorEvent(t *testing.T) {
	for raw, want := range map[string]bool{
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n":                     true,
		"data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n":                                   true,
		"event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":\"x\"}}}\n\n": true,
		"data: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":\"server_error\"}}}\n\n":              true,
		"data: {\"error\":{\"message\":\"boom\"}}\n\n":                                                               true,
		"data: {\"object\":\"error\",\"message\":\"boom\",\"code\":400}\n\n":                                         true,
		"data: {\"choices\":[{\"delta\":{\"content\":\"an \\\"error\\\" in the text\"}}]}\n\n":                       false,
		"data: {\"error\":null,\"choices\":[]}\n\n":                                                                  false,
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"error\":null}}\n\n":       false,
		"data: {\"type\":\"response.output_text.delta\",\"delta\":\"error\"}\n\n":                                    false,
	} {
		r := sse.NewReader(strings.NewReader(raw), 0)
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		if got := isErrorEvent(&ev); got != want {
			t.Errorf("%q: %v, want %v", raw, got, want)
		}
	}
}
