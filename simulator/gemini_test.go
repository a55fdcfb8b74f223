package simulator

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmrelay/caddy-llm-relay/internal/sim"
)

// The llm_simulator module speaking Gemini over real loopback HTTP: the
// module as Caddy provisions it, behind an httptest server, asked by Go
// and by the official @google/genai Node SDK (e2e/node/gemini.mjs).

// geminiSim is the simulator block the Gemini tests serve at /.
const geminiSim = `llm_simulator {
	model gemini-2.5-flash
	seed 5
	reasoning_tokens 8
	content_tokens 12
	pattern steady 0
}`

var geminiSimCfg = sim.Config{Seed: 5, ReasoningTokens: new(8), ContentTokens: new(12)}

// serveSimulators provisions one simulator per path prefix from its
// Caddyfile block and serves them all on 127.0.0.1, stripping the prefix
// as `handle_path` would.
func serveSimulators(t *testing.T, blocks map[string]string) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	for prefix, block := range blocks {
		s := new(Simulator)
		if err := s.UnmarshalCaddyfile(caddyfile.NewTestDispenser(block)); err != nil {
			t.Fatalf("%s: %v", prefix, err)
		}
		if err := simProvision(t, s); err != nil {
			t.Fatalf("%s: %v", prefix, err)
		}
		var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), nil, nil)
			if err := s.ServeHTTP(w, r, nil); err != nil {
				t.Errorf("ServeHTTP: %v", err)
			}
		})
		if prefix != "/" {
			h = http.StripPrefix(strings.TrimSuffix(prefix, "/"), h)
		}
		mux.Handle(prefix, h)
	}
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

