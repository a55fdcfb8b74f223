package llmrelay_test

// Issue 25, end to end with openai-go's own accumulators: an Anthropic
// upstream's tool call whose input never came in deltas reaches Chat and
// Responses clients with arguments "{}", not ""; its pause_turn reaches
// them unfinished (finish_reason length; status incomplete with reason
// pause_turn), streamed and not.

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

func TestAnthropicUpstreamFaithfulToOpenAIClients(t *testing.T) {
	toolStream := []msgEvent{
		msgStart("msg_t"),
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		textDelta(0, "Listing."),
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"list_files","input":{}}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":1}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":7}}`},
		{"message_stop", `{"type":"message_stop"}`},
	}
	pausedStream := okMessageStream("msg_p", "Searching")
	pausedStream[5] = msgEvent{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"pause_turn","stop_sequence":null},"usage":{"output_tokens":7}}`}
	const pausedMessage = `{"id":"msg_p","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Searching"}],"stop_reason":"pause_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":7}}`
	up := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/tool/v1/messages":
			writeMessagesStream(w, 0, toolStream...)
		case "/paused/v1/messages":
			writeMessagesStream(w, 0, pausedStream...)
		case "/pausedwhole/v1/messages":
			answerJSON(w, http.StatusOK, pausedMessage)
		}
	})
	startRelay(t, `llm_relay {
		key `+sdkKey+`
		upstream tool `+up.URL+`/tool/v1 {
			api anthropic
		}
		upstream paused `+up.URL+`/paused/v1 {
			api anthropic
		}
		upstream pausedwhole `+up.URL+`/pausedwhole/v1 {
			api anthropic
		}
		model noargs {
			to tool claude-x
		}
		model paused {
			to paused claude-x
		}
		model paused-whole {
			to pausedwhole claude-x
		}
	}`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := openaiClient(sdkKey)

	// Chat Completions, streamed, through openai-go's accumulator.
	chatStream := func(model string) openai.ChatCompletion {
		t.Helper()
		s := client.Chat.Completions.NewStreaming(ctx, chatParams(model))
		defer s.Close()
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil || len(acc.Choices) != 1 {
			t.Fatalf("%s: %v, %d choices", model, err, len(acc.Choices))
		}
		return acc.ChatCompletion
	}
	c := chatStream("noargs")
	if calls := c.Choices[0].Message.ToolCalls; len(calls) != 1 || calls[0].Function.Name != "list_files" || calls[0].Function.Arguments != "{}" {
		t.Errorf("Chat stream: tool calls %+v; want list_files with arguments {}", calls)
	}
	if c = chatStream("paused"); c.Choices[0].FinishReason != "length" || c.Choices[0].Message.Content != "Searching" {
		t.Errorf("Chat stream, pause_turn: finish %q content %q; want length", c.Choices[0].FinishReason, c.Choices[0].Message.Content)
	}
	whole, err := client.Chat.Completions.New(ctx, chatParams("paused-whole"))
	if err != nil {
		t.Fatalf("Chat, pause_turn, whole: %v", err)
	}
	if len(whole.Choices) != 1 || whole.Choices[0].FinishReason != "length" {
		t.Errorf("Chat, pause_turn, whole: %v %s; want finish length", err, whole.RawJSON())
	}

	// Responses, streamed: the final response event.
	respStream := func(model string) responses.Response {
		t.Helper()
		s := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
		defer s.Close()
		var final responses.Response
		for s.Next() {
			if ev := s.Current(); ev.Type == "response.completed" || ev.Type == "response.incomplete" {
				final = ev.Response
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		return final
	}
	r := respStream("noargs")
	var args []string
	for _, it := range r.Output {
		if it.Type == "function_call" {
			args = append(args, it.Arguments.OfString)
		}
	}
	if len(args) != 1 || args[0] != "{}" || r.Status != "completed" {
		t.Errorf("Responses stream: status %q, function_call arguments %q; want completed, [{}]", r.Status, args)
	}
	if r = respStream("paused"); r.Status != "incomplete" || r.IncompleteDetails.Reason != "pause_turn" || r.OutputText() != "Searching" {
		t.Errorf("Responses stream, pause_turn: status %q reason %q text %q; want incomplete, pause_turn", r.Status, r.IncompleteDetails.Reason, r.OutputText())
	}
	wr, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "paused-whole", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if err != nil {
		t.Fatalf("Responses, pause_turn, whole: %v", err)
	}
	if wr.Status != "incomplete" || wr.IncompleteDetails.Reason != "pause_turn" {
		t.Errorf("Responses, pause_turn, whole: %v %s; want incomplete, pause_turn", err, wr.RawJSON())
	}
}
