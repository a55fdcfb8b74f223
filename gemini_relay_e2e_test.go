package llmrelay_test

// Gemini clients through the relay (gemini.go): the Gemini API's paths
// served in front of `api chat` and `api anthropic` simulator targets, by
// plain HTTP here (the shapes, the keys, every refusal in Google's
// shape), by the official @google/genai SDK and by Gemini CLI in
// gemini_node_e2e_test.go. This file's ports are 9160-9169.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/sim"
)

const geminiRelayKey = "sk-relay-gemini"

// geminiTargetsSite: the simulator (seed 21) at /sim/, a 503 at /fail/,
// a 429 with Retry-After at /limit/.
const geminiTargetsSite = `http://127.0.0.1:9160 {
	handle /sim/* {
		llm_simulator {
			seed 21
			reasoning_tokens 12
			content_tokens 15
			pattern steady 0
		}
	}
	handle /tools/* {
		llm_simulator {
			seed 21
			reasoning_tokens 12
			content_tokens 15
			pattern steady 0
			tool_calls auto
		}
	}
	handle /fail/* {
		llm_simulator {
			fail 503
		}
	}
	handle /drop/* {
		llm_simulator {
			seed 21
			reasoning_tokens 12
			content_tokens 15
			pattern steady 0
			drop_after 8
		}
	}
	handle /limit/* {
		llm_simulator {
			fail 429 retry_after 7
		}
	}
}`

// geminiRelay is the relay block: a Gemini client's model names are the
// aliases, each in front of a target of another dialect; gemini-failover
// goes to a 503 (api anthropic) first, then to a chat target.
func geminiRelay(extra string) string {
	return `llm_relay {
		key ` + geminiRelayKey + `
		key sk-relay-gemini-slow slow {
			rpm 1
		}
		upstream simchat http://127.0.0.1:9160/sim/v1 {
			api chat
		}
		upstream simanth http://127.0.0.1:9160/sim/v1 {
			api anthropic
		}
		upstream toolchat http://127.0.0.1:9160/tools/v1 {
			api chat
		}
		upstream toolanth http://127.0.0.1:9160/tools/v1 {
			api anthropic
		}
		upstream failing http://127.0.0.1:9160/fail/v1 {
			api anthropic
		}
		upstream dropping http://127.0.0.1:9160/drop/v1 {
			api chat
		}
		model gemini-drop {
			to dropping sim-reasoner
		}
		upstream limited http://127.0.0.1:9160/limit/v1 {
			api chat
		}
		model gemini-chat {
			to simchat sim-reasoner
		}
		model gemini-anth {
			to simanth sim-reasoner
		}
		model gemini-tools-chat {
			to toolchat sim-reasoner
		}
		model gemini-tools-anth {
			to toolanth sim-reasoner
		}
		model gemini-failover {
			to failing sim-reasoner
			to simchat sim-reasoner
		}
		model gemini-limited {
			to limited sim-reasoner
		}
		` + extra + `
	}`
}

// geminiSimTexts is what the simulator (seed 21, 12 + 15 tokens) says.
func geminiSimTexts() (reasoning, content string) {
	r, c := sim.Texts(sim.Config{Seed: 21, ReasoningTokens: new(12), ContentTokens: new(15)})
	return strings.Join(r, ""), strings.Join(c, "")
}

// geminiPost posts a Gemini body to the relay's path, with the headers.
func geminiPost(t *testing.T, path, body string, hdr ...string) *http.Response {
	t.Helper()
	resp, err := geminiDo(path, body, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// geminiDo is geminiPost for a goroutine other than the test's, where
// t.Fatal cannot stop the test: the error is returned.
func geminiDo(path, body string, hdr ...string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:9080"+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", path, err)
	}
	return resp, nil
}

const geminiHi = `{"contents":[{"role":"user","parts":[{"text":"Say hi"}]}],"generationConfig":{"thinkingConfig":{"includeThoughts":true,"thinkingBudget":2048}}}`

