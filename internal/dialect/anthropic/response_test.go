package anthropic

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

func TestToChatResponse(t *testing.T) {
	msg := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"thinking","thinking":"let me","signature":"sig"},{"type":"text","text":"Hello"},{"type":"text","text":", world"},{"type":"tool_use","id":"toolu_1","name":"w","input":{"city": "Paris"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"cache_read_input_tokens":100,"cache_creation_input_tokens":5,"output_tokens":7}}`
	out, err := ToChatResponse([]byte(msg), chat.Options{Created: 1700000000})
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"id":"msg_1","object":"chat.completion","created":1700000000,"model":"claude-x","choices":[{"index":0,"message":{"role":"assistant","content":"Hello, world","reasoning_content":"let me","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"w","arguments":"{\"city\":\"Paris\"}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":115,"completion_tokens":7,"total_tokens":122,"prompt_tokens_details":{"cached_tokens":100},"cache_creation_input_tokens":5}}`)

	// No text: content is null, as OpenAI sends it with tool calls only.
	out, err = ToChatResponse([]byte(`{"type":"message","content":[],"stop_reason":"max_tokens","usage":{"input_tokens":1,"output_tokens":2}}`), chat.Options{Created: 1})
	if err != nil || !strings.Contains(string(out), `"content":null`) || !strings.Contains(string(out), `"finish_reason":"length"`) {
		t.Errorf("%v: %s", err, out)
	}
	for _, bad := range []string{`{"type":"error","error":{}}`, `[]`, `nope`} {
		if _, err := ToChatResponse([]byte(bad), chat.Options{Created: 1}); err == nil {
			t.Errorf("%s translated", bad)
		}
	}
}

func TestFromChatResponse(t *testing.T) {
	completion := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"deepseek-reasoner","choices":[{"index":0,"message":{"role":"assistant","content":"Hi","reasoning_content":"think","tool_calls":[{"id":"call_1","type":"function","function":{"name":"w","arguments":"{\"a\": 1}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":120,"completion_tokens":9,"total_tokens":129,"prompt_tokens_details":{"cached_tokens":100}}}`
	out, err := FromChatResponse([]byte(completion), chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"id":"chatcmpl-1","type":"message","role":"assistant","model":"deepseek-reasoner","content":[{"type":"thinking","thinking":"think","signature":""},{"type":"text","text":"Hi"},{"type":"tool_use","id":"call_1","name":"w","input":{"a":1}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":20,"cache_creation_input_tokens":0,"cache_read_input_tokens":100,"output_tokens":9}}`)

	// OpenRouter's "reasoning", content as parts, a plain stop.
	out, err = FromChatResponse([]byte(`{"id":"x","model":"m","choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"reasoning":"r"},"finish_reason":"stop"}]}`), chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"id":"x","type":"message","role":"assistant","model":"m","content":[{"type":"thinking","thinking":"r","signature":""},{"type":"text","text":"ab"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}`)

	// DeepSeek's cache hits; an OpenAI refusal that is all there is.
	out, err = FromChatResponse([]byte(`{"id":"d","model":"m","choices":[{"message":{"content":null,"refusal":"I can't"},"finish_reason":"content_filter"}],"usage":{"prompt_tokens":50,"completion_tokens":2,"prompt_cache_hit_tokens":40}}`), chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"id":"d","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"I can't"}],"stop_reason":"refusal","stop_sequence":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":40,"output_tokens":2}}`)

	for _, bad := range []string{`{"choices":[]}`, `{"choices":[{"message":{"tool_calls":[{"function":{"name":"f","arguments":"[1]"}}]}}]}`, `nope`} {
		if _, err := FromChatResponse([]byte(bad), chat.Options{}); err == nil {
			t.Errorf("%s translated", bad)
		}
	}
}

// Usage survives the trip both ways, cache reads and writes included.
func TestUsageRoundTrip(t *testing.T) {
	u := Usage{InputTokens: 10, OutputTokens: 7, CacheReadInputTokens: 100, CacheCreationInputTokens: 5}
	c := u.chat()
	raw, _ := json.Marshal(c)
	var in ChatUsageIn
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatal(err)
	}
	back := in.messages()
	if back.InputTokens != 10 || back.OutputTokens != 7 || back.CacheReadInputTokens != 100 || back.CacheCreationInputTokens != 5 {
		t.Errorf("round trip: %+v", back)
	}
}

func TestErrors(t *testing.T) {
	status, body := ToChatError(529, []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	if status != 529 {
		t.Errorf("status %d", status)
	}
	jsonEqual(t, body, `{"error":{"message":"Overloaded","type":"server_error","param":null,"code":"overloaded_error"}}`)

	_, body = ToChatError(401, []byte(`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`))
	jsonEqual(t, body, `{"error":{"message":"invalid x-api-key","type":"authentication_error","param":null,"code":"authentication_error"}}`)

	_, body = ToChatError(502, []byte("<html><body>\n  Bad   gateway\n</body></html>"))
	jsonEqual(t, body, `{"error":{"message":"<html><body> Bad gateway </body></html>","type":"server_error","param":null,"code":null}}`)

	_, body = ToChatError(500, nil)
	jsonEqual(t, body, `{"error":{"message":"the Anthropic upstream answered HTTP 500","type":"server_error","param":null,"code":null}}`)

	status, body = FromChatError(429, []byte(`{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`))
	if status != 429 {
		t.Errorf("status %d", status)
	}
	jsonEqual(t, body, `{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit reached"}}`)

	_, body = FromChatError(503, []byte(`{"error":"upstream down"}`))
	jsonEqual(t, body, `{"type":"error","error":{"type":"overloaded_error","message":"upstream down"}}`)

	_, body = FromChatError(404, []byte(`{"message":"no such model"}`))
	jsonEqual(t, body, `{"type":"error","error":{"type":"not_found_error","message":"no such model"}}`)

	long := strings.Repeat("é", 500)
	_, body = FromChatError(500, []byte(long))
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || len([]rune(e.Error.Message)) != 201 {
		t.Errorf("a long body: %v, %d runes", err, len([]rune(e.Error.Message)))
	}
}
