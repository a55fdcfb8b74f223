package llmrelay_test

// The baton pass (issue 28) through the real clients: the official Node
// SDKs (e2e/node/handoff.mjs: openai's Chat Completions and Responses,
// @anthropic-ai/sdk's Messages), Claude Code and Codex CLI, asking the
// relay for a hand-off alias. The answer legs are the echo simulator of
// handoff_e2e_test.go, whose answer is the reasoning it found injected
// ("handoff:<where>:<reasoning>"), so one printed answer shows the client
// took the reasoning leg's reasoning as reasoning and the answer leg's
// answer as the answer; and, for the tool-use turns, scripted fake
// upstreams that ask for a tool and then check the next turn's history.
// Same skip rule as the other Node tests (RELAY_REQUIRE_NODE).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/handoff"
)

// handoffNodeResult is the JSON line e2e/node/handoff.mjs prints.
type handoffNodeResult struct {
	Reasoning       string          `json:"reasoning"`
	Answer          string          `json:"answer"`
	Finish          string          `json:"finish"`
	Model           string          `json:"model"`
	IDs             []string        `json:"ids"`
	Models          []string        `json:"models"`
	Parts           []string        `json:"parts"`
	Roles           int             `json:"roles"`
	Chunks          int             `json:"chunks"`
	EventsReasoning *string         `json:"events_reasoning"`
	EventsAnswer    *string         `json:"events_answer"`
	Signature       *string         `json:"signature"`
	Usage           json.RawMessage `json:"usage"`
	Error           *struct {
		Status  int    `json:"status"`
		Name    string `json:"name"`
		Message string `json:"message"`
	} `json:"error"`
}

// runHandoffNode runs handoff.mjs with a HOME of its own and nothing of
// this process's environment but PATH; an error report fails the test.
func runHandoffNode(t *testing.T, node, model, call string) handoffNodeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("e2e", "node", "handoff.mjs"), relayBase, taggedKey, model, call)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NO_COLOR=1"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("node handoff.mjs %s %s timed out\nstdout: %s\nstderr: %s", model, call, stdout.String(), stderr.String())
	}
	var res handoffNodeResult
	if jerr := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); jerr != nil {
		t.Fatalf("node handoff.mjs %s %s (%v): output is not one JSON line: %v\nstdout: %s\nstderr: %s", model, call, err, jerr, stdout.String(), stderr.String())
	}
	if err != nil || res.Error != nil {
		t.Fatalf("node handoff.mjs %s %s: %v %+v\nstderr: %s", model, call, err, res.Error, stderr.String())
	}
	return res
}

// TestHandoffNodeSDKs: the openai npm client (Chat Completions: create, a
// raw stream, the stream helper; Responses: create, the stream helper)
// and @anthropic-ai/sdk (messages.create, messages.stream) read a
// hand-off as one response: the reasoning leg's reasoning where each
// reads reasoning (reasoning_content, a reasoning item, a thinking
// block), then the answer leg's echo of exactly that reasoning as the
// answer; one id, the alias as the model, one role delta.
func TestHandoffNodeSDKs(t *testing.T) {
	requireNode(t, "openai", "the openai Node SDK")
	node := requireNode(t, filepath.Join("@anthropic-ai", "sdk"), "the Anthropic Node SDK")
	startRelay(t, handoffRelay, handoffSimSite)
	reasoning := handoffReasoning(t)
	finish := map[string]string{"chat": "stop", "responses": "completed", "messages": "end_turn"}
	for _, tc := range handoffCases {
		want := echoOf(tc.where, reasoning)
		for _, call := range []string{"chat-create", "chat-stream", "chat-helper", "responses-create", "responses-stream", "messages-create", "messages-stream"} {
			what := tc.model + " " + call
			api, _, _ := strings.Cut(call, "-")
			got := runHandoffNode(t, node, tc.model, call)
			if got.Reasoning != reasoning {
				t.Errorf("%s: reasoning %q;\nwant the reasoning leg's %q", what, got.Reasoning, reasoning)
			}
			if got.Answer != want {
				t.Errorf("%s: answer %q;\nwant the answer leg's %q", what, got.Answer, want)
			}
			if !slices.Equal(got.Parts, []string{"reasoning", "answer"}) {
				t.Errorf("%s: output parts %v; want the reasoning, then the answer", what, got.Parts)
			}
			if got.Finish != finish[api] {
				t.Errorf("%s: finish %q; want %q", what, got.Finish, finish[api])
			}
			if got.Model != tc.model || len(got.Models) > 1 {
				t.Errorf("%s: model %q (all named: %v); want the alias alone", what, got.Model, got.Models)
			}
			if len(got.IDs) != 1 || got.IDs[0] == "" {
				t.Errorf("%s: ids %v; want the one response's id throughout", what, got.IDs)
			}
			if call == "chat-stream" && got.Roles != 1 {
				t.Errorf("%s: %d deltas carry a role; want one (the answer leg's own role chunk is dropped)", what, got.Roles)
			}
			if strings.HasSuffix(call, "-stream") || call == "chat-helper" {
				if got.Chunks < 8 {
					t.Errorf("%s: %d chunks/events; want the stream delta by delta", what, got.Chunks)
				}
				if got.EventsAnswer != nil && *got.EventsAnswer != want {
					t.Errorf("%s: the helper's text events say %q;\nwant %q", what, *got.EventsAnswer, want)
				}
				if got.EventsReasoning != nil && *got.EventsReasoning != reasoning {
					t.Errorf("%s: the helper's reasoning events say %q;\nwant %q", what, *got.EventsReasoning, reasoning)
				}
			}
			if api != "chat" || call == "chat-stream" || call == "chat-create" {
				var u map[string]any
				if json.Unmarshal(got.Usage, &u) != nil || len(u) == 0 {
					t.Errorf("%s: usage %s; want both legs' tokens", what, got.Usage)
				}
			}
		}
	}
}

