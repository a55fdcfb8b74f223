package llmrelay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// responsesNodeResult is the JSON line e2e/node/responses.mjs prints.
type responsesNodeResult struct {
	Text         string `json:"text"`
	Status       string `json:"status"`
	OutputTokens int    `json:"output_tokens"`
	Events       int    `json:"events"`
	Call         *struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"call"`
	Error *struct {
		Status  int    `json:"status"`
		Name    string `json:"name"`
		Message string `json:"message"`
	} `json:"error"`
}

func runResponsesNode(t *testing.T, node string, args ...string) responsesNodeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join("e2e", "node", "responses.mjs")}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NO_COLOR=1"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("node %v: %v\nstderr: %s", args, err, stderr.String())
	}
	var res responsesNodeResult
	if jerr := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); jerr != nil {
		t.Fatalf("node %v (%v): output is not one JSON line: %v\nstdout: %s\nstderr: %s", args, err, jerr, stdout.String(), stderr.String())
	}
	return res
}

// The openai npm client's Responses calls (create, a raw event stream, the
// responses.stream helper, a tool round trip) through the relay, against
// the simulator natively and translated for Chat and Anthropic upstreams;
// an unknown model is the SDK's typed NotFoundError.
func TestOpenAINodeResponses(t *testing.T) {
	requireNodeTool(t, filepath.Join("openai", "package.json"), "the openai Node SDK")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	startRelay(t, responsesRelay, clientsSimSite)
	_, want := directChat(t, simV1)
	v1 := relayBase + "/v1"
	for _, model := range []string{"native", "via-chat", "via-claude", "down-then-chat"} {
		for _, call := range []string{"create", "events", "stream", "tools"} {
			res := runResponsesNode(t, node, v1, "sk-relay-responses", model, call)
			if res.Error != nil || res.Text != want || res.Status != "completed" || res.OutputTokens == 0 {
				t.Errorf("%s %s: %+v (error %+v); want the text %q, completed, with usage", model, call, res, res.Error, want)
				continue
			}
			if (call == "events" || call == "stream") && res.Events == 0 {
				t.Errorf("%s %s: no text delta events", model, call)
			}
			if call == "tools" && (res.Call == nil || res.Call.Name != "get_weather") {
				t.Errorf("%s tools: call %+v", model, res.Call)
			}
		}
	}
	res := runResponsesNode(t, node, v1, "sk-relay-responses", "nope", "create")
	if res.Error == nil || res.Error.Status != 404 || res.Error.Name != "NotFoundError" {
		t.Errorf("unknown model: %+v", res.Error)
	}
}
