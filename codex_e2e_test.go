package llmrelay_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runCodex runs the real Codex CLI (`codex exec`) with a model provider
// whose base_url is the relay and wire_api "responses", the relay's key in
// the provider's env_key, its update check, analytics and feedback off (no
// test phones home), and args before the prompt; it returns what Codex
// printed on stdout (the final answer) and stderr.
func runCodex(t *testing.T, codex, v1, key, model, prompt string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	// Codex refuses to create its helper binaries under /tmp: its home
	// goes under /var/tmp.
	home, err := os.MkdirTemp("/var/tmp", "relay-codex-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(home) })
	work := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	argv := []string{"exec", "--skip-git-repo-check",
		"-c", "model_provider=relay",
		"-c", `model_providers.relay.name="relay"`,
		"-c", `model_providers.relay.base_url="` + v1 + `"`,
		"-c", `model_providers.relay.wire_api="responses"`,
		"-c", `model_providers.relay.env_key="RELAY_KEY"`,
		"-c", "check_for_update_on_startup=false",
		"-c", "analytics.enabled=false",
		"-c", "feedback.enabled=false",
		"-m", model}
	cmd := exec.CommandContext(ctx, codex, append(append(argv, args...), prompt)...)
	cmd.Dir = work
	cmd.Stdin = strings.NewReader("")
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"CODEX_HOME=" + home,
		"TMPDIR=" + work,
		"RELAY_KEY=" + key,
		"NO_COLOR=1",
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("codex timed out\nstdout: %s\nstderr: %s", out.String(), errOut.String())
	}
	return out.String(), errOut.String(), err
}

// TestCodexThroughRelayToChatUpstream: Codex CLI, which speaks only the
// Responses API, asks the relay for an alias whose target speaks only Chat
// Completions, and prints the simulator's answer.
func TestCodexThroughRelayToChatUpstream(t *testing.T) {
	codex := requireNodeTool(t, filepath.Join(".bin", "codex"), "Codex CLI")
	logFile := startRelay(t, `llm_relay {
		key sk-relay-codex
		upstream simchat `+simV1+` {
			api chat
		}
		model relay-codex {
			to simchat sim-reasoner
		}
	}`, clientsSimSite)
	_, want := directChat(t, simV1)

	stdout, stderr, err := runCodex(t, codex, relayBase+"/v1", "sk-relay-codex", "relay-codex", "Say hi")
	if err != nil || strings.TrimSpace(stdout) != strings.TrimSpace(want) {
		t.Fatalf("codex exec (%v) printed\n%q\nwant the simulator's answer\n%q\nstderr: %s\nrelay log:\n%s", err, stdout, want, stderr, readLog(t, logFile))
	}
	var relayed []string
	for _, line := range strings.Split(readLog(t, logFile), "\n") {
		if strings.Contains(line, `"msg":"relayed"`) {
			relayed = append(relayed, line)
		}
	}
	if len(relayed) != 1 || !strings.Contains(relayed[0], `"upstream":"simchat"`) || !strings.Contains(relayed[0], `"api":"responses"`) ||
		!strings.Contains(relayed[0], `"status":200`) || strings.Contains(relayed[0], `"stream_error"`) {
		t.Fatalf("want one clean streamed Responses request translated for simchat; the relay logged:\n%s", strings.Join(relayed, "\n"))
	}
}
