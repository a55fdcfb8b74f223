package anthropic

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// The translators never panic, whatever the body; what they produce is
// JSON; request errors are *chat.RequestError.

func FuzzFromChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"system","content":[{"type":"text","text":"s"}]},{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false,"reasoning_effort":"high","stop":["x"]}`,
		`{"messages":null,"n":1,"temperature":3}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := FromChatRequest(b, chat.Options{})
		checkTranslation(t, out, err)
	})
}

func FuzzToChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x","is_error":true},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA"}}]},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"system","content":"env"}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"},"thinking":{"type":"adaptive"},"output_config":{"effort":"max"},"stream":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := ToChatRequest(b, chat.Options{})
		checkTranslation(t, out, err)
	})
}

func FuzzToChatResponse(f *testing.F) {
	f.Add([]byte(`{"id":"m","type":"message","content":[{"type":"text","text":"a"},{"type":"thinking","thinking":"t"},{"type":"tool_use","id":"i","name":"n","input":{"a":[1, 2]}}],"stop_reason":"end_turn","usage":{"input_tokens":1}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := ToChatResponse(b, chat.Options{Created: 1})
		if err == nil && !json.Valid(out) {
			t.Fatalf("invalid JSON: %s", out)
		}
	})
}

func FuzzFromChatResponse(f *testing.F) {
	f.Add([]byte(`{"id":"c","model":"m","choices":[{"message":{"content":"a","reasoning_content":"r","tool_calls":[{"id":"i","function":{"name":"n","arguments":"{\"a\": \"b c\"}"}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":9}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := FromChatResponse(b, chat.Options{})
		if err == nil && !json.Valid(out) {
			t.Fatalf("invalid JSON: %s", out)
		}
	})
}

func FuzzErrors(f *testing.F) {
	f.Add(500, []byte(`{"type":"error","error":{"type":"api_error","message":"x"}}`))
	f.Add(429, []byte(`<html>`))
	f.Fuzz(func(t *testing.T, status int, b []byte) {
		if _, out := ToChatError(status, b); !json.Valid(out) {
			t.Fatalf("ToChatError: invalid JSON: %s", out)
		}
		if _, out := FromChatError(status, b); !json.Valid(out) {
			t.Fatalf("FromChatError: invalid JSON: %s", out)
		}
	})
}

func checkTranslation(t *testing.T, out []byte, err error) {
	t.Helper()
	if err != nil {
		var re *chat.RequestError
		if !errors.As(err, &re) {
			t.Fatalf("error %T %v, want a *chat.RequestError", err, err)
		}
		return
	}
	if !json.Valid(out) {
		t.Fatalf("invalid JSON: %s", out)
	}
}
