package llmrelay_test

// The official Go SDKs through the relay, across dialects: anthropic-sdk-go
// against the simulator as an `api anthropic` upstream (passed through) and
// as an `api chat` upstream (translated both ways), and openai-go against
// the simulator as an `api anthropic` upstream (translated). Expected texts
// come from the same simulator asked directly, without the relay.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

const sdkKey = "sk-relay-sdk"

// sdkRelay offers the one simulator under both dialects: claude-sim is it
// as an Anthropic upstream, chat-sim as a Chat Completions one; down fails
// every request (503 from the simulator), and truncated is a fake
// Anthropic upstream added by the test that needs it.
func sdkRelay(extra string) string {
	return `llm_relay {
		key ` + sdkKey + `
		upstream simanth ` + simV1 + ` {
			api anthropic
		}
		upstream simchat ` + simV1 + ` {
			api chat
		}
		upstream failing http://127.0.0.1:9084/fail/v1 {
			api anthropic
		}
		model claude-sim {
			to simanth sim-reasoner
		}
		model chat-sim {
			to simchat sim-reasoner
		}
		model down {
			to failing
		}
		upstream midway http://127.0.0.1:9084/midway/v1 {
			api anthropic
		}
		model midway {
			to midway sim-reasoner
		}
		failover {
			backoff 1ms 1ms
		}
		` + extra + `
	}`
}

// anthropicClient is an anthropic-sdk-go client for base, with nothing
// taken from the environment and no retries (a retried 5xx would hide
// what the relay answered).
func anthropicClient(base, key string) anthropic.Client {
	return anthropic.NewClient(
		aoption.WithoutEnvironmentDefaults(),
		aoption.WithBaseURL(base),
		aoption.WithAPIKey(key),
		aoption.WithMaxRetries(0),
		aoption.WithRequestTimeout(20*time.Second),
	)
}

// directAnthropic is the simulator itself, spoken to in Messages.
func directAnthropic() anthropic.Client {
	return anthropicClient("http://127.0.0.1:9084/sim", "sk-direct")
}

// sendMessage sends params with New, or with NewStreaming and accumulates
// the events into one Message (the SDK's own message.Accumulate).
func sendMessage(c anthropic.Client, stream bool, p anthropic.MessageNewParams, opts ...aoption.RequestOption) (*anthropic.Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !stream {
		return c.Messages.New(ctx, p, opts...)
	}
	s := c.Messages.NewStreaming(ctx, p, opts...)
	defer s.Close()
	var m anthropic.Message
	events := 0
	for s.Next() {
		events++
		if err := m.Accumulate(s.Current()); err != nil {
			return nil, err
		}
	}
	if err := s.Err(); err != nil {
		return &m, err
	}
	if events == 0 {
		return nil, errors.New("stream ended with no events")
	}
	return &m, nil
}

// msgParts is a Message cut into what the tests compare.
type msgParts struct {
	thinking, signature, text string
	toolUses                  []anthropic.ContentBlockUnion
	stop                      string
}

func partsOf(m *anthropic.Message) msgParts {
	p := msgParts{stop: string(m.StopReason)}
	for _, b := range m.Content {
		switch b.Type {
		case "thinking":
			p.thinking += b.Thinking
			p.signature += b.Signature
		case "text":
			p.text += b.Text
		case "tool_use":
			p.toolUses = append(p.toolUses, b)
		}
	}
	return p
}

func userParams(model string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: 4096,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say something mixed: ASCII, 中文, emoji."))},
	}
}

func withThinking(p anthropic.MessageNewParams) anthropic.MessageNewParams {
	p.Thinking = anthropic.ThinkingConfigParamOfEnabled(1024)
	return p
}

// weatherTool is the one tool of the round trips.
var weatherTool = anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
	Properties: map[string]any{"city": map[string]any{"type": "string", "description": "City name"}},
	Required:   []string{"city"},
}, "get_weather")

// send sends params (see sendMessage) and fails the test on an error.
func send(t *testing.T, what string, c anthropic.Client, stream bool, p anthropic.MessageNewParams) msgParts {
	t.Helper()
	m, err := sendMessage(c, stream, p)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return partsOf(m)
}

