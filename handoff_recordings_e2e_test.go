package llmrelay_test

// The baton pass on real recorded streams (testdata/recordings, whose
// README names each one's origin and license): each recording with
// reasoning is the reasoning leg, replayed by a fake upstream of its own
// dialect; the echo simulator is the answer leg. Real providers write
// reasoning in their own ways (DeepSeek's reasoning_content, Groq's and
// Alibaba's reasoning fields, Mistral's thinking content parts,
// Anthropic's thinking blocks) and end it with text or a tool call: the
// client must get exactly the recording's reasoning as reasoning, the
// answer leg's request exactly that reasoning, and the client none of the
// recording's own answer.

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// handoffRecordings are the recordings whose reasoning precedes their
// answer (text or tool calls), by the api that replays them.
var handoffRecordings = []recording{
	{path: "deepseek/reasoning", api: "chat"},
	{path: "groq/reasoning", api: "chat"},
	{path: "groq/reasoning-tool-call", api: "chat"},
	{path: "alibaba/reasoning", api: "chat"},
	{path: "mistral/reasoning-parts", api: "chat"},
	{path: "mistral/thinking-parts", api: "chat"},
	{path: "anthropic/thinking", api: "anthropic"},
}

func TestHandoffRecordedReasoning(t *testing.T) {
	var replayer *fakeUpstream
	replayer = newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		body := replayer.requests()[n-1].body // the harness read it
		model, _ := body["model"].(string)
		if body["stream"] != true {
			http.Error(w, "the reasoning leg must be asked for a stream", http.StatusBadRequest)
			return
		}
		replayRecording(w, model, true)
	})
	var b strings.Builder
	b.WriteString("llm_relay {\n\tkey " + taggedKey + "\n")
	for _, api := range []string{"anthropic", "chat"} {
		fmt.Fprintf(&b, "\tupstream rec-%s %s/%s/v1 {\n\t\tapi %s\n\t}\n", api, replayer.URL, api, api)
	}
	b.WriteString("\tupstream echo-chat http://127.0.0.1:9087/echo/v1 {\n\t\tapi chat\n\t}\n")
	for _, rec := range handoffRecordings {
		fmt.Fprintf(&b, "\tmodel ho-%s {\n\t\treason rec-%s %s\n\t\tto echo-chat sim-chat\n\t}\n", strings.ReplaceAll(rec.path, "/", "-"), rec.api, rec.path)
	}
	b.WriteString("}")
	startRelay(t, b.String(), handoffSimSite)

	for _, rec := range handoffRecordings {
		t.Run(rec.path, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(recordingsDir, filepath.FromSlash(rec.path)+".sse"))
			if err != nil {
				t.Fatal(err)
			}
			var want turn
			if rec.api == "anthropic" {
				want = messagesStreamTurn(raw)
			} else {
				want = chatStreamTurn(raw)
			}
			if want.Reasoning == "" || want.Text == "" && len(want.Calls) == 0 {
				t.Fatalf("the recording has no reasoning (%q) or no answer: pick another", want.Reasoning)
			}
			model := "ho-" + strings.ReplaceAll(rec.path, "/", "-")
			for _, stream := range []bool{true, false} {
				got := chatGo(t, model, stream)
				if got.reasoningContent != want.Reasoning {
					t.Errorf("stream %v: reasoning_content %q;\nwant the recording's %q", stream, got.reasoningContent, want.Reasoning)
				}
				if echo := echoOf("user", want.Reasoning); got.content != echo {
					t.Errorf("stream %v: content %q;\nwant the answer leg's echo %q", stream, got.content, echo)
				}
				if want.Text != "" && strings.Contains(got.content, want.Text) {
					t.Errorf("stream %v: the recording's own answer reached the client", stream)
				}
			}
			// An Anthropic client: a thinking block, then the answer.
			m, err := sendMessage(anthropicClient(relayBase, taggedKey), true, userParams(model))
			if err != nil {
				t.Fatalf("anthropic-sdk-go: %v", err)
			}
			if len(m.Content) != 2 || m.Content[0].Thinking != want.Reasoning || m.Content[1].Text != echoOf("user", want.Reasoning) {
				t.Errorf("anthropic-sdk-go: %+v", m.Content)
			}
		})
	}
}
