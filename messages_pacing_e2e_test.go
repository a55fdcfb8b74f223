package llmrelay_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// pacingSimSite is a simulator whose reasoning and answer arrive in
// clusters, as reasoning models send them.
const pacingSimSite = `http://127.0.0.1:9097 {
	llm_simulator {
		seed 5
		reasoning_tokens 60
		content_tokens 40
		pattern clustered 20 250ms 1ms
	}
}`

// messagesDeltas reads a Messages stream: the text of each channel's
// deltas, in order, and checks every block's event line names its data.
func messagesDeltas(t *testing.T, stream string) (thinking, text []string) {
	t.Helper()
	for _, block := range strings.Split(strings.TrimSpace(stream), "\n\n") {
		if strings.HasPrefix(block, ":") {
			continue // a heartbeat
		}
		typ, data, ok := strings.Cut(block, "\ndata: ")
		var ev struct {
			Type  string `json:"type"`
			Delta struct {
				Type     string `json:"type"`
				Text     string `json:"text"`
				Thinking string `json:"thinking"`
			} `json:"delta"`
		}
		if !ok || json.Unmarshal([]byte(data), &ev) != nil || typ != "event: "+ev.Type {
			t.Fatalf("a block whose event line does not name its data:\n%q", block)
		}
		switch ev.Delta.Type {
		case "text_delta":
			text = append(text, ev.Delta.Text)
		case "thinking_delta":
			thinking = append(thinking, ev.Delta.Thinking)
		}
	}
	return thinking, text
}

// A Messages client's stream is re-paced (split-reasoning): thinking and
// text arrive byte-exact per channel, in other pieces than the upstream
// sent, every block keeping its event line; the official SDK assembles
// the same message as without the relay. Passed through from an Anthropic
// upstream and translated from a Chat one.
func TestMessagesStreamRepaced(t *testing.T) {
	startRelay(t, `llm_relay {
		upstream claude http://127.0.0.1:9097/v1 {
			api anthropic
		}
		upstream deepseek http://127.0.0.1:9097/v1 {
			api chat
		}
		model claude-paced {
			to claude sim-reasoner
		}
		model chat-paced {
			to deepseek sim-reasoner
		}
		smoothing split-reasoning
	}`, pacingSimSite)
	body := func(model string) string {
		return `{"model":"` + model + `","max_tokens":4096,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`
	}
	resp, err := httpClient.Post("http://127.0.0.1:9097/v1/messages", "application/json", strings.NewReader(body("sim-reasoner")))
	if err != nil {
		t.Fatal(err)
	}
	upThinking, upText := messagesDeltas(t, readAll(t, resp))
	if len(upThinking) == 0 || len(upText) == 0 {
		t.Fatalf("the simulator sent %d thinking and %d text deltas", len(upThinking), len(upText))
	}
	for _, model := range []string{"claude-paced", "chat-paced"} {
		raw := readAll(t, postMessages(t, body(model)))
		thinking, text := messagesDeltas(t, raw)
		if strings.Join(thinking, "") != strings.Join(upThinking, "") || strings.Join(text, "") != strings.Join(upText, "") {
			t.Fatalf("%s: the text changed on its way:\nthinking %q\nwant     %q\ntext %q\nwant %q", model, strings.Join(thinking, ""), strings.Join(upThinking, ""), strings.Join(text, ""), strings.Join(upText, ""))
		}
		if strings.Join(thinking, "\x00") == strings.Join(upThinking, "\x00") && strings.Join(text, "\x00") == strings.Join(upText, "\x00") {
			t.Errorf("%s: the deltas are the upstream's, piece for piece: not re-paced", model)
		}
		if !strings.HasSuffix(strings.TrimSpace(raw), `data: {"type":"message_stop"}`) {
			t.Errorf("%s: the stream does not end with message_stop:\n%s", model, raw)
		}

		p := withThinking(userParams(model))
		got := send(t, model, anthropicClient(relayBase, ""), true, p)
		if got.thinking != strings.Join(upThinking, "") || got.text != strings.Join(upText, "") {
			t.Errorf("%s: the SDK assembled thinking %q text %q", model, got.thinking, got.text)
		}
	}
}

// A Responses stream is re-paced too (split-reasoning), native and
// translated from Chat: each channel's deltas byte-exact, event lines
// kept, sequence numbers counting up by one from 0 although pieces were
// split or merged, and openai-go assembles the same text.
func TestResponsesStreamRepaced(t *testing.T) {
	startRelay(t, `llm_relay {
		upstream native http://127.0.0.1:9097/v1
		upstream deepseek http://127.0.0.1:9097/v1 {
			api chat
		}
		model native-paced {
			to native sim-reasoner
		}
		model chat-paced {
			to deepseek sim-reasoner
		}
		smoothing split-reasoning
	}`, pacingSimSite)
	body := func(model string) string {
		return `{"model":"` + model + `","stream":true,"reasoning":{"effort":"low"},"input":"hi"}`
	}
	read := func(stream string) (reasoning, text []string, seqs []int) {
		t.Helper()
		for _, block := range strings.Split(strings.TrimSpace(stream), "\n\n") {
			if strings.HasPrefix(block, ":") {
				continue
			}
			typ, data, ok := strings.Cut(block, "\ndata: ")
			var ev struct {
				Type  string `json:"type"`
				Seq   int    `json:"sequence_number"`
				Delta string `json:"delta"`
			}
			if !ok || json.Unmarshal([]byte(data), &ev) != nil || typ != "event: "+ev.Type {
				t.Fatalf("a block whose event line does not name its data:\n%q", block)
			}
			seqs = append(seqs, ev.Seq)
			switch ev.Type {
			case "response.output_text.delta":
				text = append(text, ev.Delta)
			case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
				reasoning = append(reasoning, ev.Delta)
			}
		}
		return reasoning, text, seqs
	}
	resp, err := httpClient.Post("http://127.0.0.1:9097/v1/responses", "application/json", strings.NewReader(body("sim-reasoner")))
	if err != nil {
		t.Fatal(err)
	}
	upReasoning, upText, _ := read(readAll(t, resp))
	if len(upReasoning) == 0 || len(upText) == 0 {
		t.Fatalf("the simulator sent %d reasoning and %d text deltas", len(upReasoning), len(upText))
	}
	for _, model := range []string{"native-paced", "chat-paced"} {
		reasoning, text, seqs := read(readAll(t, postPath(t, "/v1/responses", body(model))))
		if strings.Join(reasoning, "") != strings.Join(upReasoning, "") || strings.Join(text, "") != strings.Join(upText, "") {
			t.Fatalf("%s: the text changed on its way:\nreasoning %q\nwant      %q\ntext %q\nwant %q", model, strings.Join(reasoning, ""), strings.Join(upReasoning, ""), strings.Join(text, ""), strings.Join(upText, ""))
		}
		if strings.Join(reasoning, "\x00") == strings.Join(upReasoning, "\x00") && strings.Join(text, "\x00") == strings.Join(upText, "\x00") {
			t.Errorf("%s: the deltas are the upstream's, piece for piece: not re-paced", model)
		}
		for i, n := range seqs {
			if n != i {
				t.Fatalf("%s: sequence numbers %v; want 0, 1, 2, ...", model, seqs)
			}
		}
		_, got, err := streamResponses(t, model)
		if err != nil || got != strings.Join(upText, "") {
			t.Errorf("%s: openai-go assembled %q (%v)", model, got, err)
		}
	}
}
