package gemini

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// TestToChatResponseRecorded: recorded generateContent answers (a thought
// cut by MAX_TOKENS; a function call) become chat.completions.
func TestToChatResponseRecorded(t *testing.T) {
	out, err := ToChatResponse(readFile(t, "generate_thought.json"), chat.Options{Created: 5})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"zi77aPQDsqLV7w_tk62YBQ","object":"chat.completion","created":5,"model":"gemini-2.0-flash-thinking-exp-01-21",
	  "choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning_content":` + jsonString(t, "generate_thought.json") + `},"logprobs":null,"finish_reason":"length"}],
	  "usage":{"prompt_tokens":17,"completion_tokens":19,"total_tokens":36,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":19}}}`
	if !jsonEqual(string(out), want) {
		t.Fatalf("got  %s\nwant %s", out, want)
	}

	out, err = ToChatResponse(readFile(t, "generate_function_call.json"), chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := mustJSON(t, out)
	ch := m["choices"].([]any)[0].(map[string]any)
	call := ch["message"].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)
	if ch["finish_reason"] != "tool_calls" || call["id"] != CallID(0, 0) ||
		call["function"].(map[string]any)["arguments"] != `{"denominator":2,"numerator":100}` {
		t.Fatalf("%s", out)
	}
}

// jsonString is the first part's text of a recorded answer, as JSON.
func jsonString(t *testing.T, name string) string {
	var r generateResponse
	if err := json.Unmarshal(readFile(t, name), &r); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(*r.Candidates[0].Content.Parts[0].Text)
	return string(b)
}