// TestAnthropicSDKGoThroughRelay: anthropic-sdk-go, streaming and not,
// gets the simulator's answer through the relay whether the target speaks
// Messages (passed through) or Chat Completions (translated): text,
// thinking, a tool-use round trip and count_tokens.
func TestAnthropicSDKGoThroughRelay(t *testing.T) {
	startRelay(t, sdkRelay(""), clientsSimSite)
	direct := directAnthropic()
	relay := anthropicClient(relayBase, sdkKey)
	chatReasoning, chatContent := directChat(t, simV1)

	for _, tc := range []struct {
		name, model string
		translated  bool
	}{
		{"anthropic upstream", "claude-sim", false},
		{"chat upstream", "chat-sim", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// What the relay must reproduce: the simulator's own answer in
			// the target's dialect.
			wantText, wantThinking := chatContent, chatReasoning
			var wantSignature string
			if !tc.translated {
				plain := send(t, "direct Messages request", direct, false, userParams("sim-reasoner"))
				thought := send(t, "direct Messages request with thinking", direct, false, withThinking(userParams("sim-reasoner")))
				wantText, wantThinking, wantSignature = plain.text, thought.thinking, thought.signature
				if thought.text != wantText || wantThinking == "" || wantSignature == "" {
					t.Fatalf("the simulator's Messages answer with thinking is %+v; want the same text %q after a signed thinking block", thought, wantText)
				}
			}
			for _, stream := range []bool{false, true} {
				mode := map[bool]string{false: "New", true: "NewStreaming"}[stream]

				got := send(t, mode, relay, stream, userParams(tc.model))
				if got.text != wantText || got.stop != "end_turn" {
					t.Errorf("%s: text %q stop %q;\nwant %q end_turn", mode, got.text, got.stop, wantText)
				}

				got = send(t, mode+" with thinking", relay, stream, withThinking(userParams(tc.model)))
				if got.thinking != wantThinking || got.text != wantText {
					t.Errorf("%s with thinking: thinking %q text %q;\nwant thinking %q text %q", mode, got.thinking, got.text, wantThinking, wantText)
				}
				if !tc.translated && got.signature != wantSignature {
					t.Errorf("%s with thinking: signature %q, want the upstream's %q unchanged", mode, got.signature, wantSignature)
				}

				checkToolRoundTrip(t, mode, relay, direct, stream, tc.model, tc.translated, wantText)
			}

			var httpResp *http.Response
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			n, err := relay.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
				Model:    anthropic.Model(tc.model),
				Messages: userParams(tc.model).Messages,
			}, aoption.WithResponseInto(&httpResp))
			if err != nil || n.InputTokens <= 0 {
				t.Fatalf("count_tokens: %v, %+v", err, n)
			}
			if est := httpResp.Header.Get("X-Relay-Estimated"); tc.translated && est != "true" {
				t.Errorf("count_tokens on a chat-only chain: X-Relay-Estimated %q, want true (the estimator answers)", est)
			}
		})
	}
}

// checkToolRoundTrip forces a tool (tool_choice any), checks the tool_use
// block, sends its tool_result back and checks the text answer.
func checkToolRoundTrip(t *testing.T, mode string, relay, direct anthropic.Client, stream bool, model string, translated bool, wantText string) {
	t.Helper()
	p := userParams(model)
	p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))}
	p.Tools = []anthropic.ToolUnionParam{weatherTool}
	p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}}
	m, err := sendMessage(relay, stream, p)
	if err != nil {
		t.Fatalf("%s forcing a tool: %v", mode, err)
	}
	call := partsOf(m)
	if call.stop != "tool_use" || len(call.toolUses) == 0 {
		t.Fatalf("%s forcing a tool: stop %q, %d tool_use blocks; want tool_use", mode, call.stop, len(call.toolUses))
	}
	use := call.toolUses[0]
	var input map[string]any
	if use.Name != "get_weather" || use.ID == "" || json.Unmarshal(use.Input, &input) != nil {
		t.Fatalf("%s: tool_use %s %q input %s; want get_weather with an id and a JSON object", mode, use.Name, use.ID, use.Input)
	}
	if !translated {
		// Passed through: the same call the simulator makes when asked
		// directly (ids aside).
		d := send(t, "direct forced tool", direct, false, withModel(p, "sim-reasoner"))
		if len(d.toolUses) == 0 || d.toolUses[0].Name != use.Name || string(d.toolUses[0].Input) != string(use.Input) {
			t.Errorf("%s: tool_use input %s, the simulator's own is %+v", mode, use.Input, d.toolUses)
		}
	}

	p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{}}
	p.Messages = append(p.Messages, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "18°C and sunny", false)))
	answer := send(t, mode+" after the tool result", relay, stream, p)
	if answer.stop != "end_turn" || len(answer.toolUses) != 0 || answer.text == "" {
		t.Fatalf("%s after the tool result: %+v; want a text answer ending end_turn", mode, answer)
	}
	want := wantText
	if !translated {
		want = send(t, "direct after the tool result", direct, false, withModel(p, "sim-reasoner")).text
	}
	if answer.text != want {
		t.Errorf("%s after the tool result: text %q, want %q", mode, answer.text, want)
	}
}