// geminiAnswer is the part of a GenerateContentResponse the tests read.
type geminiAnswer struct {
	Candidates []struct {
		Content struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         string         `json:"text"`
				Thought      bool           `json:"thought"`
				FunctionCall map[string]any `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata *struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount"`
		ThoughtsTokenCount   int `json:"thoughtsTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string `json:"modelVersion"`
}

// texts joins an answer's thought and other text parts.
func (a geminiAnswer) texts() (thoughts, text string) {
	for _, c := range a.Candidates {
		for _, p := range c.Content.Parts {
			if p.Thought {
				thoughts += p.Text
			} else {
				text += p.Text
			}
		}
	}
	return
}

// geminiError is Google's error shape.
type geminiError struct {
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

// readGeminiError reads an error answer, which must be in Google's shape
// with code = the HTTP status and status the name wanted.
func readGeminiError(t *testing.T, resp *http.Response, status int, name string) string {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e geminiError
	if resp.StatusCode != status || json.Unmarshal(b, &e) != nil || e.Error == nil || e.Error.Code != status || e.Error.Status != name || e.Error.Message == "" {
		t.Fatalf("want %d %s in Google's shape, got %d %s", status, name, resp.StatusCode, b)
	}
	return e.Error.Message
}

// TestGeminiClientThroughRelay: a Gemini client's generateContent,
// streamGenerateContent (SSE and the JSON array), countTokens and models
// list, in front of a chat and an anthropic target: the simulator's
// thoughts and text, a finishReason, usage, and no [DONE].
func TestGeminiClientThroughRelay(t *testing.T) {
	startRelay(t, geminiRelay(""), geminiTargetsSite)
	reasoning, content := geminiSimTexts()
	for _, model := range []string{"gemini-chat", "gemini-anth"} {
		t.Run(model, func(t *testing.T) {
			resp := geminiPost(t, "/v1beta/models/"+model+":generateContent", geminiHi, "x-goog-api-key", geminiRelayKey)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var a geminiAnswer
			if resp.StatusCode != 200 || json.Unmarshal(b, &a) != nil || len(a.Candidates) != 1 {
				t.Fatalf("generateContent: %d %s", resp.StatusCode, b)
			}
			th, tx := a.texts()
			if tx != content || th != reasoning || a.Candidates[0].FinishReason != "STOP" || a.Candidates[0].Content.Role != "model" {
				t.Errorf("generateContent: thoughts %q text %q finish %q, want %q / %q / STOP\n%s", th, tx, a.Candidates[0].FinishReason, reasoning, content, b)
			}
			if a.UsageMetadata == nil || a.UsageMetadata.CandidatesTokenCount == 0 {
				t.Errorf("generateContent: no usage: %s", b)
			}

			// SSE: data events only, the last with the finishReason.
			resp = geminiPost(t, "/v1beta/models/"+model+":streamGenerateContent?alt=sse", geminiHi, "x-goog-api-key", geminiRelayKey)
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("stream: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
			}
			var chunks []geminiAnswer
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				line := strings.TrimRight(sc.Text(), "\r")
				if line == "" {
					continue
				}
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok {
					t.Fatalf("stream: a line that is not data: %q", line)
				}
				var c geminiAnswer
				if err := json.Unmarshal([]byte(data), &c); err != nil {
					t.Fatalf("stream: %v in %q", err, data)
				}
				chunks = append(chunks, c)
			}
			resp.Body.Close()
			var all geminiAnswer
			for _, c := range chunks {
				all.Candidates = append(all.Candidates, c.Candidates...)
			}
			th, tx = all.texts()
			last := chunks[len(chunks)-1]
			if tx != content || th != reasoning || len(chunks) < 3 || last.Candidates[0].FinishReason != "STOP" || last.UsageMetadata == nil || last.UsageMetadata.CandidatesTokenCount == 0 ||
				// Anthropic's usage does not count thinking apart.
				model == "gemini-chat" && last.UsageMetadata.ThoughtsTokenCount == 0 {
				t.Errorf("stream: %d chunks, thoughts %q text %q, last %+v", len(chunks), th, tx, last)
			}
			for _, c := range chunks[:len(chunks)-1] {
				if c.Candidates[0].FinishReason != "" {
					t.Errorf("stream: a finishReason before the last chunk")
				}
			}

			// No alt: one JSON array of the same chunks.
			resp = geminiPost(t, "/v1beta/models/"+model+":streamGenerateContent", geminiHi, "x-goog-api-key", geminiRelayKey)
			b, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			var arr []geminiAnswer
			if resp.StatusCode != 200 || json.Unmarshal(b, &arr) != nil || len(arr) < 3 {
				t.Fatalf("stream as an array: %d %s", resp.StatusCode, b)
			}
			all = geminiAnswer{}
			for _, c := range arr {
				all.Candidates = append(all.Candidates, c.Candidates...)
			}
			if th, tx = all.texts(); tx != content || th != reasoning || arr[len(arr)-1].Candidates[0].FinishReason != "STOP" {
				t.Errorf("stream as an array: thoughts %q text %q", th, tx)
			}

			// countTokens, both request shapes, under /v1 too.
			for _, path := range []string{"/v1beta/models/" + model + ":countTokens", "/v1/models/" + model + ":countTokens"} {
				resp = geminiPost(t, path, `{"contents":[{"parts":[{"text":"How many tokens is this sentence, roughly?"}]}]}`, "x-goog-api-key", geminiRelayKey)
				b, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				var n struct {
					TotalTokens int `json:"totalTokens"`
				}
				if resp.StatusCode != 200 || json.Unmarshal(b, &n) != nil || n.TotalTokens < 5 {
					t.Errorf("%s: %d %s", path, resp.StatusCode, b)
				}
			}
		})
	}

	// The models list: the aliases, as Gemini names them; under /v1 only
	// with a Gemini credential (without, it is OpenAI's).
	for _, tc := range []struct{ url, hdr string }{
		{"http://127.0.0.1:9080/v1beta/models", "x-goog-api-key"},
		{"http://127.0.0.1:9080/v1/models", "x-goog-api-key"},
		{"http://127.0.0.1:9080/v1/models", "Authorization"},
	} {
		req, _ := http.NewRequest(http.MethodGet, tc.url, nil)
		if tc.hdr == "Authorization" {
			req.Header.Set(tc.hdr, "Bearer "+geminiRelayKey)
		} else {
			req.Header.Set(tc.hdr, geminiRelayKey)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		gemini := tc.hdr != "Authorization"
		if resp.StatusCode != 200 || strings.Contains(string(b), `"models/gemini-chat"`) != gemini || strings.Contains(string(b), `"object":"list"`) == gemini {
			t.Errorf("GET %s with %s: %d %s", tc.url, tc.hdr, resp.StatusCode, b)
		}
	}
}

// TestGeminiClientKeysAndRefusals: the key from x-goog-api-key, ?key=
// (taken off the URL before anything logs it) and Authorization: Bearer;
// every refusal in Google's shape; a Gemini client fails over from a 503
// anthropic target to a chat target unseen.
func TestGeminiClientKeysAndRefusals(t *testing.T) {
	accessLog := filepath.Join(t.TempDir(), "access.log")
	// A deferred header reads the request URI when the answer is written,
	// after the relay took the key off it.
	logFile := startRelay(t, `header >X-Seen-Uri {http.request.uri}
	log {
		output file `+accessLog+`
		format filter {
			request>headers>X-Goog-Api-Key delete
			request>uri query {
				delete key
			}
		}
	}
	`+geminiRelay(""), geminiTargetsSite)
	_, content := geminiSimTexts()
	const secretKey = geminiRelayKey
	path := "/v1beta/models/gemini-chat:generateContent"
	for name, hdr := range map[string][]string{
		"x-goog-api-key": {"x-goog-api-key", secretKey},
		"bearer":         {"Authorization", "Bearer " + secretKey},
		"query":          nil,
	} {
		p := path
		if hdr == nil {
			p += "?key=" + secretKey
		}
		resp := geminiPost(t, p, geminiHi, hdr...)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), content[:20]) {
			t.Errorf("%s: %d %s", name, resp.StatusCode, b)
		}
	}
	// ?key= on a stream, with alt=sse kept.
	resp := geminiPost(t, "/v1beta/models/gemini-anth:streamGenerateContent?alt=sse&key="+secretKey, geminiHi)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(string(b), "data: ") {
		t.Errorf("?key= on a stream: %d %s", resp.StatusCode, b)
	}
	if seen := resp.Header.Get("X-Seen-Uri"); seen != "/v1beta/models/gemini-anth:streamGenerateContent?alt=sse" {
		t.Errorf("the request URI after the relay: %q, want it without the key", seen)
	}

	// Refusals, in Google's shape.
	readGeminiError(t, geminiPost(t, path, geminiHi, "x-goog-api-key", "wrong"), 401, "UNAUTHENTICATED")
	readGeminiError(t, geminiPost(t, path+"?key=wrong", geminiHi), 401, "UNAUTHENTICATED")
	msg := readGeminiError(t, geminiPost(t, "/v1beta/models/no-such-model:generateContent", geminiHi, "x-goog-api-key", secretKey), 404, "NOT_FOUND")
	mustContain(t, msg, "no-such-model")
	readGeminiError(t, geminiPost(t, path, `{"contents":[{"role":"robot","parts":[{"text":"x"}]}]}`, "x-goog-api-key", secretKey), 400, "INVALID_ARGUMENT")
	readGeminiError(t, geminiPost(t, path, `not json`, "x-goog-api-key", secretKey), 400, "INVALID_ARGUMENT")
	// A bad body with a bad key is a 401, as for every client: the key first.
	readGeminiError(t, geminiPost(t, path, `not json`, "x-goog-api-key", "wrong"), 401, "UNAUTHENTICATED")
	// Every target rate limiting: 429 RESOURCE_EXHAUSTED with its Retry-After.
	resp = geminiPost(t, "/v1beta/models/gemini-limited:generateContent", geminiHi, "x-goog-api-key", secretKey)
	if ra := resp.Header.Get("Retry-After"); ra != "7" {
		t.Errorf("rate limited: Retry-After %q, want 7", ra)
	}
	readGeminiError(t, resp, 429, "RESOURCE_EXHAUSTED")
	// The key's own rpm: the second request in the minute.
	geminiPost(t, path, geminiHi, "x-goog-api-key", "sk-relay-gemini-slow").Body.Close()
	resp = geminiPost(t, path, geminiHi, "x-goog-api-key", "sk-relay-gemini-slow")
	if resp.Header.Get("Retry-After") == "" {
		t.Errorf("rpm: no Retry-After")
	}
	readGeminiError(t, resp, 429, "RESOURCE_EXHAUSTED")

	// Failover across dialects: the 503 anthropic target, then the chat one.
	resp = geminiPost(t, "/v1beta/models/gemini-failover:streamGenerateContent?alt=sse", geminiHi, "x-goog-api-key", secretKey)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"finishReason":"STOP"`) {
		t.Errorf("failover: %d %s", resp.StatusCode, b)
	}

	time.Sleep(200 * time.Millisecond) // the access log is written after the response
	for name, f := range map[string]string{"relay log": logFile, "access log": accessLog} {
		l := readLog(t, f)
		if strings.Contains(l, secretKey) {
			t.Errorf("the %s holds the key given as ?key=:\n%s", name, l)
		}
		if name == "access log" && !strings.Contains(l, "gemini-chat:generateContent") {
			t.Errorf("the access log has no Gemini request:\n%s", l)
		}
	}
	relayed := readLog(t, logFile)
	mustContain(t, relayed, `"api":"gemini"`, `"failures":["failing`)
	if _, err := os.Stat(accessLog); err != nil {
		t.Fatal(err)
	}
}

