package llmrelay_test

// The official Node SDKs through the relay, across dialects:
// @anthropic-ai/sdk (e2e/node/messages.mjs) against the simulator as an
// `api anthropic` upstream and as an `api chat` upstream, and the openai
// npm client (e2e/node/stream.mjs) against the simulator as an
// `api anthropic` upstream. Same skip rule as the other Node tests.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// messagesResult is the JSON line e2e/node/messages.mjs prints.
type messagesResult struct {
	Text           string `json:"text"`
	Thinking       string `json:"thinking"`
	Signature      string `json:"signature"`
	StopReason     string `json:"stop_reason"`
	TextEvents     int    `json:"text_events"`
	EventsText     string `json:"events_text"`
	ThinkingEvents int    `json:"thinking_events"`
	EventsThinking string `json:"events_thinking"`
	Usage          *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
	FirstStop string `json:"first_stop"`
	ToolUse   *struct {
		ID    string         `json:"id"`
		Name  string         `json:"name"`
		Input map[string]any `json:"input"`
	} `json:"tool_use"`
	SecondToolUses int `json:"second_tool_uses"`
	InputTokens    int `json:"input_tokens"`
	Error          *struct {
		Status   int    `json:"status"`
		Type     string `json:"type"`
		Name     string `json:"name"`
		Message  string `json:"message"`
		APIError bool   `json:"api_error"`
	} `json:"error"`
}

// runMessagesNode runs messages.mjs with a HOME of its own and nothing of
// this process's environment but PATH, and decodes its one line of output.
// It returns the exit code too: 0, or 2 when the script reports an error.
func runMessagesNode(t *testing.T, node string, args ...string) (messagesResult, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join("e2e", "node", "messages.mjs")}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NO_COLOR=1"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("node %v timed out\nstdout: %s\nstderr: %s", args, stdout.String(), stderr.String())
	}
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("node %v: %v\nstderr: %s", args, err, stderr.String())
	}
	var res messagesResult
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); err != nil {
		t.Fatalf("node %v (exit %d): output is not one JSON line: %v\nstdout: %s\nstderr: %s", args, code, err, stdout.String(), stderr.String())
	}
	if code != 0 && res.Error == nil {
		t.Fatalf("node %v: exit %d without an error report\nstderr: %s", args, code, stderr.String())
	}
	return res, code
}

// directToolAnswer is the simulator's own tool-use round trip in Messages:
// the forced call and the answer to its result.
func directToolAnswer(t *testing.T, direct anthropic.Client) (use anthropic.ContentBlockUnion, answer string) {
	t.Helper()
	p := userParams("sim-reasoner")
	p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))}
	p.Tools = []anthropic.ToolUnionParam{weatherTool}
	p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}}
	m, err := sendMessage(direct, false, p)
	if err != nil {
		t.Fatalf("direct forced tool: %v", err)
	}
	call := partsOf(m)
	if len(call.toolUses) == 0 {
		t.Fatalf("the simulator answered a forced tool with %+v", call)
	}
	use = call.toolUses[0]
	p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{}}
	p.Messages = append(p.Messages, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "18°C and sunny", false)))
	return use, send(t, "direct after the tool result", direct, false, p).text
}