func withModel(p anthropic.MessageNewParams, model string) anthropic.MessageNewParams {
	p.Model = anthropic.Model(model)
	return p
}

// TestAnthropicSDKGoTypedErrors: what the relay answers itself, and an
// upstream failure after the commit point, reach anthropic-sdk-go as
// *anthropic.Error with the status and type its users branch on.
func TestAnthropicSDKGoTypedErrors(t *testing.T) {
	cut := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		writeMessagesStream(w, 0, okMessageStream("msg_cut", "half an answer")[:4]...)
	})
	startRelay(t, sdkRelay(`upstream cut `+cut.v1()+` {
			api anthropic
		}
		model truncated {
			to cut
		}`), clientsSimSite)
	relay := anthropicClient(relayBase, sdkKey)
	for _, tc := range []struct {
		name, model, key string
		status           int
		typ              string
	}{
		{"unknown model", "no-such-model", sdkKey, 404, "not_found_error"},
		{"wrong key", "claude-sim", "sk-wrong", 401, "authentication_error"},
		{"every target fails", "down", sdkKey, 502, "api_error"},
	} {
		for _, stream := range []bool{false, true} {
			c := relay
			if tc.key != sdkKey {
				c = anthropicClient(relayBase, tc.key)
			}
			_, err := sendMessage(c, stream, userParams(tc.model))
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status || string(apiErr.Type()) != tc.typ || apiErr.Message == "" {
				t.Errorf("%s (stream %v): %v; want *anthropic.Error %d %s with a message", tc.name, stream, err, tc.status, tc.typ)
			}
		}
	}

	// After the commit point the stream cannot change status: the relay
	// ends it with an error event, which the SDK raises as a typed error.
	m, err := sendMessage(relay, true, userParams("truncated"))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || string(apiErr.Type()) != "api_error" {
		t.Fatalf("truncated stream: %v; want an *anthropic.Error of type api_error", err)
	}
	if m == nil || len(m.Content) == 0 || m.Content[0].Text != "half an answer" {
		t.Errorf("truncated stream: what arrived before the error is %+v", m)
	}

	// The upstream's own in-band error after the commit point (the
	// simulator's overloaded_error event) reaches the SDK as that error.
	m, err = sendMessage(relay, true, userParams("midway"))
	if !errors.As(err, &apiErr) || string(apiErr.Type()) != "overloaded_error" {
		t.Fatalf("in-band error: %v; want an *anthropic.Error of type overloaded_error", err)
	}
	if m == nil || len(m.Content) == 0 || m.Content[0].Text == "" {
		t.Errorf("in-band error: the text before it did not arrive: %+v", m)
	}
}

