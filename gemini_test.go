package llmrelay

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// TestGeminiCallFor: which requests are a Gemini client's, by method,
// path (under a prefix too) and credential; the rest stay the relay's
// other endpoints (an Ollama-style alias with a ':' included).
func TestGeminiCallFor(t *testing.T) {
	for _, tc := range []struct {
		method, target string
		hdr            string // an x-goog-api-key, if any
		want           geminiMethod
		model, prefix  string
		sse            bool
	}{
		{"POST", "/v1beta/models/gemini-2.5-flash:generateContent", "", geminiGenerate, "gemini-2.5-flash", "", false},
		{"POST", "/v1beta/models/m:streamGenerateContent?alt=sse", "", geminiStream, "m", "", true},
		{"POST", "/v1beta/models/m:streamGenerateContent", "", geminiStream, "m", "", false},
		{"POST", "/llm/v1beta/models/m:countTokens", "", geminiCount, "m", "/llm", false},
		{"POST", "/v1/models/m:generateContent", "", geminiGenerate, "m", "", false},
		{"POST", "/v1beta/models/llama3:8b:generateContent", "", geminiGenerate, "llama3:8b", "", false},
		{"GET", "/v1beta/models", "", geminiList, "", "", false},
		{"GET", "/v1/models", "k", geminiList, "", "", false},
		{"GET", "/v1/models?key=k", "", geminiList, "", "", false},
		{"GET", "/v1/models", "", 0, "", "", false},                 // OpenAI's list
		{"GET", "/v1/models/llama3:8b", "", 0, "", "", false},       // OpenAI's retrieve
		{"POST", "/v1/models/m:embedContent", "", 0, "", "", false}, // not served
		{"GET", "/v1beta/models/m:generateContent", "", 0, "", "", false},
		{"POST", "/v1/chat/completions", "k", 0, "", "", false},
		{"POST", "/v1beta/models", "", 0, "", "", false},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		if tc.hdr != "" {
			r.Header.Set("X-Goog-Api-Key", tc.hdr)
		}
		c, prefix := geminiCallFor(r)
		if tc.want == 0 {
			if c != nil {
				t.Errorf("%s %s: a Gemini call %+v, want none", tc.method, tc.target, c)
			}
			continue
		}
		if c == nil || c.method != tc.want || c.model != tc.model || c.sse != tc.sse || prefix != tc.prefix {
			t.Errorf("%s %s: %+v prefix %q, want method %d model %q sse %v prefix %q", tc.method, tc.target, c, prefix, tc.want, tc.model, tc.sse, tc.prefix)
		}
	}
}

// TestTakeQueryKey: ?key= leaves the URL (the rest of the query kept)
// for the x-goog-api-key header, unless a credential header is there.
func TestTakeQueryKey(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/v1beta/models/m:streamGenerateContent?alt=sse&key=secret", nil)
	takeQueryKey(r)
	if r.URL.RawQuery != "alt=sse" || r.RequestURI != "/v1beta/models/m:streamGenerateContent?alt=sse" || r.Header.Get("X-Goog-Api-Key") != "secret" {
		t.Errorf("query %q, URI %q, header %q", r.URL.RawQuery, r.RequestURI, r.Header.Get("X-Goog-Api-Key"))
	}
	r = httptest.NewRequest(http.MethodPost, "/v1beta/models/m:generateContent?key=other", nil)
	r.Header.Set("Authorization", "Bearer mine")
	takeQueryKey(r)
	if r.URL.RawQuery != "" || r.Header.Get("X-Goog-Api-Key") != "" || clientToken(r) != "mine" {
		t.Errorf("with a Bearer: query %q, x-goog-api-key %q", r.URL.RawQuery, r.Header.Get("X-Goog-Api-Key"))
	}
	r = httptest.NewRequest(http.MethodPost, "/v1beta/models/m:generateContent?monkey=1", nil)
	takeQueryKey(r)
	if r.URL.RawQuery != "monkey=1" {
		t.Errorf("a query without key changed: %q", r.URL.RawQuery)
	}
}

// TestGeminiWriterStreamReadError: a Chat event the front door's reader
// cannot take (larger than sse.DefaultMaxEvent: a Gemini upstream's call
// of 9 MiB of args, escaped into a Chat arguments string, is one) ends
// the Gemini client's stream with an error, in both shapes, rather than
// cleanly after the events before it with the call left out.
func TestGeminiWriterStreamReadError(t *testing.T) {
	const head = `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":`
	big := head + `{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":\"` +
		strings.Repeat("x", sse.DefaultMaxEvent) + `\"}"}}]}}]}` + "\n\n"
	for _, alt := range []bool{true, false} {
		rec := httptest.NewRecorder()
		gw := &geminiWriter{w: rec, rc: http.NewResponseController(rec), call: &geminiCall{method: geminiStream, model: "m", sse: alt}, header: http.Header{}}
		gw.Header().Set("Content-Type", "text/event-stream")
		gw.WriteHeader(http.StatusOK)
		for _, s := range []string{head + `{"content":"Hi"}}]}` + "\n\n", big, head + `{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n"} {
			if _, err := gw.Write([]byte(s)); err != nil {
				t.Fatal(err)
			}
		}
		gw.finish()
		body := rec.Body.String()
		if !strings.Contains(body, `"text":"Hi"`) || !strings.Contains(body, `"error":{"code":502`) || strings.Contains(body, "finishReason") {
			t.Errorf("alt=sse %v: the stream is %.300q, want Hi, then the error and no finishReason", alt, body)
		}
	}
}
