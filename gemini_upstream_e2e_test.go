package llmrelay_test

// `api gemini` upstreams: the openai client (openai-go) through the relay
// in front of the simulator speaking Gemini, the auth header and the path
// a Gemini target gets, 429 RESOURCE_EXHAUSTED and 503 UNAVAILABLE failed
// over, Retry-After from a RetryInfo, and a Gemini client's thought
// signatures given back to a Gemini target. Ports 9162-9163.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmrelay/caddy-llm-relay/internal/sim"
)

// geminiUpstreamSite: the simulator speaking Gemini (seed 33) at /, a 429
// RESOURCE_EXHAUSTED at /e429/, a 503 UNAVAILABLE at /busy/.
const geminiUpstreamSite = `http://127.0.0.1:9162 {
	handle /e429/* {
		llm_simulator {
			fail 429 retry_after 2
		}
	}
	handle /busy/* {
		llm_simulator {
			overloaded
		}
	}
	handle {
		llm_simulator {
			model gemini-2.5-flash
			seed 33
			reasoning_tokens 8
			content_tokens 14
			pattern steady 0
		}
	}
}`

func geminiUpstreamRelay(extra string) string {
	return `llm_relay {
		key ` + geminiRelayKey + `
		upstream simgem http://127.0.0.1:9162/v1beta {
			api gemini
			api_key sim-gemini-key
		}
		upstream gem429 http://127.0.0.1:9162/e429/v1beta {
			api gemini
		}
		upstream gembusy http://127.0.0.1:9162/busy/v1beta {
			api gemini
		}
		upstream simchat http://127.0.0.1:9160/sim/v1 {
			api chat
		}
		model gflash {
			to simgem gemini-2.5-flash
		}
		model limited-then-chat {
			to gem429 gemini-2.5-flash
			to simchat sim-reasoner
		}
		model busy-then-gemini {
			to gembusy gemini-2.5-flash
			to simgem gemini-2.5-flash
		}
		` + extra + `
	}`
}