// TestOpenAIGoAgainstAnthropicUpstream: openai-go asks the relay for a
// model whose target speaks only Messages: the answer is translated back
// to Chat Completions, streaming and not, with reasoning, a tool-call round
// trip and typed errors.
func TestOpenAIGoAgainstAnthropicUpstream(t *testing.T) {
	startRelay(t, sdkRelay(""), clientsSimSite)
	direct := directAnthropic()
	plain := send(t, "direct Messages request", direct, false, userParams("sim-reasoner"))
	thought := send(t, "direct Messages request with thinking", direct, false, withThinking(userParams("sim-reasoner")))
	client := openaiClient(sdkKey)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	res, err := client.Chat.Completions.New(ctx, chatParams("claude-sim"))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if len(res.Choices) != 1 || res.Choices[0].Message.Content != plain.text || res.Choices[0].FinishReason != "stop" || res.Usage.PromptTokens <= 0 || res.Usage.CompletionTokens <= 0 {
		t.Fatalf("New: %+v; want content %q, stop, usage", res, plain.text)
	}

	got := streamChatGo(t, client, "claude-sim")
	if r, c := strings.Join(got.reasoning, ""), strings.Join(got.content, ""); r != plain.thinking || c != plain.text {
		t.Errorf("stream: reasoning %q content %q;\nwant %q and %q", r, c, plain.thinking, plain.text)
	}
	if got.finish != "stop" || got.usage.CompletionTokens <= 0 || len(got.ids) != 1 {
		t.Errorf("stream: finish %q, usage %+v, ids %v", got.finish, got.usage, got.ids)
	}
	got = streamChatGo(t, client, "claude-sim", option.WithJSONSet("reasoning_effort", "low"))
	if r, c := strings.Join(got.reasoning, ""), strings.Join(got.content, ""); r != thought.thinking || c != thought.text {
		t.Errorf("stream with reasoning_effort low: reasoning %q content %q;\nwant %q and %q", r, c, thought.thinking, thought.text)
	}

	for _, stream := range []bool{false, true} {
		checkOpenAIToolRoundTrip(t, client, "claude-sim", stream)
	}

	for _, tc := range []struct {
		name, model, key string
		status           int
	}{
		{"unknown model", "no-such-model", sdkKey, 404},
		{"wrong key", "claude-sim", "sk-wrong", 401},
		{"every target fails", "down", sdkKey, 502},
	} {
		c := openaiClient(tc.key)
		_, err := c.Chat.Completions.New(ctx, chatParams(tc.model))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status || apiErr.Code == "" {
			t.Errorf("%s: %v; want *openai.Error %d with a code", tc.name, err, tc.status)
		}
	}
}

// streamChatGo streams model with openai-go and include_usage, collecting
// the deltas per channel; a stream error fails the test.
func streamChatGo(t *testing.T, client openai.Client, model string, opts ...option.RequestOption) goStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := chatParams(model)
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
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

// checkOpenAIToolRoundTrip forces a tool call (tool_choice required) from
// a Messages upstream, streamed through openai-go's accumulator or not,
// and sends the tool's answer back.
func checkOpenAIToolRoundTrip(t *testing.T, client openai.Client, model string, stream bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name:       "get_weather",
			Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
		})},
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
	}
	var msg openai.ChatCompletionMessage
	var finish string
	if stream {
		s := client.Chat.Completions.NewStreaming(ctx, params)
		acc := openai.ChatCompletionAccumulator{}
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatalf("streamed tool call: %v", err)
		}
		_ = s.Close()
		if len(acc.Choices) != 1 {
			t.Fatalf("streamed tool call: %d choices", len(acc.Choices))
		}
		msg, finish = acc.Choices[0].Message, acc.Choices[0].FinishReason
	} else {
		res, err := client.Chat.Completions.New(ctx, params)
		if err != nil || len(res.Choices) != 1 {
			t.Fatalf("tool call: %v %+v", err, res)
		}
		msg, finish = res.Choices[0].Message, res.Choices[0].FinishReason
	}
	if finish != "tool_calls" || len(msg.ToolCalls) == 0 {
		t.Fatalf("stream %v: finish %q, tool calls %+v; want tool_calls", stream, finish, msg.ToolCalls)
	}
	call := msg.ToolCalls[0]
	var args map[string]any
	if call.ID == "" || call.Function.Name != "get_weather" || json.Unmarshal([]byte(call.Function.Arguments), &args) != nil {
		t.Fatalf("stream %v: tool call %+v; want get_weather with an id and JSON arguments", stream, call)
	}

	params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")}
	params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage("18°C and sunny", call.ID))
	res, err := client.Chat.Completions.New(ctx, params)
	if err != nil || len(res.Choices) != 1 {
		t.Fatalf("after the tool result: %v %+v", err, res)
	}
	if c := res.Choices[0]; c.FinishReason != "stop" || c.Message.Content == "" || len(c.Message.ToolCalls) != 0 {
		t.Fatalf("stream %v, after the tool result: %+v; want a text answer", stream, c)
	}
}
