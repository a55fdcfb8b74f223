package sim

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/handoff"
)

var echoPaths = [...]string{
	handoff.Chat:      "/v1/chat/completions",
	handoff.Messages:  "/v1/messages",
	handoff.Responses: "/v1/responses",
}

var dialectNames = [...]string{handoff.Chat: "chat", handoff.Messages: "messages", handoff.Responses: "responses"}

// postEcho sends body to d's endpoint with X-Sim-Echo set to echo (none
// if empty).
func postEcho(t *testing.T, ts *httptest.Server, d handoff.Dialect, echo, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+echoPaths[d], strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if echo != "" {
		req.Header.Set(EchoHeader, echo)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// echoed is what an answer carried: its reasoning (all channels
// together), its answer text, how many deltas that text came in (0 for a
// non-stream answer) and the output tokens its usage counts for it.
type echoed struct {
	reasoning, text string
	deltas, tokens  int
}

// readEchoed reads an answer of dialect d, streamed or not.
func readEchoed(t *testing.T, d handoff.Dialect, stream bool, resp *http.Response) echoed {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var e echoed
	switch {
	case d == handoff.Chat && stream:
		events, err := readEvents(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		e.reasoning, e.text = chatTexts(t, events)
		for _, ev := range events[:len(events)-1] {
			c := decodeChunk(t, ev.data)
			if len(c.Choices) > 0 && c.Choices[0].Delta.Content != nil && *c.Choices[0].Delta.Content != "" {
				e.deltas++
			}
			if c.Usage != nil {
				e.tokens = c.Usage.CompletionTokens
				if c.Usage.CompletionTokensDetails.ReasoningTokens != 0 {
					t.Errorf("usage %+v counts reasoning", c.Usage)
				}
			}
		}
	case d == handoff.Chat:
		var c completion
		var u usage
		c.Usage = &u
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("%v: %+v", err, c)
		}
		m := c.Choices[0].Message
		e.reasoning, e.text, e.tokens = m.ReasoningContent, *m.Content, u.CompletionTokens
	case d == handoff.Messages && stream:
		events, err := readMsgEvents(t, resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		r := reassemble(t, events)
		e.reasoning, e.text, e.tokens = r.thinking, r.text, int(r.outputTokens)
		for _, b := range r.blocks {
			if b["type"] != "text" {
				t.Errorf("a %v block", b["type"])
			}
		}
		for _, ev := range events {
			if ev.typ == "content_block_delta" {
				e.deltas++
			}
		}
	case d == handoff.Messages:
		m := decodeMsg(t, resp)
		for _, b := range m.Content {
			switch {
			case b.Type == "text":
				e.text += *b.Text
			case b.Thinking != nil:
				e.reasoning += *b.Thinking
			default:
				t.Errorf("a %s block", b.Type)
			}
		}
		e.tokens = m.Usage["output_tokens"]
	case stream:
		events, err := readRespEvents(t, resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		r := reassembleResp(t, events)
		if r.textDone != r.text {
			t.Errorf("output_text.done %q, deltas %q", r.textDone, r.text)
		}
		e.reasoning, e.text = r.summary, r.text
		for _, ev := range events {
			if ev.typ == "response.output_text.delta" {
				e.deltas++
			}
		}
		raw, _ := json.Marshal(r.completed)
		var o respObj
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Fatal(err)
		}
		e.tokens = o.Usage.OutputTokens
		if len(o.Output) != 1 || o.Output[0].Type != "message" {
			t.Errorf("completed output %+v", o.Output)
		}
	default:
		o := decodeRespObj(t, resp)
		for _, it := range o.Output {
			switch it.Type {
			case "message":
				for _, c := range it.Content {
					e.text += c.Text
				}
			case "reasoning":
				for _, s := range it.Summary {
					e.reasoning += s.Text
				}
			default:
				t.Errorf("a %s item", it.Type)
			}
		}
		e.tokens = o.Usage.OutputTokens
	}
	return e
}

// setMembers sets top-level members of a JSON object body.
func setMembers(t *testing.T, body []byte, members map[string]string) string {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatal(err)
	}
	for k, v := range members {
		top[k] = json.RawMessage(v)
	}
	b, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// echoReasoning is reasoning as a reasoning leg sends it: the
// simulator's own text (multi-byte characters, escapes, newlines, tabs,
// "<b>" and "&"), with whitespace around it that Wrap trims.
func echoReasoning() string {
	r, _ := Texts(Config{Seed: 9, ReasoningTokens: new(30)})
	return "\n  " + strings.Join(r, "") + " \n"
}

// reasoningKnobs ask each dialect's model to reason, as a target's `set`
// may add back to an answer leg: the echo sends none all the same.
var reasoningKnobs = [...]map[string]string{
	handoff.Chat:      {},
	handoff.Messages:  {"thinking": `{"type":"enabled","budget_tokens":1024}`},
	handoff.Responses: {"reasoning": `{"effort":"high","summary":"auto"}`},
}

// TestEchoHandoff: for each dialect, client body and position, the answer
// leg's body that internal/handoff builds gets the injected reasoning
// echoed byte for byte, streamed in several deltas or not, with no
// reasoning; a body with nothing injected gets "handoff:none:".
func TestEchoHandoff(t *testing.T) {
	cfg := Config{Seed: 5, ReasoningPattern: fast, ContentPattern: fast}
	s, ts := startServer(t, cfg)
	reasoning := echoReasoning()
	bodies := []struct {
		name string
		d    handoff.Dialect
		body string
	}{
		{"strings", handoff.Chat, `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello world!"}]}`},
		{"parts no system", handoff.Chat, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":"yo"},{"role":"user","content":[{"type":"text","text":"hello"}]}]}`},
		{"developer and prefill", handoff.Chat, `{"model":"m","messages":[{"role":"developer","content":[{"type":"text","text":"be brief"}]},{"role":"user","content":"hello"},{"role":"assistant","content":"Sure:"}]}`},
		{"tool result", handoff.Chat, `{"model":"m","messages":[{"role":"user","content":"hello"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"42"}]}`},
		{"strings", handoff.Messages, `{"model":"c","max_tokens":64,"system":"be brief","messages":[{"role":"user","content":"hello world!"}]}`},
		{"blocks no system", handoff.Messages, `{"model":"c","max_tokens":64,"messages":[{"role":"user","content":[{"type":"text","text":"hello"}]}]}`},
		{"system blocks and prefill", handoff.Messages, `{"model":"c","max_tokens":64,"system":[{"type":"text","text":"be brief"}],"messages":[{"role":"user","content":"hello"},{"role":"assistant","content":[{"type":"text","text":"Sure:"}]}]}`},
		{"tool result", handoff.Messages, `{"model":"c","max_tokens":64,"messages":[{"role":"user","content":"hello"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"42"}]}]}`},
		{"string input", handoff.Responses, `{"model":"g","instructions":"be brief","input":"hello world!"}`},
		{"items no instructions", handoff.Responses, `{"model":"g","input":[{"role":"user","content":"hi"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"yo"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"hello"}]}]}`},
		{"tool output", handoff.Responses, `{"model":"g","instructions":"be brief","input":[{"role":"user","content":"hello"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"42"}]}`},
	}
	wheres := []struct {
		name   string
		inject handoff.Inject
		none   bool
	}{{"prefill", handoff.Prefill, false}, {"user", handoff.User, false}, {"system", handoff.System, false}, {"none", 0, true}}
	requests := 0
	for _, b := range bodies {
		for _, w := range wheres {
			for _, stream := range []bool{true, false} {
				name := dialectNames[b.d] + "/" + b.name + "/" + w.name
				if !stream {
					name += "/nostream"
				}
				t.Run(name, func(t *testing.T) {
					r, want := reasoning, EchoText(w.name, strings.TrimSpace(reasoning))
					if w.none {
						r, want = "", "handoff:none:"
					}
					answer, err := handoff.Answer(b.d, []byte(b.body), r, w.inject)
					if err != nil {
						t.Fatal(err)
					}
					members := map[string]string{"stream": "false"}
					if stream {
						members["stream"] = "true"
					}
					for k, v := range reasoningKnobs[b.d] {
						members[k] = v
					}
					body := setMembers(t, answer, members)
					requests++
					got := readEchoed(t, b.d, stream, postEcho(t, ts, b.d, EchoHandoff, body))
					if got.text != want {
						t.Errorf("answer\n %q\nwant\n %q\nbody %s", got.text, want, body)
					}
					if got.reasoning != "" {
						t.Errorf("reasoning %q", got.reasoning)
					}
					pieces := echoPieces(want)
					if got.tokens != len(pieces) {
						t.Errorf("usage counts %d output tokens, want %d", got.tokens, len(pieces))
					}
					if stream && got.deltas != len(pieces) {
						t.Errorf("%d deltas, want %d", got.deltas, len(pieces))
					}
				})
			}
		}
	}
	if n := s.Requests(); n != int64(requests) {
		t.Errorf("%d requests counted, want %d", n, requests)
	}
}

// TestEchoHandoffSearchOrder: a prefill wins over the user turn, the
// user turn over the system prompt; only the last user turn is read.
func TestEchoHandoffSearchOrder(t *testing.T) {
	_, ts := startServer(t, Config{ReasoningPattern: fast, ContentPattern: fast})
	wrap := func(s string) string { b, _ := json.Marshal(handoff.Preamble + handoff.Wrap(s)); return string(b) }
	for _, tc := range []struct{ body, want string }{
		{`{"messages":[{"role":"system","content":` + wrap("S") + `},{"role":"user","content":` + wrap("U") + `},{"role":"assistant","content":"<think>\nP\n</think>\n\nSure:"}]}`, "handoff:prefill:P"},
		{`{"messages":[{"role":"system","content":` + wrap("S") + `},{"role":"user","content":` + wrap("U") + `},{"role":"assistant","content":"Sure:"}]}`, "handoff:user:U"},
		{`{"messages":[{"role":"system","content":` + wrap("S") + `},{"role":"user","content":"hi"}]}`, "handoff:system:S"},
		{`{"messages":[{"role":"user","content":` + wrap("old") + `},{"role":"assistant","content":"yo"},{"role":"user","content":"hi"}]}`, "handoff:none:"},
		{`{"messages":[{"role":"user","content":"<think>\nunclosed"}]}`, "handoff:none:"},
		{`{"messages":[{"role":"user","content":"<think>\n\n</think>"}]}`, "handoff:user:"},
		{`{}`, "handoff:none:"},
	} {
		if got := readEchoed(t, handoff.Chat, false, postEcho(t, ts, handoff.Chat, EchoHandoff, tc.body)).text; got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.body, got, tc.want)
		}
	}
}

// TestEchoConfigAndHeader: Config.Echo echoes with no header; without
// either the answer is the generated text; an unknown header value is a
// 400 in each endpoint's error shape; a reasoning form still shapes the
// chat answer.
func TestEchoConfigAndHeader(t *testing.T) {
	body := `{"model":"m","input":"hi","messages":[{"role":"user","content":"hi"}]}`
	_, ts := startServer(t, Config{Echo: EchoHandoff, ReasoningPattern: fast, ContentPattern: fast})
	for d := range echoPaths {
		d := handoff.Dialect(d)
		if got := readEchoed(t, d, false, postEcho(t, ts, d, "", body)).text; got != "handoff:none:" {
			t.Errorf("%s, configured: %q", dialectNames[d], got)
		}
	}

	cfg := Config{ReasoningPattern: fast, ContentPattern: fast}
	_, ts = startServer(t, cfg)
	_, content := Texts(cfg)
	for d := range echoPaths {
		d := handoff.Dialect(d)
		streamed := setMembers(t, []byte(body), map[string]string{"stream": "true"})
		if got := readEchoed(t, d, true, postEcho(t, ts, d, "", streamed)).text; got != strings.Join(content, "") {
			t.Errorf("%s, no echo: %q", dialectNames[d], got)
		}
		for _, stream := range []string{"true", "false"} {
			resp := postEcho(t, ts, d, "reasoning", setMembers(t, []byte(body), map[string]string{"stream": stream}))
			var msg string
			if d == handoff.Messages {
				msg = decodeAnthropicError(t, resp, http.StatusBadRequest, "invalid_request_error").Error.Message
			} else {
				var e apiError
				if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != http.StatusBadRequest ||
					resp.Header.Get("Content-Type") != "application/json" || e.Error.Type != "invalid_request_error" {
					t.Errorf("%s: %d %+v (%v)", dialectNames[d], resp.StatusCode, e, err)
				}
				msg = e.Error.Message
			}
			if want := `X-Sim-Echo: unknown mode "reasoning" (want "handoff")`; msg != want {
				t.Errorf("%s: error %q, want %q", dialectNames[d], msg, want)
			}
		}
	}

	for _, form := range []string{ReasoningTags, ReasoningTagsUnopened} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+"/v1/chat/completions",
			strings.NewReader(`{"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set(EchoHeader, EchoHandoff)
		req.Header.Set(ReasoningFormHeader, form)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if got, want := strings.Join(readTagged(t, resp).chunks, ""), wantTagged(form, "", "handoff:none:"); got != want {
			t.Errorf("%s: %q, want %q", form, got, want)
		}
	}
}

func TestEchoValidates(t *testing.T) {
	_, err := New(Config{Echo: "all"})
	if err == nil || !strings.Contains(err.Error(), `echo: unknown mode "all" (want "handoff")`) {
		t.Errorf("New = %v", err)
	}
}

func TestEchoPieces(t *testing.T) {
	for _, s := range []string{"", "abc", "handoff:user:", "日本語です👨‍👩‍👧 e\u0301", strings.Repeat("x", 17)} {
		pieces := echoPieces(s)
		if strings.Join(pieces, "") != s {
			t.Errorf("%q: pieces %q", s, pieces)
		}
		for i, p := range pieces {
			if n := utf8.RuneCountInString(p); !utf8.ValidString(p) || n == 0 || n > 4 || (n < 4 && i != len(pieces)-1) {
				t.Errorf("%q: piece %d %q", s, i, p)
			}
		}
	}
}
