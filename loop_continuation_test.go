package llmrelay

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/handoff"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// With after_commit continue (the default), a break after the first data
// event is continued by the next target of the chain: the client's stream
// goes on with b's continuation, spliced (one id, no second role), with
// the seam's comment, and ends with [DONE]; b is asked with the answer so
// far and the instruction (api openai: instruct).
func TestLoopBreakAfterFirstDataContinues(t *testing.T) {
	for _, c := range []struct {
		name   string
		script func(w http.ResponseWriter)
	}{
		{"broken", func(w http.ResponseWriter) { sendSSE(w, data(chatChunk("Hello"))); breakOff(w) }},
		{"eof before [DONE]", func(w http.ResponseWriter) { sendSSE(w, data(chatChunk("Hello"))) }},
		{"eof mid-event", func(w http.ResponseWriter) { sendSSE(w, data(chatChunk("Hello")), `data: {"id":"c1","choi`) }},
		{"error event", func(w http.ResponseWriter) {
			sendSSE(w, data(chatChunk("Hello")), data(`{"error":{"message":"overloaded","type":"server_error","code":"server_error"}}`))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := fakeUpstream("a", func(_ int, w http.ResponseWriter, _ *http.Request) { c.script(w) })
			b := fakeUpstream("b", func(_ int, w http.ResponseWriter, _ *http.Request) {
				sendSSE(w, data(strings.Replace(chatChunk(""), `"content":""`, `"role":"assistant","content":""`, 1)),
					data(strings.Replace(chatChunk(", world"), `"id":"c1"`, `"id":"other"`, 1)), data(chatStop), data("[DONE]"))
			})
			lr := startLoop(t, chainAB(""), a, b)

			res := lr.post("/v1/chat/completions", chatStreamReq)
			res.expect(t, http.StatusOK, "a", "1")
			var text strings.Builder
			for _, d := range res.datas() {
				if d == "[DONE]" {
					continue
				}
				var ck struct {
					ID      string `json:"id"`
					Error   any    `json:"error"`
					Choices []struct {
						Delta struct {
							Content string `json:"content"`
						} `json:"delta"`
					} `json:"choices"`
				}
				if err := json.Unmarshal([]byte(d), &ck); err != nil || ck.Error != nil || ck.ID != "c1" {
					t.Fatalf("event %s: want a chunk of id c1 (err %v)", d, err)
				}
				for _, ch := range ck.Choices {
					text.WriteString(ch.Delta.Content)
				}
			}
			if text.String() != "Hello, world" || !strings.HasSuffix(res.body, "data: [DONE]\n\n") {
				t.Errorf("client's text %q, want %q, ending with [DONE]:\n%s", text.String(), "Hello, world", res.body)
			}
			if !strings.Contains(res.body, ": relay-continued upstream=b model=model-b at_token=") {
				t.Errorf("no seam comment:\n%s", res.body)
			}
			lr.expectSeen(t, map[string]int{"a": 1, "b": 1})
			var sent struct {
				Messages []struct {
					Role    string `json:"role"`
					Content any    `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(lr.fakes["b"].requests()[0].body, &sent); err != nil {
				t.Fatal(err)
			}
			n := len(sent.Messages)
			if n < 2 || sent.Messages[n-2].Role != "assistant" || sent.Messages[n-2].Content != "Hello" ||
				sent.Messages[n-1].Role != "user" || sent.Messages[n-1].Content != handoff.ContinueInstruction {
				t.Errorf("b was asked %+v; want the answer so far, then the instruction", sent.Messages)
			}
		})
	}
}

// An error event with a 4xx (the request itself, not the upstream's
// trouble) is not continued: the client gets it, as without continuation.
func TestLoopClientErrorEventNotContinued(t *testing.T) {
	a := fakeUpstream("a", func(_ int, w http.ResponseWriter, _ *http.Request) {
		sendSSE(w, data(chatChunk("Hello")), data(`{"error":{"message":"bad","type":"invalid_request_error","code":"400"}}`))
	})
	b := fakeUpstream("b", func(_ int, w http.ResponseWriter, _ *http.Request) { sendSSE(w, chatStream("other")...) })
	lr := startLoop(t, chainAB(""), a, b)
	res := lr.post("/v1/chat/completions", chatStreamReq)
	if d := res.datas(); len(d) != 2 || errorCode(d[1]) != "400" {
		t.Errorf("events %q; want Hello, then the upstream's error", d)
	}
	lr.expectSeen(t, map[string]int{"a": 1, "b": 0})
}

// typed finds an end event by its event: line or, without one, by its
// data's type value, never by the same words inside a string.
func TestTypedEndEvent(t *testing.T) {
	for _, c := range []struct {
		typ, data string
		want      bool
	}{
		{"message_stop", `{"type":"message_stop"}`, true},
		{"", `{"type":"message_stop"}`, true},
		{"", `{ "type" : "message_stop" }`, true},
		{"", `{"type":"message_stop_x"}`, false},
		{"", `{"type":"content_block_delta","delta":{"text":"\"type\":\"message_stop\""}}`, false},
		{"ping", `{"type":"message_stop"}`, false},
	} {
		ev := sse.Event{Type: c.typ, Data: []byte(c.data), HasData: true}
		if got := typed(&ev, "message_stop"); got != c.want {
			t.Errorf("typed(%q, %s) = %v, want %v", c.typ, c.data, got, c.want)
		}
	}
}