// TestGeminiUpstreamOpenAIClient: openai-go against an `api gemini`
// target: a stream with the thoughts as reasoning_content and usage, a
// whole answer, a tool round trip with the arguments intact; a 429 and a
// 503 from Gemini targets failed over unseen.
func TestGeminiUpstreamOpenAIClient(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real Caddy; skipped with -short")
	}
	logFile := startRelay(t, geminiUpstreamRelay(""), geminiUpstreamSite, geminiTargetsSite)
	r, c := sim.Texts(sim.Config{Seed: 33, ReasoningTokens: new(8), ContentTokens: new(14)})
	reasoning, content := strings.Join(r, ""), strings.Join(c, "")
	client := openaiClient(geminiRelayKey)

	for _, model := range []string{"gflash", "busy-then-gemini"} {
		t.Run(model, func(t *testing.T) {
			// Gemini sends its thoughts only when asked (includeThoughts),
			// which a reasoning effort does.
			s := streamChatGo(t, client, model, option.WithJSONSet("reasoning_effort", "low"))
			if strings.Join(s.content, "") != content || strings.Join(s.reasoning, "") != reasoning || s.finish != "stop" {
				t.Errorf("stream: content %q reasoning %q finish %q\n%s", strings.Join(s.content, ""), strings.Join(s.reasoning, ""), s.finish, readLog(t, logFile))
			}
			if s.usage.CompletionTokens != 14+8 && s.usage.CompletionTokens != 14 || s.usage.CompletionTokensDetails.ReasoningTokens != 8 {
				t.Errorf("stream usage %+v", s.usage)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res, err := client.Chat.Completions.New(ctx, chatParams(model))
			if err != nil || len(res.Choices) != 1 || res.Choices[0].Message.Content != content || res.Choices[0].FinishReason != "stop" {
				t.Fatalf("whole: %v %+v", err, res)
			}
		})
	}
	t.Run("tools", func(t *testing.T) {
		checkOpenAIToolRoundTrip(t, client, "gflash", true)
		checkOpenAIToolRoundTrip(t, client, "gflash", false)
	})
	t.Run("anthropic client", func(t *testing.T) {
		for _, stream := range []bool{false, true} {
			body := `{"model":"gflash","max_tokens":512,"stream":` + strconv.FormatBool(stream) + `,"messages":[{"role":"user","content":"hi"}]}`
			resp := geminiPost(t, "/v1/messages", body, "x-api-key", geminiRelayKey, "anthropic-version", "2023-06-01")
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			text := string(b)
			if stream {
				text = ""
				for _, line := range strings.Split(string(b), "\n") {
					var ev struct {
						Type  string `json:"type"`
						Delta struct {
							Text string `json:"text"`
						} `json:"delta"`
					}
					if d, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(d), &ev) == nil && ev.Type == "content_block_delta" {
						text += ev.Delta.Text
					}
				}
				if !strings.Contains(string(b), "event: message_stop") {
					t.Errorf("no message_stop:\n%s", b)
				}
			} else {
				var m struct {
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
					StopReason string `json:"stop_reason"`
				}
				if json.Unmarshal(b, &m) != nil || len(m.Content) == 0 || m.StopReason != "end_turn" {
					t.Fatalf("messages: %d %s", resp.StatusCode, b)
				}
				text = m.Content[len(m.Content)-1].Text
			}
			if resp.StatusCode != 200 || text != content {
				t.Errorf("messages (stream %v): %d, text %q", stream, resp.StatusCode, text)
			}
		}
	})
	t.Run("responses client", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "gflash",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
		if err != nil || res.OutputText() != content || res.Status != "completed" {
			t.Fatalf("responses: %v, %q %q", err, res.OutputText(), res.Status)
		}
		stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gflash",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
		text, completed := "", false
		for stream.Next() {
			ev := stream.Current()
			switch ev.Type {
			case "response.output_text.delta":
				text += ev.Delta
			case "response.completed":
				completed = true
			}
		}
		if err := stream.Err(); err != nil || text != content || !completed {
			t.Errorf("responses stream: %v, %q, completed %v", err, text, completed)
		}
	})
	t.Run("429 then chat", func(t *testing.T) {
		_, chatContent := geminiSimTexts()
		s := streamChatGo(t, client, "limited-then-chat")
		if strings.Join(s.content, "") != chatContent {
			t.Errorf("after the 429: %q", strings.Join(s.content, ""))
		}
	})
	// The relay logs a request once it is through, which may be just
	// after its client read the end.
	waitFor(t, 5*time.Second, "the last request's log line", func() bool {
		return strings.Contains(readLog(t, logFile), `"failures":["gem429`)
	})
	mustContain(t, readLog(t, logFile), `"failures":["gembusy`, `"failures":["gem429`)
}

