package llmrelay_test

// The request knobs clients already send (issue 29, section 1), through a
// real Caddy: relay.split_ratio from a Python standard-library client
// written as the published failover sample is, extra_body from the
// official openai Node SDK as a Node client that copied a Python sample
// sends it, to a strict upstream that refuses unknown parameters, and the
// split ratio measured on a backlogged simulator stream.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/sim"
)

// knobsSimSite runs the simulators on :9090: /sim/ a reasoning model,
// /fail/ one that answers every request 503, /backlog/ one whose bursts
// are large enough that both lanes of split-reasoning stay queued while
// the reasoning drains beside the answer.
const knobsSimSite = `http://127.0.0.1:9090 {
	handle /sim/* {
		llm_simulator {
			seed 29
			reasoning_tokens 60
			content_tokens 40
			reasoning_pattern clustered 15 200ms
			content_pattern clustered 10 150ms
		}
	}
	handle /fail/* {
		llm_simulator {
			fail 503
		}
	}
	handle /backlog/* {
		llm_simulator {
			seed 29
			reasoning_tokens 400
			content_tokens 400
			reasoning_pattern clustered 200 600ms
			content_pattern clustered 100 150ms
		}
	}
}`

const (
	knobsSeed      = 29
	knobsReasoning = 60
	knobsContent   = 40
)

// strictAllowed are the members a strict Chat upstream accepts, as
// OpenAI's own answer 400 "Unrecognized request argument supplied" to
// any other.
var strictAllowed = []string{"model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens",
	"temperature", "top_p", "reasoning_effort", "user", "tools", "tool_choice", "parallel_tool_calls", "response_format"}

