package llmrelay_test

// Claude Code itself through the relay: the real CLI (npm
// @anthropic-ai/claude-code, pinned in e2e/node/package.json) asks the
// relay for an alias whose only target is a Chat Completions simulator, so
// every byte it gets back was translated from Chat to Messages. What the
// CLI sends is recorded in testdata/claudecode (request.json and README).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// clientsSimSite runs the simulators the client tests use, on :9084 (the
// other e2e files use 9080-9083). One llm_simulator answers both dialects
// (.../chat/completions and .../messages), so the same handler is an
// `api chat` upstream or an `api anthropic` one depending on the relay's
// config. /fail/ answers every request 503, /busy/ 529 overloaded_error
// (503 on Chat), and /midway/ sends 6 data events of its answer, then an
// in-band overloaded error.
const clientsSimSite = `http://127.0.0.1:9084 {
	handle /sim/* {
		llm_simulator {
			seed 21
			reasoning_tokens 12
			content_tokens 15
			pattern steady 0
		}
	}
	handle /fail/* {
		llm_simulator {
			fail 503
		}
	}
	handle /busy/* {
		llm_simulator {
			overloaded
		}
	}
	handle /midway/* {
		llm_simulator {
			seed 21
			reasoning_tokens 12
			content_tokens 15
			pattern steady 0
			error_after 6
		}
	}
}`

// simV1 is the simulator's base URL as an upstream line wants it.
const simV1 = "http://127.0.0.1:9084/sim/v1"

// requireNodeTool returns the path of an e2e/node tool (under
// node_modules), skipping the test when it is not installed, or failing it
// when RELAY_REQUIRE_NODE=1 (CI installs it and must run the test).
func requireNodeTool(t *testing.T, rel, what string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test with a real Caddy; skipped with -short")
	}
	p, err := filepath.Abs(filepath.Join("e2e", "node", "node_modules", rel))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		msg := "e2e/node/node_modules/" + rel + " is missing: run `npm ci --prefix e2e/node` to install " + what
		if os.Getenv("RELAY_REQUIRE_NODE") == "1" {
			t.Fatal(msg + " (RELAY_REQUIRE_NODE=1)")
		}
		t.Skip(msg)
	}
	return p
}

