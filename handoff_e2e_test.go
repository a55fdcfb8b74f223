package llmrelay_test

// The baton pass (issue 28) through the official Go SDKs: a hand-off
// alias reasons on the reasoning simulator and answers on the echo
// simulator, which answers with what it found injected in its request
// ("handoff:<where>:<reasoning>"). So each test checks, in one answer,
// that the client got the reasoning leg's reasoning as reasoning, the
// answer leg's answer as the answer, and that the answer leg's request
// held exactly that reasoning at the configured position.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmrelay/caddy-llm-relay/internal/sim"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// handoffSimSite runs the legs' simulators on :9087: /reason/ a reasoning
// model (reasoning, then an answer the relay must never forward), /echo/
// an answer model that echoes the injected reasoning.
const handoffSimSite = `http://127.0.0.1:9087 {
	handle /reason/* {
		llm_simulator {
			seed 28
			reasoning_tokens 24
			content_tokens 16
			pattern steady 0
		}
	}
	handle /reason-tags/* {
		llm_simulator {
			seed 28
			reasoning_tokens 24
			content_tokens 16
			pattern steady 0
			reasoning_form tags
		}
	}
	handle /echo/* {
		llm_simulator {
			seed 29
			content_tokens 8
			pattern steady 0
			echo handoff
		}
	}
	handle /echo-slow/* {
		llm_simulator {
			seed 29
			content_tokens 8
			pattern steady 0
			echo handoff
			ttfb 800ms
		}
	}
}`

// handoffRelay: baton answers on an Anthropic target (prefill by
// default), baton-user on a Chat target (user by default), baton-system
// reasons on an Anthropic target and injects into the system prompt.
const handoffRelay = `llm_relay {
	key ` + taggedKey + `
	upstream reasoner http://127.0.0.1:9087/reason/v1 {
		api chat
	}
	upstream reasoner-claude http://127.0.0.1:9087/reason/v1 {
		api anthropic
	}
	upstream reasoner-tags http://127.0.0.1:9087/reason-tags/v1 {
		api chat
		reasoning_format tags
	}
	upstream echo-claude http://127.0.0.1:9087/echo/v1 {
		api anthropic
	}
	upstream echo-chat http://127.0.0.1:9087/echo/v1 {
		api chat
	}
	upstream echo-slow http://127.0.0.1:9087/echo-slow/v1 {
		api chat
	}
	price sim-r1 {
		input 1
		output 2
	}
	price sim-claude {
		input 3
		output 15
	}
	model baton {
		reason reasoner sim-r1
		to echo-claude sim-claude
	}
	model baton-user {
		reason reasoner sim-r1
		to echo-chat sim-chat
	}
	model baton-tags {
		reason reasoner-tags sim-r1-distill
		to echo-claude sim-claude
	}
	model baton-slow {
		reason reasoner sim-r1
		to echo-slow sim-chat
	}
	model baton-budget {
		reason reasoner sim-r1
		to echo-chat sim-chat
		reasoning_budget 6 truncate
	}
	model baton-system {
		reason reasoner-claude sim-claude-thinker {
			set thinking {"type":"enabled","budget_tokens":2048}
		}
		to echo-chat sim-chat
		handoff {
			inject system
		}
	}
}`

// handoffReasoning is the reasoning the reasoning simulator writes.
func handoffReasoning(t *testing.T) string {
	t.Helper()
	r, c := 24, 16
	rs, _ := sim.Texts(sim.Config{Seed: 28, ReasoningTokens: &r, ContentTokens: &c})
	return strings.Join(rs, "")
}

// echoOf is the echo simulator's answer for reasoning injected at where.
func echoOf(where, reasoning string) string {
	return sim.EchoText(where, strings.TrimSpace(reasoning))
}

var handoffCases = []struct{ model, where string }{
	{"baton", "prefill"},
	{"baton-user", "user"},
	{"baton-system", "system"},
}

// TestHandoffChatGo: openai-go's Chat Completions, streaming and not.
func TestHandoffChatGo(t *testing.T) {
	startRelay(t, handoffRelay, handoffSimSite)
	reasoning := handoffReasoning(t)
	for _, tc := range handoffCases {
		for _, stream := range []bool{false, true} {
			got := chatGo(t, tc.model, stream)
			what := tc.model + map[bool]string{false: " New", true: " NewStreaming"}[stream]
			if got.reasoningContent != reasoning {
				t.Errorf("%s: reasoning_content %q;\nwant the reasoning leg's %q", what, got.reasoningContent, reasoning)
			}
			if want := echoOf(tc.where, reasoning); got.content != want {
				t.Errorf("%s: content %q;\nwant the answer leg's %q", what, got.content, want)
			}
			if got.finish != "stop" {
				t.Errorf("%s: finish_reason %q", what, got.finish)
			}
		}
	}
}

