package llmrelay_test

// Issue 25: a request that is not valid in the client's own dialect,
// found while translating it, is answered at once with 400
// invalid_request_error in that dialect, naming the member (OpenAI's
// param; in Anthropic's message), and no upstream is called; a valid
// request one upstream dialect cannot express still skips that target.
// Checked with the official Go SDKs, which raise both as their
// BadRequest errors.

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

func TestInvalidRequestAnsweredAtOnce(t *testing.T) {
	anth := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, http.StatusOK, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
	})
	chatUp := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, http.StatusOK, okCompletion)
	})
	startRelay(t, `llm_relay {
		key `+sdkKey+`
		upstream anth `+anth.v1()+` {
			api anthropic
		}
		upstream chatup `+chatUp.v1()+` {
			api chat
		}
		model to-anth {
			to anth claude-x
		}
		model to-chat {
			to chatup gpt-x
		}
		model mixed {
			to anth claude-x
			to chatup gpt-x
		}
		failover {
			backoff 1ms 1ms
		}
	}`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	oai := openaiClient(sdkKey)
	ant := anthropicClient(relayBase, sdkKey)

	// wantOpenAI checks an openai-go error: 400 invalid_request_error with
	// the member in param and in the message.
	wantOpenAI := func(what string, err error, param string) {
		t.Helper()
		var e *openai.Error
		if !errors.As(err, &e) || e.StatusCode != http.StatusBadRequest || e.Type != "invalid_request_error" ||
			e.Code != "invalid_request" || e.Param != param || !strings.Contains(e.Message, param) {
			t.Errorf("%s: %v %s; want 400 invalid_request_error, code invalid_request, param %q", what, err, apiErrJSON(err), param)
		}
	}
	// wantAnthropic checks an anthropic-sdk-go error: 400
	// invalid_request_error, the member in the message (the shape has no
	// param).
	wantAnthropic := func(what string, err error, param string) {
		t.Helper()
		var e *anthropic.Error
		if !errors.As(err, &e) || e.StatusCode != http.StatusBadRequest || string(e.Type()) != "invalid_request_error" ||
			!strings.Contains(e.RawJSON(), param) {
			t.Errorf("%s: %v; want 400 invalid_request_error naming %q", what, err, param)
		}
	}

	// Chat Completions clients, for an Anthropic upstream.
	chat := chatParams("to-anth")
	chat.ReasoningEffort = shared.ReasoningEffort("extreme")
	_, err := oai.Chat.Completions.New(ctx, chat)
	wantOpenAI("an unknown reasoning_effort", err, "reasoning_effort")
	s := oai.Chat.Completions.NewStreaming(ctx, chat)
	for s.Next() {
	}
	wantOpenAI("an unknown reasoning_effort, stream", s.Err(), "reasoning_effort")
	s.Close()
	_, err = oai.Chat.Completions.New(ctx, chatParams("to-anth"), option.WithJSONSet("tools", []any{map[string]any{"type": "function", "function": map[string]any{"name": "f"}}}),
		option.WithJSONSet("tool_choice", map[string]any{"type": "function", "function": map[string]any{}}))
	wantOpenAI("a function tool_choice without a name", err, "tool_choice.function.name")
	_, err = oai.Chat.Completions.New(ctx, chatParams("to-anth"), option.WithJSONSet("messages.0.content", nil))
	wantOpenAI("a user message with content null", err, "messages[0].content")
	_, err = oai.Chat.Completions.New(ctx, chatParams("to-anth"), option.WithJSONSet("tools", []any{map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": "object"}}}))
	wantOpenAI("parameters that are not an object", err, "tools[0].function.parameters")

	// Anthropic Messages clients, for a Chat upstream.
	for _, stream := range []bool{false, true} {
		p := userParams("to-chat")
		p.Thinking = anthropic.ThinkingConfigParamOfEnabled(-5)
		_, err = sendMessage(ant, stream, p)
		wantAnthropic("a negative budget_tokens", err, "thinking.budget_tokens")
	}
	p := userParams("to-chat")
	p.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "f", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}}}}
	p.ToolChoice = anthropic.ToolChoiceParamOfTool("")
	_, err = sendMessage(ant, false, p)
	wantAnthropic("a tool tool_choice without a name", err, "tool_choice.name")
	_, err = sendMessage(ant, false, userParams("to-chat"), aoption.WithJSONSet("messages.0.content", nil))
	wantAnthropic("a turn with content null", err, "messages[0].content")
	_, err = sendMessage(ant, false, userParams("to-chat"), aoption.WithJSONSet("tools", []any{map[string]any{"name": "f", "input_schema": "object"}}))
	wantAnthropic("an input_schema that is not an object", err, "tools[0].input_schema")

	// Responses clients, for either upstream (through Chat for Anthropic).
	effort := responses.ResponseNewParams{Model: "to-anth", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffort("extreme")}}
	_, err = oai.Responses.New(ctx, effort)
	wantOpenAI("an unknown reasoning.effort", err, "reasoning.effort")
	_, err = oai.Responses.New(ctx, responses.ResponseNewParams{Model: "to-chat", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}},
		option.WithJSONSet("tools", []any{map[string]any{"type": "function", "name": "f", "parameters": map[string]any{}}}),
		option.WithJSONSet("tool_choice", map[string]any{"type": "function"}))
	wantOpenAI("a function tool_choice without a name", err, "tool_choice.name")

	if n := len(anth.requests()) + len(chatUp.requests()); n != 0 {
		t.Fatalf("the upstreams were called %d times for invalid requests", n)
	}

	// A valid request one dialect cannot express still skips that target:
	// n=2 goes past the Anthropic target to the Chat one...
	res, err := oai.Chat.Completions.New(ctx, chatParams("mixed"), option.WithJSONSet("n", 2))
	if err != nil || len(res.Choices) == 0 || res.Choices[0].Message.Content != "hello" {
		t.Fatalf("n=2 on a chain with a Chat target: %v %+v", err, res)
	}
	if len(anth.requests()) != 0 || len(chatUp.requests()) != 1 {
		t.Fatalf("n=2: the Anthropic target got %d requests, the Chat one %d; want 0 and 1", len(anth.requests()), len(chatUp.requests()))
	}
	// ...and with no target left, it is the 400 untranslatable_request of
	// before: a Responses tool_choice required with only hosted tools,
	// which a Chat provider can neither run nor keep.
	_, err = oai.Responses.New(ctx, responses.ResponseNewParams{Model: "to-chat", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}},
		option.WithJSONSet("tools", []any{map[string]any{"type": "web_search"}}), option.WithJSONSet("tool_choice", "required"))
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusBadRequest || e.Code != "untranslatable_request" || !strings.Contains(e.Message, "tool_choice") {
		t.Fatalf("hosted tool with tool_choice required: %v %s", err, apiErrJSON(err))
	}
	if len(chatUp.requests()) != 1 {
		t.Fatalf("the Chat upstream got the hosted-tool request")
	}

	// None of it was the upstreams' doing: no health sample for them.
	for _, tg := range getRelayStatus(t).Targets {
		if tg.Upstream == "anth" && (tg.Samples != 0 || tg.ConsecutiveFailures != 0) {
			t.Errorf("target %s: %d samples, %d consecutive failures; a request never sent says nothing of its health", tg.Name, tg.Samples, tg.ConsecutiveFailures)
		}
	}
}

