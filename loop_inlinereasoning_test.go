package llmrelay

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// taggedConfig is a relay whose one upstream "u" (api chat) writes its
// reasoning inline, as inline says (the InlineReasoning JSON members).
func taggedConfig(inline, extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return `{
		"upstreams": [{"name": "u", "api": "chat"` + inline + `}],
		"models": [{"alias": "loop", "targets": [{"upstream": "u"}]}]` + extra + `
	}`
}

// chatText is what a Chat client got: the reasoning (either field) and
// the content, each joined over the stream's chunks.
func chatText(t *testing.T, datas []string) (reasoning, content string) {
	t.Helper()
	var r, c strings.Builder
	for _, d := range datas {
		if d == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta map[string]json.RawMessage `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			t.Fatalf("a chunk that is not JSON: %s", d)
		}
		for _, choice := range ch.Choices {
			for k, v := range choice.Delta {
				var s string
				if json.Unmarshal(v, &s) != nil {
					continue
				}
				switch k {
				case "reasoning_content", "reasoning":
					r.WriteString(s)
				case "content":
					c.WriteString(s)
				}
			}
		}
	}
	return r.String(), c.String()
}

// A stream cut short inside its reasoning block (max_tokens: no closing
// tag, finish_reason length) sends everything after the opening tag as
// reasoning, never as answer; a whole answer likewise.
func TestLoopTaggedReasoningUnclosed(t *testing.T) {
	length := strings.Replace(chatStop, `"stop"`, `"length"`, 1)
	u := fakeUpstream("u", func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 2 { // the second request, not a stream
			sendJSON(w, http.StatusOK, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"<think>\nstep one, step"},"finish_reason":"length"}]}`)
			return
		}
		sendSSE(w, data(chatChunk("<th")), data(chatChunk("ink>\nstep one,")), data(chatChunk(" step</thi")), data(length), data("[DONE]"))
	})
	lr := startLoop(t, taggedConfig(`, "reasoning_format": "tags"`, ""), u)
	res := lr.post("/v1/chat/completions", chatStreamReq)
	res.expect(t, http.StatusOK, "u", "1")
	reasoning, content := chatText(t, res.datas())
	if reasoning != "step one, step</thi" || content != "" {
		t.Errorf("reasoning %q content %q; want all of it as reasoning, no answer", reasoning, content)
	}
	res = lr.post("/v1/chat/completions", chatReq)
	var whole struct {
		Choices []struct {
			Message struct {
				Content          string `json:"content"`
				ReasoningContent string `json:"reasoning_content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(res.body), &whole); err != nil || len(whole.Choices) != 1 {
		t.Fatalf("answer %s: %v", res.body, err)
	}
	if m := whole.Choices[0].Message; m.ReasoningContent != "step one, step" || m.Content != "" {
		t.Errorf("message %+v; want all of it as reasoning", m)
	}
}

// With reasoning_format auto, an answer that begins with text and
// mentions <think> later is not split: it passes byte for byte; without
// a reasoning_format line, content is never read for tags.
func TestLoopTaggedReasoningAutoLeavesAnswers(t *testing.T) {
	stream := chatStream("The tag ", "<think> opens", " a block</think>.")
	u := fakeUpstream("u", func(_ int, w http.ResponseWriter, _ *http.Request) { sendSSE(w, stream...) })
	for _, inline := range []string{`, "reasoning_format": "auto"`, ``} {
		lr := startLoop(t, taggedConfig(inline, `"smoothing": {"mode": "off"}`), u)
		res := lr.post("/v1/chat/completions", chatStreamReq)
		res.expect(t, http.StatusOK, "u", "1")
		if want := strings.Join(stream, ""); res.body != want {
			t.Errorf("%s: body\n%s\nwant the upstream's\n%s", inline, res.body, want)
		}
	}
}
