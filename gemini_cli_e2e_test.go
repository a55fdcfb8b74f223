package llmrelay_test

// Gemini CLI itself (npm @google/gemini-cli, pinned in
// e2e/node/package.json) against the simulator's native Gemini endpoint,
// with no relay in between: the groundwork for running it through the
// relay. It proves the switches e2e/node/README.md lists keep the CLI on
// 127.0.0.1 (no telemetry, usage statistics, update check or auth flow)
// and that it accepts what the simulator streams.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/sim"
)

// geminiSimSite serves a simulator on :9150 (this file's ports are
// 9150-9159; the other e2e files use 9080-9149) that answers Gemini's
// .../v1beta/models/{model}:streamGenerateContent among the rest, and on
// :9151 the same simulator calling the first tool of every request that
// has tools (tool_calls auto: Gemini CLI never forces a call), and on
// :9152 one that fails every stream after 3 chunks.
const geminiSimSite = `http://127.0.0.1:9150 {
	log
	llm_simulator {
		model gemini-2.5-flash
		seed 33
		reasoning_tokens 8
		content_tokens 14
		pattern steady 0
	}
}
http://127.0.0.1:9151 {
	llm_simulator {
		seed 33
		reasoning_tokens 8
		content_tokens 14
		pattern steady 0
		tool_calls auto
	}
}
http://127.0.0.1:9152 {
	llm_simulator {
		pattern steady 0
		error_after 3
	}
}`

// geminiCLISettings is the settings.json of the CLI's fresh HOME: API-key
// auth chosen (without it a base URL gives "Invalid auth method
// selected"), usage statistics off (on, the CLI looks up Google's
// logging host), telemetry, auto-update and its notice, and the IDE
// integration off, and one attempt per request (by default the CLI
// retries a 429 or 503 up to 10 times with backoff, for minutes; a relay
// test wants the relay's own failover, not the client's).
const geminiCLISettings = `{
  "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false, "maxAttempts": 1},
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "ide": {"enabled": false},
  "security": {"auth": {"selectedType": "gemini-api-key"}}
}`

// geminiCLIResult is the part of `gemini -p ... --output-format json`
// the tests read.
type geminiCLIResult struct {
	Response string `json:"response"`
	Stats    struct {
		Tools struct {
			TotalCalls int `json:"totalCalls"`
		} `json:"tools"`
		Models map[string]struct {
			API struct {
				TotalRequests int `json:"totalRequests"`
				TotalErrors   int `json:"totalErrors"`
			} `json:"api"`
			Tokens struct {
				Candidates int `json:"candidates"`
				Thoughts   int `json:"thoughts"`
			} `json:"tokens"`
		} `json:"models"`
	} `json:"stats"`
	Error *struct {
		Message string `json:"message"`
		Code    int    `json:"code"`
	} `json:"error"`
}

