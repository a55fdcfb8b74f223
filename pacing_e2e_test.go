package llmrelay_test

// Smoothing (the SSE re-pacer) end to end, through a real Caddy: the relay
// in front of a simulator that sends clustered reasoning and clustered
// content, read back with the official openai-go client and the official
// openai Node SDK (e2e/node/stream.mjs). Whatever the pacer does to the
// chunking, per channel the text must be the simulator's, byte for byte.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmrelay/caddy-llm-relay/internal/sim"
)

// pacedSimSite runs one simulator on :9082 (openai_e2e_test.go has :9081)
// that streams like a reasoning model behind a batching gateway: bursts of
// tokens a few milliseconds apart, then silence.
const pacedSimSite = `http://127.0.0.1:9082 {
	llm_simulator {
		model sim-reasoner
		seed 11
		reasoning_tokens 60
		content_tokens 40
		reasoning_pattern clustered 15 200ms
		content_pattern clustered 10 150ms
	}
}`

const (
	pacedSeed      = 11
	pacedReasoning = 60
	pacedContent   = 40
)

// pacedRelay smooths every stream (split-reasoning, set for the whole
// relay); the model sim-hidden also hides the reasoning (set on the model).
const pacedRelay = `llm_relay {
	key sk-test-client
	upstream sim http://127.0.0.1:9082/v1
	smoothing split-reasoning {
		max_delay 400ms
		reasoning_max_delay 1500ms
		min_interval 30ms
		heartbeat 15s
	}
	model sim-reasoner {
		to sim
	}
	model sim-hidden {
		to sim
		smoothing split-reasoning {
			reasoning hide
		}
	}
}`

// offRelay does not smooth unless the request asks for it.
const offRelay = `llm_relay {
	key sk-test-client
	upstream sim http://127.0.0.1:9082/v1
	smoothing off
	model sim-reasoner {
		to sim
	}
}`

// startPaced loads a config and stops the test if it did not load
// (caddytest only marks the test failed and carries on).
func startPaced(t *testing.T, relayBlock string, extraSites ...string) {
	t.Helper()
	startRelay(t, relayBlock, extraSites...)
	if t.Failed() {
		t.FailNow()
	}
}

// pacedPieces is what the simulator sends: one piece per delta.
func pacedPieces() (reasoning, content []string) {
	r, c := pacedReasoning, pacedContent
	return sim.Texts(sim.Config{Seed: pacedSeed, ReasoningTokens: &r, ContentTokens: &c})
}

// goStream is one stream as openai-go saw it.
type goStream struct {
	reasoning []string // non-empty reasoning_content deltas, in order
	content   []string // non-empty content deltas, in order
	chunks    int
	finish    string
	usage     openai.CompletionUsage
	ids       map[string]bool
}

