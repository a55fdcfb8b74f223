package sim

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// msgCfg is a small fast config with both phases.
var msgCfg = Config{Seed: 7, ReasoningTokens: new(9), ContentTokens: new(6), ReasoningPattern: fast, ContentPattern: fast}

func TestMessagesStreamMatchesChat(t *testing.T) {
	wantR, wantC := Texts(msgCfg)
	for _, tc := range []struct {
		name, thinking string
		wantThinking   bool
	}{
		{"enabled", `"thinking":{"type":"enabled","budget_tokens":2048},`, true},
		{"adaptive", `"thinking":{"type":"adaptive"},`, true},
		{"disabled", `"thinking":{"type":"disabled"},`, false},
		{"absent", ``, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ts := startServer(t, msgCfg)
			resp := postTo(t, ts, "/anthropic/v1/messages", msgBody(`"stream":true,`+tc.thinking))
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			events, err := readMsgEvents(t, resp.Body)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			got := reassemble(t, events)

			// The Chat stream of the same server carries the same texts.
			chat, err := readEvents(mustPost(t, ts, streamBody).Body)
			if err != nil {
				t.Fatal(err)
			}
			var chatR, chatC strings.Builder
			for _, ev := range chat[:len(chat)-1] { // all but [DONE]
				for _, ch := range decodeChunk(t, ev.data).Choices {
					if ch.Delta.ReasoningContent != nil {
						chatR.WriteString(*ch.Delta.ReasoningContent)
					}
					if ch.Delta.Content != nil {
						chatC.WriteString(*ch.Delta.Content)
					}
				}
			}
			if got.text != chatC.String() || got.text != strings.Join(wantC, "") {
				t.Errorf("text %q, chat content %q", got.text, chatC.String())
			}

			wantTypes := []string{"message_start", "ping"}
			blockTypes := []string{"text"}
			if tc.wantThinking {
				if got.thinking != chatR.String() || got.thinking != strings.Join(wantR, "") {
					t.Errorf("thinking %q, chat reasoning %q", got.thinking, chatR.String())
				}
				if !slices.Equal(got.signatures, []string{Signature(msgCfg)}) {
					t.Errorf("signatures %q, want one: %q", got.signatures, Signature(msgCfg))
				}
				wantTypes = append(wantTypes, "content_block_start")
				for range wantR {
					wantTypes = append(wantTypes, "content_block_delta")
				}
				wantTypes = append(wantTypes, "content_block_delta", "content_block_stop") // signature
				blockTypes = []string{"thinking", "text"}
			} else if got.thinking != "" || len(got.signatures) != 0 {
				t.Errorf("thinking not asked for, got %q %q", got.thinking, got.signatures)
			}
			wantTypes = append(wantTypes, "content_block_start")
			for range wantC {
				wantTypes = append(wantTypes, "content_block_delta")
			}
			wantTypes = append(wantTypes, "content_block_stop", "message_delta", "message_stop")
			if !slices.Equal(got.types, wantTypes) {
				t.Errorf("event types\n got %v\nwant %v", got.types, wantTypes)
			}
			var gotBlocks []string
			for _, b := range got.blocks {
				gotBlocks = append(gotBlocks, b["type"].(string))
				if b["type"] == "thinking" && (b["thinking"] != "" || b["signature"] != "") {
					t.Errorf("thinking block starts non-empty: %v", b)
				}
				if b["type"] == "text" && b["text"] != "" {
					t.Errorf("text block starts non-empty: %v", b)
				}
			}
			if !slices.Equal(gotBlocks, blockTypes) {
				t.Errorf("blocks %v, want %v", gotBlocks, blockTypes)
			}

			start := events[0].data["message"].(map[string]any)
			usage := start["usage"].(map[string]any)
			if start["id"] != "msg_sim_1" || start["model"] != "claude-sim" || start["role"] != "assistant" ||
				usage["output_tokens"] != 1.0 || usage["input_tokens"] != 5.0 {
				t.Errorf("message_start %s", events[0].raw)
			}
			wantOut := len(wantC)
			if tc.wantThinking {
				wantOut += len(wantR)
			}
			if got.stopReason != "end_turn" || got.outputTokens != float64(wantOut) {
				t.Errorf("message_delta: stop %q, output_tokens %v, want %d", got.stopReason, got.outputTokens, wantOut)
			}
			md := events[len(events)-2].data["delta"].(map[string]any)
			if v, ok := md["stop_sequence"]; !ok || v != nil {
				t.Errorf("message_delta stop_sequence %v (present %v), want null", v, ok)
			}
			if s.Requests() != 2 {
				t.Errorf("Requests() = %d after a Messages and a Chat request", s.Requests())
			}
		})
	}
}

