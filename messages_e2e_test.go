package llmrelay_test

// The relay's Anthropic Messages wiring, against scripted fake upstreams:
// credentials and headers per dialect, errors in the client's shape, the
// Messages commit point, truncation, count_tokens, endpoints a dialect
// lacks, reasoning_field and cache-write pricing. The official SDKs and
// Claude Code are in anthropic_*_e2e_test.go and claudecode_e2e_test.go.

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// msgEvent is one Anthropic SSE event: its type and JSON data.
type msgEvent struct{ typ, data string }

// writeMessagesStream writes Anthropic events, flushing each.
func writeMessagesStream(w http.ResponseWriter, gap time.Duration, events ...msgEvent) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, e := range events {
		_, _ = io.WriteString(w, "event: "+e.typ+"\ndata: "+e.data+"\n\n")
		w.(http.Flusher).Flush()
		if gap > 0 {
			time.Sleep(gap)
		}
	}
}

func msgStart(id string) msgEvent {
	return msgEvent{"message_start", `{"type":"message_start","message":{"id":"` + id + `","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":1}}}`}
}

func textDelta(i int, text string) msgEvent {
	b, _ := json.Marshal(text)
	return msgEvent{"content_block_delta", `{"type":"content_block_delta","index":` + itoa(i) + `,"delta":{"type":"text_delta","text":` + string(b) + `}}`}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// okMessageStream is a whole, valid text answer.
func okMessageStream(id, text string) []msgEvent {
	return []msgEvent{
		msgStart(id),
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		{"ping", `{"type": "ping"}`},
		textDelta(0, text),
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":7}}`},
		{"message_stop", `{"type":"message_stop"}`},
	}
}

const okMessage = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":7}}`

const overloaded = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`

func postMessages(t *testing.T, body string, header ...string) *http.Response {
	t.Helper()
	return postPath(t, "/v1/messages", body, append([]string{"anthropic-version", "2023-06-01"}, header...)...)
}

// An Anthropic upstream gets its key in x-api-key, never the client's,
// with anthropic-version (the client's, else 2023-06-01; an upstream
// `header` wins); the client's anthropic-beta passes; a Chat upstream
// gets a Bearer key and no Anthropic headers.
func TestMessagesUpstreamCredentials(t *testing.T) {
	claude := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 200, okMessage)
	})
	pinned := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 200, okMessage)
	})
	startRelay(t, `llm_relay {
		key client-secret-key
		upstream claude `+claude.v1()+` {
			api anthropic
			api_key sk-ant-upstream
		}
		upstream pinned `+pinned.v1()+` {
			api anthropic
			api_key sk-ant-pinned
			header anthropic-version 2099-01-01
		}
		model claude-x {
			to claude claude-up
		}
		model pinned {
			to pinned
		}
	}`)
	body := `{"model":"claude-x","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	resp := postMessages(t, body, "x-api-key", "client-secret-key", "anthropic-beta", "tools-2024-04-04")
	if got := readAll(t, resp); resp.StatusCode != 200 || !strings.Contains(got, `"text":"hello"`) {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
	seen := claude.requests()
	if len(seen) != 1 {
		t.Fatalf("claude saw %d requests", len(seen))
	}
	h := seen[0].header
	switch {
	case seen[0].path != "/v1/messages":
		t.Errorf("path %q, want /v1/messages", seen[0].path)
	case h.Get("X-Api-Key") != "sk-ant-upstream":
		t.Errorf("x-api-key %q, want the upstream's key", h.Get("X-Api-Key"))
	case h.Get("Authorization") != "":
		t.Errorf("Authorization %q sent to an Anthropic upstream", h.Get("Authorization"))
	case h.Get("Anthropic-Version") != "2023-06-01":
		t.Errorf("anthropic-version %q", h.Get("Anthropic-Version"))
	case h.Get("Anthropic-Beta") != "tools-2024-04-04":
		t.Errorf("anthropic-beta %q, want the client's", h.Get("Anthropic-Beta"))
	case seen[0].body["model"] != "claude-up":
		t.Errorf("model %v, want claude-up", seen[0].body["model"])
	}

	// No anthropic-version from the client: the relay's default.
	req, _ := http.NewRequest(http.MethodPost, relayBase+"/v1/messages", strings.NewReader(`{"model":"pinned","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("x-api-key", "client-secret-key")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if got := pinned.requests()[0].header.Get("Anthropic-Version"); got != "2099-01-01" {
		t.Errorf("pinned upstream got anthropic-version %q, want its own header's 2099-01-01", got)
	}
	if got := pinned.requests()[0].header.Get("X-Api-Key"); got != "sk-ant-pinned" {
		t.Errorf("pinned upstream got x-api-key %q", got)
	}
}

// Errors the relay answers itself reach Anthropic clients in Anthropic's
// shape, with the status its SDKs map to typed errors.
func TestMessagesRelayErrorsInAnthropicShape(t *testing.T) {
	down := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 529, overloaded)
	})
	startRelay(t, `llm_relay {
		key client-secret-key
		upstream claude `+down.v1()+` {
			api anthropic
		}
		model claude-x {
			to claude
		}
		failover {
			backoff 1ms 1ms
		}
	}`)
	for _, tc := range []struct {
		name, body, key string
		status          int
		typ             string
	}{
		{"no key", `{"model":"claude-x","max_tokens":8,"messages":[]}`, "", 401, "authentication_error"},
		{"unknown model", `{"model":"nope","max_tokens":8,"messages":[]}`, "client-secret-key", 404, "not_found_error"},
		{"not JSON", `{"model":`, "client-secret-key", 400, "invalid_request_error"},
		{"all overloaded", `{"model":"claude-x","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, "client-secret-key", 502, "api_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.key != "" {
				hdr = []string{"x-api-key", tc.key}
			}
			resp := postMessages(t, tc.body, hdr...)
			got := readAll(t, resp)
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(got), &e); err != nil || resp.StatusCode != tc.status || e.Type != "error" || e.Error.Type != tc.typ || e.Error.Message == "" {
				t.Fatalf("status %d, body %s; want %d with type %s", resp.StatusCode, got, tc.status, tc.typ)
			}
		})
	}
	if n := len(down.requests()); n != 1 {
		t.Errorf("the overloaded upstream got %d requests, want 1 (529 is a 5xx: retried on the next target, and there is none)", n)
	}
}

// The commit point of a Messages stream is its first content: an
// upstream that sends message_start and ping, then an overloaded error
// event, is failed over invisibly, and the client sees one clean message.
func TestMessagesCommitPointAfterMessageStart(t *testing.T) {
	flaky := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		writeMessagesStream(w, 0, msgStart("msg_flaky"), msgEvent{"ping", `{"type": "ping"}`}, msgEvent{"error", overloaded})
	})
	good := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		writeMessagesStream(w, 0, okMessageStream("msg_good", "steady answer")...)
	})
	startRelay(t, `llm_relay {
		upstream flaky `+flaky.v1()+` {
			api anthropic
		}
		upstream good `+good.v1()+` {
			api anthropic
		}
		model claude-x {
			to flaky
			to good
		}
	}`)
	resp := postMessages(t, `{"model":"claude-x","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	got := readAll(t, resp)
	var want strings.Builder
	for _, e := range okMessageStream("msg_good", "steady answer") {
		want.WriteString("event: " + e.typ + "\ndata: " + e.data + "\n\n")
	}
	if resp.StatusCode != 200 || got != want.String() {
		t.Fatalf("status %d, stream:\n%s\nwant exactly the good upstream's stream:\n%s", resp.StatusCode, got, want.String())
	}
	if resp.Header.Get("X-Relay-Upstream") != "good" {
		t.Errorf("X-Relay-Upstream %q", resp.Header.Get("X-Relay-Upstream"))
	}
}

// A Messages stream that ends without message_stop was cut off: the client
// gets an `event: error` that its SDK raises, not a silent short answer.
func TestMessagesTruncatedStreamEndsWithErrorEvent(t *testing.T) {
	cut := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		writeMessagesStream(w, 0, okMessageStream("msg_cut", "half an answer")[:4]...)
	})
	startRelay(t, `llm_relay {
		upstream claude `+cut.v1()+` {
			api anthropic
		}
		model claude-x {
			to claude
		}
	}`)
	resp := postMessages(t, `{"model":"claude-x","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	got := readAll(t, resp)
	const tail = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"The upstream closed the stream before it was complete.\"}}\n\n"
	if !strings.HasSuffix(got, tail) || !strings.Contains(got, "half an answer") {
		t.Fatalf("stream:\n%s\nwant it to end with:\n%s", got, tail)
	}
}

// count_tokens goes to an Anthropic target; a chain with none is answered
// from the relay's estimator.
func TestCountTokens(t *testing.T) {
	claude := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 200, `{"input_tokens":4242}`)
	})
	chatOnly := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 500, `{"error":{"message":"should not be called"}}`)
	})
	startRelay(t, `llm_relay {
		upstream claude `+claude.v1()+` {
			api anthropic
		}
		upstream cheap `+chatOnly.v1()+` {
			api chat
		}
		model claude-x {
			to claude
		}
		model cheap-x {
			to cheap
		}
	}`)
	body := `{"model":"claude-x","messages":[{"role":"user","content":"` + strings.Repeat("count these words please ", 40) + `"}]}`
	resp := postPath(t, "/v1/messages/count_tokens", body)
	if got := readAll(t, resp); resp.StatusCode != 200 || got != `{"input_tokens":4242}` {
		t.Fatalf("anthropic target: status %d: %s", resp.StatusCode, got)
	}
	if p := claude.requests()[0].path; p != "/v1/messages/count_tokens" {
		t.Errorf("upstream path %q", p)
	}
	resp = postPath(t, "/v1/messages/count_tokens", strings.Replace(body, "claude-x", "cheap-x", 1))
	got := readAll(t, resp)
	var n struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.Unmarshal([]byte(got), &n); err != nil || resp.StatusCode != 200 || n.InputTokens < 150 || n.InputTokens > 400 {
		t.Fatalf("estimate: status %d: %s (want about 200 tokens)", resp.StatusCode, got)
	}
	if resp.Header.Get("X-Relay-Estimated") != "true" {
		t.Error("an estimate must say so (X-Relay-Estimated)")
	}
	if len(chatOnly.requests()) != 0 {
		t.Error("a chat upstream was asked to count tokens")
	}
}