// TestAnthropicNodeSDKThroughRelay: @anthropic-ai/sdk's messages.create
// and messages.stream (text and thinking events, finalMessage), a tool-use
// round trip, countTokens and typed APIErrors, against both dialects of
// upstream; and the openai npm client against an Anthropic upstream.
func TestAnthropicNodeSDKThroughRelay(t *testing.T) {
	requireNodeTool(t, filepath.Join("@anthropic-ai", "sdk", "package.json"), "the Anthropic Node SDK")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node_modules is installed but node is not on PATH: %v", err)
	}
	cut := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		writeMessagesStream(w, 0, okMessageStream("msg_cut", "half an answer")[:4]...)
	})
	startRelay(t, sdkRelay(`upstream cut `+cut.v1()+` {
			api anthropic
		}
		model truncated {
			to cut
		}`), clientsSimSite)
	chatReasoning, chatContent := directChat(t, simV1)
	direct := directAnthropic()

	for _, tc := range []struct {
		name, model string
		translated  bool
	}{
		{"anthropic upstream", "claude-sim", false},
		{"chat upstream", "chat-sim", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantText, wantThinking, wantAnswer := chatContent, chatReasoning, chatContent
			var wantSignature string
			if !tc.translated {
				plain := send(t, "direct Messages request", direct, false, userParams("sim-reasoner"))
				thought := send(t, "direct Messages request with thinking", direct, false, withThinking(userParams("sim-reasoner")))
				wantText, wantThinking, wantSignature = plain.text, thought.thinking, thought.signature
				_, wantAnswer = directToolAnswer(t, direct)
			}
			run := func(call, flags string) messagesResult {
				t.Helper()
				res, code := runMessagesNode(t, node, relayBase, sdkKey, tc.model, call, flags)
				if code != 0 {
					t.Fatalf("%s %s: exit %d, error %+v", call, flags, code, res.Error)
				}
				return res
			}

			for _, call := range []string{"create", "stream"} {
				res := run(call, "")
				if res.Text != wantText || res.StopReason != "end_turn" || res.Usage == nil || res.Usage.OutputTokens <= 0 {
					t.Errorf("%s: text %q stop %q usage %+v;\nwant %q end_turn with usage", call, res.Text, res.StopReason, res.Usage, wantText)
				}
				if call == "stream" && (res.EventsText != wantText || res.TextEvents == 0) {
					t.Errorf("stream: %d text events carried %q, want %q", res.TextEvents, res.EventsText, wantText)
				}

				res = run(call, "thinking")
				if res.Thinking != wantThinking || res.Text != wantText {
					t.Errorf("%s with thinking: thinking %q text %q;\nwant %q and %q", call, res.Thinking, res.Text, wantThinking, wantText)
				}
				if !tc.translated && res.Signature != wantSignature {
					t.Errorf("%s with thinking: signature %q, want the upstream's %q", call, res.Signature, wantSignature)
				}
				if call == "stream" && (res.EventsThinking != wantThinking || res.ThinkingEvents == 0) {
					t.Errorf("stream with thinking: %d thinking events carried %q, want %q", res.ThinkingEvents, res.EventsThinking, wantThinking)
				}
			}

			for _, flags := range []string{"", "stream"} {
				res := run("tools", flags)
				if res.FirstStop != "tool_use" || res.ToolUse == nil || res.ToolUse.Name != "get_weather" || res.ToolUse.ID == "" || res.ToolUse.Input == nil {
					t.Fatalf("tools %q: first turn stop %q, tool_use %+v; want get_weather with an id and an object input", flags, res.FirstStop, res.ToolUse)
				}
				if res.StopReason != "end_turn" || res.SecondToolUses != 0 || res.Text != wantAnswer {
					t.Errorf("tools %q: answer %q stop %q (%d tool uses); want %q end_turn", flags, res.Text, res.StopReason, res.SecondToolUses, wantAnswer)
				}
			}

			if res := run("count", ""); res.InputTokens <= 0 {
				t.Errorf("count: %+v", res)
			}
		})
	}

	for _, tc := range []struct {
		name, model, key, call string
		status                 int
		typ, class             string
	}{
		{"unknown model", "no-such-model", sdkKey, "create", 404, "not_found_error", "NotFoundError"},
		{"unknown model, streaming", "no-such-model", sdkKey, "stream", 404, "not_found_error", "NotFoundError"},
		{"wrong key", "claude-sim", "sk-wrong", "create", 401, "authentication_error", "AuthenticationError"},
		{"every target fails", "down", sdkKey, "stream", 502, "api_error", "InternalServerError"},
	} {
		res, code := runMessagesNode(t, node, relayBase, tc.key, tc.model, tc.call)
		if e := res.Error; code != 2 || e == nil || !e.APIError || e.Status != tc.status || e.Type != tc.typ || e.Name != tc.class {
			t.Errorf("%s: exit %d, error %+v; want an APIError %s %d %s", tc.name, code, res.Error, tc.class, tc.status, tc.typ)
		}
	}
	// An error event after the commit point is raised by the stream.
	res, code := runMessagesNode(t, node, relayBase, sdkKey, "truncated", "stream")
	if e := res.Error; code != 2 || e == nil || !e.APIError || e.Type != "api_error" || res.EventsText != "half an answer" {
		t.Errorf("truncated stream: exit %d, %+v; want an APIError api_error after the text that arrived", code, res)
	}

	// The openai npm client, asking for a model whose target speaks
	// Messages, gets the simulator's Messages answer as Chat Completions.
	plain := send(t, "direct Messages request", direct, false, userParams("sim-reasoner"))
	for _, call := range []string{"stream", "create"} {
		r, code := runNode(t, node, relayBase+"/v1", sdkKey, "claude-sim", "", call)
		if code != 0 || r.Error != nil || r.Content != plain.text || r.FinishReason != "stop" || r.Usage == nil || r.Usage.CompletionTokens <= 0 {
			t.Errorf("openai npm %s against an anthropic upstream: exit %d, %+v; want content %q, stop, usage", call, code, r, plain.text)
		}
	}
	r, code := runNode(t, node, relayBase+"/v1", "sk-wrong", "claude-sim", "", "stream")
	if code != 2 || r.Error == nil || r.Error.Status != 401 {
		t.Errorf("openai npm with a wrong key: exit %d, error %+v; want a 401 APIError", code, r.Error)
	}
}