func TestMessagesNonStream(t *testing.T) {
	wantR, wantC := Texts(msgCfg)
	_, ts := startServer(t, msgCfg)

	m := decodeMsg(t, postTo(t, ts, "/v1/messages", msgBody(`"thinking":{"type":"enabled","budget_tokens":1024},`)))
	if m.ID != "msg_sim_1" || m.Type != "message" || m.Role != "assistant" || m.Model != "claude-sim" ||
		m.StopReason != "end_turn" || m.StopSequence != nil {
		t.Errorf("envelope %+v", m)
	}
	if len(m.Content) != 2 || m.Content[0].Type != "thinking" || m.Content[1].Type != "text" {
		t.Fatalf("content %+v", m.Content)
	}
	if *m.Content[0].Thinking != strings.Join(wantR, "") || *m.Content[1].Text != strings.Join(wantC, "") {
		t.Errorf("texts %q %q", *m.Content[0].Thinking, *m.Content[1].Text)
	}
	sig := m.Content[0].Signature
	if sig == nil || *sig != Signature(msgCfg) {
		t.Errorf("signature %v, want %q", sig, Signature(msgCfg))
	}
	wantUsage := map[string]int{"input_tokens": 5, // "be brief" + "hello world!": 20 characters
		"output_tokens":               len(wantR) + len(wantC),
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	if !mapsEqual(m.Usage, wantUsage) {
		t.Errorf("usage %v, want %v", m.Usage, wantUsage)
	}

	m = decodeMsg(t, postTo(t, ts, "/v1/messages", msgBody(``)))
	if m.ID != "msg_sim_2" || len(m.Content) != 1 || m.Content[0].Type != "text" || m.Content[0].Signature != nil {
		t.Fatalf("no thinking asked: content %+v", m.Content)
	}
	if m.Usage["output_tokens"] != len(wantC) {
		t.Errorf("output_tokens %d without thinking, want %d", m.Usage["output_tokens"], len(wantC))
	}

	// No reasoning phase configured: no thinking block even when asked.
	cfg := msgCfg
	cfg.ReasoningTokens = new(0)
	_, ts = startServer(t, cfg)
	m = decodeMsg(t, postTo(t, ts, "/v1/messages", msgBody(`"thinking":{"type":"enabled","budget_tokens":1024},`)))
	if len(m.Content) != 1 || m.Content[0].Type != "text" {
		t.Errorf("reasoning_tokens 0: content %+v", m.Content)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestSignatureShape(t *testing.T) {
	a, b := Signature(Config{Seed: 1}), Signature(Config{Seed: 2})
	raw, err := base64.StdEncoding.DecodeString(a)
	if err != nil || len(raw) < 32 {
		t.Errorf("signature %q: not base64 of enough bytes (%d, %v)", a, len(raw), err)
	}
	if a == b || a != Signature(Config{}) {
		t.Errorf("signatures must depend on the seed only: %q %q %q", a, b, Signature(Config{}))
	}
}

func TestCountTokens(t *testing.T) {
	s, ts := startServer(t, msgCfg)
	body := `{"model":"m","system":[{"type":"text","text":"0123456789"}],"messages":[` +
		`{"role":"user","content":"héllo"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"abcd"}]},{"type":"text","text":"xyz"}]}]}`
	resp := postTo(t, ts, "/v1/messages/count_tokens", body)
	var got map[string]int
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	// 10 + 5 + 4 + 3 = 22 characters: ceil(22/4) = 6.
	if len(got) != 1 || got["input_tokens"] != 6 {
		t.Errorf("count_tokens %v, want input_tokens 6", got)
	}
	m := decodeMsg(t, postTo(t, ts, "/v1/messages", body))
	if m.Usage["input_tokens"] != got["input_tokens"] {
		t.Errorf("usage input_tokens %d differs from count_tokens %d", m.Usage["input_tokens"], got["input_tokens"])
	}
	if s.Requests() != 2 {
		t.Errorf("Requests() = %d after count_tokens and messages", s.Requests())
	}
}

func TestMessagesPacedLikeChat(t *testing.T) {
	// 4 thinking tokens in bursts of 2 with a 60ms pause: the stream
	// has a gap of at least 60ms inside the thinking block.
	cfg := Config{ReasoningTokens: new(4), ContentTokens: new(2),
		ReasoningPattern: Pattern{Kind: Clustered, Burst: 2, Pause: 60 * time.Millisecond, BurstSpread: time.Millisecond},
		ContentPattern:   fast}
	_, ts := startServer(t, cfg)
	start := time.Now()
	resp := postTo(t, ts, "/v1/messages", msgBody(`"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},`))
	events, err := readMsgEvents(t, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Errorf("stream took %v, want the 60ms pause", d)
	}
	if r := reassemble(t, events); r.stopReason != "end_turn" {
		t.Errorf("stop %q", r.stopReason)
	}
}
