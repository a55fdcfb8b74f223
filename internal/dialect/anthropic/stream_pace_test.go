package anthropic

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

type bufOutput struct{ bytes.Buffer }

func (*bufOutput) Flush() error { return nil }

// TestTranslatedStreamsThroughPacer: each translator's output, re-paced
// with split lanes by pace.Run in the client's format, ends as done and
// still carries the whole answer.
func TestTranslatedStreamsThroughPacer(t *testing.T) {
	cfg := pace.Config{Mode: pace.ModeSplit, MaxDelay: 20 * time.Millisecond, ReasoningMaxDelay: 20 * time.Millisecond, MinInterval: time.Millisecond}
	want := streamAnswer{
		content:   "Let me check Paris.",
		reasoning: "The user wants the weather.",
		tools:     []streamTool{{id: "toolu_01T1x", name: "get_weather", args: `{"location": "Paris"}`}},
		finish:    "tool_calls",
	}

	var chatOut bufOutput
	cfg.Format = pace.FormatChat
	res := pace.Run(context.Background(), cfg, nil, ToChatStream(sse.NewReader(strings.NewReader(wholeMessages), 0), chat.Options{IncludeUsage: true}), &chatOut, func() {})
	if res.End != pace.EndDone {
		t.Fatalf("Chat: end %d (%v), want done", res.End, res.Err)
	}
	if got := readAnswer(t, sse.NewReader(&chatOut.Buffer, 0)); fmtAnswer(got) != fmtAnswer(want) {
		t.Fatalf("Chat through the pacer:\ngot  %+v\nwant %+v", got, want)
	}

	var msgOut bufOutput
	cfg.Format = pace.FormatMessages
	res = pace.Run(context.Background(), cfg, nil, FromChatStream(sse.NewReader(strings.NewReader(wholeChat), 0), chat.Options{Model: "m"}), &msgOut, func() {})
	if res.End != pace.EndDone {
		t.Fatalf("Messages: end %d (%v), want done", res.End, res.Err)
	}
	want = streamAnswer{content: "Checking Paris.", reasoning: "Weather needed.",
		tools: []streamTool{{id: "call_9", name: "get_weather", args: `{"location": "Paris"}`}}, finish: "tool_calls"}
	if got := readAnswer(t, ToChatStream(sse.NewReader(&msgOut.Buffer, 0), chat.Options{})); fmtAnswer(got) != fmtAnswer(want) {
		t.Fatalf("Messages through the pacer:\ngot  %+v\nwant %+v", got, want)
	}
}