// TestGeminiUpstreamWire: what a Gemini target gets (the key in
// x-goog-api-key, bare; the model and method in the path; alt=sse for a
// stream; nothing of the client's credentials), Retry-After from a 429's
// RetryInfo when there is no header, and a Gemini client's thought
// signature given back to a Gemini target on its functionCall part.
func TestGeminiUpstreamWire(t *testing.T) {
	sig := "c2lnbmF0dXJlLW9mLXRoZS1jYWxs"
	up := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "limited") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"41s"}]}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"fine"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1,"totalTokenCount":4},"modelVersion":"gemini-3-pro"}`)
	})
	startRelay(t, `llm_relay {
		key `+geminiRelayKey+`
		upstream fake `+up.URL+`/v1beta {
			api gemini
			api_key AIza-upstream-key
		}
		model g3 {
			to fake gemini-3-pro
		}
		model limited {
			to fake limited-model
		}
		model g3-edited {
			to fake gemini-3-pro {
				set generationConfig.temperature 0.25
			}
		}
		model g3-thoughts {
			to fake gemini-3-pro {
				set generationConfig.thinkingConfig.includeThoughts true
			}
		}
	}`)
	// A Gemini client's tool loop, with the signature on the call.
	body := `{"contents":[
		{"role":"user","parts":[{"text":"Weather?"}]},
		{"role":"model","parts":[{"functionCall":{"id":"fc_1","name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"` + sig + `"}]},
		{"role":"user","parts":[{"functionResponse":{"id":"fc_1","name":"get_weather","response":{"result":"sunny"}}}]}],
		"safetySettings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}],
		"generationConfig":{"topK":7,"thinkingConfig":{"includeThoughts":true}}}`
	resp := geminiPost(t, "/v1beta/models/g3:generateContent", body, "x-goog-api-key", geminiRelayKey)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"text":"fine"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	seen := up.requests()
	if len(seen) != 1 {
		t.Fatalf("%d requests", len(seen))
	}
	got := seen[0]
	if got.path != "/v1beta/models/gemini-3-pro:generateContent" || got.query != "" {
		t.Errorf("path %q query %q", got.path, got.query)
	}
	if k := got.header.Get("X-Goog-Api-Key"); k != "AIza-upstream-key" || got.header.Get("Authorization") != "" {
		t.Errorf("x-goog-api-key %q, Authorization %q", k, got.header.Get("Authorization"))
	}
	raw, _ := json.Marshal(got.body)
	var req struct {
		Contents []struct {
			Parts []struct {
				FunctionCall *struct {
					Name string         `json:"name"`
					Args map[string]any `json:"args"`
				} `json:"functionCall"`
				ThoughtSignature string `json:"thoughtSignature"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(raw, &req); err != nil || len(req.Contents) != 3 {
		t.Fatalf("the target got %s", raw)
	}
	p := req.Contents[1].Parts[0]
	if p.FunctionCall == nil || p.FunctionCall.Args["city"] != "Paris" || p.ThoughtSignature != sig {
		t.Errorf("the call went to Gemini as %s: want its args and its thoughtSignature back", raw)
	}
	// A Gemini client's body reaches a Gemini target as it was: what Chat
	// has no place for is kept.
	mustContain(t, string(raw), `"safetySettings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}]`,
		`"topK":7`, `"includeThoughts":true`, `"id":"fc_1"`)
	// A target with an edit gets the body translated from the Chat pivot,
	// the edit applied: what Chat has no place for is put back
	// (gemini.KeepNative), the call's arguments and signature are there.
	resp = geminiPost(t, "/v1beta/models/g3-edited:generateContent", body, "x-goog-api-key", geminiRelayKey)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if s := up.requests(); len(s) != 2 {
		t.Fatalf("%d requests", len(s))
	} else {
		edited, _ := json.Marshal(s[1].body)
		mustContain(t, string(edited), `"safetySettings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}]`,
			`"topK":7`, `"includeThoughts":true`, `"temperature":0.25`, `"args":{"city":"Paris"}`, `"thoughtSignature":"`+sig+`"`)
	}
	resp = geminiPost(t, "/v1beta/models/g3:streamGenerateContent?alt=sse", body, "x-goog-api-key", geminiRelayKey)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if s := up.requests(); len(s) != 3 || s[2].path != "/v1beta/models/gemini-3-pro:streamGenerateContent" || s[2].query != "alt=sse" || !jsonSame(s[2].body, got.body) {
		t.Errorf("a Gemini client's stream: %d requests, the last to %q?%q", len(s), s[len(s)-1].path, s[len(s)-1].query)
	}

	// A stream: the SSE method.
	resp = geminiPost(t, "/v1/chat/completions", `{"model":"g3","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+geminiRelayKey)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if s := up.requests(); len(s) != 4 || s[3].path != "/v1beta/models/gemini-3-pro:streamGenerateContent" || s[3].query != "alt=sse" {
		t.Errorf("the stream went to %q ? %q", s[len(s)-1].path, s[len(s)-1].query)
	}

	// A Chat client that asks for no reasoning gets Gemini's thoughts
	// where the target says so (docs/gemini.md).
	resp = geminiPost(t, "/v1/chat/completions", `{"model":"g3-thoughts","messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+geminiRelayKey)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	s := up.requests()
	if len(s) != 5 {
		t.Fatalf("%d requests: the g3-thoughts one did not reach the target", len(s))
	}
	thoughts, _ := json.Marshal(s[4].body)
	mustContain(t, string(thoughts), `"thinkingConfig":{"includeThoughts":true}`)

	// Retry-After from the RetryInfo (no header).
	resp = geminiPost(t, "/v1/chat/completions", `{"model":"limited","messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+geminiRelayKey)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "41" {
		t.Errorf("429: Retry-After %q, %d %s", resp.Header.Get("Retry-After"), resp.StatusCode, b)
	}
}

var _ = openai.Bool

// TestGeminiUpstreamTruncatedStream: a Gemini stream has no [DONE], it
// ends on the chunk with the finishReason; one that stops before it is a
// truncation: the Chat client gets the text so far and an in-band error,
// never a [DONE] or a finish_reason. One that ends on its finishReason
// ends clean.
func TestGeminiUpstreamTruncatedStream(t *testing.T) {
	const chunk = `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"%s"}]},"index":0}],"modelVersion":"gemini-2.5-flash"}` + "\r\n\r\n"
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, strings.Replace(chunk, "%s", "Hello", 1))
		_, _ = io.WriteString(w, strings.Replace(chunk, "%s", " there", 1))
		if strings.Contains(r.URL.Path, "whole") {
			_, _ = io.WriteString(w, `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"!"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":2,"candidatesTokenCount":3,"totalTokenCount":5}}`+"\r\n\r\n")
		}
	})
	startRelay(t, `llm_relay {
		key `+geminiRelayKey+`
		upstream fake `+up.URL+`/v1beta {
			api gemini
		}
		model cut {
			to fake cut-model
		}
		model whole {
			to fake whole-model
		}
	}`)
	for model, clean := range map[string]bool{"cut": false, "whole": true} {
		resp := geminiPost(t, "/v1/chat/completions", `{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+geminiRelayKey)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s := string(b)
		if resp.StatusCode != 200 || !strings.Contains(s, `"content":"Hello"`) || !strings.Contains(s, `"content":" there"`) {
			t.Fatalf("%s: %d %s", model, resp.StatusCode, s)
		}
		done, errored := strings.Contains(s, "data: [DONE]"), strings.Contains(s, `"error":{`)
		finished := strings.Contains(s, `"finish_reason":"stop"`)
		if clean && (!done || errored || !finished) || !clean && (done || !errored || finished) {
			t.Errorf("%s: [DONE] %v, error %v, finish_reason stop %v, want a clean end %v:\n%s", model, done, errored, finished, clean, s)
		}
	}
}

// jsonSame reports whether two decoded JSON values are the same.
func jsonSame(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestGeminiUpstreamProbe: an `api gemini` upstream's active health probe
// is Gemini's models list, asked with the key in x-goog-api-key.
func TestGeminiUpstreamProbe(t *testing.T) {
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"models":[{"name":"models/gemini-2.5-flash"}]}`)
	})
	startRelay(t, `llm_relay {
		upstream fake `+up.URL+`/v1beta {
			api gemini
			api_key AIza-probe-key
			health_check {
				interval 1s
			}
		}
		model g {
			to fake gemini-2.5-flash
		}
	}`)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if s := up.requests(); len(s) > 0 {
			if s[0].path != "/v1beta/models" || s[0].header.Get("X-Goog-Api-Key") != "AIza-probe-key" || s[0].header.Get("Authorization") != "" {
				t.Errorf("probe: %s with x-goog-api-key %q, Authorization %q", s[0].path, s[0].header.Get("X-Goog-Api-Key"), s[0].header.Get("Authorization"))
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no probe within 5s")
}