// TestHandoffAnthropicSDKGo: anthropic-sdk-go, a thinking block (the
// reasoning leg's) then a text block (the answer leg's).
func TestHandoffAnthropicSDKGo(t *testing.T) {
	startRelay(t, handoffRelay, handoffSimSite)
	reasoning := handoffReasoning(t)
	relay := anthropicClient(relayBase, taggedKey)
	for _, tc := range handoffCases {
		for _, stream := range []bool{false, true} {
			what := tc.model + map[bool]string{false: " New", true: " NewStreaming"}[stream]
			m, err := sendMessage(relay, stream, userParams(tc.model))
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			var types []string
			for _, b := range m.Content {
				types = append(types, string(b.Type))
			}
			if strings.Join(types, ",") != "thinking,text" {
				t.Errorf("%s: blocks %v; want a thinking block, then a text block", what, types)
				continue
			}
			if th := m.Content[0].Thinking; th != reasoning {
				t.Errorf("%s: thinking %q;\nwant %q", what, th, reasoning)
			}
			if want := echoOf(tc.where, reasoning); m.Content[1].Text != want {
				t.Errorf("%s: text %q;\nwant %q", what, m.Content[1].Text, want)
			}
			if m.StopReason != anthropic.StopReasonEndTurn {
				t.Errorf("%s: stop_reason %q", what, m.StopReason)
			}
			if m.Model != anthropic.Model(tc.model) {
				t.Errorf("%s: model %q; want the alias", what, m.Model)
			}
			if m.Usage.OutputTokens <= 0 || m.Usage.InputTokens <= 0 {
				t.Errorf("%s: usage %+v; want both legs' tokens", what, m.Usage)
			}
		}
	}
}

// TestHandoffResponsesGo: openai-go's Responses, a reasoning item then a
// message.
func TestHandoffResponsesGo(t *testing.T) {
	startRelay(t, handoffRelay, handoffSimSite)
	reasoning := handoffReasoning(t)
	for _, tc := range handoffCases {
		for _, stream := range []bool{false, true} {
			what := tc.model + map[bool]string{false: " New", true: " NewStreaming"}[stream]
			got := responsesGo(t, tc.model, stream)
			if strings.Join(got.items, ",") != "reasoning,message" {
				t.Errorf("%s: output items %v", what, got.items)
			}
			if got.summary != reasoning {
				t.Errorf("%s: reasoning %q;\nwant %q", what, got.summary, reasoning)
			}
			if want := echoOf(tc.where, reasoning); got.text != want {
				t.Errorf("%s: text %q;\nwant %q", what, got.text, want)
			}
			if stream && (got.eventSummary != reasoning || got.eventText != got.text) {
				t.Errorf("%s: delta events %q / %q", what, got.eventSummary, got.eventText)
			}
		}
	}
}

// TestHandoffInlineReasoning: a reasoning leg that writes its reasoning
// between <think> tags (an R1 distill behind vLLM without a reasoning
// parser): `</think>` is the hand-off point, the reasoning reaches the
// client as reasoning and the answer leg's request verbatim, and none of
// the reasoning leg's answer reaches the client.
func TestHandoffInlineReasoning(t *testing.T) {
	startRelay(t, handoffRelay, handoffSimSite)
	reasoning := handoffReasoning(t) + "\n" // the newline before </think> stays in the reasoning (internal/thinktag)
	for _, stream := range []bool{false, true} {
		got := chatGo(t, "baton-tags", stream)
		if got.reasoningContent != reasoning {
			t.Errorf("stream %v: reasoning_content %q;\nwant %q", stream, got.reasoningContent, reasoning)
		}
		if want := echoOf("prefill", reasoning); got.content != want || hasTag(got.content) {
			t.Errorf("stream %v: content %q;\nwant %q", stream, got.content, want)
		}
	}
}