// newStrictUpstream is a Chat upstream that refuses unknown members and
// otherwise streams a little reasoning and an answer.
func newStrictUpstream(t *testing.T) *fakeUpstream {
	var f *fakeUpstream
	f = newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		body := f.requests()[n-1].body
		for k := range body {
			if !slices.Contains(strictAllowed, k) {
				answerJSON(w, http.StatusBadRequest, `{"error":{"message":"Unrecognized request argument supplied: `+k+`","type":"invalid_request_error","param":null,"code":null}}`)
				return
			}
		}
		if body["stream"] != true {
			answerJSON(w, http.StatusOK, okCompletion)
			return
		}
		streamEvents(w, 0, reasoningChunk("Let me think it over. "), reasoningChunk("Yes."), chunk("The answer"), chunk(" is 4."),
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}`,
			"[DONE]")
	})
	return f
}

// knobsRelay offers the simulator behind a failing model (the failover
// loop's first choice), the strict upstream as Chat for every client
// dialect, and the backlogged simulator for the measure. Smoothing is off:
// the requests ask for split-reasoning themselves.
func knobsRelay(strict string) string {
	return `llm_relay {
	key sk-knobs
	upstream sim http://127.0.0.1:9090/sim/v1
	upstream down http://127.0.0.1:9090/fail/v1
	upstream backlog http://127.0.0.1:9090/backlog/v1
	upstream strict ` + strict + ` {
		api chat
	}
	smoothing off {
		reasoning_max_delay 3s
		reasoning_drain 1500ms
	}
	model primary {
		to down
	}
	model secondary {
		to sim sim-reasoner
	}
	model strict {
		to strict strict-model
	}
	model backlog {
		to backlog sim-reasoner
	}
	failover {
		backoff 1ms 1ms
	}
}`
}

// relayedLineWhere waits for the "relayed" log line of the request for alias
// that matches, and decodes it.
func relayedLineWhere(t *testing.T, logFile, alias string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	var found map[string]any
	waitFor(t, 5*time.Second, "relayed log line for "+alias, func() bool {
		for _, l := range strings.Split(readLog(t, logFile), "\n") {
			if !strings.Contains(l, `"msg":"relayed"`) {
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["alias"] == alias && match(m) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// pythonResult is the JSON line e2e/python/failover_split_ratio.py prints.
type pythonResult struct {
	Model        *string `json:"model"`
	Reasoning    string  `json:"reasoning"`
	Content      string  `json:"content"`
	FinishReason string  `json:"finish_reason"`
	Failures     []struct {
		Model  string `json:"model"`
		Status int    `json:"status"`
		Code   string `json:"code"`
	} `json:"failures"`
}

// TestPythonFailoverSplitRatio: the published sample's failover loop,
// written with Python's urllib, sends "relay": {"mode":
// "split-reasoning", "split_ratio": 0.35} with every request: the model
// whose upstream fails (a 5xx) and the one that does not exist (404) are passed over
// as the sample expects, and the third streams its whole answer, paced in
// split-reasoning with the ratio (the log line says so). Before
// split_ratio had a meaning, every model answered 400
// unsupported_relay_option and the loop failed on all of them.
func TestPythonFailoverSplitRatio(t *testing.T) {
	if testing.Short() {
		t.Skip("caddytest end-to-end test; skipped with -short")
	}
	python := requirePython(t)
	strict := newStrictUpstream(t)
	logFile := startRelay(t, knobsRelay(strict.v1()), knobsSimSite)
	if t.Failed() {
		t.FailNow()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, filepath.Join("e2e", "python", "failover_split_ratio.py"),
		relayBase+"/v1", "sk-knobs", "primary", "missing", "secondary")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("python: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var res pythonResult
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); err != nil {
		t.Fatalf("python output is not one JSON line: %v\n%s", err, stdout.String())
	}
	if res.Model == nil || *res.Model != "secondary" {
		t.Fatalf("the loop was answered by %v, want secondary: %s", res.Model, stdout.String())
	}
	if len(res.Failures) != 2 || res.Failures[0].Model != "primary" || res.Failures[0].Status < 500 ||
		res.Failures[1].Model != "missing" || res.Failures[1].Status != http.StatusNotFound || res.Failures[1].Code != "model_not_found" {
		t.Errorf("failures %+v, want primary 5xx then missing 404 model_not_found", res.Failures)
	}
	r, c := knobsReasoning, knobsContent
	wantR, wantC := sim.Texts(sim.Config{Seed: knobsSeed, ReasoningTokens: &r, ContentTokens: &c})
	if res.Reasoning != strings.Join(wantR, "") || res.Content != strings.Join(wantC, "") || res.FinishReason != "stop" {
		t.Errorf("answer differs from the simulator's:\nreasoning %q\ncontent   %q\nfinish %q", res.Reasoning, res.Content, res.FinishReason)
	}
	line := relayedLineWhere(t, logFile, "secondary", func(map[string]any) bool { return true })
	if line["smoothing"] != "split-reasoning" || line["split_ratio"] != 0.35 {
		t.Errorf("log line: smoothing %v, split_ratio %v; want split-reasoning, 0.35", line["smoothing"], line["split_ratio"])
	}
}

// TestNodeExtraBody: the official openai Node SDK, given extra_body
// literally in its create() params as a Node client copying a Python
// sample writes it, sends it in the body; the relay merges it, so
// reasoning_dispersion asks for split-reasoning and relay.split_ratio
// applies (the log line says so), and the strict upstream, which refuses
// unknown members, sees neither extra_body nor the relay's knobs: Chat
// and Responses (translated to Chat) alike. Messages and count_tokens
// merge it the same way, and an extra_body that is not an object is a
// 400 in the client's dialect, naming it.
func TestNodeExtraBody(t *testing.T) {
	node := requireNode(t, "openai", "the openai Node SDK")
	strict := newStrictUpstream(t)
	logFile := startRelay(t, knobsRelay(strict.v1()), knobsSimSite)
	if t.Failed() {
		t.FailNow()
	}
	for _, api := range []string{"chat", "responses"} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, node, filepath.Join("e2e", "node", "extrabody.mjs"), relayBase+"/v1", "sk-knobs", "strict", api)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		var res struct {
			Reasoning, Content string
			Error              *struct {
				Status  int
				Message string
			}
		}
		if jerr := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); jerr != nil || err != nil || res.Error != nil {
			t.Fatalf("%s: node: %v\nstdout: %s\nstderr: %s", api, err, stdout.String(), stderr.String())
		}
		if res.Content != "The answer is 4." {
			t.Errorf("%s: content %q", api, res.Content)
		}
		if api == "chat" && res.Reasoning != "Let me think it over. Yes." {
			t.Errorf("%s: reasoning %q", api, res.Reasoning)
		}
		line := relayedLineWhere(t, logFile, "strict", func(m map[string]any) bool {
			return m["api"] == map[string]string{"chat": "openai", "responses": "responses"}[api]
		})
		if line["smoothing"] != "split-reasoning" || line["split_ratio"] != 0.35 {
			t.Errorf("%s: log line: smoothing %v, split_ratio %v; want split-reasoning (reasoning_dispersion) and 0.35", api, line["smoothing"], line["split_ratio"])
		}
	}

	// Messages, and count_tokens, which a Chat chain answers with the
	// relay's own estimate.
	resp := postPath(t, "/v1/messages", `{"model":"strict","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}],"extra_body":{"reasoning_dispersion":true,"temperature":0.5}}`,
		"x-api-key", "sk-knobs", "anthropic-version", "2023-06-01")
	if b := readAll(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(b, "The answer") {
		t.Errorf("messages with extra_body: status %d: %s", resp.StatusCode, b)
	}
	resp = postPath(t, "/v1/messages/count_tokens", `{"model":"strict","messages":[{"role":"user","content":"hi"}],"extra_body":{"messages":[{"role":"user","content":"`+strings.Repeat("many words here ", 200)+`"}]}}`,
		"x-api-key", "sk-knobs", "anthropic-version", "2023-06-01")
	var counted struct {
		InputTokens int `json:"input_tokens"`
	}
	if b := readAll(t, resp); resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(b), &counted) != nil || counted.InputTokens < 400 {
		t.Errorf("count_tokens with extra_body: status %d: %s; want extra_body's messages counted", resp.StatusCode, b)
	}
	resp = postPath(t, "/v1/messages", `{"model":"strict","max_tokens":64,"messages":[{"role":"user","content":"hi"}],"extra_body":["temperature"]}`,
		"x-api-key", "sk-knobs", "anthropic-version", "2023-06-01")
	if b := readAll(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, `"type":"error"`) || !strings.Contains(b, "extra_body") {
		t.Errorf("messages with an array extra_body: status %d: %s; want an Anthropic-shaped 400 naming extra_body", resp.StatusCode, b)
	}

	seen := strict.requests()
	if len(seen) < 3 {
		t.Fatalf("the strict upstream saw %d requests, want 3", len(seen))
	}
	for i, s := range seen {
		for k := range s.body {
			if !slices.Contains(strictAllowed, k) {
				t.Errorf("request %d: the strict upstream got %q: %v", i+1, k, s.body)
			}
		}
	}
	if last := seen[len(seen)-1]; last.body["temperature"] != 0.5 {
		t.Errorf("messages: extra_body's temperature did not reach the upstream: %v", last.body)
	}
}