// TestGeminiClientToolHistory: a Gemini client's tool loop as a chat
// target sees it and back: the functionCall (with a thoughtSignature, as
// Gemini 3 sends it) and its functionResponse become a tool call and its
// result whose ids match and carry no signature, the arguments byte for
// byte; the target's next call comes back as a functionCall whose args
// are the target's arguments, whole.
func TestGeminiClientToolHistory(t *testing.T) {
	const args = `{"city":"Zürich \"old town\"","days":[1,2],"units":{"temp":"°C"}}`
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,`+
			`"tool_calls":[{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":`+strconvQuote(args)+`}}]},"finish_reason":"tool_calls"}],`+
			`"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}}`)
	})
	startRelay(t, `llm_relay {
		key `+geminiRelayKey+`
		upstream fake `+up.v1()+` {
			api chat
		}
		model gemini-fake {
			to fake m
		}
	}`)
	sig := strings.Repeat("c2lnbmF0dXJl+/=", 20)
	body := `{"contents":[
		{"role":"user","parts":[{"text":"Weather?"}]},
		{"role":"model","parts":[{"functionCall":{"id":"fc_1","name":"get_weather","args":` + args + `},"thoughtSignature":"` + sig + `"}]},
		{"role":"user","parts":[{"functionResponse":{"id":"fc_1","name":"get_weather","response":{"result":"sunny"}}}]}],
		"tools":[{"functionDeclarations":[{"name":"get_weather","parameters":{"type":"OBJECT","properties":{"city":{"type":"STRING"}}}}]}]}`
	resp := geminiPost(t, "/v1beta/models/gemini-fake:generateContent", body, "x-goog-api-key", geminiRelayKey)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	var a struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					FunctionCall *struct {
						ID   string          `json:"id"`
						Name string          `json:"name"`
						Args json.RawMessage `json:"args"`
					} `json:"functionCall"`
				} `json:"parts"`
			} `json:"content"`
			FinishReason string `json:"finishReason"`
		} `json:"candidates"`
	}
	if err := json.Unmarshal(b, &a); err != nil || len(a.Candidates) != 1 || len(a.Candidates[0].Content.Parts) != 1 || a.Candidates[0].Content.Parts[0].FunctionCall == nil {
		t.Fatalf("answer %s", b)
	}
	fc := a.Candidates[0].Content.Parts[0].FunctionCall
	if fc.Name != "get_weather" || fc.ID != "call_2" || !jsonEqual(string(fc.Args), args) {
		t.Errorf("functionCall %+v (args %s), want get_weather call_2 %s", fc, fc.Args, args)
	}

	seen := up.requests()
	if len(seen) != 1 {
		t.Fatalf("%d upstream requests", len(seen))
	}
	raw, _ := json.Marshal(seen[0].body)
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(raw, &req); err != nil || len(req.Messages) != 3 || len(req.Messages[1].ToolCalls) != 1 {
		t.Fatalf("the target got %s", raw)
	}
	call, result := req.Messages[1].ToolCalls[0], req.Messages[2]
	if call.ID != result.ToolCallID || len(call.ID) > 40 || strings.ContainsAny(call.ID, "+/=") || strings.Contains(string(raw), sig[:20]) {
		t.Errorf("ids: call %q, result %q: want the same, short, without the signature", call.ID, result.ToolCallID)
	}
	if !jsonEqual(call.Function.Arguments, args) {
		t.Errorf("arguments %s, want %s", call.Function.Arguments, args)
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestGeminiClientTruncatedStream: a chat target's stream cut off after
// the commit point (no [DONE]) reaches a Gemini client as an error object
// after the chunks it had, never as a chunk with a finishReason: the
// relay's Chat end-of-stream rule holds for Gemini clients, whose streams
// end on the finishReason chunk.
func TestGeminiClientTruncatedStream(t *testing.T) {
	startRelay(t, geminiRelay(""), geminiTargetsSite)
	for _, alt := range []string{"?alt=sse", ""} {
		resp := geminiPost(t, "/v1beta/models/gemini-drop:streamGenerateContent"+alt, geminiHi, "x-goog-api-key", geminiRelayKey)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s := string(b)
		if resp.StatusCode != 200 || strings.Contains(s, "finishReason") || !strings.Contains(s, `"candidates"`) {
			t.Fatalf("alt %q: %d, want chunks and no finishReason:\n%s", alt, resp.StatusCode, s)
		}
		if !strings.Contains(s, `{"error":{"code":500,"message":"The upstream stream broke off before it was complete.","status":"INTERNAL"}}`) {
			t.Errorf("alt %q: no Google error object at the end:\n%s", alt, s)
		}
		if alt == "" {
			// The array still parses: the error is its last element.
			var arr []json.RawMessage
			if err := json.Unmarshal(b, &arr); err != nil || !strings.Contains(string(arr[len(arr)-1]), `"error"`) {
				t.Errorf("the array: %v\n%s", err, s)
			}
		} else if !strings.HasSuffix(strings.TrimRight(s, "\n"), "}") || !strings.Contains(s, "data: {\"error\"") {
			t.Errorf("alt=sse: the error is not written as a data event and bare:\n%s", s)
		}
	}
}

// TestGeminiClientStreamNotHeldBack: a Gemini client gets each event of
// its stream as the upstream sends it, not when the next one comes: the
// upstream sends "first" and waits until the client has it (within 5 s)
// before it sends the rest. The translator flushes once per read of the
// relay's stream; an event written but not flushed would fail this.
func TestGeminiClientStreamNotHeldBack(t *testing.T) {
	release := make(chan struct{})
	chunk := func(delta, finish string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, chunk(`{"role":"assistant","content":"first"}`, "null"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		case <-time.After(10 * time.Second):
		}
		_, _ = io.WriteString(w, chunk(`{"content":" second"}`, "null")+chunk(`{}`, `"stop"`)+"data: [DONE]\n\n")
	}))
	defer up.Close()
	startRelay(t, geminiRelay("upstream held "+up.URL+"/v1 {\n\t\t\tapi chat\n\t\t}\n\t\tmodel gemini-held {\n\t\t\tto held m\n\t\t}"), geminiTargetsSite)
	for _, alt := range []string{"?alt=sse", ""} {
		resp := geminiPost(t, "/v1beta/models/gemini-held:streamGenerateContent"+alt, geminiHi, "x-goog-api-key", geminiRelayKey)
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("alt %q: %d %s", alt, resp.StatusCode, b)
		}
		var mu sync.Mutex
		var got strings.Builder
		seen, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			buf := make([]byte, 4096)
			once := sync.Once{}
			for {
				n, err := resp.Body.Read(buf)
				mu.Lock()
				got.Write(buf[:n])
				has := strings.Contains(got.String(), "first")
				mu.Unlock()
				if has {
					once.Do(func() { close(seen) })
				}
				if err != nil {
					return
				}
			}
		}()
		select {
		case <-seen:
		case <-time.After(5 * time.Second):
			mu.Lock()
			t.Fatalf("alt %q: the first event has not reached the client 5 s after the upstream sent it (the upstream waits for it); got %q", alt, got.String())
		}
		release <- struct{}{}
		<-done
		resp.Body.Close()
		if s := got.String(); !strings.Contains(s, " second") || !strings.Contains(s, `"finishReason"`) {
			t.Errorf("alt %q: the rest of the stream: %q", alt, s)
		}
	}
}