// TestHandoffClaudeCode: Claude Code, asking for hand-off aliases (the
// reasoning as a prefill on an `api anthropic` answer target, in the user
// turn or the system prompt of a Chat one), prints the answer leg's
// answer, and shows the reasoning leg's reasoning as the message's
// thinking block.
func TestHandoffClaudeCode(t *testing.T) {
	claude := requireNodeTool(t, filepath.Join(".bin", "claude"), "Claude Code")
	logFile := startRelay(t, handoffRelay, handoffSimSite)
	reasoning := handoffReasoning(t)
	for _, tc := range handoffCases {
		got, stderr := runClaudeStreamJSON(t, claude, taggedKey, tc.model, "Say hi")
		if r := got.result; r.Subtype != "success" || r.IsError {
			t.Errorf("%s: claude result %+v; want a success\nstderr: %s\nrelay log:\n%s", tc.model, r, stderr, readLog(t, logFile))
			continue
		}
		want := echoOf(tc.where, reasoning)
		if got.result.Result != want {
			t.Errorf("%s: claude printed %q;\nwant the answer leg's %q", tc.model, got.result.Result, want)
		}
		if strings.Join(got.thinking, "") != reasoning || strings.Join(got.text, "") != want {
			t.Errorf("%s: claude's message: thinking %q, text %q;\nwant thinking %q, text %q", tc.model, got.thinking, got.text, reasoning, want)
		}
	}
}

// handoffToolMarker is the text of the file the tool-use turns have the
// clients read or print: the next turn's tool result must carry it.
const handoffToolMarker = "baton-marker-7c1f"