// An endpoint the upstream's dialect lacks (embeddings on Anthropic) skips
// that target rather than sending it a request it cannot understand.
func TestEndpointTheDialectLacksSkipsTheTarget(t *testing.T) {
	claude := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 200, `{}`)
	})
	openai := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 200, `{"object":"list","data":[]}`)
	})
	startRelay(t, `llm_relay {
		upstream claude `+claude.v1()+` {
			api anthropic
		}
		upstream openai `+openai.v1()+`
		model m {
			to claude
			to openai
		}
	}`)
	resp := postPath(t, "/v1/embeddings", `{"model":"m","input":"x"}`)
	if got := readAll(t, resp); resp.StatusCode != 200 || resp.Header.Get("X-Relay-Upstream") != "openai" {
		t.Fatalf("status %d from %q: %s", resp.StatusCode, resp.Header.Get("X-Relay-Upstream"), got)
	}
	if len(claude.requests()) != 0 {
		t.Error("the Anthropic upstream was sent an embeddings request")
	}
}

// reasoning_field gives Chat clients one name for reasoning text, in
// streams and whole answers, whatever the provider called it.
func TestReasoningFieldRenames(t *testing.T) {
	openrouter := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		var body struct {
			Stream bool `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if r.Header.Get("X-Want") == "whole" {
			answerJSON(w, 200, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","reasoning":"mull","content":"hi"},"finish_reason":"stop"}]}`)
			return
		}
		streamEvents(w, 0,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning":"mull it over"},"finish_reason":null}]}`,
			chunk("answer"), "[DONE]")
	})
	startRelay(t, `llm_relay {
		upstream or `+openrouter.v1()+` {
			api chat
		}
		model m {
			to or
			reasoning_field reasoning_content
		}
	}`)
	got := readAll(t, post(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if !strings.Contains(got, `"delta":{"reasoning_content":"mull it over"}`) || strings.Contains(got, `"reasoning":`) {
		t.Fatalf("stream not renamed:\n%s", got)
	}
	got = readAll(t, post(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "X-Want", "whole"))
	if !strings.Contains(got, `"reasoning_content":"mull"`) || strings.Contains(got, `"reasoning":`) {
		t.Fatalf("answer not renamed:\n%s", got)
	}
}

// Adaptive effort reaches an Anthropic-dialect request as a thinking
// budget, with max_tokens raised above it.
func TestAdaptiveEffortBecomesThinkingBudget(t *testing.T) {
	claude := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 200, okMessage)
	})
	startRelay(t, `llm_relay {
		upstream claude `+claude.v1()+` {
			api anthropic
		}
		model claude-x {
			to claude
		}
		adaptive_effort {
			below 100 low
			else high
		}
	}`)
	readAll(t, postMessages(t, `{"model":"claude-x","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`))
	seen := claude.requests()[0].body
	thinking, _ := seen["thinking"].(map[string]any)
	if thinking["type"] != "enabled" || thinking["budget_tokens"] != float64(2048) {
		t.Fatalf("thinking %v, want enabled with the low budget 2048", seen["thinking"])
	}
	if mt, _ := seen["max_tokens"].(float64); mt <= 2048 {
		t.Fatalf("max_tokens %v, want it raised above the budget", seen["max_tokens"])
	}
	// The client's own thinking is kept (client_effort keep).
	readAll(t, postMessages(t, `{"model":"claude-x","max_tokens":1000,"thinking":{"type":"disabled"},"messages":[{"role":"user","content":"hi"}]}`))
	if th, _ := claude.requests()[1].body["thinking"].(map[string]any); th["type"] != "disabled" {
		t.Fatalf("the client's thinking was replaced: %v", th)
	}
	// A forced tool gets no thinking: Messages refuses the two together.
	readAll(t, postMessages(t, `{"model":"claude-x","max_tokens":1000,"tools":[{"name":"w","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"hi"}]}`))
	if th, set := claude.requests()[2].body["thinking"]; set {
		t.Fatalf("thinking %v added to a request that forces a tool", th)
	}
}

