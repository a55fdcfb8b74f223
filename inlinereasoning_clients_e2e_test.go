package llmrelay_test

// Inline reasoning (issue 27) through the official Node clients and the
// real CLIs: the openai npm client (e2e/node/tagged.mjs: Chat Completions
// and Responses), @anthropic-ai/sdk (e2e/node/messages.mjs), Claude Code
// and Codex CLI, in front of the tagged simulators of
// inlinereasoning_e2e_test.go. Same skip rule as the other Node tests.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// taggedNodeResult is the JSON line e2e/node/tagged.mjs prints.
type taggedNodeResult struct {
	ReasoningContent    string   `json:"reasoning_content"`
	Reasoning           string   `json:"reasoning"`
	HasReasoningContent bool     `json:"has_reasoning_content"`
	HasReasoning        bool     `json:"has_reasoning"`
	Content             string   `json:"content"`
	EventsContent       *string  `json:"events_content"`
	FinishReason        string   `json:"finish_reason"`
	Chunks              int      `json:"chunks"`
	Items               []string `json:"items"`
	Summary             string   `json:"summary"`
	Text                string   `json:"text"`
	OutputText          string   `json:"output_text"`
	EventsSummary       string   `json:"events_summary"`
	SummaryEvents       int      `json:"summary_events"`
	EventsText          string   `json:"events_text"`
	TextEvents          int      `json:"text_events"`
	Error               *struct {
		Status  int    `json:"status"`
		Name    string `json:"name"`
		Message string `json:"message"`
	} `json:"error"`
}

// runTaggedNode runs tagged.mjs with a HOME of its own and nothing of this
// process's environment but PATH; an error report fails the test.
func runTaggedNode(t *testing.T, node, model, call string) taggedNodeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("e2e", "node", "tagged.mjs"), relayBase+"/v1", taggedKey, model, call)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NO_COLOR=1"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("node tagged.mjs %s %s timed out\nstdout: %s\nstderr: %s", model, call, stdout.String(), stderr.String())
	}
	var res taggedNodeResult
	if jerr := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); jerr != nil {
		t.Fatalf("node tagged.mjs %s %s (%v): output is not one JSON line: %v\nstdout: %s\nstderr: %s", model, call, err, jerr, stdout.String(), stderr.String())
	}
	if err != nil || res.Error != nil {
		t.Fatalf("node tagged.mjs %s %s: %v %+v\nstderr: %s", model, call, err, res.Error, stderr.String())
	}
	return res
}

// requireNode is node, once e2e/node/node_modules has pkg (else the test
// is skipped, see requireNodeTool).
func requireNode(t *testing.T, pkg, what string) string {
	t.Helper()
	requireNodeTool(t, filepath.Join(pkg, "package.json"), what)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node_modules is installed but node is not on PATH: %v", err)
	}
	return node
}