// msgsRequest is the part of a Messages request the scripted answer
// upstream reads.
type msgsRequest struct {
	Thinking          json.RawMessage `json:"thinking"`
	ContextManagement *struct {
		Edits []struct {
			Type string `json:"type"`
		} `json:"edits"`
	} `json:"context_management"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// msgsBlock is a content block of a Messages turn.
type msgsBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

func (m *msgsRequest) blocks(i int) []msgsBlock {
	var bs []msgsBlock
	if json.Unmarshal(m.Messages[i].Content, &bs) != nil {
		var s string
		_ = json.Unmarshal(m.Messages[i].Content, &s)
		bs = []msgsBlock{{Type: "text", Text: s}}
	}
	return bs
}

// thinkingOn reports a request that asks the model to think.
func (m *msgsRequest) thinkingOn() bool {
	var th struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(m.Thinking, &th)
	return th.Type == "enabled" || th.Type == "adaptive"
}

// anthropicRefusal is what Anthropic's API says, as a 400
// invalid_request_error, of a request it refuses and a hand-off could
// send: a thinking block it did not sign (the hand-off's reasoning, which
// the client keeps in its history), a clear_thinking context edit with
// thinking off (the answer leg is not asked to think), a prefill with
// thinking on. "": accepted.
func anthropicRefusal(m *msgsRequest) string {
	for i, msg := range m.Messages {
		if msg.Role != "assistant" {
			continue
		}
		for j, b := range m.blocks(i) {
			if b.Type == "thinking" || b.Type == "redacted_thinking" {
				return fmt.Sprintf("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
			}
		}
	}
	if cm := m.ContextManagement; cm != nil && !m.thinkingOn() {
		for _, e := range cm.Edits {
			if strings.HasPrefix(e.Type, "clear_thinking") {
				return "`" + e.Type + "` strategy requires `thinking` to be enabled or adaptive"
			}
		}
	}
	if n := len(m.Messages); n > 0 && m.Messages[n-1].Role == "assistant" && m.thinkingOn() {
		return "Expected `thinking` or `redacted_thinking`, but found `text`. When `thinking` is enabled, a final `assistant` message must start with a thinking block."
	}
	return ""
}

// toolResult is the text of the tool_result blocks of turn i.
func (m *msgsRequest) toolResult(i int) (id, text string) {
	for _, b := range m.blocks(i) {
		if b.Type != "tool_result" {
			continue
		}
		id = b.ToolUseID
		var s string
		if json.Unmarshal(b.Content, &s) == nil {
			text += s
			continue
		}
		var parts []msgsBlock
		_ = json.Unmarshal(b.Content, &parts)
		for _, p := range parts {
			text += p.Text
		}
	}
	return id, text
}

// refusals is what a scripted upstream refused, for the test to show:
// a client may retry a refused turn in a shape of its own (Claude Code
// drops thinking blocks after a signature error), which hides the refusal
// from its output.
type refusals struct {
	mu   sync.Mutex
	msgs []string
}

func (r *refusals) add(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, msg)
}

func (r *refusals) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

// claudeToolUpstream is an `api anthropic` answer leg for Claude Code's
// tool-use turn: it refuses what Anthropic refuses (anthropicRefusal);
// asked without a tool result it calls Read on file; given the result, it
// answers "read: <the result's text>".
func claudeToolUpstream(t *testing.T, file string, refused *refusals) *fakeUpstream {
	var up *fakeUpstream
	up = newFakeUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		raw, _ := json.Marshal(up.requests()[n-1].body)
		var m msgsRequest
		if err := json.Unmarshal(raw, &m); err != nil || len(m.Messages) == 0 {
			answerJSON(w, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: Field required"}}`)
			return
		}
		if msg := anthropicRefusal(&m); msg != "" {
			refused.add(fmt.Sprintf("request %d: %s", n, msg))
			b, _ := json.Marshal(msg)
			answerJSON(w, 400, `{"type":"error","error":{"type":"invalid_request_error","message":`+string(b)+`}}`)
			return
		}
		last := len(m.Messages) - 1
		if m.Messages[last].Role == "assistant" {
			last-- // the hand-off's prefill
		}
		id := "msg_baton_" + strconv.Itoa(n)
		if _, text := m.toolResult(last); text != "" {
			writeMessagesStream(w, 0, okMessageStream(id, "read: "+text)...)
			return
		}
		input, _ := json.Marshal(map[string]string{"file_path": file})
		inputJSON, _ := json.Marshal(string(input))
		writeMessagesStream(w, 0,
			msgStart(id),
			msgEvent{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_baton_1","name":"Read","input":{}}}`},
			msgEvent{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":` + string(inputJSON) + `}}`},
			msgEvent{"content_block_stop", `{"type":"content_block_stop","index":0}`},
			msgEvent{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}`},
			msgEvent{"message_stop", `{"type":"message_stop"}`},
		)
	})
	return up
}

// TestHandoffClaudeCodeToolUse: Claude Code through a hand-off alias whose
// answer leg asks for a tool: Claude Code runs it (Read), and the next
// turn, whose history holds the hand-off's thinking block (unsigned: the
// relay wrote it), reaches the `api anthropic` answer target without it,
// with the tool's result and the new reasoning as a prefill; the answer
// upstream refuses what Anthropic refuses, so an unsigned thinking block,
// or a context edit that needs thinking on, fails the run.
func TestHandoffClaudeCodeToolUse(t *testing.T) {
	claude := requireNodeTool(t, filepath.Join(".bin", "claude"), "Claude Code")
	dir := t.TempDir()
	file := filepath.Join(dir, "baton.txt")
	if err := os.WriteFile(file, []byte(handoffToolMarker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var refused refusals
	up := claudeToolUpstream(t, file, &refused)
	logFile := startRelay(t, `llm_relay {
		key `+taggedKey+`
		upstream reasoner http://127.0.0.1:9087/reason/v1 {
			api chat
		}
		upstream claude `+up.v1()+` {
			api anthropic
		}
		model baton-tools {
			reason reasoner sim-r1
			to claude claude-up
		}
	}`, handoffSimSite)
	reasoning := handoffReasoning(t)

	stdout, stderr, err := execClaude(t, claude, relayBase, taggedKey, "baton-tools", "Read the file baton.txt and tell me what it says",
		"--output-format", "stream-json", "--verbose", "--add-dir", dir, "--allowedTools", "Read")
	seen := up.requests()
	if r := refused.list(); len(r) > 0 {
		t.Errorf("the answer upstream refused what Anthropic refuses:\n%s", strings.Join(r, "\n"))
	}
	if err != nil || len(seen) != 2 {
		t.Fatalf("claude (%v): the answer upstream saw %d requests; want the tool call's and the answer's\nstdout: %s\nstderr: %s\nrelay log:\n%s", err, len(seen), stdout, stderr, readLog(t, logFile))
	}
	var result claudeResult
	var thinking int
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var ev struct {
			Type    string `json:"type"`
			Message struct {
				Content []msgsBlock `json:"content"`
			} `json:"message"`
		}
		_ = json.Unmarshal([]byte(line), &ev)
		switch ev.Type {
		case "result":
			_ = json.Unmarshal([]byte(line), &result)
		case "assistant":
			for _, b := range ev.Message.Content {
				if b.Type == "thinking" {
					thinking++
				}
			}
		}
	}
	if result.IsError || !strings.Contains(result.Result, "read: ") || !strings.Contains(result.Result, handoffToolMarker) {
		t.Errorf("claude's result %+v; want the answer leg's read: <the file>\nstdout: %s", result, stdout)
	}
	if thinking < 2 {
		t.Errorf("claude showed %d thinking blocks; want the hand-off's reasoning on both turns\nstdout: %s", thinking, stdout)
	}

	prefill := handoff.Injected(reasoning, handoff.Prefill)
	for i, s := range seen {
		raw, _ := json.Marshal(s.body)
		var m msgsRequest
		_ = json.Unmarshal(raw, &m)
		n := len(m.Messages)
		if n == 0 || m.Messages[n-1].Role != "assistant" || len(m.blocks(n-1)) != 1 || m.blocks(n - 1)[0].Text != prefill {
			t.Errorf("request %d: want the reasoning leg's reasoning as the prefill, last; messages %s", i+1, raw)
		}
		if m.thinkingOn() {
			t.Errorf("request %d asks the answer leg to think: %s", i+1, m.Thinking)
		}
	}
	raw, _ := json.Marshal(seen[1].body)
	var second msgsRequest
	_ = json.Unmarshal(raw, &second)
	n := len(second.Messages)
	if n < 4 {
		t.Fatalf("the second turn has %d messages; want the prompt, the tool call, its result, the prefill: %s", n, raw)
	}
	calls := second.blocks(n - 3)
	if len(calls) != 1 || calls[0].Type != "tool_use" || calls[0].ID != "toolu_baton_1" {
		t.Errorf("the second turn's assistant turn is %+v; want the tool call alone (the thinking block removed)", calls)
	}
	if id, text := second.toolResult(n - 2); id != "toolu_baton_1" || !strings.Contains(text, handoffToolMarker) {
		t.Errorf("the second turn's tool result is %q for %q; want the file's text for toolu_baton_1", text, id)
	}
}

// runCodexQuiet is runCodex against the relay with the hand-off tests'
// key.
func runCodexQuiet(t *testing.T, codex, model, prompt string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return runCodex(t, codex, relayBase+"/v1", taggedKey, model, prompt, args...)
}

// TestHandoffCodex: Codex CLI (Responses API), asking for hand-off
// aliases, prints the answer leg's answer (the echo of the reasoning it
// was given at each inject position), after the reasoning leg's
// reasoning, which it shows as its thinking on stderr.
func TestHandoffCodex(t *testing.T) {
	codex := requireNodeTool(t, filepath.Join(".bin", "codex"), "Codex CLI")
	logFile := startRelay(t, handoffRelay, handoffSimSite)
	reasoning := handoffReasoning(t)
	for _, tc := range handoffCases {
		want := echoOf(tc.where, reasoning)
		stdout, stderr, err := runCodexQuiet(t, codex, tc.model, "Say hi")
		if err != nil || strings.TrimSpace(stdout) != want {
			t.Errorf("%s: codex exec (%v) printed\n%q\nwant the answer leg's\n%q\nstderr: %s\nrelay log:\n%s", tc.model, err, stdout, want, stderr, readLog(t, logFile))
			continue
		}
		thought, said := strings.Index(stderr, strings.TrimSpace(reasoning)), strings.LastIndex(stderr, "codex\n"+want)
		if thought < 0 || said < thought {
			t.Errorf("%s: codex's stderr %q;\nwant the reasoning %q, then the answer", tc.model, stderr, reasoning)
		}
	}
}

// respItem is an input item of a Responses request.
type respItem struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	CallID  string          `json:"call_id"`
	Name    string          `json:"name"`
	Output  json.RawMessage `json:"output"`
}

// respRequest is the part of a Responses request the scripted answer
// upstream reads.
type respRequest struct {
	Reasoning json.RawMessage `json:"reasoning"`
	Include   []string        `json:"include"`
	Input     []respItem      `json:"input"`
}

// outputText is a function_call_output's output: a string, or text parts.
func (it respItem) outputText() string {
	var s string
	if json.Unmarshal(it.Output, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(it.Output, &parts)
	for _, p := range parts {
		s += p.Text
	}
	return s
}

// openAIRefusal is what OpenAI's Responses API says, as a 400, of a
// request to a model that does not reason (gpt-4.1, the kind an answer
// leg is), which a hand-off could send: a reasoning item it did not make
// (the hand-off's, which Codex keeps in its history; with store false
// OpenAI has none stored, and no encrypted content of its own to read),
// reasoning settings, or the reasoning's encrypted content asked for
// (Codex asks on every request). "": accepted.
func openAIRefusal(r *respRequest) string {
	if len(r.Reasoning) > 0 && string(r.Reasoning) != "null" {
		return "Unsupported parameter: 'reasoning' is not supported with this model."
	}
	if slices.Contains(r.Include, "reasoning.encrypted_content") {
		return "Encrypted content is not supported with this model."
	}
	for i, it := range r.Input {
		if it.Type == "reasoning" {
			return fmt.Sprintf("input[%d]: Item with id '%s' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.", i, it.ID)
		}
	}
	return ""
}

// functionCallStream is a whole Responses stream calling name with args.
func functionCallStream(id, callID, name, args string) string {
	a, _ := json.Marshal(args)
	item := func(status, args string) string {
		return `{"type":"function_call","id":"fc_` + id + `","call_id":"` + callID + `","name":"` + name + `","arguments":` + args + `,"status":"` + status + `"}`
	}
	resp := func(status, output string) string {
		return `"response":{"id":"` + id + `","object":"response","created_at":1,"status":"` + status + `","model":"gpt-up","output":[` + output + `]`
	}
	return responsesEvent(0, "response.created", resp("in_progress", "")+"}") +
		responsesEvent(1, "response.output_item.added", `"output_index":0,"item":`+item("in_progress", `""`)) +
		responsesEvent(2, "response.function_call_arguments.delta", `"item_id":"fc_`+id+`","output_index":0,"delta":`+string(a)) +
		responsesEvent(3, "response.function_call_arguments.done", `"item_id":"fc_`+id+`","output_index":0,"arguments":`+string(a)) +
		responsesEvent(4, "response.output_item.done", `"output_index":0,"item":`+item("completed", string(a))) +
		responsesEvent(5, "response.completed", resp("completed", item("completed", string(a)))+
			`,"usage":{"input_tokens":40,"input_tokens_details":{"cached_tokens":0},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":49}}`)
}

// codexToolUpstream is an `api openai` answer leg (Responses) for Codex's
// tool-use turn: it refuses what OpenAI refuses of a model that does not
// reason (openAIRefusal); asked
// without a function_call_output it calls exec_command to print the
// marker; given the output, it answers "ran: <marker>" when the output
// holds the marker.
func codexToolUpstream(t *testing.T, refused *refusals) *fakeUpstream {
	var up *fakeUpstream
	up = newFakeUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		raw, _ := json.Marshal(up.requests()[n-1].body)
		var r respRequest
		if err := json.Unmarshal(raw, &r); err != nil {
			answerJSON(w, 400, `{"error":{"message":"input: not an array of items","type":"invalid_request_error","param":"input","code":null}}`)
			return
		}
		if msg := openAIRefusal(&r); msg != "" {
			refused.add(fmt.Sprintf("request %d: %s", n, msg))
			b, _ := json.Marshal(msg)
			answerJSON(w, 400, `{"error":{"message":`+string(b)+`,"type":"invalid_request_error","param":"input","code":null}}`)
			return
		}
		id := "resp_baton_" + strconv.Itoa(n)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, it := range r.Input {
			if it.Type == "function_call_output" {
				text := "ran: no marker"
				if strings.Contains(it.outputText(), handoffToolMarker) {
					text = "ran: " + handoffToolMarker
				}
				_, _ = io.WriteString(w, responsesStream(id, text))
				return
			}
		}
		args, _ := json.Marshal(map[string]string{"cmd": "echo " + handoffToolMarker})
		_, _ = io.WriteString(w, functionCallStream(id, "call_baton_1", "exec_command", string(args)))
	})
	return up
}

// TestHandoffCodexToolUse: Codex CLI through a hand-off alias whose answer
// leg (an `api openai` target, Responses, a model that does not reason)
// asks for a tool: Codex runs the command, and the next turn, whose
// history holds the hand-off's reasoning item (not OpenAI's: OpenAI
// refuses it), reaches the answer target without it, with the call, its
// output and the new reasoning; neither turn asks the answer leg for
// reasoning (settings, encrypted content), which such a model refuses.
func TestHandoffCodexToolUse(t *testing.T) {
	codex := requireNodeTool(t, filepath.Join(".bin", "codex"), "Codex CLI")
	var refused refusals
	up := codexToolUpstream(t, &refused)
	logFile := startRelay(t, `llm_relay {
		key `+taggedKey+`
		upstream reasoner http://127.0.0.1:9087/reason/v1 {
			api chat
		}
		upstream gpt `+up.v1()+` {
			api openai
		}
		model baton-tools {
			reason reasoner sim-r1
			to gpt gpt-4.1
		}
	}`, handoffSimSite)
	reasoning := handoffReasoning(t)

	stdout, stderr, err := runCodexQuiet(t, codex, "baton-tools", "Print the marker with echo")
	seen := up.requests()
	if r := refused.list(); len(r) > 0 {
		t.Errorf("the answer upstream refused what OpenAI refuses:\n%s", strings.Join(r, "\n"))
	}
	if err != nil || len(seen) != 2 || strings.TrimSpace(stdout) != "ran: "+handoffToolMarker {
		t.Fatalf("codex exec (%v) printed %q; want ran: %s, and the answer upstream saw %d requests; want the tool call's and the answer's\nstderr: %s\nrelay log:\n%s",
			err, stdout, handoffToolMarker, len(seen), stderr, readLog(t, logFile))
	}
	if !strings.Contains(stderr, strings.TrimSpace(reasoning)) {
		t.Errorf("codex's stderr %q;\nwant the reasoning %q shown as its thinking", stderr, reasoning)
	}

	injected := handoff.Injected(reasoning, handoff.User)
	for i, s := range seen {
		raw, _ := json.Marshal(s.body)
		var r respRequest
		_ = json.Unmarshal(raw, &r)
		n := len(r.Input)
		if n == 0 || r.Input[n-1].Role != "user" || !strings.Contains(string(r.Input[n-1].Content), mustJSONString(injected)) {
			t.Errorf("request %d: want the reasoning leg's reasoning in a user turn, last; input %s", i+1, raw)
		}
		if len(r.Reasoning) > 0 || len(r.Include) > 0 {
			t.Errorf("request %d asks the answer leg for reasoning: reasoning %s, include %v", i+1, r.Reasoning, r.Include)
		}
	}
	raw, _ := json.Marshal(seen[1].body)
	var second respRequest
	_ = json.Unmarshal(raw, &second)
	var call, output *respItem
	for i := range second.Input {
		switch it := &second.Input[i]; it.Type {
		case "function_call":
			call = it
		case "function_call_output":
			output = it
		}
	}
	if call == nil || call.CallID != "call_baton_1" || call.Name != "exec_command" {
		t.Errorf("the second turn's function call is %+v; want exec_command, call_baton_1", call)
	}
	if output == nil || output.CallID != "call_baton_1" || !strings.Contains(output.outputText(), handoffToolMarker) {
		t.Errorf("the second turn's function output is %+v; want the command's output for call_baton_1", output)
	}
}

// mustJSONString is s as a JSON string's contents (escaped, unquoted),
// to find it in raw JSON.
func mustJSONString(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// claudeReasoning is what claudeReasonerUpstream thinks.
const claudeReasoning = "The user greets; a greeting back will do."

// claudeReasonerUpstream is an `api anthropic` reasoning leg that does
// what Anthropic does with thinking.display: "omitted" (Claude Opus 4.7
// and later default to it) and "updates" (Claude Code sends it: only the
// short progress notes between tool calls get text) send the reasoning's
// thinking block with its signature and no text; "summarized", or no
// display, streams the text. Then it answers, which the relay must never
// forward.
func claudeReasonerUpstream(t *testing.T) *fakeUpstream {
	var up *fakeUpstream
	up = newFakeUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		var th struct {
			Type    string `json:"type"`
			Display string `json:"display"`
		}
		raw, _ := json.Marshal(up.requests()[n-1].body["thinking"])
		_ = json.Unmarshal(raw, &th)
		id := "msg_reasoner_" + strconv.Itoa(n)
		events := []msgEvent{msgStart(id)}
		i := 0
		if th.Type == "enabled" || th.Type == "adaptive" {
			events = append(events, msgEvent{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`})
			if th.Display != "omitted" && th.Display != "updates" {
				b, _ := json.Marshal(claudeReasoning)
				events = append(events, msgEvent{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":` + string(b) + `}}`})
			}
			events = append(events,
				msgEvent{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"c2lnbmVk"}}`},
				msgEvent{"content_block_stop", `{"type":"content_block_stop","index":0}`})
			i = 1
		}
		events = append(events,
			msgEvent{"content_block_start", `{"type":"content_block_start","index":` + itoa(i) + `,"content_block":{"type":"text","text":""}}`},
			textDelta(i, "the reasoner's own answer, never forwarded"),
			msgEvent{"content_block_stop", `{"type":"content_block_stop","index":` + itoa(i) + `}`},
			msgEvent{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":20}}`},
			msgEvent{"message_stop", `{"type":"message_stop"}`})
		writeMessagesStream(w, 0, events...)
	})
	return up
}