// TestFromChatResponse: reasoning, text, calls (with the signature back
// on the part) and usage; a blocked prompt; arguments that are not an
// object are refused.
func TestFromChatResponse(t *testing.T) {
	id := withSignature("call_7", "YWJj")
	in := `{"id":"chatcmpl-9","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","reasoning_content":"hm","content":"Hi","tool_calls":[{"id":"` + id + `","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}}]},"finish_reason":"tool_calls"}],
	  "usage":{"prompt_tokens":10,"completion_tokens":6,"total_tokens":16,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":4}}}`
	out, err := FromChatResponse([]byte(in), chat.Options{Model: "gemini-2.5-flash"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"candidates":[{"content":{"role":"model","parts":[{"text":"hm","thought":true},{"text":"Hi"},{"thoughtSignature":"YWJj","functionCall":{"id":"call_7","name":"f","args":{"a":1}}}]},"finishReason":"STOP","index":0}],
	  "usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":2,"totalTokenCount":16,"cachedContentTokenCount":2,"thoughtsTokenCount":4},
	  "modelVersion":"gemini-2.5-flash","responseId":"chatcmpl-9"}`
	if !jsonEqual(string(out), want) {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	bad := `{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"x","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]},"finish_reason":"tool_calls"}]}`
	if _, err := FromChatResponse([]byte(bad), chat.Options{}); !errors.As(err, new(*chat.UnreadableError)) {
		t.Fatalf("err %v, want unreadable", err)
	}
	blocked := `{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":4,"totalTokenCount":4}}`
	out, err = ToChatResponse([]byte(blocked), chat.Options{})
	if err != nil || mustJSON(t, out)["choices"].([]any)[0].(map[string]any)["finish_reason"] != "content_filter" {
		t.Fatalf("%s %v", out, err)
	}
}

// TestResponseRoundTrip: a recorded answer through Chat and back keeps
// its parts.
func TestResponseRoundTrip(t *testing.T) {
	for _, name := range []string{"generate_thought.json", "generate_function_call.json"} {
		in := readFile(t, name)
		c, err := ToChatResponse(in, chat.Options{})
		if err != nil {
			t.Fatal(err)
		}
		back, err := FromChatResponse(c, chat.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var a, b generateResponse
		_ = json.Unmarshal(in, &a)
		_ = json.Unmarshal(back, &b)
		pa, pb := a.Candidates[0].Content.Parts, b.Candidates[0].Content.Parts
		if len(pa) != len(pb) || a.Candidates[0].FinishReason != b.Candidates[0].FinishReason || *a.UsageMetadata != *b.UsageMetadata {
			t.Fatalf("%s: %s", name, back)
		}
		for i := range pa {
			if pa[i].FunctionCall != nil {
				pa[i].FunctionCall.ID = CallID(0, 0) // minted on the way
			}
			ga, _ := json.Marshal(pa[i])
			gb, _ := json.Marshal(pb[i])
			if !jsonEqual(string(ga), string(gb)) {
				t.Fatalf("%s part %d: %s, want %s", name, i, gb, ga)
			}
		}
	}
}

// TestErrors: Google's shape both ways, its statuses, the recorded 404,
// an HTML page, RetryInfo.
func TestErrors(t *testing.T) {
	status, out := ToChatError(404, readFile(t, "error_not_found.json"))
	m := mustJSON(t, out)["error"].(map[string]any)
	if status != 404 || m["code"] != "NOT_FOUND" || m["type"] != "not_found_error" || m["message"] == "" {
		t.Fatalf("%d %s", status, out)
	}
	for code, name := range map[int]string{400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED",
		500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED", 529: "UNAVAILABLE", 418: "INVALID_ARGUMENT", 502: "INTERNAL"} {
		_, out := FromChatError(code, []byte(`{"error":{"message":"m","type":"x","param":null,"code":null}}`))
		want := `{"error":{"code":` + itoa(code) + `,"message":"m","status":"` + name + `"}}`
		if string(out) != want {
			t.Errorf("%d: %s, want %s", code, out, want)
		}
		if c := StatusCode(name); code != 529 && code != 418 && code != 502 && c != code {
			t.Errorf("StatusCode(%s) = %d, want %d", name, c, code)
		}
	}
	// A Gemini error through Chat and back keeps its status name.
	_, c := ToChatError(400, []byte(`{"error":{"code":400,"message":"bad","status":"FAILED_PRECONDITION"}}`))
	if _, back := FromChatError(400, c); string(back) != `{"error":{"code":400,"message":"bad","status":"FAILED_PRECONDITION"}}` {
		t.Errorf("round trip: %s", back)
	}
	if _, out := FromChatError(502, []byte("<html><body>Bad gateway</body></html>")); string(out) != `{"error":{"code":502,"message":"<html><body>Bad gateway</body></html>","status":"INTERNAL"}}` {
		t.Errorf("html: %s", out)
	}
	retry := `[{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure"},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37.5s"}]}}]`
	if d, ok := RetryDelay([]byte(retry)); !ok || d != 37500*time.Millisecond {
		t.Errorf("RetryDelay %v %v", d, ok)
	}
	if _, ok := RetryDelay([]byte(`{"error":{"code":429,"message":"x","status":"RESOURCE_EXHAUSTED"}}`)); ok {
		t.Error("RetryDelay without RetryInfo")
	}
	if _, out := FromChatError(http.StatusTooManyRequests, []byte(retry)); !json.Valid(out) {
		t.Error(string(out))
	} else if d, ok := RetryDelay(out); !ok || d != 37500*time.Millisecond {
		t.Errorf("FromChatError drops RetryInfo: %s", out)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestAnswerPartsStreamAndWhole: an answer's part is refused by
// ToChatResponse when ToChatStream refuses it (a thought image, a call
// without a name, a part of an unknown kind marked thought), rather than
// the whole answer coming out clean without it; and the parts either
// carries pass both.
func TestAnswerPartsStreamAndWhole(t *testing.T) {
	for _, tc := range []struct {
		part    string
		refused bool
	}{
		{`{"text":"a"}`, false},
		{`{"text":"t","thought":true}`, false},
		{`{"functionCall":{"name":"f","args":{"a":1}},"thoughtSignature":"c2ln"}`, false},
		{`{"thought":true,"thoughtSignature":"c2ln"}`, false},
		{`{"thought":true,"inlineData":{"mimeType":"image/png","data":"AA"}}`, true},
		{`{"thought":true,"executableCode":{"language":"PYTHON","code":"1"}}`, true},
		{`{"thought":true,"toolCall":{"name":"search"}}`, true},
		{`{"functionCall":{"args":{"a":1}}}`, true},
		{`{"functionCall":{"name":"f","args":[1]}}`, true},
		{`{"functionCall":{"name":"f","partialArgs":[]}}`, true},
		{`{"functionResponse":{"name":"f","response":{}}}`, true},
	} {
		answer := `{"candidates":[{"content":{"parts":[{"text":"Hi"},` + tc.part + `],"role":"model"},"finishReason":"STOP"}]}`
		_, err := ToChatResponse([]byte(answer), chat.Options{})
		if got := errors.As(err, new(*chat.UnreadableError)); got != tc.refused {
			t.Errorf("%s: ToChatResponse refused %v (%v), want %v", tc.part, got, err, tc.refused)
		}
		_, err = drain(ToChatStream(reader("data: "+answer+"\n\n"), chat.Options{}))
		if got := errors.As(err, new(*chat.UnreadableError)); got != tc.refused {
			t.Errorf("%s: ToChatStream refused %v (%v), want %v", tc.part, got, err, tc.refused)
		}
	}
}