// TestUntranslatableTargetTakesNoAttempt: a target that cannot be sent the
// request (a valid request its dialect cannot express, an endpoint it does
// not have) takes none of the chain's attempts: with `attempts 1`, the
// next target still answers.
func TestUntranslatableTargetTakesNoAttempt(t *testing.T) {
	anth := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, http.StatusOK, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
	})
	chatUp := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/embeddings") {
			answerJSON(w, http.StatusOK, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5]}],"model":"gpt-x","usage":{"prompt_tokens":1,"total_tokens":1}}`)
			return
		}
		answerJSON(w, http.StatusOK, okCompletion)
	})
	startRelay(t, `llm_relay {
		upstream anth `+anth.v1()+` {
			api anthropic
		}
		upstream chatup `+chatUp.v1()+` {
			api chat
		}
		model mixed {
			to anth claude-x
			to chatup gpt-x
		}
		failover {
			attempts 1
		}
	}`)
	// n=2: Messages carries one answer, so the Anthropic target is skipped.
	resp := post(t, `{"model":"mixed","n":2,"messages":[{"role":"user","content":"hi"}]}`)
	if body := readAll(t, resp); resp.StatusCode != http.StatusOK || resp.Header.Get("X-Relay-Upstream") != "chatup" {
		t.Fatalf("n=2 with attempts 1: %d from %q: %s; want the Chat target's answer", resp.StatusCode, resp.Header.Get("X-Relay-Upstream"), body)
	}
	// Embeddings: an Anthropic upstream has no such endpoint.
	resp = postPath(t, "/v1/embeddings", `{"model":"mixed","input":"hi"}`)
	if body := readAll(t, resp); resp.StatusCode != http.StatusOK || resp.Header.Get("X-Relay-Upstream") != "chatup" {
		t.Fatalf("embeddings with attempts 1: %d from %q: %s; want the Chat target's answer", resp.StatusCode, resp.Header.Get("X-Relay-Upstream"), body)
	}
	if n := len(anth.requests()); n != 0 {
		t.Errorf("the Anthropic upstream got %d requests", n)
	}
}