// heartbeatRelay is a relay in front of a fake Anthropic upstream that
// pauses before its first content and between two text deltas ("Hel",
// "lo"), with early_commit and heartbeats short enough that the client
// sees `: keep-alive` comments in both places. It checks the raw stream
// once and returns the upstream.
func heartbeatRelay(t *testing.T) *fakeUpstream {
	t.Helper()
	slow := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		// writeMessagesStream would set the status once per call.
		write := func(events ...msgEvent) {
			for _, e := range events {
				_, _ = io.WriteString(w, "event: "+e.typ+"\ndata: "+e.data+"\n\n")
			}
			w.(http.Flusher).Flush()
		}
		w.Header().Set("Content-Type", "text/event-stream")
		write(msgStart("msg_slow"), msgEvent{"ping", `{"type":"ping"}`})
		sleepOrGone(r, 600*time.Millisecond)
		write(msgEvent{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
			textDelta(0, "Hel"))
		sleepOrGone(r, 500*time.Millisecond)
		write(okMessageStream("msg_slow", "lo")[3:]...)
	})
	startRelay(t, `llm_relay {
		key `+sdkKey+`
		upstream slow `+slow.v1()+` {
			api anthropic
		}
		model claude-slow {
			to slow claude-up
		}
		smoothing off {
			early_commit 150ms
			heartbeat 100ms
		}
	}`)
	// The raw stream carries heartbeats in both places.
	raw := readAll(t, postMessages(t, `{"model":"claude-slow","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", sdkKey))
	first, last := strings.Index(raw, "text_delta"), strings.LastIndex(raw, "text_delta")
	if first < 0 || !strings.Contains(raw[:first], ": keep-alive\n\n") || !strings.Contains(raw[first:last], ": keep-alive\n\n") {
		t.Fatalf("want heartbeats before the first content and between the deltas:\n%s", raw)
	}
	return slow
}

// TestAnthropicNodeSDKAcceptsHeartbeats: @anthropic-ai/sdk skips the
// relay's `: keep-alive` comments, before the commit point and between
// deltas, and assembles the message whole.
func TestAnthropicNodeSDKAcceptsHeartbeats(t *testing.T) {
	requireNodeTool(t, filepath.Join("@anthropic-ai", "sdk", "package.json"), "the Anthropic Node SDK")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node_modules is installed but node is not on PATH: %v", err)
	}
	heartbeatRelay(t)
	res, code := runMessagesNode(t, node, relayBase, sdkKey, "claude-slow", "stream")
	if code != 0 || res.Text != "Hello" || res.EventsText != "Hello" || res.TextEvents != 2 || res.StopReason != "end_turn" {
		t.Fatalf("exit %d, %+v; want Hello in 2 text events, end_turn", code, res)
	}
}