// runGeminiCLI runs `gemini -m model -p prompt --output-format json`
// (whose JSON object is on stdout, or last on stderr when the run fails)
// against baseURL with a fresh HOME holding geminiCLISettings and
// nothing from this process's environment but PATH. When strace is
// installed it runs under `strace -f -e trace=connect` and returns every
// address the CLI connected to (IPv4 and IPv6, "host:port"); otherwise
// connects is nil. A run that times out or does not start fails the test.
func runGeminiCLI(t *testing.T, gemini, baseURL, key, model, prompt string) (res geminiCLIResult, stderr string, connects []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	home, work := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(geminiCLISettings), 0o600); err != nil {
		t.Fatal(err)
	}
	argv := []string{gemini, "-m", model, "-p", prompt, "--output-format", "json"}
	traceFile := ""
	if strace, err := exec.LookPath("strace"); err == nil {
		traceFile = filepath.Join(home, "connects.txt")
		argv = append([]string{strace, "-f", "-qq", "-e", "trace=connect", "-o", traceFile}, argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = work
	cmd.Stdin = strings.NewReader("")
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"TMPDIR=" + home,
		"GEMINI_API_KEY=" + key,
		"GOOGLE_GEMINI_BASE_URL=" + baseURL,
		"GEMINI_TELEMETRY_ENABLED=false",
		// A fresh folder is untrusted: headless runs stop with exit 55.
		"GEMINI_CLI_TRUST_WORKSPACE=true",
		// The CLI otherwise starts itself again as a child with a larger heap.
		"GEMINI_CLI_NO_RELAUNCH=true",
		"NO_COLOR=1",
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("gemini timed out (a network call hanging?)\nstdout: %s\nstderr: %s", out.String(), errOut.String())
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("gemini: %v\nstderr: %s", err, errOut.String())
	}
	result := bytes.TrimSpace(out.Bytes())
	if len(result) == 0 && err != nil {
		// A failed run prints its JSON object ({"session_id","error"}) last
		// on stderr, after the error's stack.
		if i := bytes.LastIndex(errOut.Bytes(), []byte("\n{\n")); i >= 0 {
			result = bytes.TrimSpace(errOut.Bytes()[i:])
		} else if bytes.HasPrefix(errOut.Bytes(), []byte("{\n")) {
			result = bytes.TrimSpace(errOut.Bytes())
		}
	}
	if jerr := json.Unmarshal(result, &res); jerr != nil {
		t.Fatalf("gemini (%v): output is not one JSON object: %v\nstdout: %s\nstderr: %s", err, jerr, out.String(), errOut.String())
	}
	if err != nil {
		t.Logf("gemini exited with %v; stderr: %s", err, errOut.String())
	}
	if traceFile != "" {
		trace, rerr := os.ReadFile(traceFile)
		if rerr != nil {
			t.Fatalf("strace wrote no trace: %v", rerr)
		}
		connects = connectAddrs(string(trace))
	}
	return res, errOut.String(), connects
}

// connectRE matches the address of an IPv4 or IPv6 connect(2) in
// strace's output.
var connectRE = regexp.MustCompile(`connect\(\d+, \{sa_family=AF_INET6?, sin6?_port=htons\((\d+)\),.*?(?:inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)")`)

func connectAddrs(trace string) []string {
	var out []string
	for _, m := range connectRE.FindAllStringSubmatch(trace, -1) {
		out = append(out, m[2]+m[3]+":"+m[1])
	}
	return out
}

