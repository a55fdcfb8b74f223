package llmrelay_test

// The official @google/genai SDK (e2e/node/gemini.mjs) and Gemini CLI
// itself through the relay, in front of `api chat` and `api anthropic`
// simulator targets (the relay block and sites of
// gemini_relay_e2e_test.go). Same skip rule as the other Node tests:
// skipped without e2e/node/node_modules, failed under RELAY_REQUIRE_NODE=1.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/sim"
)

// geminiMidwaySite: a chat target whose stream breaks with an in-band
// error after 6 events, after the relay committed it.
const geminiMidwaySite = `http://127.0.0.1:9161 {
	llm_simulator {
		seed 21
		reasoning_tokens 12
		content_tokens 15
		pattern steady 0
		error_after 6
	}
}`

const geminiMidwayModel = `upstream midway http://127.0.0.1:9161/v1 {
			api chat
		}
		model gemini-midway {
			to midway sim-reasoner
		}`

// runGeminiSDKRelay runs e2e/node/gemini.mjs in mode against the relay,
// for model, and decodes its one line into out.
func runGeminiSDKRelay(t *testing.T, node, model, mode string, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("e2e", "node", "gemini.mjs"), "http://127.0.0.1:9080", geminiRelayKey, model, mode)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NO_COLOR=1"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("gemini.mjs %s %s: %v\nstdout: %s\nstderr: %s", model, mode, err, stdout.String(), stderr.String())
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), out); err != nil {
		t.Fatalf("gemini.mjs %s %s: %v in %q", model, mode, err, stdout.String())
	}
}

// TestGeminiSDKThroughRelay: @google/genai's generateContent and
// generateContentStream, a function-call round trip with its arguments
// intact, and typed errors (a 429 before the stream, an in-band error
// after the commit point), through the relay in front of a chat and an
// anthropic target.
func TestGeminiSDKThroughRelay(t *testing.T) {
	requireNodeTool(t, filepath.Join("@google", "genai", "package.json"), "the @google/genai SDK")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node_modules is installed but node is not on PATH: %v", err)
	}
	logFile := startRelay(t, geminiRelay(geminiMidwayModel), geminiTargetsSite, geminiMidwaySite)
	reasoning, content := geminiSimTexts()

	type answer struct {
		Text, Thoughts, Finish string
		Chunks                 int
		Usage                  map[string]any
	}
	// gemini-failover: its first target (api anthropic) answers 503,
	// the next (api chat) answers; the client sees one clean answer.
	for _, model := range []string{"gemini-chat", "gemini-anth", "gemini-failover"} {
		// gemini.mjs asks for thoughts without a budget: a chat target's
		// model reasons anyway, an Anthropic one thinks only with a
		// budget.
		wantThoughts := reasoning
		if model == "gemini-anth" {
			wantThoughts = ""
		}
		for _, mode := range []string{"create", "stream"} {
			t.Run(model+" "+mode, func(t *testing.T) {
				var got answer
				runGeminiSDKRelay(t, node, model, mode, &got)
				if got.Text != content || got.Thoughts != wantThoughts || got.Finish != "STOP" {
					t.Errorf("text %q thoughts %q finish %q, want %q / %q / STOP", got.Text, got.Thoughts, got.Finish, content, wantThoughts)
				}
				if mode == "stream" && got.Chunks < 3 || mode == "create" && got.Chunks != 1 {
					t.Errorf("%d chunks", got.Chunks)
				}
				if got.Usage["candidatesTokenCount"] != float64(15) {
					t.Errorf("usage %v", got.Usage)
				}
			})
		}
		t.Run(model+" tools", func(t *testing.T) {
			var got struct {
				Calls []struct {
					ID, Name string
					Args     json.RawMessage
				}
				Finish, Answer string
			}
			runGeminiSDKRelay(t, node, model, "tools", &got)
			if len(got.Calls) != 1 || got.Calls[0].Name != "get_weather" || got.Calls[0].ID == "" || string(got.Calls[0].Args) != sim.ToolInput {
				t.Fatalf("calls %+v, want one get_weather with %s", got.Calls, sim.ToolInput)
			}
			if got.Finish != "STOP" || got.Answer != content {
				t.Errorf("finish %q, answer after the functionResponse %q (want %q)", got.Finish, got.Answer, content)
			}
		})
	}

	type sdkError struct {
		Name    string
		Status  int
		Message string
		Chunks  int
	}
	for _, tc := range []struct {
		model        string
		create       int // the status of generateContent's ApiError
		stream       int // and of the stream's
		inMessage    string
		streamChunks int // the chunks before the stream's error
	}{
		{"gemini-limited", 429, 429, "rate limiting", 0},
		{"gemini-midway", 0, 500, "", 2},
	} {
		t.Run("error "+tc.model, func(t *testing.T) {
			var got struct{ Create, Stream *sdkError }
			runGeminiSDKRelay(t, node, tc.model, "error", &got)
			for name, c := range map[string]struct {
				e      *sdkError
				status int
			}{"create": {got.Create, tc.create}, "stream": {got.Stream, tc.stream}} {
				if c.status == 0 {
					continue // generateContent of a stream that breaks: the relay fails over or answers; not this test's
				}
				if c.e == nil || c.e.Name != "ApiError" || c.e.Status != c.status || !strings.Contains(c.e.Message, tc.inMessage) {
					t.Errorf("%s: %+v, want an ApiError %d with %q\n%s", name, c.e, c.status, tc.inMessage, readLog(t, logFile))
				}
			}
			if got.Stream != nil && got.Stream.Chunks < tc.streamChunks {
				t.Errorf("the stream raised after %d chunks, want at least %d", got.Stream.Chunks, tc.streamChunks)
			}
		})
	}
}

