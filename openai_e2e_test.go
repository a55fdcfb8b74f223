package llmrelay_test

// The wire format checked with the official openai-go client: streaming and
// non-streaming through a real Caddy, relay in front of the simulator.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmrelay/caddy-llm-relay/internal/sim"
)

// simSite runs two simulators on :9081: /good/ (clustered reasoning, as
// reasoning models send it) and /drop/ (drops the connection mid-stream).
const simSite = `http://127.0.0.1:9081 {
	handle /good/* {
		llm_simulator {
			model sim-reasoner
			seed 7
			reasoning_tokens 50
			content_tokens 30
			reasoning_pattern clustered 10 30ms
			content_pattern steady 400
		}
	}
	handle /drop/* {
		llm_simulator {
			seed 7
			reasoning_tokens 0
			content_tokens 30
			pattern steady 0
			drop_after 5
		}
	}
}`

const simRelay = `llm_relay {
	key sk-test-client
	upstream good http://127.0.0.1:9081/good/v1
	upstream drop http://127.0.0.1:9081/drop/v1
	model sim-reasoner {
		to good
	}
	model dropper {
		to drop
	}
}`

// expectedTexts is what the /good/ simulator sends.
func expectedTexts() (reasoning, content string) {
	r, c := 50, 30
	rs, cs := sim.Texts(sim.Config{Seed: 7, ReasoningTokens: &r, ContentTokens: &c})
	return strings.Join(rs, ""), strings.Join(cs, "")
}

func openaiClient(key string) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(relayBase+"/v1/"),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(20*time.Second),
	)
}

func chatParams(model string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say something mixed: ASCII, 中文, emoji.")},
	}
}

func TestOpenAIGoStreamingReassemblesExactly(t *testing.T) {
	startRelay(t, simRelay, simSite)
	wantReasoning, wantContent := expectedTexts()
	if wantReasoning == "" || wantContent == "" {
		t.Fatal("simulator texts are empty")
	}

	client := openaiClient("sk-test-client")
	params := chatParams("sim-reasoner")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	var reasoning, content strings.Builder
	var finish string
	var usage openai.CompletionUsage
	events := 0
	for stream.Next() {
		events++
		ch := stream.Current()
		if ch.Usage.TotalTokens > 0 {
			usage = ch.Usage
		}
		for _, c := range ch.Choices {
			content.WriteString(c.Delta.Content)
			if f, ok := c.Delta.JSON.ExtraFields["reasoning_content"]; ok && f.Raw() != "" {
				var s string
				if err := json.Unmarshal([]byte(f.Raw()), &s); err != nil {
					t.Fatalf("reasoning_content %q: %v", f.Raw(), err)
				}
				reasoning.WriteString(s)
			}
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream error: %v", err)
	}
	if reasoning.String() != wantReasoning {
		t.Errorf("reasoning differs:\n got %q\nwant %q", reasoning.String(), wantReasoning)
	}
	if content.String() != wantContent {
		t.Errorf("content differs:\n got %q\nwant %q", content.String(), wantContent)
	}
	if finish != "stop" {
		t.Errorf("finish_reason %q", finish)
	}
	if usage.CompletionTokensDetails.ReasoningTokens != 50 || usage.CompletionTokens != 80 {
		t.Errorf("usage %+v", usage)
	}
	if events < 80 {
		t.Errorf("only %d events: the stream was not forwarded event by event", events)
	}
}

func TestOpenAIGoNonStreaming(t *testing.T) {
	startRelay(t, simRelay, simSite)
	_, wantContent := expectedTexts()
	client := openaiClient("sk-test-client")
	res, err := client.Chat.Completions.New(context.Background(), chatParams("sim-reasoner"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Choices) != 1 || res.Choices[0].Message.Content != wantContent {
		t.Fatalf("choices %+v", res.Choices)
	}
	if res.Usage.CompletionTokensDetails.ReasoningTokens != 50 {
		t.Errorf("usage %+v", res.Usage)
	}
	models, err := client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "sim-reasoner,dropper" {
		t.Errorf("models %v", ids)
	}
}

func TestOpenAIGoSeesRelayErrors(t *testing.T) {
	startRelay(t, simRelay, simSite)
	ctx := context.Background()

	wrong, good := openaiClient("sk-wrong"), openaiClient("sk-test-client")
	_, err := wrong.Chat.Completions.New(ctx, chatParams("sim-reasoner"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Code != "invalid_api_key" {
		t.Errorf("wrong key: %v", err)
	}
	_, err = good.Chat.Completions.New(ctx, chatParams("no-such-model"))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" {
		t.Errorf("unknown model: %v", err)
	}

	// A stream that breaks after the commit point ends with an in-band
	// error that the SDK raises, after the content that did arrive.
	stream := good.Chat.Completions.NewStreaming(ctx, chatParams("dropper"))
	got := 0
	for stream.Next() {
		got++
	}
	if stream.Err() == nil {
		t.Fatalf("a dropped stream ended without an error after %d events", got)
	}
	if !strings.Contains(stream.Err().Error(), "upstream") {
		t.Errorf("stream error %v", stream.Err())
	}
	if got != 5 {
		t.Errorf("client saw %d events before the error, want the 5 the upstream sent", got)
	}
}