// sseKinds reads a Chat stream and returns, in order, whether each text
// event carried reasoning (true) or answer text (false).
func sseKinds(t *testing.T, body string) []bool {
	t.Helper()
	resp := post(t, body, "Authorization", "Bearer sk-knobs")
	stream := readAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, stream)
	}
	var kinds []bool
	for _, data := range sseDatas(stream) {
		if data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		for _, ch := range c.Choices {
			switch {
			case ch.Delta.ReasoningContent != "":
				kinds = append(kinds, true)
			case ch.Delta.Content != "":
				kinds = append(kinds, false)
			}
		}
	}
	return kinds
}

// overlapShare is the reasoning events' share of the text events from the
// first answer event to the last reasoning one: the stretch where the
// reasoning drains beside the answer, both lanes queued.
func overlapShare(kinds []bool) (share float64, n int) {
	first, last := slices.Index(kinds, false), -1
	for i, k := range kinds {
		if k {
			last = i
		}
	}
	if first < 0 || last < first {
		return 0, 0
	}
	r := 0
	for _, k := range kinds[first : last+1] {
		if k {
			r++
		}
	}
	n = last + 1 - first
	return float64(r) / float64(n), n
}

// TestSplitRatioMeasured: on the backlogged simulator stream, the share of
// reasoning events while the reasoning drains beside the answer follows
// relay.split_ratio: without one, each tick carries a piece of each lane
// (about half); with 0.2, about a fifth; with 0.8, about four fifths. Only
// the order of the events is counted, never their timing; the bounds are
// generous (the delay bounds send what falls due whatever the share).
func TestSplitRatioMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("caddytest end-to-end test; skipped with -short")
	}
	strict := newStrictUpstream(t)
	startRelay(t, knobsRelay(strict.v1()), knobsSimSite)
	if t.Failed() {
		t.FailNow()
	}
	const msgs = `"messages":[{"role":"user","content":"think long"}]`
	for _, tc := range []struct {
		relay  string
		lo, hi float64
	}{
		{`{"mode":"split-reasoning"}`, 0.38, 0.62},
		{`{"mode":"split-reasoning","split_ratio":0.2}`, 0.02, 0.38},
		{`{"mode":"split-reasoning","split_ratio":0.8}`, 0.58, 0.98},
	} {
		kinds := sseKinds(t, fmt.Sprintf(`{"model":"backlog","stream":true,"relay":%s,%s}`, tc.relay, msgs))
		share, n := overlapShare(kinds)
		t.Logf("relay %s: %d events in the overlap, reasoning share %.2f", tc.relay, n, share)
		if n < 8 {
			t.Errorf("relay %s: only %d events while both lanes sent; the stream was not backlogged", tc.relay, n)
			continue
		}
		if share < tc.lo || share > tc.hi {
			t.Errorf("relay %s: reasoning share %.2f of %d events, want %.2f to %.2f", tc.relay, share, n, tc.lo, tc.hi)
		}
	}
}