func TestConnectAddrs(t *testing.T) {
	trace := `12 connect(21, {sa_family=AF_INET, sin_port=htons(9150), sin_addr=inet_addr("127.0.0.1")}, 16) = 0
12 connect(22, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1 ENOENT
13 connect(23, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.255.255.53")}, 16) = -1 ENETUNREACH
13 connect(24, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "2001:db8::1", &sin6_addr), sin6_scope_id=0}, 28) = -1
`
	got := connectAddrs(trace)
	want := []string{"127.0.0.1:9150", "10.255.255.53:53", "2001:db8::1:443"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestGeminiCLISimulator: Gemini CLI, pointed at the simulator with
// GOOGLE_GEMINI_BASE_URL, prints the simulator's answer and reports its
// thoughts and candidates tokens, and connects to nothing but 127.0.0.1.
// Run it in a network namespace with only loopback (/work/bin/nsrun) to
// see that nothing it would reach outside can make it hang either.
func TestGeminiCLISimulator(t *testing.T) {
	gemini := requireNodeTool(t, filepath.Join(".bin", "gemini"), "Gemini CLI")
	logFile := startRelay(t, `respond "no relay in this test" 404`, geminiSimSite)
	cfg := sim.Config{Seed: 33, ReasoningTokens: new(8), ContentTokens: new(14)}
	_, content := sim.Texts(cfg)
	want := strings.Join(content, "")

	res, stderr, connects := runGeminiCLI(t, gemini, "http://127.0.0.1:9150", "sim-gemini-key", "gemini-2.5-flash", "Say hi")
	if res.Error != nil || res.Response != want {
		t.Fatalf("gemini's answer %q (error %+v), want the simulator's %q\nstderr: %s\ncaddy log:\n%s", res.Response, res.Error, want, stderr, readLog(t, logFile))
	}
	st, ok := res.Stats.Models["gemini-2.5-flash"]
	if !ok || st.API.TotalRequests != 1 || st.API.TotalErrors != 0 || st.Tokens.Candidates != len(content) || st.Tokens.Thoughts != 8 {
		t.Errorf("stats %+v: want 1 request, %d candidates and 8 thoughts tokens", res.Stats, len(content))
	}
	if connects == nil {
		// Without strace the CLI's connections are not seen; CI installs it
		// (.ci/run) and requires it.
		if os.Getenv("RELAY_REQUIRE_STRACE") == "1" {
			t.Fatal("strace not installed (Debian: apt-get install strace; RELAY_REQUIRE_STRACE=1): the CLI's connections cannot be checked")
		}
		t.Log("strace not installed: the connections were not checked")
	}
	for _, addr := range connects {
		if !strings.HasPrefix(addr, "127.0.0.1:") && !strings.HasPrefix(addr, "::1:") {
			t.Errorf("gemini connected to %s; every switch in e2e/node/README.md should keep it on 127.0.0.1 (all: %q)", addr, connects)
		}
	}
	// What it asked for: the streamed SSE method, with the key in the
	// header (never in the URL, where logs would keep it).
	log := readLog(t, logFile)
	if !strings.Contains(log, `/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`) {
		t.Errorf("the simulator's access log has no streamGenerateContent?alt=sse request:\n%s", log)
	}
	if strings.Contains(log, "key=sim-gemini-key") {
		t.Errorf("the key went into a URL:\n%s", log)
	}
}

// TestGeminiCLISimulatorToolTurn: one tool-using turn. The simulator
// calls the CLI's first tool with its fixed args {"input":"sim"}; the
// CLI runs it (it rejects the args: the turn is about the wire, a call
// with its id and thoughtSignature, then the functionResponse sent back)
// and asks again with the result, and the simulator, seeing the result
// as the last turn, answers with its text, which the CLI prints.
func TestGeminiCLISimulatorToolTurn(t *testing.T) {
	gemini := requireNodeTool(t, filepath.Join(".bin", "gemini"), "Gemini CLI")
	logFile := startRelay(t, `respond "no relay in this test" 404`, geminiSimSite)
	_, content := sim.Texts(sim.Config{Seed: 33, ReasoningTokens: new(8), ContentTokens: new(14)})

	res, stderr, _ := runGeminiCLI(t, gemini, "http://127.0.0.1:9151", "sim-gemini-key", "gemini-2.5-flash", "Say hi")
	if res.Error != nil || res.Response != strings.Join(content, "") {
		t.Fatalf("gemini's answer %q (error %+v)\nstderr: %s\ncaddy log:\n%s", res.Response, res.Error, stderr, readLog(t, logFile))
	}
	st := res.Stats.Models["gemini-2.5-flash"]
	if res.Stats.Tools.TotalCalls != 1 || st.API.TotalRequests != 2 || st.API.TotalErrors != 0 {
		t.Errorf("%d tool calls, %d requests, %d errors: want 1 call between 2 requests\nstderr: %s", res.Stats.Tools.TotalCalls, st.API.TotalRequests, st.API.TotalErrors, stderr)
	}
}

// TestGeminiCLISimulatorInBandError: an error in the middle of the
// stream, sent as Gemini sends it, is an error to the CLI (code 500),
// not a short answer.
func TestGeminiCLISimulatorInBandError(t *testing.T) {
	gemini := requireNodeTool(t, filepath.Join(".bin", "gemini"), "Gemini CLI")
	startRelay(t, `respond "no relay in this test" 404`, geminiSimSite)
	res, stderr, _ := runGeminiCLI(t, gemini, "http://127.0.0.1:9152", "sim-gemini-key", "gemini-2.5-flash", "Say hi")
	if res.Error == nil || res.Error.Code != 500 || !strings.Contains(res.Error.Message, "INTERNAL") || res.Response != "" {
		t.Fatalf("result %+v (error %+v): want the stream's error, code 500\nstderr: %s", res, res.Error, stderr)
	}
}