// Anthropic's cache reads and writes are priced: cached_input for reads,
// cache_write for writes.
func TestCacheWritePriced(t *testing.T) {
	claude := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 200, okMessage)
	})
	logFile := startRelay(t, `llm_relay {
		upstream claude `+claude.v1()+` {
			api anthropic
		}
		model claude-x {
			to claude claude-up
		}
		price claude-up {
			input 3
			output 15
			cached_input 0.3
			cache_write 3.75
		}
	}`)
	readAll(t, postMessages(t, `{"model":"claude-x","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`))
	// 10 input at $3, 100 written at $3.75, 1000 read at $0.30, 7 out at $15, per MTok.
	const want = (10*3 + 100*3.75 + 1000*0.3 + 7*15) / 1e6
	waitFor(t, 5*time.Second, "the cost log line", func() bool { return strings.Contains(readLog(t, logFile), `"cost":`) })
	mustContain(t, readLog(t, logFile), `"cost":"`+usage.FormatUSD(want)+`"`, `"prompt_tokens":1110`, `"cached_tokens":1000`, `"cache_write_tokens":100`)
}

// Health probes of an Anthropic upstream carry its own credentials:
// x-api-key and anthropic-version, not a Bearer token.
func TestAnthropicProbeHeaders(t *testing.T) {
	claude := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 200, `{"data":[]}`)
	})
	startRelay(t, `llm_relay {
		upstream claude `+claude.v1()+` {
			api anthropic
			api_key sk-ant-probe
			health_check {
				interval 1s
			}
		}
		model claude-x {
			to claude
		}
	}`)
	waitFor(t, 5*time.Second, "a probe", func() bool { return len(claude.requests()) > 0 })
	p := claude.requests()[0]
	if p.path != "/v1/models" || p.header.Get("X-Api-Key") != "sk-ant-probe" || p.header.Get("Anthropic-Version") != "2023-06-01" || p.header.Get("Authorization") != "" {
		t.Fatalf("probe %s with headers %v", p.path, p.header)
	}
}