// directChat asks the simulator itself (no relay) for a non-streaming
// chat completion: the texts every path through the relay must reproduce.
func directChat(t *testing.T, v1 string) (reasoning, content string) {
	t.Helper()
	resp, err := httpClient.Post(v1+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"sim-reasoner","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatalf("direct chat request to the simulator: %v", err)
	}
	body := readAll(t, resp)
	var c struct {
		Choices []struct {
			Message struct {
				Content          string `json:"content"`
				ReasoningContent string `json:"reasoning_content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(body), &c); err != nil || resp.StatusCode != 200 || len(c.Choices) != 1 || c.Choices[0].Message.Content == "" {
		t.Fatalf("direct chat request: status %d: %s", resp.StatusCode, body)
	}
	return c.Choices[0].Message.ReasoningContent, c.Choices[0].Message.Content
}

// claudeResult is the part of `claude -p --output-format json` we check.
type claudeResult struct {
	Type           string `json:"type"`
	Subtype        string `json:"subtype"`
	IsError        bool   `json:"is_error"`
	Result         string `json:"result"`
	APIErrorStatus int    `json:"api_error_status"`
	NumTurns       int    `json:"num_turns"`
	StopReason     string `json:"stop_reason"`
}

// runClaude runs `claude -p prompt --model model --output-format json`
// against baseURL with a HOME of its own and nothing from this process's
// environment but PATH, so no user setting, key or proxy leaks in.
func runClaude(t *testing.T, claude, baseURL, key, model, prompt string) (claudeResult, string) {
	t.Helper()
	stdout, stderr, err := execClaude(t, claude, baseURL, key, model, prompt, "--output-format", "json")
	var res claudeResult
	if jerr := json.Unmarshal(bytes.TrimSpace([]byte(stdout)), &res); jerr != nil {
		t.Fatalf("claude (%v): output is not one JSON object: %v\nstdout: %s\nstderr: %s", err, jerr, stdout, stderr)
	}
	if err != nil {
		t.Logf("claude exited with %v; stderr: %s", err, stderr)
	}
	return res, stderr
}

// execClaude runs `claude -p prompt --model model args...` against
// baseURL with a HOME of its own and nothing from this process's
// environment but PATH, telemetry and update checks off, no retries. A
// run that times out or does not start fails the test; err is the exit.
func execClaude(t *testing.T, claude, baseURL, key, model, prompt string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, claude, append([]string{"-p", prompt, "--model", model}, args...)...)
	cmd.Dir = home
	cmd.Stdin = strings.NewReader("")
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"TMPDIR=" + home,
		"ANTHROPIC_BASE_URL=" + baseURL,
		"ANTHROPIC_API_KEY=" + key,
		"DISABLE_TELEMETRY=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		// Claude Code retries failed requests (a 401 too) with backoff for
		// minutes; the relay does its own failover, and a test wants the
		// first answer.
		"CLAUDE_CODE_MAX_RETRIES=0",
		"NO_COLOR=1",
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("claude timed out\nstdout: %s\nstderr: %s", out.String(), errOut.String())
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("claude: %v\nstderr: %s", err, errOut.String())
	}
	return out.String(), errOut.String(), err
}

// TestClaudeCodeThroughRelayToChatUpstream: Claude Code, asking the relay
// for an alias whose target speaks only Chat Completions, prints the
// simulator's answer as its result.
func TestClaudeCodeThroughRelayToChatUpstream(t *testing.T) {
	claude := requireNodeTool(t, filepath.Join(".bin", "claude"), "Claude Code")
	logFile := startRelay(t, `llm_relay {
		key sk-relay-claude-code
		upstream simchat `+simV1+` {
			api chat
		}
		model relay-claude {
			to simchat sim-reasoner
		}
	}`, clientsSimSite)
	_, want := directChat(t, simV1)

	res, stderr := runClaude(t, claude, relayBase, "sk-relay-claude-code", "relay-claude", "Say hi")
	if res.Type != "result" || res.Subtype != "success" || res.IsError {
		t.Fatalf("claude result %+v; want a success\nstderr: %s\nrelay log:\n%s", res, stderr, readLog(t, logFile))
	}
	if res.Result != want {
		t.Fatalf("claude's answer differs from the simulator's:\n got %q\nwant %q", res.Result, want)
	}
	// The answer came through the relay as one clean stream, translated
	// from the chat upstream. (When a stream breaks, Claude Code retries
	// without streaming and may still print the answer: count requests.)
	// The log line is written as the handler returns, which can be just
	// after the client has read the end of the stream.
	var relayed []string
	waitFor(t, 5*time.Second, "the relayed log line", func() bool {
		relayed = relayed[:0]
		for _, line := range strings.Split(readLog(t, logFile), "\n") {
			if strings.Contains(line, `"msg":"relayed"`) {
				relayed = append(relayed, line)
			}
		}
		return len(relayed) > 0
	})
	if len(relayed) != 1 || !strings.Contains(relayed[0], `"upstream":"simchat"`) || !strings.Contains(relayed[0], `"stream":true`) ||
		!strings.Contains(relayed[0], `"status":200`) || strings.Contains(relayed[0], `"stream_error"`) {
		t.Fatalf("want one clean streamed request to simchat; the relay logged:\n%s", strings.Join(relayed, "\n"))
	}

	// A wrong key is the relay's 401, which Claude Code reports as an
	// error rather than an answer.
	res, _ = runClaude(t, claude, relayBase, "sk-not-the-key", "relay-claude", "Say hi")
	if !res.IsError || res.APIErrorStatus != 401 || res.Result == want {
		t.Fatalf("with a wrong key claude reported %+v; want the relay's 401", res)
	}
}

// capturedRequest is one request of testdata/claudecode/request.json.
type capturedRequest struct {
	Method  string              `json:"method"`
	Path    string              `json:"path"`
	Query   string              `json:"query"`
	Headers map[string][]string `json:"headers"`
	Body    json.RawMessage     `json:"body"`
}

// loadClaudeCodeCapture reads the one request Claude Code sends for
// `claude -p` (see testdata/claudecode/README.md).
func loadClaudeCodeCapture(t *testing.T) capturedRequest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "claudecode", "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Requests []capturedRequest `json:"requests"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || len(c.Requests) != 1 {
		t.Fatalf("testdata/claudecode/request.json: %v (%d requests)", err, len(c.Requests))
	}
	return c.Requests[0]
}

// replayCapture sends the captured request to the relay, as Claude Code
// did, with the relay's key, and returns the response body.
func replayCapture(t *testing.T, c capturedRequest, key string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(c.Method, relayBase+c.Path+"?"+c.Query, bytes.NewReader(c.Body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range c.Headers {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length", "Accept-Encoding", "Connection":
			// Go's transport sets these itself (and undoes a gzip it asked for).
		default:
			req.Header[http.CanonicalHeaderKey(k)] = vs
		}
	}
	req.Header.Set("X-Api-Key", key)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("replaying the capture: %v", err)
	}
	return resp, readAll(t, resp)
}

// messagesText is the concatenated text_delta text of a Messages stream,
// after checking that it is one whole message: message_start first,
// message_stop last, no error event.
func messagesText(t *testing.T, stream string) string {
	t.Helper()
	var types []string
	var text strings.Builder
	for _, d := range sseDatas(stream) {
		var ev struct {
			Type  string `json:"type"`
			Delta struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(d), &ev); err != nil {
			t.Fatalf("stream data %q: %v", d, err)
		}
		types = append(types, ev.Type)
		if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
			text.WriteString(ev.Delta.Text)
		}
	}
	if len(types) < 3 || types[0] != "message_start" || types[len(types)-1] != "message_stop" || slices.Contains(types, "error") {
		t.Fatalf("not one whole message; event types %v\n%s", types, stream)
	}
	return text.String()
}

// TestClaudeCodeCaptureReplay: the request Claude Code sends (replayed
// from testdata, so this runs where Node is not installed) is answered by
// a Chat target, translated; and passed to an Anthropic target unchanged
// but for the model, with its ?beta=true, anthropic-beta and the
// upstream's own key.
func TestClaudeCodeCaptureReplay(t *testing.T) {
	c := loadClaudeCodeCapture(t)
	var gotQuery string
	claude := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		gotQuery = r.URL.RawQuery
		writeMessagesStream(w, 0, okMessageStream("msg_cc", "hello Claude Code")...)
	})
	startRelay(t, `llm_relay {
		key sk-relay-claude-code
		upstream simchat `+simV1+` {
			api chat
		}
		upstream claude `+claude.v1()+` {
			api anthropic
			api_key sk-ant-upstream
		}
		model relay-claude {
			to simchat sim-reasoner
		}
		model relay-claude-native {
			to claude claude-up
		}
	}`, clientsSimSite)
	_, want := directChat(t, simV1)

	t.Run("chat target", func(t *testing.T) {
		resp, body := replayCapture(t, c, "sk-relay-claude-code")
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("status %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if got := messagesText(t, body); got != want {
			t.Fatalf("text %q, want the simulator's %q", got, want)
		}
	})

	t.Run("anthropic target", func(t *testing.T) {
		var captured map[string]any
		if err := json.Unmarshal(c.Body, &captured); err != nil {
			t.Fatal(err)
		}
		captured["model"] = "relay-claude-native"
		native, _ := json.Marshal(captured)
		c.Body = native
		resp, body := replayCapture(t, c, "sk-relay-claude-code")
		if resp.StatusCode != 200 || messagesText(t, body) != "hello Claude Code" {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		seen := claude.requests()
		if len(seen) != 1 {
			t.Fatalf("the anthropic upstream saw %d requests", len(seen))
		}
		h := seen[0].header
		if seen[0].path != "/v1/messages" || gotQuery != c.Query || h.Get("X-Api-Key") != "sk-ant-upstream" || h.Get("Anthropic-Beta") != c.Headers["Anthropic-Beta"][0] || h.Get("Anthropic-Version") != "2023-06-01" {
			t.Errorf("upstream got %s?%s with headers %v", seen[0].path, gotQuery, h)
		}
		captured["model"] = "claude-up"
		if !reflect.DeepEqual(seen[0].body, captured) {
			t.Errorf("the body reached the anthropic upstream changed beyond its model")
		}
	})
}

// TestClaudeCodeAcceptsHeartbeats: Claude Code reads a stream with the
// relay's `: keep-alive` comments before the commit point and between
// deltas as the one answer it is, without falling back to a
// non-streaming retry.
func TestClaudeCodeAcceptsHeartbeats(t *testing.T) {
	claude := requireNodeTool(t, filepath.Join(".bin", "claude"), "Claude Code")
	slow := heartbeatRelay(t)
	res, stderr := runClaude(t, claude, relayBase, sdkKey, "claude-slow", "Say hi")
	if res.IsError || res.Result != "Hello" {
		t.Fatalf("claude result %+v; want Hello\nstderr: %s", res, stderr)
	}
	// One request from the raw check, one streamed request from Claude Code.
	if seen := slow.requests(); len(seen) != 2 || seen[1].body["stream"] != true {
		t.Fatalf("the upstream saw %d requests; want Claude Code's one streamed request after the raw check", len(seen))
	}
}