// TestHandoffModesAndBudget: the pacer's modes work on a hand-off alias
// as on any (X-Relay-Mode), and a truncating reasoning budget is a
// hand-off point: the client's reasoning stops at the budget, and the
// answer leg gets exactly that reasoning.
func TestHandoffModesAndBudget(t *testing.T) {
	startRelay(t, handoffRelay, handoffSimSite)
	reasoning := handoffReasoning(t)
	for _, mode := range []string{"off", "pace", "split-reasoning"} {
		for _, stream := range []bool{false, true} {
			got := chatGo(t, "baton", stream, option.WithHeader("X-Relay-Mode", mode))
			if got.reasoningContent != reasoning || got.content != echoOf("prefill", reasoning) {
				t.Errorf("mode %s, stream %v: reasoning %q, content %q", mode, stream, got.reasoningContent, got.content)
			}
		}
	}
	for _, stream := range []bool{false, true} {
		got := chatGo(t, "baton-budget", stream)
		if got.reasoningContent == "" || !strings.HasPrefix(reasoning, got.reasoningContent) || len([]rune(got.reasoningContent)) >= len([]rune(reasoning)) {
			t.Errorf("stream %v: reasoning %q; want a beginning of %q, cut near 6 tokens", stream, got.reasoningContent, reasoning)
		}
		if n := (len([]rune(got.reasoningContent)) + 3) / 4; n < 6 || n > 6+4 {
			t.Errorf("stream %v: %d reasoning tokens reached the client; want the budget of 6 (and the piece that crossed it)", stream, n)
		}
		if want := echoOf("user", got.reasoningContent); got.content != want {
			t.Errorf("stream %v: content %q;\nwant the answer leg's echo of the reasoning the client got, %q", stream, got.content, want)
		}
	}
}