// After an early commit, a chain that fails ends the Anthropic client's
// stream with one `event: error` in Anthropic's shape.
func TestMessagesEarlyCommitThenFailure(t *testing.T) {
	slow := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		sleepOrGone(r, 300*time.Millisecond)
		answerJSON(w, 529, overloaded)
	})
	startRelay(t, `llm_relay {
		upstream claude `+slow.v1()+` {
			api anthropic
		}
		model claude-x {
			to claude
		}
		smoothing {
			early_commit 50ms
			heartbeat 50ms
		}
	}`)
	resp := postMessages(t, `{"model":"claude-x","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	got := readAll(t, resp)
	if resp.StatusCode != 200 || !strings.HasPrefix(got, ": keep-alive\n\n") {
		t.Fatalf("status %d, stream:\n%s\nwant an early 200 with heartbeats", resp.StatusCode, got)
	}
	i := strings.Index(got, "event: error\ndata: ")
	if i < 0 {
		t.Fatalf("no Anthropic error event in:\n%s", got)
	}
	var e struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	data := strings.TrimSpace(strings.TrimPrefix(got[i:], "event: error\ndata: "))
	if err := json.Unmarshal([]byte(data), &e); err != nil || e.Type != "error" || e.Error.Type != "api_error" || !strings.Contains(e.Error.Message, "529") {
		t.Fatalf("error event %q", data)
	}
}

// A query string belongs to the endpoint it was written for: Claude Code
// calls /v1/messages?beta=true; an Anthropic upstream gets it, a Chat
// upstream that gets the translated request does not.
func TestQueryStaysWithItsDialect(t *testing.T) {
	claude := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 200, okMessage)
	})
	chatUp := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, 200, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	})
	startRelay(t, `llm_relay {
		upstream claude `+claude.v1()+` {
			api anthropic
		}
		upstream deepseek `+chatUp.v1()+` {
			api chat
		}
		model to-claude {
			to claude
		}
		model to-chat {
			to deepseek
		}
	}`)
	for _, model := range []string{"to-claude", "to-chat"} {
		resp := postPath(t, "/v1/messages?beta=true", `{"model":"`+model+`","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, "anthropic-version", "2023-06-01")
		if got := readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("%s: status %d: %s", model, resp.StatusCode, got)
		}
	}
	if q := claude.requests()[0].query; q != "beta=true" {
		t.Errorf("the Anthropic upstream got query %q, want the client's beta=true", q)
	}
	if q := chatUp.requests()[0].query; q != "" {
		t.Errorf("the Chat upstream got query %q with the translated request, want none", q)
	}
}