// streamGo streams model through the relay with openai-go and
// include_usage, and fails the test on a stream error.
func streamGo(t *testing.T, model string, opts ...option.RequestOption) goStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := chatParams(model)
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	client := openaiClient("sk-test-client")
	stream := client.Chat.Completions.NewStreaming(ctx, params, opts...)
	defer stream.Close()
	res := goStream{ids: map[string]bool{}}
	for stream.Next() {
		res.chunks++
		ch := stream.Current()
		res.ids[ch.ID] = true
		if ch.Usage.TotalTokens > 0 {
			res.usage = ch.Usage
		}
		for _, c := range ch.Choices {
			if c.Index != 0 {
				t.Errorf("chunk %d has a choice with index %d", res.chunks, c.Index)
			}
			if c.Delta.Content != "" {
				res.content = append(res.content, c.Delta.Content)
			}
			if f, ok := c.Delta.JSON.ExtraFields["reasoning_content"]; ok && f.Raw() != "" && f.Raw() != "null" {
				var s string
				if err := json.Unmarshal([]byte(f.Raw()), &s); err != nil {
					t.Fatalf("reasoning_content %q: %v", f.Raw(), err)
				}
				if s != "" {
					res.reasoning = append(res.reasoning, s)
				}
			}
			if c.FinishReason != "" {
				res.finish = c.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream error after %d chunks: %v", res.chunks, err)
	}
	return res
}

// checkExact fails unless the stream carried the simulator's text exactly,
// finished with stop, and ended with the usage chunk.
func checkExact(t *testing.T, got goStream, wantReasoning, wantContent []string) {
	t.Helper()
	if r, w := strings.Join(got.reasoning, ""), strings.Join(wantReasoning, ""); r != w {
		t.Errorf("reasoning differs:\n got %q\nwant %q", r, w)
	}
	if c, w := strings.Join(got.content, ""), strings.Join(wantContent, ""); c != w {
		t.Errorf("content differs:\n got %q\nwant %q", c, w)
	}
	if got.finish != "stop" {
		t.Errorf("finish_reason %q, want stop", got.finish)
	}
	u := got.usage
	if u.CompletionTokensDetails.ReasoningTokens != pacedReasoning || u.CompletionTokens != pacedReasoning+pacedContent || u.TotalTokens <= u.CompletionTokens {
		t.Errorf("usage %+v, want %d reasoning of %d completion tokens", u, pacedReasoning, pacedReasoning+pacedContent)
	}
	if len(got.ids) != 1 {
		t.Errorf("chunk ids %v: one stream has one id", got.ids)
	}
	checkClusters(t, "reasoning", got.reasoning)
	checkClusters(t, "content", got.content)
}

// rechunked reports whether the text deltas differ from the simulator's
// pieces. A relay that passes the stream through yields exactly the
// pieces; a pacer that splits or merges anything does not.
func rechunked(got goStream, wantReasoning, wantContent []string) bool {
	return !slices.Equal(got.reasoning, wantReasoning) || !slices.Equal(got.content, wantContent)
}

// checkClusters fails if a chunk boundary cuts a user-perceived character:
// the simulator's pieces never do (no piece starts with a combining mark,
// ZWJ, variation selector or skin-tone modifier, or ends with a ZWJ, and
// every flag follows a space), so any such cut is the relay's. Each delta
// must also be valid UTF-8 on its own.
func checkClusters(t *testing.T, channel string, deltas []string) {
	t.Helper()
	for i, d := range deltas {
		if !utf8.ValidString(d) {
			t.Errorf("%s delta %d is not valid UTF-8: %q", channel, i, d)
			continue
		}
		first, _ := utf8.DecodeRuneInString(d)
		last, _ := utf8.DecodeLastRuneInString(d)
		if i > 0 && (unicode.Is(unicode.Mn, first) || first == '\u200d' || first == '\ufe0f' || first == '\ufe0e' || (first >= 0x1f3fb && first <= 0x1f3ff)) {
			t.Errorf("%s delta %d starts inside a grapheme cluster: %q after %q", channel, i, d, deltas[i-1])
		}
		if i > 0 && isRegionalIndicator(first) {
			if prev, _ := utf8.DecodeLastRuneInString(deltas[i-1]); isRegionalIndicator(prev) {
				t.Errorf("%s delta %d splits a flag: %q after %q", channel, i, d, deltas[i-1])
			}
		}
		if i < len(deltas)-1 && last == '\u200d' {
			t.Errorf("%s delta %d ends with a ZWJ: %q", channel, i, d)
		}
	}
}

func isRegionalIndicator(r rune) bool { return r >= 0x1f1e6 && r <= 0x1f1ff }

// rawPacedStream streams model with plain net/http and checks the SSE
// framing: text/event-stream, every data event but the last is a
// chat.completion.chunk JSON object, the last is [DONE].
func rawPacedStream(t *testing.T, model string, header ...string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, model)
	resp := post(t, body, append([]string{"Authorization", "Bearer sk-test-client"}, header...)...)
	got := readAll(t, resp)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, Content-Type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), got)
	}
	datas := sseDatas(got)
	if len(datas) < 2 || datas[len(datas)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]:\n%s", got)
	}
	for i, d := range datas[:len(datas)-1] {
		var c struct {
			Object  string            `json:"object"`
			Choices []json.RawMessage `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil || c.Object != "chat.completion.chunk" || c.Choices == nil {
			t.Errorf("data event %d is not a chat.completion.chunk: %s", i, d)
		}
	}
}

// TestPacedStreamOpenAIGo: with `smoothing split-reasoning` in the config,
// a clustered stream reaches openai-go re-chunked, yet with the exact
// reasoning and content, finish_reason and usage of the upstream.
func TestPacedStreamOpenAIGo(t *testing.T) {
	startPaced(t, pacedRelay, pacedSimSite)
	wantR, wantC := pacedPieces()
	if len(wantR) == 0 || len(wantC) == 0 {
		t.Fatal("simulator texts are empty")
	}

	got := streamGo(t, "sim-reasoner")
	checkExact(t, got, wantR, wantC)
	if !rechunked(got, wantR, wantC) {
		t.Errorf("the relay passed the stream through unchanged (%d reasoning and %d content deltas, as the upstream sent them): not smoothed",
			len(got.reasoning), len(got.content))
	}
	t.Logf("upstream: %d+%d text deltas; client: %d+%d text deltas in %d chunks",
		len(wantR), len(wantC), len(got.reasoning), len(got.content), got.chunks)

	rawPacedStream(t, "sim-reasoner")
}

// TestRelayModeHeaderOverridesConfig: X-Relay-Mode turns smoothing on for
// one request on a relay configured `smoothing off`, and off for one
// request on a relay that smooths. The control (no header, smoothing off)
// proves the re-chunking check detects a pass-through.
func TestRelayModeHeaderOverridesConfig(t *testing.T) {
	wantR, wantC := pacedPieces()

	startPaced(t, offRelay, pacedSimSite)
	control := streamGo(t, "sim-reasoner")
	checkExact(t, control, wantR, wantC)
	if rechunked(control, wantR, wantC) {
		t.Errorf("smoothing off, no header: the stream was re-chunked (%d+%d text deltas, upstream sent %d+%d)",
			len(control.reasoning), len(control.content), len(wantR), len(wantC))
	}

	for _, mode := range []string{"split-reasoning", "pace"} {
		got := streamGo(t, "sim-reasoner", option.WithHeader("X-Relay-Mode", mode))
		checkExact(t, got, wantR, wantC)
		if !rechunked(got, wantR, wantC) {
			t.Errorf("X-Relay-Mode: %s on a `smoothing off` relay: the stream was passed through", mode)
		}
	}
	rawPacedStream(t, "sim-reasoner", "X-Relay-Mode", "pace")

	startPaced(t, pacedRelay, pacedSimSite)
	got := streamGo(t, "sim-reasoner", option.WithHeader("X-Relay-Mode", "off"))
	checkExact(t, got, wantR, wantC)
	if rechunked(got, wantR, wantC) {
		t.Errorf("X-Relay-Mode: off on a smoothing relay: the stream was re-chunked (%d+%d text deltas, upstream sent %d+%d)",
			len(got.reasoning), len(got.content), len(wantR), len(wantC))
	}
}

// TestRelayModeBodyField: "relay":{"mode":"pace"} in the request body turns
// smoothing on for that request, like the header.
func TestRelayModeBodyField(t *testing.T) {
	startPaced(t, offRelay, pacedSimSite)
	wantR, wantC := pacedPieces()
	got := streamGo(t, "sim-reasoner", option.WithJSONSet("relay", map[string]any{"mode": "pace"}))
	checkExact(t, got, wantR, wantC)
	if !rechunked(got, wantR, wantC) {
		t.Errorf(`"relay":{"mode":"pace"} on a smoothing off relay: the stream was passed through`)
	}
	got = streamGo(t, "sim-reasoner", option.WithJSONSet("relay.mode", "split-reasoning"))
	checkExact(t, got, wantR, wantC)
	if !rechunked(got, wantR, wantC) {
		t.Errorf(`"relay":{"mode":"split-reasoning"} on a smoothing off relay: the stream was passed through`)
	}
}

// TestPacedStreamHidesReasoning: `reasoning hide` (set on the model) drops
// the reasoning text and keeps the content exact.
func TestPacedStreamHidesReasoning(t *testing.T) {
	startPaced(t, pacedRelay, pacedSimSite)
	_, wantC := pacedPieces()
	got := streamGo(t, "sim-hidden")
	if len(got.reasoning) != 0 {
		t.Errorf("reasoning hide: %d reasoning deltas reached the client: %q", len(got.reasoning), strings.Join(got.reasoning, ""))
	}
	if c, w := strings.Join(got.content, ""), strings.Join(wantC, ""); c != w {
		t.Errorf("content differs:\n got %q\nwant %q", c, w)
	}
	if got.finish != "stop" || got.usage.TotalTokens == 0 {
		t.Errorf("finish_reason %q, usage %+v", got.finish, got.usage)
	}
	checkClusters(t, "content", got.content)
}

// TestRelayModeInvalid: an unknown mode, in the header or the body, is the
// client's error (400, OpenAI error JSON, invalid_relay_mode), and nothing
// is sent upstream.
func TestRelayModeInvalid(t *testing.T) {
	up := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamEvents(w, 0, chunk("ok"), "[DONE]")
	})
	startPaced(t, fmt.Sprintf(`llm_relay {
		key sk-test-client
		upstream a %s
		smoothing off
		model chat {
			to a
		}
	}`, up.v1()))

	cases := []struct {
		name   string
		body   string
		header []string
	}{
		{"header", chatStreamBody, []string{"X-Relay-Mode", "fast"}},
		{"body", `{"model":"chat","stream":true,"relay":{"mode":"fast"},"messages":[{"role":"user","content":"hi"}]}`, nil},
	}
	for _, tc := range cases {
		resp := post(t, tc.body, append([]string{"Authorization", "Bearer sk-test-client"}, tc.header...)...)
		body := readAll(t, resp)
		if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("%s: status %d, Content-Type %q, body %s; want 400 JSON", tc.name, resp.StatusCode, resp.Header.Get("Content-Type"), body)
			continue
		}
		e := decodeErr(t, body)
		if e.Error.Code != "invalid_relay_mode" || e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
			t.Errorf("%s: error %+v, want code invalid_relay_mode", tc.name, e.Error)
		}
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("requests with an invalid mode reached the upstream %d times", n)
	}

	// A valid mode still goes through.
	resp := post(t, chatStreamBody, "Authorization", "Bearer sk-test-client", "X-Relay-Mode", "pace")
	if body := readAll(t, resp); resp.StatusCode != 200 {
		t.Errorf("X-Relay-Mode: pace: status %d: %s", resp.StatusCode, body)
	}
}

// TestRelayModeNeverReachesUpstream: the X-Relay-Mode header and the
// body's relay field are the relay's; the upstream never sees them, and
// the rest of the request is kept.
func TestRelayModeNeverReachesUpstream(t *testing.T) {
	up := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 4 {
			answerJSON(w, 200, okCompletion)
			return
		}
		streamEvents(w, 0, chunk("hello, "), chunk("paced "), chunk("world"), "[DONE]")
	})
	startPaced(t, fmt.Sprintf(`llm_relay {
		key sk-test-client
		upstream a %s
		smoothing off
		model chat {
			to a
		}
	}`, up.v1()))

	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	requests := []struct {
		body   string
		header []string
	}{
		{`{"model":"chat","stream":true,` + msgs + `}`, []string{"X-Relay-Mode", "pace"}},
		{`{"model":"chat","stream":true,"relay":{"mode":"split-reasoning"},` + msgs + `}`, nil},
		{`{"model":"chat","stream":true,"relay":{"mode":"pace"},` + msgs + `}`, []string{"X-Relay-Mode", "pace"}},
		{`{"model":"chat","relay":{"mode":"off"},` + msgs + `}`, []string{"X-Relay-Mode", "off"}},
	}
	for i, rq := range requests {
		resp := post(t, rq.body, append([]string{"Authorization", "Bearer sk-test-client"}, rq.header...)...)
		body := readAll(t, resp)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d: %s", i+1, resp.StatusCode, body)
		}
		if i < 3 {
			var text strings.Builder
			datas := sseDatas(body)
			for _, d := range datas {
				var c struct {
					Choices []struct {
						Delta struct {
							Content string `json:"content"`
						} `json:"delta"`
					} `json:"choices"`
				}
				if json.Unmarshal([]byte(d), &c) == nil && len(c.Choices) > 0 {
					text.WriteString(c.Choices[0].Delta.Content)
				}
			}
			if text.String() != "hello, paced world" || len(datas) == 0 || datas[len(datas)-1] != "[DONE]" {
				t.Errorf("request %d: content %q, stream:\n%s", i+1, text.String(), body)
			}
		}
	}

	seen := up.requests()
	if len(seen) != len(requests) {
		t.Fatalf("upstream got %d requests, want %d", len(seen), len(requests))
	}
	for i, s := range seen {
		if v := s.header.Values("X-Relay-Mode"); len(v) != 0 {
			t.Errorf("request %d: upstream received X-Relay-Mode: %q", i+1, v)
		}
		if _, ok := s.body["relay"]; ok {
			t.Errorf("request %d: the relay field reached the upstream: %v", i+1, s.body)
		}
		if s.body["model"] != "chat" || s.body["messages"] == nil {
			t.Errorf("request %d: upstream body lost fields: %v", i+1, s.body)
		}
		if wantStream := i < 3; (s.body["stream"] == true) != wantStream {
			t.Errorf("request %d: upstream body stream = %v", i+1, s.body["stream"])
		}
	}
}

// nodeResult is the JSON line e2e/node/stream.mjs prints.
type nodeResult struct {
	Reasoning       string `json:"reasoning"`
	Content         string `json:"content"`
	Chunks          int    `json:"chunks"`
	ReasoningChunks int    `json:"reasoning_chunks"`
	ContentChunks   int    `json:"content_chunks"`
	FinishReason    string `json:"finish_reason"`
	Usage           *struct {
		PromptTokens            int `json:"prompt_tokens"`
		CompletionTokens        int `json:"completion_tokens"`
		TotalTokens             int `json:"total_tokens"`
		CompletionTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
	Error *struct {
		Status int    `json:"status"`
		Code   string `json:"code"`
		Type   string `json:"type"`
	} `json:"error"`
}

// runNode runs stream.mjs and decodes its one line of output. It returns
// the exit code too: 0, or 2 when the script reports an API error.
func runNode(t *testing.T, node string, args ...string) (nodeResult, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join("e2e", "node", "stream.mjs")}, args...)...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("node %v: %v\nstderr: %s", args, err, stderr.String())
	}
	if ctx.Err() != nil {
		t.Fatalf("node %v timed out\nstdout: %s\nstderr: %s", args, stdout.String(), stderr.String())
	}
	var res nodeResult
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); err != nil {
		t.Fatalf("node %v (exit %d): output is not one JSON line: %v\nstdout: %s\nstderr: %s", args, code, err, stdout.String(), stderr.String())
	}
	return res, code
}

// TestPacedStreamOpenAINode: the official openai Node SDK reads a smoothed
// stream (mode chosen by X-Relay-Mode) with the exact texts and usage, a
// non-streaming answer from a smoothing relay, and the relay's
// invalid_relay_mode error as a typed API error.
func TestPacedStreamOpenAINode(t *testing.T) {
	if testing.Short() {
		t.Skip("caddytest end-to-end test; skipped with -short")
	}
	if _, err := os.Stat(filepath.Join("e2e", "node", "node_modules", "openai", "package.json")); err != nil {
		msg := "e2e/node/node_modules is missing: run `npm ci --prefix e2e/node` to install the openai Node SDK"
		if os.Getenv("RELAY_REQUIRE_NODE") == "1" {
			t.Fatal(msg + " (RELAY_REQUIRE_NODE=1)")
		}
		t.Skip(msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node_modules is installed but node is not on PATH: %v", err)
	}

	startPaced(t, offRelay, pacedSimSite)
	wantR, wantC := pacedPieces()
	wantReasoning, wantContent := strings.Join(wantR, ""), strings.Join(wantC, "")
	base := relayBase + "/v1"

	for _, mode := range []string{"split-reasoning", "body:pace"} {
		res, code := runNode(t, node, base, "sk-test-client", "sim-reasoner", mode, "stream")
		if code != 0 || res.Error != nil {
			t.Fatalf("mode %s: exit %d, error %+v", mode, code, res.Error)
		}
		if res.Reasoning != wantReasoning {
			t.Errorf("mode %s: reasoning differs:\n got %q\nwant %q", mode, res.Reasoning, wantReasoning)
		}
		if res.Content != wantContent {
			t.Errorf("mode %s: content differs:\n got %q\nwant %q", mode, res.Content, wantContent)
		}
		if res.Chunks <= 0 || res.FinishReason != "stop" {
			t.Errorf("mode %s: %d chunks, finish_reason %q", mode, res.Chunks, res.FinishReason)
		}
		if res.Usage == nil || res.Usage.CompletionTokensDetails.ReasoningTokens != pacedReasoning || res.Usage.CompletionTokens != pacedReasoning+pacedContent {
			t.Errorf("mode %s: usage %+v", mode, res.Usage)
		}
		if res.ReasoningChunks == len(wantR) && res.ContentChunks == len(wantC) {
			t.Logf("mode %s: as many text chunks as the upstream sent (%d+%d)", mode, res.ReasoningChunks, res.ContentChunks)
		}
	}

	res, code := runNode(t, node, base, "sk-test-client", "sim-reasoner", "fast", "stream")
	if code != 2 || res.Error == nil || res.Error.Status != 400 || res.Error.Code != "invalid_relay_mode" || res.Error.Type != "invalid_request_error" {
		t.Errorf("X-Relay-Mode: fast: exit %d, error %+v; want a 400 invalid_relay_mode API error", code, res.Error)
	}

	startPaced(t, pacedRelay, pacedSimSite)
	res, code = runNode(t, node, base, "sk-test-client", "sim-reasoner", "", "create")
	if code != 0 || res.Error != nil || res.Content != wantContent || res.Reasoning != wantReasoning || res.FinishReason != "stop" || res.Usage == nil {
		t.Errorf("non-streaming through a smoothing relay: exit %d, %+v", code, res)
	}
	res, code = runNode(t, node, base, "sk-test-client", "sim-reasoner", "", "stream")
	if code != 0 || res.Error != nil || res.Reasoning != wantReasoning || res.Content != wantContent || res.Usage == nil {
		t.Errorf("config-smoothed stream: exit %d, %+v", code, res)
	}
}

// TestReasoningDispersion: "reasoning_dispersion": true, the knob other
// relays' clients send, asks for split-reasoning on a relay whose
// smoothing is off, and the field never reaches the upstream.
func TestReasoningDispersion(t *testing.T) {
	startPaced(t, offRelay, pacedSimSite)
	wantR, wantC := pacedPieces()
	got := streamGo(t, "sim-reasoner", option.WithJSONSet("reasoning_dispersion", true))
	checkExact(t, got, wantR, wantC)
	if !rechunked(got, wantR, wantC) {
		t.Errorf(`"reasoning_dispersion": true on a smoothing off relay: the stream was passed through`)
	}
	got = streamGo(t, "sim-reasoner", option.WithJSONSet("reasoning_dispersion", false))
	if rechunked(got, wantR, wantC) {
		t.Errorf(`"reasoning_dispersion": false on a smoothing off relay: the stream was re-paced`)
	}
}

// TestRelayKnobsOtherRelaysUse: reasoning_dispersion, relay (with its
// split_ratio) and extra_body are stripped before the upstream, in every
// form; a split_ratio outside 0..1, an extra_body that is not an object
// and a reasoning_dispersion that is not a boolean are the client's
// errors (400), and reach nobody.
func TestRelayKnobsOtherRelaysUse(t *testing.T) {
	up := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamEvents(w, 0, chunk("ok"), "[DONE]")
	})
	startPaced(t, fmt.Sprintf(`llm_relay {
		key sk-test-client
		upstream a %s
		smoothing off
		model chat {
			to a
			to a {
				set temperature 0.5
			}
		}
	}`, up.v1()))
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	for _, body := range []string{
		`{"model":"chat","stream":true,"reasoning_dispersion":true,` + msgs + `}`,
		`{"model":"chat","stream":true,"reasoning_dispersion":false,` + msgs + `}`,
		// A repeated key takes the map path rather than the splice.
		`{"model":"chat","stream":true,"reasoning_dispersion":true,"stream":true,` + msgs + `}`,
		`{"model":"chat","stream":true,"relay":{"mode":"split-reasoning","split_ratio":0.3},` + msgs + `}`,
		`{"model":"chat","stream":true,"relay":{"mode":"pace","split_ratio":0},` + msgs + `}`,
		`{"model":"chat","stream":true,"extra_body":{"reasoning_dispersion":true,"relay":{"split_ratio":1}},` + msgs + `}`,
		`{"model":"chat","stream":true,"stream":true,"extra_body":{"reasoning_dispersion":true},` + msgs + `}`,
		`{"model":"chat","stream":true,"top_p":1,"extra_body":{"top_p":0.25},` + msgs + `}`,
	} {
		resp := post(t, body, "Authorization", "Bearer sk-test-client")
		if b := readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("%s: status %d: %s", body, resp.StatusCode, b)
		}
	}
	merged := 0
	for i, s := range up.requests() {
		if s.body["top_p"] == 0.25 {
			merged++ // extra_body's member, over the top-level one
		}
		for _, field := range []string{"reasoning_dispersion", "relay", "extra_body"} {
			if _, ok := s.body[field]; ok {
				t.Errorf("request %d: %s reached the upstream: %v", i+1, field, s.body)
			}
		}
	}
	if merged == 0 {
		t.Errorf("extra_body's top_p did not reach the upstream")
	}
	before := len(up.requests())
	for body, code := range map[string]string{
		`{"model":"chat","stream":true,"relay":{"split_ratio":1.3},` + msgs + `}`:               "invalid_relay_options",
		`{"model":"chat","stream":true,"relay":{"split_ratio":"0.3"},` + msgs + `}`:             "invalid_relay_options",
		`{"model":"chat","stream":true,"extra_body":{"relay":{"split_ratio":-1}},` + msgs + `}`: "invalid_relay_options",
		`{"model":"chat","stream":true,"extra_body":"reasoning_dispersion",` + msgs + `}`:       "invalid_extra_body",
		`{"model":"chat","stream":true,"reasoning_dispersion":"yes",` + msgs + `}`:              "invalid_relay_options",
	} {
		resp := post(t, body, "Authorization", "Bearer sk-test-client")
		b := readAll(t, resp)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400: %s", body, resp.StatusCode, b)
			continue
		}
		if e := decodeErr(t, b); e.Error.Code != code || e.Error.Message == "" {
			t.Errorf("%s: error %+v, want code %s", body, e.Error, code)
		}
	}
	if n := len(up.requests()) - before; n != 0 {
		t.Errorf("%d refused requests reached the upstream", n)
	}
}