// TestGeminiCLIThroughRelay: Gemini CLI (-p, GOOGLE_GEMINI_BASE_URL at
// the relay, GEMINI_API_KEY the relay's key) answers through the relay in
// front of a chat target and an anthropic target, and runs one tool turn
// in front of each (a target that calls the CLI's first tool).
func TestGeminiCLIThroughRelay(t *testing.T) {
	gemini := requireNodeTool(t, filepath.Join(".bin", "gemini"), "Gemini CLI")
	logFile := startRelay(t, geminiRelay(""), geminiTargetsSite)
	_, content := geminiSimTexts()
	for _, model := range []string{"gemini-chat", "gemini-anth"} {
		t.Run(model, func(t *testing.T) {
			res, stderr, connects := runGeminiCLI(t, gemini, "http://127.0.0.1:9080", geminiRelayKey, model, "Say hi")
			if res.Error != nil || res.Response != content {
				t.Fatalf("gemini's answer %q (error %+v), want %q\nstderr: %s\ncaddy log:\n%s", res.Response, res.Error, content, stderr, readLog(t, logFile))
			}
			st := res.Stats.Models[model]
			if st.API.TotalRequests != 1 || st.API.TotalErrors != 0 || st.Tokens.Candidates != 15 {
				t.Errorf("stats %+v", res.Stats)
			}
			for _, addr := range connects {
				if !strings.HasPrefix(addr, "127.0.0.1:") && !strings.HasPrefix(addr, "::1:") {
					t.Errorf("gemini connected to %s", addr)
				}
			}
		})
	}
	for _, model := range []string{"gemini-tools-chat", "gemini-tools-anth"} {
		t.Run("tool turn "+model, func(t *testing.T) {
			res, stderr, _ := runGeminiCLI(t, gemini, "http://127.0.0.1:9080", geminiRelayKey, model, "Say hi")
			if res.Error != nil || res.Response != content {
				t.Fatalf("gemini's answer %q (error %+v)\nstderr: %s\ncaddy log:\n%s", res.Response, res.Error, stderr, readLog(t, logFile))
			}
			st := res.Stats.Models[model]
			if res.Stats.Tools.TotalCalls != 1 || st.API.TotalRequests != 2 || st.API.TotalErrors != 0 {
				t.Errorf("%d tool calls, %d requests, %d errors: want 1 call between 2 requests\nstderr: %s", res.Stats.Tools.TotalCalls, st.API.TotalRequests, st.API.TotalErrors, stderr)
			}
		})
	}
	log := readLog(t, logFile)
	mustContain(t, log, `"api":"gemini"`)
	if strings.Contains(log, geminiRelayKey) {
		t.Errorf("the relay's log holds the key")
	}
}