// TestInlineReasoningOpenAINode: the openai npm client, Chat Completions
// (create, a raw stream, the stream helper) and Responses (create, the
// stream helper), reads a tagged model's reasoning where each reads
// reasoning and the answer alone as the text.
func TestInlineReasoningOpenAINode(t *testing.T) {
	node := requireNode(t, "openai", "the openai Node SDK")
	startRelay(t, taggedRelay, taggedSimSite)
	_, wantR, answer := taggedTexts(t)

	t.Run("chat", func(t *testing.T) {
		for _, tc := range []struct{ model, field string }{
			{"tagged", ""},
			{"unopened", ""},
			{"per-target-unopened", ""},
			{"tagged-reasoning", "reasoning"},
			{"unopened-both", "both"},
			{"tagged-inline", "inline"},
			{"unopened-inline", "inline"},
		} {
			for _, call := range []string{"chat-create", "chat-stream", "chat-stream", "chat-helper"} {
				what := tc.model + " " + call
				got := runTaggedNode(t, node, tc.model, call)
				if got.FinishReason != "stop" {
					t.Errorf("%s: finish_reason %q", what, got.FinishReason)
				}
				if call != "chat-create" && got.Chunks < 16 {
					t.Errorf("%s: %d chunks; want the stream delta by delta", what, got.Chunks)
				}
				if got.EventsContent != nil && *got.EventsContent != got.Content {
					t.Errorf("%s: content.delta events %q, final content %q", what, *got.EventsContent, got.Content)
				}
				switch tc.field {
				case "inline":
					want := "<think>\n" + wantR + "</think>\n\n" + answer
					if got.Content != want || got.HasReasoningContent || got.HasReasoning {
						t.Errorf("%s: content %q, reasoning members %v %v;\nwant content %q and no reasoning member", what, got.Content, got.HasReasoningContent, got.HasReasoning, want)
					}
					continue
				case "":
					if got.ReasoningContent != wantR || got.HasReasoning {
						t.Errorf("%s: reasoning_content %q (reasoning there: %v);\nwant reasoning_content %q alone", what, got.ReasoningContent, got.HasReasoning, wantR)
					}
				case "reasoning":
					if got.Reasoning != wantR || got.HasReasoningContent {
						t.Errorf("%s: reasoning %q (reasoning_content there: %v);\nwant reasoning %q alone", what, got.Reasoning, got.HasReasoningContent, wantR)
					}
				case "both":
					if got.Reasoning != wantR || got.ReasoningContent != wantR {
						t.Errorf("%s: reasoning %q, reasoning_content %q; want both %q", what, got.Reasoning, got.ReasoningContent, wantR)
					}
				}
				if got.Content != answer || hasTag(got.Content) {
					t.Errorf("%s: content %q;\nwant the answer alone %q", what, got.Content, answer)
				}
			}
		}
	})

	t.Run("responses", func(t *testing.T) {
		for _, model := range []string{"tagged", "unopened"} {
			for _, call := range []string{"responses-create", "responses-stream", "responses-stream"} {
				what := model + " " + call
				got := runTaggedNode(t, node, model, call)
				if strings.Join(got.Items, ",") != "reasoning,message" {
					t.Errorf("%s: output items %v; want a reasoning item, then a message", what, got.Items)
				}
				if got.Summary != wantR {
					t.Errorf("%s: reasoning summary %q;\nwant %q", what, got.Summary, wantR)
				}
				if got.Text != answer || got.OutputText != answer || hasTag(got.Text) {
					t.Errorf("%s: message text %q, output_text %q;\nwant the answer alone %q", what, got.Text, got.OutputText, answer)
				}
				if call == "responses-stream" && (got.EventsSummary != wantR || got.EventsText != answer || got.SummaryEvents < 2 || got.TextEvents < 2) {
					t.Errorf("%s: events: summary %q (%d), text %q (%d);\nwant %q and %q, delta by delta", what, got.EventsSummary, got.SummaryEvents, got.EventsText, got.TextEvents, wantR, answer)
				}
			}
		}
	})
}

// TestInlineReasoningAnthropicNode: @anthropic-ai/sdk's messages.create
// and messages.stream (thinking and text events, finalMessage) on
// /v1/messages, in front of the tagged Chat simulators: a thinking block
// with the reasoning, a text block with the answer.
func TestInlineReasoningAnthropicNode(t *testing.T) {
	node := requireNode(t, filepath.Join("@anthropic-ai", "sdk"), "the Anthropic Node SDK")
	startRelay(t, taggedRelay, taggedSimSite)
	_, wantR, answer := taggedTexts(t)
	for _, model := range []string{"tagged", "unopened"} {
		for _, call := range []string{"create", "stream", "stream"} {
			what := model + " " + call
			got, code := runMessagesNode(t, node, relayBase, taggedKey, model, call, "thinking")
			if code != 0 {
				t.Fatalf("%s: exit %d: %+v", what, code, got.Error)
			}
			if got.Thinking != wantR || got.Text != answer || hasTag(got.Text) || got.StopReason != "end_turn" {
				t.Errorf("%s: thinking %q text %q stop %q;\nwant thinking %q text %q end_turn", what, got.Thinking, got.Text, got.StopReason, wantR, answer)
			}
			if call == "stream" && (got.EventsThinking != wantR || got.EventsText != answer || got.ThinkingEvents < 2 || got.TextEvents < 2) {
				t.Errorf("%s: events: thinking %q (%d), text %q (%d);\nwant %q and %q, delta by delta", what, got.EventsThinking, got.ThinkingEvents, got.EventsText, got.TextEvents, wantR, answer)
			}
		}
	}
}

// claudeStreamed is what `claude -p --output-format stream-json --verbose`
// prints: the assistant messages' thinking and text blocks, and the result.
type claudeStreamed struct {
	thinking, text []string
	result         claudeResult
	hasResult      bool
}