// TestHandoffClaudeCodeAnthropicReasoner: Claude Code through a hand-off
// whose reasoning leg is an `api anthropic` target: Claude Code asks for
// its thinking with a display ("updates"; "omitted" on some requests)
// that would leave the reasoning leg's thinking empty and nothing to hand
// off; the reasoning leg is asked for its thinking's text, which the
// client gets as thinking and the answer leg as its prefill.
func TestHandoffClaudeCodeAnthropicReasoner(t *testing.T) {
	claude := requireNodeTool(t, filepath.Join(".bin", "claude"), "Claude Code")
	reasoner := claudeReasonerUpstream(t)
	logFile := startRelay(t, `llm_relay {
		key `+taggedKey+`
		upstream claude-reasoner `+reasoner.v1()+` {
			api anthropic
		}
		upstream echo-claude http://127.0.0.1:9087/echo/v1 {
			api anthropic
		}
		model baton-claude {
			reason claude-reasoner claude-thinker
			to echo-claude sim-claude
		}
	}`, handoffSimSite)
	got, stderr := runClaudeStreamJSON(t, claude, taggedKey, "baton-claude", "Say hi")
	if r := got.result; r.Subtype != "success" || r.IsError {
		t.Fatalf("claude result %+v; want a success\nstderr: %s\nrelay log:\n%s", r, stderr, readLog(t, logFile))
	}
	seen := reasoner.requests()
	if len(seen) != 1 {
		t.Fatalf("the reasoning upstream saw %d requests; want one", len(seen))
	}
	th, _ := json.Marshal(seen[0].body["thinking"])
	if want := echoOf("prefill", claudeReasoning); got.result.Result != want {
		t.Errorf("claude printed %q;\nwant the answer leg's echo of the reasoning, %q (the reasoning leg was asked for thinking %s)", got.result.Result, want, th)
	}
	if strings.Join(got.thinking, "") != claudeReasoning {
		t.Errorf("claude showed thinking %q; want the reasoning leg's %q", got.thinking, claudeReasoning)
	}
}