// TestGeminiSDKToGeminiUpstream: @google/genai through the relay in front
// of an `api gemini` target (the simulator speaking Gemini): the answer,
// the stream, and a function-call round trip whose thoughtSignature comes
// to the client on the call's part and goes back to the target on it.
// The client's body reaches the target as it was (includeThoughts
// without a budget included: the thoughts come back), the answer through
// Chat.
func TestGeminiSDKToGeminiUpstream(t *testing.T) {
	requireNodeTool(t, filepath.Join("@google", "genai", "package.json"), "the @google/genai SDK")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node_modules is installed but node is not on PATH: %v", err)
	}
	startRelay(t, geminiUpstreamRelay(""), geminiUpstreamSite, geminiTargetsSite)
	cfg := sim.Config{Seed: 33, ReasoningTokens: new(8), ContentTokens: new(14)}
	r, c := sim.Texts(cfg)
	content, reasoning := strings.Join(c, ""), strings.Join(r, "")
	for _, mode := range []string{"create", "stream"} {
		var got struct {
			Text, Thoughts, Finish string
		}
		runGeminiSDKRelay(t, node, "gflash", mode, &got)
		if got.Text != content || got.Thoughts != reasoning || got.Finish != "STOP" {
			t.Errorf("%s: text %q thoughts %q finish %q, want %q / %q", mode, got.Text, got.Thoughts, got.Finish, content, reasoning)
		}
	}
	var got struct {
		Calls []struct {
			ID, Name string
			Args     json.RawMessage
		}
		Signatures     []string
		Finish, Answer string
	}
	runGeminiSDKRelay(t, node, "gflash", "tools", &got)
	if len(got.Calls) != 1 || got.Calls[0].Name != "get_weather" || got.Calls[0].ID == "" || string(got.Calls[0].Args) != sim.ToolInput {
		t.Fatalf("calls %+v", got.Calls)
	}
	if sig := sim.Signature(cfg); len(got.Signatures) != 1 || got.Signatures[0] != sig {
		t.Errorf("signatures %q, want the simulator's %q", got.Signatures, sig)
	}
	if got.Answer != content {
		t.Errorf("the answer after the functionResponse %q", got.Answer)
	}
}

// TestGeminiCLIToGeminiUpstream: Gemini CLI through the relay in front of
// an `api gemini` target (the simulator speaking Gemini): an answer, and
// a tool turn whose call (with its thoughtSignature) and functionResponse
// go Gemini → Chat → Gemini and back. The aliases are not the CLI's own
// (auto, pro, flash, flash-lite), which it turns into its model names
// before it asks.
func TestGeminiCLIToGeminiUpstream(t *testing.T) {
	gemini := requireNodeTool(t, filepath.Join(".bin", "gemini"), "Gemini CLI")
	logFile := startRelay(t, geminiUpstreamRelay(`upstream simgemtools http://127.0.0.1:9163/v1beta {
			api gemini
		}
		model gflash-tools {
			to simgemtools gemini-2.5-flash
		}`), geminiUpstreamSite, geminiTargetsSite, `http://127.0.0.1:9163 {
	llm_simulator {
		seed 33
		reasoning_tokens 8
		content_tokens 14
		pattern steady 0
		tool_calls auto
	}
}`)
	_, c := sim.Texts(sim.Config{Seed: 33, ReasoningTokens: new(8), ContentTokens: new(14)})
	content := strings.Join(c, "")
	res, stderr, _ := runGeminiCLI(t, gemini, "http://127.0.0.1:9080", geminiRelayKey, "gflash", "Say hi")
	if res.Error != nil || res.Response != content {
		t.Fatalf("gemini's answer %q (error %+v), want %q\nstderr: %s\ncaddy log:\n%s", res.Response, res.Error, content, stderr, readLog(t, logFile))
	}
	res, stderr, _ = runGeminiCLI(t, gemini, "http://127.0.0.1:9080", geminiRelayKey, "gflash-tools", "Say hi")
	if res.Error != nil || res.Response != content {
		t.Fatalf("tool turn: gemini's answer %q (error %+v)\nstderr: %s\ncaddy log:\n%s", res.Response, res.Error, stderr, readLog(t, logFile))
	}
	st := res.Stats.Models["gflash-tools"]
	if res.Stats.Tools.TotalCalls != 1 || st.API.TotalRequests != 2 || st.API.TotalErrors != 0 {
		t.Errorf("%d tool calls, %d requests, %d errors: want 1 call between 2 requests\nstderr: %s", res.Stats.Tools.TotalCalls, st.API.TotalRequests, st.API.TotalErrors, stderr)
	}
}