// runClaudeStreamJSON runs Claude Code as runClaude does (its own HOME,
// no telemetry, no retries, nothing else of this environment), with
// stream-json output, which shows each message's blocks.
func runClaudeStreamJSON(t *testing.T, claude, key, model, prompt string) (claudeStreamed, string) {
	t.Helper()
	stdout, stderr, err := execClaude(t, claude, relayBase, key, model, prompt, "--output-format", "stream-json", "--verbose")
	var out claudeStreamed
	for _, line := range strings.Split(stdout, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		var ev struct {
			Type    string `json:"type"`
			Message struct {
				Content []struct {
					Type     string `json:"type"`
					Text     string `json:"text"`
					Thinking string `json:"thinking"`
				} `json:"content"`
			} `json:"message"`
		}
		if jerr := json.Unmarshal([]byte(line), &ev); jerr != nil {
			t.Fatalf("claude stream-json line %q: %v\nstderr: %s", line, jerr, stderr)
		}
		switch ev.Type {
		case "assistant":
			for _, b := range ev.Message.Content {
				switch b.Type {
				case "thinking":
					out.thinking = append(out.thinking, b.Thinking)
				case "text":
					out.text = append(out.text, b.Text)
				}
			}
		case "result":
			if jerr := json.Unmarshal([]byte(line), &out.result); jerr != nil {
				t.Fatalf("claude result %q: %v", line, jerr)
			}
			out.hasResult = true
		}
	}
	if !out.hasResult {
		t.Fatalf("claude (%v) printed no result\nstdout: %s\nstderr: %s", err, stdout, stderr)
	}
	return out, stderr
}

// TestInlineReasoningClaudeCode: Claude Code, asking the relay for models
// whose Chat target writes its reasoning between tags (Qwen3's form and
// DeepSeek-R1's), prints the answer alone; the message it shows in
// stream-json has the reasoning as a thinking block.
func TestInlineReasoningClaudeCode(t *testing.T) {
	claude := requireNodeTool(t, filepath.Join(".bin", "claude"), "Claude Code")
	logFile := startRelay(t, taggedRelay, taggedSimSite)
	_, wantR, answer := taggedTexts(t)
	for _, model := range []string{"tagged", "unopened"} {
		got, stderr := runClaudeStreamJSON(t, claude, taggedKey, model, "Say hi")
		if r := got.result; r.Subtype != "success" || r.IsError {
			t.Fatalf("%s: claude result %+v; want a success\nstderr: %s\nrelay log:\n%s", model, r, stderr, readLog(t, logFile))
		}
		if got.result.Result != answer || hasTag(got.result.Result) {
			t.Errorf("%s: claude printed %q;\nwant the answer alone %q", model, got.result.Result, answer)
		}
		if strings.Join(got.text, "") != answer || strings.Join(got.thinking, "") != wantR {
			t.Errorf("%s: claude's message: thinking %q, text %q;\nwant thinking %q, text %q", model, got.thinking, got.text, wantR, answer)
		}
	}
}

// TestInlineReasoningCodex: Codex CLI (Responses API), asking the relay
// for models whose Chat target writes its reasoning between tags, prints
// the answer alone on stdout, and the reasoning, which it shows as its
// thinking, on stderr.
func TestInlineReasoningCodex(t *testing.T) {
	codex := requireNodeTool(t, filepath.Join(".bin", "codex"), "Codex CLI")
	logFile := startRelay(t, taggedRelay, taggedSimSite)
	_, wantR, answer := taggedTexts(t)
	for _, model := range []string{"tagged", "unopened"} {
		stdout, stderr, err := runCodex(t, codex, relayBase+"/v1", taggedKey, model, "Say hi")
		if err != nil || strings.TrimSpace(stdout) != strings.TrimSpace(answer) || hasTag(stdout) {
			t.Errorf("%s: codex exec (%v) printed\n%q\nwant the answer alone\n%q\nstderr: %s\nrelay log:\n%s", model, err, stdout, answer, stderr, readLog(t, logFile))
		}
		// Codex prints its thinking on stderr, then "codex" and the answer.
		thought, said := strings.Index(stderr, strings.TrimSpace(wantR)), strings.LastIndex(stderr, "codex\n"+answer)
		if hasTag(stderr) || thought < 0 || said < thought {
			t.Errorf("%s: codex's stderr %q;\nwant the reasoning %q, without tags, before the answer", model, stderr, wantR)
		}
	}
}
