package main

import (
	"net/http"
	"testing"
)

// TestCheckAnswerGeminiStream: a Gemini stream has no [DONE]; it is
// complete when its last chunk carries the finishReason, and a stream cut
// before that chunk (or ending in an error object) is an error.
func TestCheckAnswerGeminiStream(t *testing.T) {
	ok := &http.Response{StatusCode: http.StatusOK}
	g := &target{name: "gemini", gemini: true}
	chunk := `data: {"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"},"index":0}]}`
	last := `data: {"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"totalTokenCount":3}}`
	for _, tc := range []struct {
		name string
		body string
		good bool
	}{
		{"complete, LF", chunk + "\n\n" + last + "\n\n", true},
		{"complete, CRLF", chunk + "\r\n\r\n" + last + "\r\n\r\n", true},
		{"cut before the finish chunk", chunk + "\n\n" + chunk + "\n\n", false},
		{"finishReason only in an earlier chunk", last + "\n\n" + chunk + "\n\n", false},
		{"ends in an error object", chunk + "\n\n" + `data: {"error":{"code":500,"message":"boom","status":"INTERNAL"}}` + "\n\n", false},
		{"empty", "", false},
		{"a Chat stream's [DONE]", chunk + "\n\ndata: [DONE]\n\n", false},
	} {
		err := checkAnswer(ok, []byte(tc.body), true, g)
		if (err == nil) != tc.good {
			t.Errorf("%s: checkAnswer = %v, want complete %v", tc.name, err, tc.good)
		}
	}
	// The Chat end is still what a Chat target needs.
	if err := checkAnswer(ok, []byte(last+"\n\n"), true, &target{name: "native"}); err == nil {
		t.Error("a Chat target accepted a stream without [DONE]")
	}
}