// TestGeminiClientsAcceptHeartbeats: the relay's heartbeats (early_commit
// before the first content, then between events) reach a Gemini client as
// bare line breaks, not SSE comments, which Gemini CLI's stream reader
// would stop at; the raw stream has them in both places, and the SDK and
// the CLI read the whole answer through them.
func TestGeminiClientsAcceptHeartbeats(t *testing.T) {
	slow := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		flush := func(s string) {
			_, _ = w.Write([]byte(s))
			w.(http.Flusher).Flush()
		}
		chunk := func(delta string) string {
			return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
		}
		flush(chunk(`{"role":"assistant","content":""}`))
		time.Sleep(600 * time.Millisecond) // before the first content: early commit, heartbeats
		flush(chunk(`{"content":"Hel"}`))
		time.Sleep(500 * time.Millisecond) // between content events: heartbeats
		flush(chunk(`{"content":"lo"}`) +
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}` + "\n\n" +
			"data: [DONE]\n\n")
	})
	logFile := startRelay(t, `llm_relay {
		key `+geminiRelayKey+`
		upstream slow `+slow.v1()+` {
			api chat
		}
		model gemini-slow {
			to slow up
		}
		smoothing off {
			early_commit 150ms
			heartbeat 100ms
		}
	}`)
	for _, alt := range []string{"?alt=sse", ""} {
		resp := geminiPost(t, "/v1beta/models/gemini-slow:streamGenerateContent"+alt, geminiHi, "x-goog-api-key", geminiRelayKey)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		raw := string(b)
		first, last := strings.Index(raw, `"text":"Hel"`), strings.Index(raw, `"text":"lo"`)
		if first < 0 || last < 0 || !strings.HasPrefix(raw, "\n\n") || !strings.Contains(raw[first:last], "\n\n\n") || strings.Contains(raw, "keep-alive") {
			t.Fatalf("alt %q: want line breaks before the first content and between the chunks, no comment:\n%q", alt, raw)
		}
		if alt == "" {
			var arr []json.RawMessage
			if err := json.Unmarshal(b, &arr); err != nil || len(arr) != 3 {
				t.Errorf("the array with heartbeats in it: %v, %d elements", err, len(arr))
			}
		}
	}

	requireNodeTool(t, filepath.Join("@google", "genai", "package.json"), "the @google/genai SDK")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node_modules is installed but node is not on PATH: %v", err)
	}
	var got struct{ Text, Finish string }
	runGeminiSDKRelay(t, node, "gemini-slow", "stream", &got)
	if got.Text != "Hello" || got.Finish != "STOP" {
		t.Errorf("the SDK read %q, finish %q", got.Text, got.Finish)
	}
	gemini := requireNodeTool(t, filepath.Join(".bin", "gemini"), "Gemini CLI")
	res, stderr, _ := runGeminiCLI(t, gemini, "http://127.0.0.1:9080", geminiRelayKey, "gemini-slow", "Say hi")
	if res.Error != nil || res.Response != "Hello" {
		t.Errorf("the CLI read %q (error %+v)\nstderr: %s\ncaddy log:\n%s", res.Response, res.Error, stderr, readLog(t, logFile))
	}
}