func TestSimulatorServesGemini(t *testing.T) {
	ts := serveSimulators(t, map[string]string{"/": geminiSim})
	wantR, wantC := sim.Texts(geminiSimCfg)
	body := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"thinkingConfig":{"includeThoughts":true}}}`
	post := func(path string) *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+path, strings.NewReader(body))
		req.Header.Set("x-goog-api-key", "AIza-anything")
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}

	var whole struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					Text             string `json:"text"`
					Thought          bool   `json:"thought"`
					ThoughtSignature string `json:"thoughtSignature"`
				} `json:"parts"`
			} `json:"content"`
			FinishReason string `json:"finishReason"`
		} `json:"candidates"`
		ModelVersion string `json:"modelVersion"`
	}
	if err := json.NewDecoder(post("/v1beta/models/gemini-2.5-flash:generateContent").Body).Decode(&whole); err != nil {
		t.Fatal(err)
	}
	ps := whole.Candidates[0].Content.Parts
	if len(ps) != 2 || !ps[0].Thought || ps[0].Text != strings.Join(wantR, "") || ps[1].Text != strings.Join(wantC, "") ||
		ps[1].ThoughtSignature != sim.Signature(geminiSimCfg) || whole.Candidates[0].FinishReason != "STOP" || whole.ModelVersion != "gemini-2.5-flash" {
		t.Errorf("generateContent: %+v", whole)
	}

	resp := post("/v1/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
	raw := new(bytes.Buffer)
	if _, err := raw.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	events := strings.Split(strings.TrimSuffix(raw.String(), "\r\n\r\n"), "\r\n\r\n")
	if resp.Header.Get("Content-Type") != "text/event-stream" || len(events) != len(wantR)+len(wantC)+1 {
		t.Fatalf("stream: type %q, %d events, want %d", resp.Header.Get("Content-Type"), len(events), len(wantR)+len(wantC)+1)
	}
	if last := events[len(events)-1]; !strings.Contains(last, `"finishReason":"STOP"`) || !strings.Contains(last, `"candidatesTokenCount":12`) {
		t.Errorf("last event %s", last)
	}

	// GET /v1beta/models lists the configured model in Gemini's shape.
	listResp, err := ts.Client().Get(ts.URL + "/v1beta/models")
	if err != nil {
		t.Fatal(err)
	}
	defer listResp.Body.Close()
	var list struct{ Models []struct{ Name string } }
	if err := json.NewDecoder(listResp.Body).Decode(&list); err != nil || len(list.Models) != 1 || list.Models[0].Name != "models/gemini-2.5-flash" {
		t.Errorf("models %+v %v", list, err)
	}
}

// nodeScript returns node and the path of an e2e/node script whose SDK
// package is installed, skipping the test when either is missing, or
// failing it under RELAY_REQUIRE_NODE=1 (as CI runs it), like the root
// package's requireNodeTool.
func nodeScript(t *testing.T, script, pkg string) (node, path string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a Node SDK; skipped with -short")
	}
	dir, err := filepath.Abs(filepath.Join("..", "e2e", "node"))
	if err != nil {
		t.Fatal(err)
	}
	missing := func(msg string) {
		if os.Getenv("RELAY_REQUIRE_NODE") == "1" {
			t.Fatal(msg + " (RELAY_REQUIRE_NODE=1)")
		}
		t.Skip(msg)
	}
	node, err = exec.LookPath("node")
	if err != nil {
		missing("node is not installed")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
		missing("e2e/node/node_modules/" + pkg + " is missing: run `npm ci --prefix e2e/node`")
	}
	return node, filepath.Join(dir, script)
}

// runGeminiSDK runs e2e/node/gemini.mjs in mode against baseURL and
// decodes its one line of JSON into out.
func runGeminiSDK(t *testing.T, node, script, baseURL, mode string, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, baseURL, "AIza-sim", "gemini-2.5-flash", mode)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("gemini.mjs %s: %v\nstdout: %s\nstderr: %s", mode, err, stdout.String(), stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("gemini.mjs %s: %v in %q", mode, err, stdout.String())
	}
}

// TestGeminiSDK: @google/genai, streaming and not, a function-call round
// trip and typed errors, against the simulator module on loopback.
func TestGeminiSDK(t *testing.T) {
	node, script := nodeScript(t, "gemini.mjs", filepath.Join("@google", "genai"))
	ts := serveSimulators(t, map[string]string{
		"/":        geminiSim,
		"/e429/":   "llm_simulator {\n\tfail 429 retry_after 2\n}",
		"/busy/":   "llm_simulator {\n\toverloaded\n}",
		"/inband/": "llm_simulator {\n\tpattern steady 0\n\terror_after 2\n}",
	})
	wantR, wantC := sim.Texts(geminiSimCfg)
	sig := sim.Signature(geminiSimCfg)

	type answer struct {
		Text, Thoughts, Finish string
		Signatures             []string
		Chunks                 int
		Usage                  map[string]any
	}
	for _, tc := range []struct {
		mode   string
		chunks int
	}{{"create", 1}, {"stream", len(wantR) + len(wantC) + 1}} {
		t.Run(tc.mode, func(t *testing.T) {
			var got answer
			runGeminiSDK(t, node, script, ts.URL, tc.mode, &got)
			if got.Text != strings.Join(wantC, "") || got.Thoughts != strings.Join(wantR, "") {
				t.Errorf("text %q, thoughts %q", got.Text, got.Thoughts)
			}
			if got.Finish != "STOP" || got.Chunks != tc.chunks || len(got.Signatures) != 1 || got.Signatures[0] != sig {
				t.Errorf("finish %q, %d chunks (want %d), signatures %q", got.Finish, got.Chunks, tc.chunks, got.Signatures)
			}
			if got.Usage["candidatesTokenCount"] != float64(len(wantC)) || got.Usage["thoughtsTokenCount"] != float64(len(wantR)) {
				t.Errorf("usage %v", got.Usage)
			}
		})
	}

	t.Run("tools", func(t *testing.T) {
		var got struct {
			Calls []struct {
				ID, Name string
				Args     json.RawMessage
			}
			Signatures     []string
			Finish, Answer string
		}
		runGeminiSDK(t, node, script, ts.URL, "tools", &got)
		if len(got.Calls) != 1 || got.Calls[0].Name != "get_weather" || got.Calls[0].ID == "" || string(got.Calls[0].Args) != sim.ToolInput {
			t.Fatalf("calls %+v", got.Calls)
		}
		if len(got.Signatures) != 1 || got.Signatures[0] != sig || got.Finish != "STOP" {
			t.Errorf("signatures %q, finish %q", got.Signatures, got.Finish)
		}
		if got.Answer != strings.Join(wantC, "") {
			t.Errorf("answer after the functionResponse %q", got.Answer)
		}
	})

	type sdkError struct {
		Name    string
		Status  int
		Message string
		Chunks  int
	}
	for _, tc := range []struct {
		prefix       string
		status       int
		inMessage    string
		streamChunks int
	}{
		{"/e429", 429, `"retryDelay":"2s"`, 0},
		{"/busy", 503, `"status":"UNAVAILABLE"`, 0},
		{"/inband", 500, `"status":"INTERNAL"`, 2},
	} {
		t.Run("error "+tc.prefix, func(t *testing.T) {
			var got struct{ Create, Stream *sdkError }
			runGeminiSDK(t, node, script, ts.URL+tc.prefix, "error", &got)
			for name, e := range map[string]*sdkError{"create": got.Create, "stream": got.Stream} {
				if e == nil || e.Name != "ApiError" || e.Status != tc.status || !strings.Contains(e.Message, tc.inMessage) {
					t.Errorf("%s: %+v, want an ApiError %d with %s", name, e, tc.status, tc.inMessage)
				}
			}
			if got.Stream != nil && got.Stream.Chunks != tc.streamChunks {
				t.Errorf("stream raised after %d chunks, want %d", got.Stream.Chunks, tc.streamChunks)
			}
		})
	}
}

// TestSimulatorToolCallsAuto: `tool_calls auto` is parsed and makes a
// Gemini request that never forces a call (as Gemini CLI's) get one.
func TestSimulatorToolCallsAuto(t *testing.T) {
	var s Simulator
	if err := s.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_simulator {\n\ttool_calls auto\n}")); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(s); string(got) != `{"tool_calls":"auto"}` {
		t.Errorf("JSON %s", got)
	}
	for block, want := range map[string]string{
		"llm_simulator {\n\ttool_calls always\n}":                    `tool_calls: must be forced or auto, got "always"`,
		"llm_simulator {\n\ttool_calls auto\n\ttool_calls forced\n}": "tool_calls already specified",
		"llm_simulator {\n\ttool_calls\n}":                           "wrong argument count",
	} {
		var s Simulator
		if err := s.UnmarshalCaddyfile(caddyfile.NewTestDispenser(block)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", block, err, want)
		}
	}

	ts := serveSimulators(t, map[string]string{"/": "llm_simulator {\n\ttool_calls auto\n\tpattern steady 0\n}"})
	body := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"read_file"},{"name":"glob"}]}]}`
	resp, err := ts.Client().Post(ts.URL+"/v1beta/models/m:generateContent", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw := new(bytes.Buffer)
	_, _ = raw.ReadFrom(resp.Body)
	if !strings.Contains(raw.String(), `"functionCall":{"id":"call_sim_1","name":"read_file","args":{"input":"sim"}}`) {
		t.Errorf("answer %s: want a call of read_file", raw)
	}
}
