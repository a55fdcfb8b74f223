package llmrelay_test

// The baton pass (issue 28) through the official Go SDKs: a hand-off
// alias reasons on the reasoning simulator and answers on the echo
// simulator, which answers with what it found injected in its request
// ("handoff:<where>:<reasoning>"). So each test checks, in one answer,
// that the client got the reasoning leg's reasoning as reasoning, the
// answer leg's answer as the answer, and that the answer leg's request
// held exactly that reasoning at the configured position.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/llmrelay/caddy-llm-relay/internal/sim"
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
	handle /echo/* {
		llm_simulator {
			seed 29
			content_tokens 8
			pattern steady 0
			echo handoff
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
	upstream echo-claude http://127.0.0.1:9087/echo/v1 {
		api anthropic
	}
	upstream echo-chat http://127.0.0.1:9087/echo/v1 {
		api chat
	}
	model baton {
		reason reasoner sim-r1
		to echo-claude sim-claude
	}
	model baton-user {
		reason reasoner sim-r1
		to echo-chat sim-chat
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

var _ = context.Background
var _ = time.Second
