package responses

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

func FuzzToChatRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","input":"hi","instructions":"x","stream":true,"max_output_tokens":5}`), false)
	f.Add([]byte(`{"input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"u"}]},
		{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"o"},
		{"type":"reasoning","encrypted_content":"x"}],"tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"f"},
		"text":{"format":{"type":"json_schema","name":"n","schema":{}}},"reasoning":{"effort":"low"}}`), true)
	f.Add([]byte(`{"input":"x","previous_response_id":"r","store":true}`), false)
	f.Add([]byte(`{"input":[{"type":"function_call","call_id":"","name":null}],"tools":[{"type":"web_search"}]}`), false)
	f.Fuzz(func(t *testing.T, in []byte, openai bool) {
		opt := chat.Options{}
		if openai {
			opt.MaxTokensField = "max_completion_tokens"
		}
		out, err := ToChatRequest(in, opt)
		if err != nil {
			var re *chat.RequestError
			if !errors.As(err, &re) || re.Message == "" {
				t.Fatalf("error %v is not a *chat.RequestError with a message", err)
			}
			return
		}
		var req struct {
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(out, &req); err != nil || req.Messages == nil {
			t.Fatalf("output is not a Chat request (%v): %s", err, out)
		}
		for _, m := range req.Messages {
			switch m.Role {
			case "user", "assistant", "system", "developer", "tool":
			default:
				t.Fatalf("role %q in %s", m.Role, out)
			}
		}
	})
}

func FuzzFromChatResponse(f *testing.F) {
	f.Add([]byte(completion(`{"role":"assistant","content":"Hello","reasoning_content":"hmm","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]}`, "length", usageChat)), []byte(`{"input":"x","tools":[]}`))
	f.Add([]byte(`{"id":"\"","choices":[{"message":{"content":null}}],"usage":{"prompt_tokens":-1}}`), []byte(`[`))
	f.Fuzz(func(t *testing.T, in, req []byte) {
		out, err := FromChatResponse(in, chat.Options{Request: req})
		if err != nil {
			return
		}
		var r struct {
			Object string            `json:"object"`
			Status string            `json:"status"`
			Output []json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(out, &r); err != nil || r.Object != "response" || r.Output == nil {
			t.Fatalf("not a response object (%v): %s", err, out)
		}
		if r.Status != "completed" && r.Status != "incomplete" {
			t.Fatalf("status %q", r.Status)
		}
	})
}

func FuzzResponsesStream(f *testing.F) {
	whole := delta(`{"role":"assistant","content":""}`, "") + delta(`{"reasoning_content":"hm"}`, "") + delta(`{"content":"Hi"}`, "") +
		delta(`{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]}`, "") +
		delta(`{}`, "stop") + usageChunk + doneChunk
	f.Add([]byte(whole))
	f.Add([]byte(whole[:len(whole)/2]))
	f.Add([]byte(delta(`{"content":"\ud800 bad"}`, "") + "event: error\ndata: x\n\n"))
	f.Add([]byte(delta(`{"tool_calls":[{"index":3,"function":{"arguments":"x"}},{"index":-1}]}`, "length") + "data: [DONE]"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":5}}]}\r\r"))
	f.Fuzz(func(t *testing.T, in []byte) {
		src := FromChatStream(sse.NewReader(strings.NewReader(string(in)), 1<<16), chat.Options{})
		var evs []sse.Event
		for range 1 << 16 {
			ev, err := src.Next()
			if err != nil {
				checkEvents(t, evs)
				if n := len(evs); n > 0 && (evs[n-1].Type == evCompleted || evs[n-1].Type == evIncomplete) &&
					!strings.Contains(string(in), "[DONE]") {
					t.Fatalf("terminator made up")
				}
				return
			}
			evs = append(evs, ev.Clone())
		}
		t.Fatal("stream does not end")
	})
}