// TestHandoffRecord: one Chat stream through baton with include_usage:
// the usage chunk sums both legs (both prompts; the reasoning leg's
// reasoning in completion_tokens and reasoning_tokens); the log line
// names the answer leg as its upstream and has a handoff object with both
// legs; the status view's recent stream has both legs.
func TestHandoffRecord(t *testing.T) {
	logFile := startRelay(t, handoffRelay, handoffSimSite)
	reasoning := handoffReasoning(t)
	resp := post(t, `{"model":"baton","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer "+taggedKey)
	if resp.StatusCode != 200 || resp.Header.Get("X-Relay-Handoff") != "reasoned-by reasoner (sim-r1)" {
		t.Fatalf("status %d, X-Relay-Handoff %q", resp.StatusCode, resp.Header.Get("X-Relay-Handoff"))
	}
	var got struct {
		Prompt     int `json:"prompt_tokens"`
		Completion int `json:"completion_tokens"`
		Details    struct {
			Reasoning int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	}
	var answer string
	for _, d := range sseDatas(readAll(t, resp)) {
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage json.RawMessage `json:"usage"`
		}
		if d == "[DONE]" || json.Unmarshal([]byte(d), &c) != nil {
			continue
		}
		for _, ch := range c.Choices {
			answer += ch.Delta.Content
		}
		if len(c.Usage) > 0 && string(c.Usage) != "null" {
			_ = json.Unmarshal(c.Usage, &got)
		}
	}
	answerTokens := (len([]rune(answer)) + 3) / 4 // the echo simulator's figure is one token a piece: at least this
	wantReasoning := (len([]rune(reasoning)) + 3) / 4
	if got.Details.Reasoning != wantReasoning {
		t.Errorf("reasoning_tokens %d; want the reasoning leg's %d (a quarter of its %d characters)", got.Details.Reasoning, wantReasoning, len([]rune(reasoning)))
	}
	if got.Completion < wantReasoning+answerTokens {
		t.Errorf("completion_tokens %d; want the answer leg's (at least %d) plus the reasoning's %d", got.Completion, answerTokens, wantReasoning)
	}
	if got.Prompt < 2 {
		t.Errorf("prompt_tokens %d; want both legs' prompts", got.Prompt)
	}

	var line map[string]any
	waitFor(t, 5*time.Second, "the relayed log line", func() bool {
		for _, l := range strings.Split(readLog(t, logFile), "\n") {
			if strings.Contains(l, `"msg":"relayed"`) && strings.Contains(l, `"alias":"baton"`) {
				return json.Unmarshal([]byte(l), &line) == nil
			}
		}
		return false
	})
	if line["upstream"] != "echo-claude" || line["model"] != "sim-claude" {
		t.Errorf("log line upstream %v model %v; want the answer leg's", line["upstream"], line["model"])
	}
	ho, _ := line["handoff"].(map[string]any)
	for k, want := range map[string]any{"reason_upstream": "reasoner", "reason_model": "sim-r1", "answer_upstream": "echo-claude",
		"answer_model": "sim-claude", "why": "answer", "reasoning_tokens": float64(wantReasoning)} {
		if ho[k] != want {
			t.Errorf("log line handoff.%s = %v; want %v (handoff: %v)", k, ho[k], want, ho)
		}
	}
	// Each leg at its own model's price (the price lines above), and the
	// line's cost their sum.
	num := func(k string) int { f, _ := ho[k].(float64); return int(f) }
	reasonCost := usage.Price{Input: 1, Output: 2}.Cost(usage.Usage{Prompt: num("reason_prompt_tokens"), Completion: num("reasoning_tokens"), Reasoning: num("reasoning_tokens")})
	answerCost := usage.Price{Input: 3, Output: 15}.Cost(usage.Usage{Prompt: num("answer_prompt_tokens"), Completion: num("answer_completion_tokens")})
	if num("reason_prompt_tokens") == 0 || num("answer_prompt_tokens") == 0 || num("answer_completion_tokens") == 0 {
		t.Errorf("handoff tokens missing: %v", ho)
	}
	if ho["reason_cost"] != usage.FormatUSD(reasonCost) || ho["answer_cost"] != usage.FormatUSD(answerCost) || line["cost"] != usage.FormatUSD(reasonCost+answerCost) {
		t.Errorf("costs: reason %v answer %v line %v; want %s, %s and their sum %s", ho["reason_cost"], ho["answer_cost"], line["cost"],
			usage.FormatUSD(reasonCost), usage.FormatUSD(answerCost), usage.FormatUSD(reasonCost+answerCost))
	}
	if gap, _ := ho["gap"].(float64); gap <= 0 || gap > 1 {
		t.Errorf("handoff.gap %v s; want the time from the hand-off point to the answer leg's request written", ho["gap"])
	}

	var st struct {
		Streams []struct {
			Alias    string `json:"alias"`
			Upstream string `json:"upstream"`
			Handoff  *struct {
				ReasonUpstream string `json:"reason_upstream"`
				AnswerUpstream string `json:"answer_upstream"`
				Why            string `json:"why"`
			} `json:"handoff"`
		} `json:"streams"`
	}
	if err := json.Unmarshal(getStatusRaw(t, adminStatusURL), &st); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range st.Streams {
		if s.Alias == "baton" && s.Handoff != nil {
			found = true
			if s.Upstream != "echo-claude" || s.Handoff.ReasonUpstream != "reasoner" || s.Handoff.AnswerUpstream != "echo-claude" || s.Handoff.Why != "answer" {
				t.Errorf("status stream %+v %+v", s, *s.Handoff)
			}
		}
	}
	if !found {
		t.Errorf("the status view's recent streams have no hand-off: %+v", st.Streams)
	}
}

var _ = context.Background

// TestHandoffPrefillRefused: Anthropic's Claude 4.6 and later refuse an
// assistant prefill with a 400. The default inject for an `api anthropic`
// target is prefill; a target that refuses it gets the reasoning in the
// user turn instead, at once for that request (the client never sees the
// 400) and from then on without trying the prefill again.
func TestHandoffPrefillRefused(t *testing.T) {
	var claude *fakeUpstream
	claude = newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		body := claude.requests()[n-1].body
		msgs, _ := body["messages"].([]any)
		if last, _ := msgs[len(msgs)-1].(map[string]any); last["role"] == "assistant" {
			answerJSON(w, http.StatusBadRequest, `{"type":"error","error":{"type":"invalid_request_error","message":"This model does not support assistant message prefill. The conversation must end with a user message."}}`)
			return
		}
		// As a model without prefill would: answer, here by the echo
		// simulator, which says where it found the reasoning.
		raw, _ := json.Marshal(body)
		resp, err := http.Post("http://127.0.0.1:9087/echo/v1/messages", "application/json", bytes.NewReader(raw))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})
	relay := `llm_relay {
	key ` + taggedKey + `
	upstream reasoner http://127.0.0.1:9087/reason/v1 {
		api chat
	}
	upstream claude46 ` + claude.v1() + ` {
		api anthropic
	}
	model baton46 {
		reason reasoner sim-r1
		to claude46 claude-sonnet-4-6
	}
}`
	logFile := startRelay(t, relay, handoffSimSite)
	reasoning := handoffReasoning(t)
	for i, stream := range []bool{true, false} {
		got := chatGo(t, "baton46", stream)
		if got.reasoningContent != reasoning || got.content != echoOf("user", reasoning) {
			t.Errorf("request %d: reasoning %q, content %q; want the answer with the reasoning in the user turn", i+1, got.reasoningContent, got.content)
		}
	}
	// Three requests to the target: the refused prefill, then the user
	// turn; then the user turn alone.
	if n := len(claude.requests()); n != 3 {
		t.Errorf("the target got %d requests; want 3 (one refused prefill, then never again)", n)
	}
	if !strings.Contains(readLog(t, logFile), "refused the reasoning as a prefill") {
		t.Error("the log line does not say the prefill was refused")
	}
}

// TestHandoffReasoningStreamsAtOnce: the reasoning reaches the client as
// the reasoning leg sends it, not when the answer leg answers: with an
// answer leg that takes 800 ms to its first byte, the whole reasoning is
// at the client well before, in every smoothing mode.
func TestHandoffReasoningStreamsAtOnce(t *testing.T) {
	startRelay(t, handoffRelay, handoffSimSite)
	reasoning := handoffReasoning(t)
	for _, mode := range []string{"off", "pace", "split-reasoning"} {
		start := time.Now()
		resp := post(t, `{"model":"baton-slow","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			"Authorization", "Bearer "+taggedKey, "X-Relay-Mode", mode)
		r := sse.NewReader(resp.Body, 0)
		var got string
		var firstReasoning, reasoningDone, answerAt time.Duration
		for {
			ev, err := r.Next()
			if err != nil {
				break
			}
			var c struct {
				Choices []struct {
					Delta struct {
						ReasoningContent string `json:"reasoning_content"`
						Content          string `json:"content"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if json.Unmarshal(ev.Data, &c) != nil || len(c.Choices) == 0 {
				continue
			}
			if d := c.Choices[0].Delta; d.ReasoningContent != "" {
				if got == "" {
					firstReasoning = time.Since(start)
				}
				got += d.ReasoningContent
				if got == reasoning {
					reasoningDone = time.Since(start)
				}
			} else if d.Content != "" && answerAt == 0 {
				answerAt = time.Since(start)
			}
		}
		resp.Body.Close()
		if reasoningDone == 0 || answerAt == 0 {
			t.Fatalf("mode %s: reasoning %q (done at %v), answer at %v", mode, got, reasoningDone, answerAt)
		}
		// The answer leg's 800 ms wait follows the hand-off; the
		// reasoning (24 pieces, sent at once) starts at once, and, but in
		// split-reasoning (which spreads the burst across the wait, its
		// purpose), is all out long before the wait ends.
		if firstReasoning > 300*time.Millisecond {
			t.Errorf("mode %s: the first reasoning reached the client at %v: held back", mode, firstReasoning)
		}
		if mode != "split-reasoning" && answerAt-reasoningDone < 300*time.Millisecond {
			t.Errorf("mode %s: the reasoning was all at the client at %v, the answer at %v: held back with the answer", mode, reasoningDone, answerAt)
		}
	}
}

// TestHandoffRefusesLogprobs: the splice cannot carry the answer leg's
// log probabilities, so a request for them gets a 400 naming logprobs, in
// the client's dialect, before either leg is asked; a request that sets
// them off is served.
func TestHandoffRefusesLogprobs(t *testing.T) {
	startRelay(t, handoffRelay, handoffSimSite)
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"baton","stream":true,"logprobs":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/chat/completions", `{"model":"baton","top_logprobs":3,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"model":"baton","top_logprobs":2,"input":"hi"}`},
		{"/v1/responses", `{"model":"baton","include":["message.output_text.logprobs"],"input":"hi"}`},
	} {
		resp := postPath(t, tc.path, tc.body, "Authorization", "Bearer "+taggedKey)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Error struct{ Param, Message string } `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Error.Param != "logprobs" || !strings.Contains(e.Error.Message, "hand-off") {
			t.Errorf("%s %s: status %d, body %s; want 400 naming logprobs", tc.path, tc.body, resp.StatusCode, b)
		}
	}
	resp := post(t, `{"model":"baton","logprobs":false,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+taggedKey)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("logprobs false: status %d, body %s", resp.StatusCode, b)
	}
}
