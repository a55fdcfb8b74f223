package llmrelay_test

// The baton pass (issue 28) when things fail, and its options, through a
// real Caddy: failover inside each leg, the answer chain exhausted after
// the reasoning was streamed, on_reason_failure both ways, max_reasoning,
// the reasoning leg cancelled at the hand-off point, a tool call from the
// reasoning leg, and the usage and log line a hand-off adds up to.
//
// The legs are the simulators on :9088 (a reasoner, a long reasoner, an
// echo answerer that says what reasoning it found injected) and scripted
// fake upstreams (503s, a reasoner that goes on talking after its answer
// starts, one that calls a tool), each failing target under its own
// upstream name so no request's failures eject the next one's target.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmrelay/caddy-llm-relay/internal/handoff"
	"github.com/llmrelay/caddy-llm-relay/internal/sim"
)

// hoFailSimSite: /reason/ reasons (the same text as handoffSimSite's, so
// handoffReasoning is its reasoning), /long/ reasons for 400 tokens (for
// max_reasoning), /echo/ answers with the reasoning it found injected,
// /slow-echo/ too, after 600 ms.
const hoFailSimSite = `http://127.0.0.1:9088 {
	handle /reason/* {
		llm_simulator {
			seed 28
			reasoning_tokens 24
			content_tokens 16
			pattern steady 0
		}
	}
	handle /long/* {
		llm_simulator {
			seed 31
			reasoning_tokens 400
			content_tokens 16
			pattern steady 0
		}
	}
	handle /echo/* {
		llm_simulator {
			seed 29
			content_tokens 8
			pattern steady 0
			echo handoff
		}
	}
	handle /slow-echo/* {
		llm_simulator {
			seed 29
			content_tokens 8
			pattern steady 0
			echo handoff
			ttfb 600ms
		}
	}
}`

// hoFailRelay is a relay over the :9088 simulators (upstreams reasoner,
// long-reasoner, echo-chat, slow-echo) and the given fakes (name → base URL, all api
// chat), with the given model blocks.
func hoFailRelay(fakes map[string]string, models string) string {
	var b strings.Builder
	b.WriteString("llm_relay {\n\tkey " + taggedKey + `
	upstream reasoner http://127.0.0.1:9088/reason/v1 {
		api chat
	}
	upstream long-reasoner http://127.0.0.1:9088/long/v1 {
		api chat
	}
	upstream echo-chat http://127.0.0.1:9088/echo/v1 {
		api chat
	}
	upstream slow-echo http://127.0.0.1:9088/slow-echo/v1 {
		api chat
	}
	failover {
		backoff 1ms 1ms
	}
`)
	names := make([]string, 0, len(fakes))
	for n := range fakes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "\tupstream %s %s {\n\t\tapi chat\n\t}\n", n, fakes[n])
	}
	b.WriteString(models)
	b.WriteString("\n}")
	return b.String()
}

// overloadedBody is the fake's 503: an OpenAI error the relay fails over on.
const overloadedBody = `{"error":{"message":"the fake upstream is overloaded","type":"server_error","code":"overloaded"}}`

func unavailable(_ int, w http.ResponseWriter, _ *http.Request) {
	answerJSON(w, http.StatusServiceUnavailable, overloadedBody)
}

// deltaChunk is a Chat chunk with one choice: delta (JSON) and finish.
func deltaChunk(delta, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `{"id":"fake-1","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}`
}

func reasoningDelta(text string) string {
	b, _ := json.Marshal(text)
	return deltaChunk(`{"reasoning_content":`+string(b)+`}`, "")
}

func contentDelta(text string) string {
	b, _ := json.Marshal(text)
	return deltaChunk(`{"content":`+string(b)+`}`, "")
}

// fakeReasoning is what the scripted reasoners reason, in pieces.
var fakeReasoning = []string{"Let me think. ", "The user greets me; ", "a short, friendly answer fits."}

// fakeAnswerText is what the scripted answerer answers, in pieces.
var fakeAnswerText = []string{"Hello ", "from the ", "answer leg."}

// answerer streams fakeAnswerText with a finish and a usage chunk.
func answerer(_ int, w http.ResponseWriter, _ *http.Request) {
	var datas []string
	for _, p := range fakeAnswerText {
		datas = append(datas, contentDelta(p))
	}
	datas = append(datas, deltaChunk(`{}`, "stop"),
		`{"id":"fake-1","object":"chat.completion.chunk","created":1,"model":"fake","choices":[],"usage":{"prompt_tokens":50,"completion_tokens":3,"total_tokens":53}}`,
		"[DONE]")
	streamEvents(w, 0, datas...)
}

// hoChatSeen is a Chat Completions answer read raw: every chunk, header
// and the order of what came.
type hoChatSeen struct {
	status             int
	header             http.Header
	body               string
	ids                map[string]bool
	roles              int
	reasoning, content string
	reasoningLate      bool // reasoning after answer text
	toolCalls          bool
	finish             string
	errorData          string // an in-band error chunk's data
	done               bool   // [DONE]
	afterError         int    // chunks after the error chunk
	usage              map[string]any
}

// hoChat asks model for an answer to "hi" with a raw Chat request,
// streaming (with include_usage) or not.
func hoChat(t *testing.T, model string, stream bool) hoChatSeen {
	t.Helper()
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]`
	if stream {
		body += `,"stream":true,"stream_options":{"include_usage":true}`
	}
	resp := post(t, body+"}", "Authorization", "Bearer "+taggedKey)
	got := hoChatSeen{status: resp.StatusCode, header: resp.Header, ids: map[string]bool{}}
	got.body = readAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		return got
	}
	type msg struct {
		Role             string          `json:"role"`
		Content          string          `json:"content"`
		ReasoningContent string          `json:"reasoning_content"`
		ToolCalls        json.RawMessage `json:"tool_calls"`
	}
	type answer struct {
		ID      string         `json:"id"`
		Error   any            `json:"error"`
		Usage   map[string]any `json:"usage"`
		Choices []struct {
			Delta        msg    `json:"delta"`
			Message      msg    `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	read := func(a answer, m msg) {
		if a.ID != "" {
			got.ids[a.ID] = true
		}
		if a.Usage != nil {
			got.usage = a.Usage
		}
		if m.Role != "" {
			got.roles++
		}
		if m.ReasoningContent != "" && got.content != "" {
			got.reasoningLate = true
		}
		got.reasoning += m.ReasoningContent
		got.content += m.Content
		if len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" {
			got.toolCalls = true
		}
	}
	if !stream {
		var a answer
		if err := json.Unmarshal([]byte(got.body), &a); err != nil {
			t.Fatalf("%s: not a chat.completion: %v\n%s", model, err, got.body)
		}
		for _, c := range a.Choices {
			read(a, c.Message)
			got.finish = c.FinishReason
		}
		return got
	}
	for _, d := range sseDatas(got.body) {
		if got.errorData != "" {
			got.afterError++
		}
		if d == "[DONE]" {
			got.done = true
			continue
		}
		var a answer
		if err := json.Unmarshal([]byte(d), &a); err != nil {
			t.Fatalf("%s: chunk %q: %v", model, d, err)
		}
		if a.Error != nil {
			got.errorData = d
			continue
		}
		if len(a.Choices) == 0 {
			read(a, msg{})
		}
		for _, c := range a.Choices {
			read(a, c.Delta)
			if c.FinishReason != "" {
				got.finish = c.FinishReason
			}
		}
	}
	return got
}

// checkAnswered fails unless got is a whole, well-formed hand-off answer:
// 200, the reasoning then the answer, one id, one role, a finish, [DONE]
// when streamed, and nothing of an error.
func checkAnswered(t *testing.T, what string, got hoChatSeen, stream bool, reasoning, content string) {
	t.Helper()
	if got.status != http.StatusOK {
		t.Fatalf("%s: status %d: %s", what, got.status, got.body)
	}
	if got.reasoning != reasoning {
		t.Errorf("%s: reasoning_content %q;\nwant %q", what, got.reasoning, reasoning)
	}
	if got.content != content {
		t.Errorf("%s: content %q;\nwant %q", what, got.content, content)
	}
	if got.errorData != "" || strings.Contains(got.body, "overloaded") || strings.Contains(got.body, "503") {
		t.Errorf("%s: the client sees a failure: %s", what, got.body)
	}
	if got.finish != "stop" || got.toolCalls {
		t.Errorf("%s: finish %q, tool calls %v; want stop and none", what, got.finish, got.toolCalls)
	}
	if stream && (!got.done || len(got.ids) != 1 || got.roles != 1 || got.reasoningLate) {
		t.Errorf("%s: [DONE] %v, ids %v, %d roles, reasoning after the answer %v; want one stream: one id, one role, the reasoning then the answer, [DONE]",
			what, got.done, got.ids, got.roles, got.reasoningLate)
	}
}

// relayedLine waits for the request log line of alias (each test's
// aliases serve one request each).
func relayedLine(t *testing.T, logFile, alias string) logEntry {
	t.Helper()
	var e logEntry
	waitFor(t, 5*time.Second, "the log line of "+alias, func() bool {
		for _, l := range logEntries(t, logFile) {
			if l.str("msg") == "relayed" && l.str("alias") == alias {
				e = l
				return true
			}
		}
		return false
	})
	return e
}

// handoffOf is a log line's handoff object.
func handoffOf(t *testing.T, e logEntry) map[string]any {
	t.Helper()
	ho, _ := e["handoff"].(map[string]any)
	if ho == nil {
		t.Errorf("log line of %s has no handoff object: %v", e.str("alias"), e)
		return map[string]any{}
	}
	return ho
}

// failuresOf is a log line's failures list, joined.
func failuresOf(e logEntry) string {
	var out []string
	list, _ := e["failures"].([]any)
	for _, f := range list {
		s, _ := f.(string)
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

// hasText reports whether any string in v (a decoded JSON body) contains s.
func hasText(v any, s string) bool {
	switch x := v.(type) {
	case string:
		return strings.Contains(x, s)
	case []any:
		return slices.ContainsFunc(x, func(e any) bool { return hasText(e, s) })
	case map[string]any:
		for _, e := range x {
			if hasText(e, s) {
				return true
			}
		}
	}
	return false
}

func handoffCount(t *testing.T, alias, outcome string) float64 {
	t.Helper()
	return metricValue(t, scrapeMetrics(t), `llm_relay_handoffs_total{alias="`+alias+`",outcome="`+outcome+`"}`)
}

// TestHandoffFailoverReasonLeg: a 503 on the first reason target; the
// second reasons. The client, in Chat (raw stream, openai-go streaming
// and not) and through anthropic-sdk-go streaming, gets the second
// target's reasoning and the answer, and nothing of the 503; the log line
// lists it in its failures.
func TestHandoffFailoverReasonLeg(t *testing.T) {
	down := newFakeUpstream(t, unavailable)
	fakes := map[string]string{}
	var models strings.Builder
	for i := 1; i <= 4; i++ {
		fakes[fmt.Sprintf("down-%d", i)] = down.v1()
		fmt.Fprintf(&models, "\tmodel rfail-%d {\n\t\treason down-%d r-down\n\t\treason reasoner sim-r1\n\t\tto echo-chat sim-chat\n\t}\n", i, i)
	}
	logFile := startRelay(t, hoFailRelay(fakes, models.String()), hoFailSimSite)
	reasoning := handoffReasoning(t)
	answer := echoOf("user", reasoning)

	got := hoChat(t, "rfail-1", true)
	checkAnswered(t, "Chat stream", got, true, reasoning, answer)
	if h := got.header.Get("X-Relay-Handoff"); h != "reasoned-by reasoner (sim-r1)" {
		t.Errorf("X-Relay-Handoff %q; want the second reason target named", h)
	}
	for i, stream := range []bool{true, false} {
		g := chatGo(t, fmt.Sprintf("rfail-%d", i+2), stream)
		if g.reasoningContent != reasoning || g.content != answer || g.finish != "stop" {
			t.Errorf("openai-go (stream %v): reasoning %q content %q finish %q;\nwant %q and %q", stream, g.reasoningContent, g.content, g.finish, reasoning, answer)
		}
	}
	m, err := sendMessage(anthropicClient(relayBase, taggedKey), true, userParams("rfail-4"))
	if err != nil {
		t.Fatalf("anthropic-sdk-go stream: %v", err)
	}
	if p := partsOf(m); p.thinking != reasoning || p.text != answer || p.stop != "end_turn" {
		t.Errorf("anthropic-sdk-go stream: thinking %q text %q stop %q;\nwant %q and %q", p.thinking, p.text, p.stop, reasoning, answer)
	}

	if n := len(down.requests()); n != 4 {
		t.Errorf("the failing reason target got %d requests; want 4, one per request", n)
	}
	for i := 1; i <= 4; i++ {
		alias := fmt.Sprintf("rfail-%d", i)
		e := relayedLine(t, logFile, alias)
		if f := failuresOf(e); !strings.Contains(f, fmt.Sprintf("down-%d (r-down): ", i)) || !strings.Contains(f, "503") {
			t.Errorf("%s: failures %q; want the first reason target's 503", alias, f)
		}
		ho := handoffOf(t, e)
		if ho["reason_upstream"] != "reasoner" || ho["answer_upstream"] != "echo-chat" {
			t.Errorf("%s: handoff %v; want reasoned on reasoner, answered on echo-chat", alias, ho)
		}
		if s, _ := e["status"].(float64); s != 200 {
			t.Errorf("%s: logged status %v", alias, e["status"])
		}
	}
}

// TestHandoffFailoverAnswerLeg: the reasoning streamed, a 503 on the first
// `to` target, the second answers: the client sees one stream, the
// reasoning then the second target's answer. The failing target was sent
// the injected reasoning: it was tried after the hand-off.
func TestHandoffFailoverAnswerLeg(t *testing.T) {
	down := newFakeUpstream(t, unavailable)
	fakes := map[string]string{}
	var models strings.Builder
	for i := 1; i <= 3; i++ {
		fakes[fmt.Sprintf("down-%d", i)] = down.v1()
		fmt.Fprintf(&models, "\tmodel afail-%d {\n\t\treason reasoner sim-r1\n\t\tto down-%d m-down\n\t\tto echo-chat sim-chat\n\t}\n", i, i)
	}
	logFile := startRelay(t, hoFailRelay(fakes, models.String()), hoFailSimSite)
	reasoning := handoffReasoning(t)
	answer := echoOf("user", reasoning)

	got := hoChat(t, "afail-1", true)
	checkAnswered(t, "Chat stream", got, true, reasoning, answer)
	if g := chatGo(t, "afail-2", false); g.reasoningContent != reasoning || g.content != answer {
		t.Errorf("openai-go New: reasoning %q content %q;\nwant %q and %q", g.reasoningContent, g.content, reasoning, answer)
	}
	m, err := sendMessage(anthropicClient(relayBase, taggedKey), true, userParams("afail-3"))
	if err != nil {
		t.Fatalf("anthropic-sdk-go stream: %v", err)
	}
	if p := partsOf(m); p.thinking != reasoning || p.text != answer {
		t.Errorf("anthropic-sdk-go stream: thinking %q text %q;\nwant %q and %q", p.thinking, p.text, reasoning, answer)
	}

	reqs := down.requests()
	if len(reqs) != 3 {
		t.Fatalf("the failing answer target got %d requests; want 3", len(reqs))
	}
	injected := handoff.Injected(reasoning, handoff.User)
	for i, r := range reqs {
		if !hasText(r.body, injected) {
			t.Errorf("request %d to the failing answer target lacks the injected reasoning: %v", i+1, r.body)
		}
	}
	for i := 1; i <= 3; i++ {
		alias := fmt.Sprintf("afail-%d", i)
		e := relayedLine(t, logFile, alias)
		if f := failuresOf(e); !strings.Contains(f, fmt.Sprintf("down-%d (m-down): ", i)) || !strings.Contains(f, "503") {
			t.Errorf("%s: failures %q; want the first answer target's 503", alias, f)
		}
		if ho := handoffOf(t, e); ho["reason_upstream"] != "reasoner" || ho["answer_upstream"] != "echo-chat" {
			t.Errorf("%s: handoff %v", alias, ho)
		}
		if e.str("upstream") != "echo-chat" {
			t.Errorf("%s: logged upstream %q; want the answer leg's", alias, e.str("upstream"))
		}
	}
}

// TestHandoffAnswerChainExhausted: the reasoning streamed, then every `to`
// target fails. Streaming, each dialect's client gets the reasoning then
// its in-band error (Chat: an error chunk and no [DONE]; Messages: an
// error event; Responses: an error event and response.failed), and the
// official SDKs raise. Not streaming: an error status in the client's
// dialect.
func TestHandoffAnswerChainExhausted(t *testing.T) {
	down := newFakeUpstream(t, unavailable)
	cases := []string{"chat-raw", "chat-sdk", "msg-raw", "msg-sdk", "resp-raw", "resp-sdk", "chat-whole", "msg-whole", "resp-whole"}
	fakes := map[string]string{}
	var models strings.Builder
	for _, c := range cases {
		fakes["down-"+c+"-a"], fakes["down-"+c+"-b"] = down.v1(), down.v1()
		fmt.Fprintf(&models, "\tmodel exh-%s {\n\t\treason reasoner sim-r1\n\t\tto down-%s-a m-down\n\t\tto down-%s-b m-down\n\t}\n", c, c, c)
	}
	logFile := startRelay(t, hoFailRelay(fakes, models.String()), hoFailSimSite)
	reasoning := handoffReasoning(t)
	wantR := (utf8.RuneCountInString(reasoning) + 3) / 4
	before := map[string]float64{}
	for _, c := range cases {
		before[c] = handoffCount(t, "exh-"+c, "answer_failed")
	}

	// Chat, raw: the reasoning, then one error chunk, and no [DONE].
	got := hoChat(t, "exh-chat-raw", true)
	if got.status != http.StatusOK || got.reasoning != reasoning || got.content != "" {
		t.Errorf("Chat stream: status %d reasoning %q content %q; want 200, the reasoning and no answer", got.status, got.reasoning, got.content)
	}
	if got.errorData == "" || got.done || got.afterError != 0 {
		t.Errorf("Chat stream: error chunk %q, [DONE] %v, %d chunks after the error; want the stream to end on one error chunk:\n%s", got.errorData, got.done, got.afterError, got.body)
	}
	t.Logf("Chat in-band error: %s", got.errorData)

	// Chat, openai-go: the stream raises, after the reasoning.
	{
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		client := openaiClient(taggedKey)
		s := client.Chat.Completions.NewStreaming(ctx, chatParams("exh-chat-sdk"))
		var r string
		for s.Next() {
			for _, c := range s.Current().Choices {
				extraString(t, c.Delta.JSON.ExtraFields, "reasoning_content", &r)
			}
		}
		if s.Err() == nil || r != reasoning {
			t.Errorf("openai-go Chat stream: error %v after reasoning %q; want an error after %q", s.Err(), r, reasoning)
		} else {
			t.Logf("openai-go Chat stream raises: %v", s.Err())
		}
		s.Close()
		cancel()
	}

	// Messages, raw: thinking, then an error event, no message_stop.
	raw := readAll(t, postMessages(t, `{"model":"exh-msg-raw","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", taggedKey))
	if !strings.Contains(raw, "event: error\n") || strings.Contains(raw, "message_stop") || !strings.Contains(raw, "thinking_delta") ||
		strings.Index(raw, "thinking_delta") > strings.Index(raw, "event: error") {
		t.Errorf("Messages stream: want thinking deltas, then an error event and no message_stop:\n%s", raw)
	}

	// Messages, anthropic-sdk-go: the stream raises, after the thinking.
	m, err := sendMessage(anthropicClient(relayBase, taggedKey), true, userParams("exh-msg-sdk"))
	if err == nil {
		t.Errorf("anthropic-sdk-go stream: no error; want the in-band error raised")
	} else {
		t.Logf("anthropic-sdk-go stream raises: %v", err)
		if m == nil || partsOf(m).thinking != reasoning {
			t.Errorf("anthropic-sdk-go stream: %+v before the error; want the thinking %q", m, reasoning)
		}
	}

	// Responses, raw: reasoning summary deltas, an error event, then
	// response.failed; no response.completed.
	raw = readAll(t, postPath(t, "/v1/responses", `{"model":"exh-resp-raw","input":"hi","stream":true}`, "Authorization", "Bearer "+taggedKey))
	iSum, iErr, iFailed := strings.Index(raw, "response.reasoning_summary_text.delta"), strings.Index(raw, "event: error\n"), strings.Index(raw, "event: response.failed\n")
	if iSum < 0 || iErr < iSum || iFailed < iErr || strings.Contains(raw, "response.completed") {
		t.Errorf("Responses stream: want reasoning deltas, an error event, response.failed, and no response.completed:\n%s", raw)
	}

	// Responses, openai-go: the stream raises.
	{
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		client := openai.NewClient(option.WithBaseURL(relayBase+"/v1"), option.WithAPIKey(taggedKey), option.WithMaxRetries(0))
		s := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "exh-resp-sdk", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
		var r string
		for s.Next() {
			if ev := s.Current(); ev.Type == "response.reasoning_summary_text.delta" {
				r += ev.Delta
			}
		}
		if s.Err() == nil || r != reasoning {
			t.Errorf("openai-go Responses stream: error %v after reasoning %q; want an error after %q", s.Err(), r, reasoning)
		} else {
			t.Logf("openai-go Responses stream raises: %v", s.Err())
		}
		s.Close()
		cancel()
	}

	// Not streaming: an error status, in the client's dialect.
	resp := post(t, `{"model":"exh-chat-whole","messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+taggedKey)
	body := readAll(t, resp)
	if resp.StatusCode < 500 {
		t.Errorf("Chat New: status %d; want an error status: %s", resp.StatusCode, body)
	} else {
		e := decodeErr(t, body)
		t.Logf("Chat New: %d %s %q", resp.StatusCode, e.Error.Code, e.Error.Message)
	}
	resp = postMessages(t, `{"model":"exh-msg-whole","max_tokens":1024,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", taggedKey)
	body = readAll(t, resp)
	var ae struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &ae); err != nil || resp.StatusCode < 500 || ae.Type != "error" || ae.Error.Type == "" {
		t.Errorf("Messages New: status %d body %s; want an error status and an Anthropic error", resp.StatusCode, body)
	} else {
		t.Logf("Messages New: %d %s %q", resp.StatusCode, ae.Error.Type, ae.Error.Message)
	}
	resp = postPath(t, "/v1/responses", `{"model":"exh-resp-whole","input":"hi"}`, "Authorization", "Bearer "+taggedKey)
	body = readAll(t, resp)
	if resp.StatusCode < 500 {
		t.Errorf("Responses New: status %d; want an error status: %s", resp.StatusCode, body)
	} else {
		decodeErr(t, body)
	}

	for _, c := range cases {
		alias := "exh-" + c
		if got := handoffCount(t, alias, "answer_failed"); got != before[c]+1 {
			t.Errorf("%s: handoffs_total{outcome=answer_failed} %v; want %v", alias, got, before[c]+1)
		}
		e := relayedLine(t, logFile, alias)
		if f := failuresOf(e); !strings.Contains(f, "down-"+c+"-a") || !strings.Contains(f, "down-"+c+"-b") {
			t.Errorf("%s: failures %q; want both answer targets", alias, f)
		}
		// The log line says the request failed, as for the relay's other
		// in-band errors, and counts the reasoning it paid for.
		ho := handoffOf(t, e)
		if n, _ := ho["reasoning_tokens"].(float64); ho["reason_upstream"] != "reasoner" || int(n) != wantR {
			t.Errorf("%s: handoff %v; want the reasoning leg named, and its %d reasoning tokens", alias, ho, wantR)
		}
		streamed := !strings.HasSuffix(c, "-whole")
		if e.str("error") != "all_upstreams_failed" || streamed && e.str("stream_error") != "all_upstreams_failed" {
			t.Errorf("%s: logged error %q, stream_error %q; want all_upstreams_failed", alias, e.str("error"), e.str("stream_error"))
		}
	}
}

// TestHandoffOnReasonFailure: every reason target fails. answer (the
// default): the answer leg answers with no reasoning injected (the echo
// says handoff:none:), and says so in X-Relay-Handoff, the log and the
// metric; error: the client gets the reasoning chain's error and the
// answer leg is never asked.
func TestHandoffOnReasonFailure(t *testing.T) {
	down := newFakeUpstream(t, unavailable)
	answerFake := newFakeUpstream(t, answerer)
	fakes := map[string]string{"answer-fake": answerFake.v1()}
	var models strings.Builder
	for _, c := range []string{"s", "n", "m"} {
		fakes["down-"+c] = down.v1()
		fmt.Fprintf(&models, "\tmodel nr-answer-%s {\n\t\treason down-%s r-down\n\t\tto echo-chat sim-chat\n\t}\n", c, c)
	}
	for _, c := range []string{"s", "n"} {
		fakes["down-e"+c+"1"], fakes["down-e"+c+"2"] = down.v1(), down.v1()
		fmt.Fprintf(&models, "\tmodel nr-error-%s {\n\t\treason down-e%s1 r-down\n\t\treason down-e%s2 r-down\n\t\tto answer-fake m\n\t\thandoff {\n\t\t\ton_reason_failure error\n\t\t}\n\t}\n", c, c, c)
	}
	logFile := startRelay(t, hoFailRelay(fakes, models.String()), hoFailSimSite)
	before := map[string]float64{}
	for _, a := range []string{"nr-answer-s", "nr-answer-n", "nr-answer-m"} {
		before[a] = handoffCount(t, a, "no_reasoning")
	}
	for _, a := range []string{"nr-error-s", "nr-error-n"} {
		before[a] = handoffCount(t, a, "reason_failed")
	}
	none := sim.EchoText("none", "")

	for _, tc := range []struct {
		alias  string
		stream bool
	}{{"nr-answer-s", true}, {"nr-answer-n", false}} {
		got := hoChat(t, tc.alias, tc.stream)
		checkAnswered(t, tc.alias, got, tc.stream, "", none)
		if h := got.header.Get("X-Relay-Handoff"); h != "no-reasoning" {
			t.Errorf("%s: X-Relay-Handoff %q; want no-reasoning", tc.alias, h)
		}
	}
	m, err := sendMessage(anthropicClient(relayBase, taggedKey), true, userParams("nr-answer-m"))
	if err != nil {
		t.Fatalf("anthropic-sdk-go stream: %v", err)
	}
	if p := partsOf(m); p.thinking != "" || p.text != none {
		t.Errorf("anthropic-sdk-go stream: thinking %q text %q; want no thinking and %q", p.thinking, p.text, none)
	}
	for _, a := range []string{"nr-answer-s", "nr-answer-n", "nr-answer-m"} {
		if got := handoffCount(t, a, "no_reasoning"); got != before[a]+1 {
			t.Errorf("%s: handoffs_total{outcome=no_reasoning} %v; want %v", a, got, before[a]+1)
		}
		e := relayedLine(t, logFile, a)
		if ho := handoffOf(t, e); ho["no_reasoning"] != true || ho["answer_upstream"] != "echo-chat" {
			t.Errorf("%s: handoff %v; want no_reasoning and the answer leg", a, ho)
		}
		if f := failuresOf(e); !strings.Contains(f, "503") || !strings.Contains(f, "on_reason_failure answer") {
			t.Errorf("%s: failures %q; want the 503 and the note that it answered without reasoning", a, f)
		}
	}

	for _, tc := range []struct {
		alias  string
		stream bool
	}{{"nr-error-s", true}, {"nr-error-n", false}} {
		got := hoChat(t, tc.alias, tc.stream)
		if got.status != http.StatusServiceUnavailable && got.status != http.StatusBadGateway {
			t.Errorf("%s: status %d; want the chain's error (502 or the upstream's 503): %s", tc.alias, got.status, got.body)
			continue
		}
		e := decodeErr(t, got.body)
		t.Logf("on_reason_failure error (stream %v): %d %s %q", tc.stream, got.status, e.Error.Code, e.Error.Message)
		if got.header.Get("X-Relay-Handoff") != "" {
			t.Errorf("%s: X-Relay-Handoff %q on an error", tc.alias, got.header.Get("X-Relay-Handoff"))
		}
	}
	if n := len(answerFake.requests()); n != 0 {
		t.Errorf("on_reason_failure error: the answer leg got %d requests; want none", n)
	}
	for _, a := range []string{"nr-error-s", "nr-error-n"} {
		if got := handoffCount(t, a, "reason_failed"); got != before[a]+1 {
			t.Errorf("%s: handoffs_total{outcome=reason_failed} %v; want %v", a, got, before[a]+1)
		}
		e := relayedLine(t, logFile, a)
		if f := failuresOf(e); strings.Count(f, "503") != 2 {
			t.Errorf("%s: failures %q; want both reason targets' 503", a, f)
		}
		if ho := handoffOf(t, e); len(ho) != 1 || ho["reason_failed"] != true {
			t.Errorf("%s: handoff %v; want reason_failed alone (no leg answered)", a, ho)
		}
	}
}

// TestHandoffMaxReasoning: max_reasoning 20 hands off once the reasoning
// reaches 20 tokens (a quarter of its runes, rounded up): the client gets
// the long reasoner's reasoning up to the delta that reaches them, at
// most 80 runes and that delta, and the answer leg's request carries
// exactly that.
func TestHandoffMaxReasoning(t *testing.T) {
	const maxTokens = 20
	answerFake := newFakeUpstream(t, answerer)
	models := `	model capped-s {
		reason long-reasoner sim-r1
		to answer-fake m
		handoff {
			max_reasoning 20
		}
	}
	model capped-n {
		reason long-reasoner sim-r1
		to answer-fake m
		handoff {
			max_reasoning 20
		}
	}
`
	logFile := startRelay(t, hoFailRelay(map[string]string{"answer-fake": answerFake.v1()}, models), hoFailSimSite)

	// The simulator sends one piece per delta: the hand-off comes with the
	// first delta at which the reasoning's estimate reaches 20 tokens.
	r, c := 400, 16
	pieces, _ := sim.Texts(sim.Config{Seed: 31, ReasoningTokens: &r, ContentTokens: &c})
	var want string
	var last int
	for _, p := range pieces {
		want += p
		last = utf8.RuneCountInString(p)
		if (utf8.RuneCountInString(want)+3)/4 >= maxTokens { // the relay's estimate rounds up
			break
		}
	}
	answer := strings.Join(fakeAnswerText, "")
	for i, tc := range []struct {
		alias  string
		stream bool
	}{{"capped-s", true}, {"capped-n", false}} {
		got := hoChat(t, tc.alias, tc.stream)
		checkAnswered(t, tc.alias, got, tc.stream, want, answer)
		if n := utf8.RuneCountInString(got.reasoning); n > 4*maxTokens+last {
			t.Errorf("%s: %d runes of reasoning; want at most %d (4×max_reasoning, and the delta that crossed it)", tc.alias, n, 4*maxTokens+last)
		}
		reqs := answerFake.requests()
		if len(reqs) != i+1 {
			t.Fatalf("%s: the answer leg got %d requests in all; want %d", tc.alias, len(reqs), i+1)
		}
		if inj := handoff.Injected(got.reasoning, handoff.User); !hasText(reqs[i].body, inj) {
			t.Errorf("%s: the answer leg's request lacks exactly the reasoning the client got (%q): %v", tc.alias, inj, reqs[i].body)
		}
		ho := handoffOf(t, relayedLine(t, logFile, tc.alias))
		if ho["why"] != "max_reasoning" {
			t.Errorf("%s: handoff why %v; want max_reasoning", tc.alias, ho["why"])
		}
		if n, _ := ho["reasoning_tokens"].(float64); int(n) != (utf8.RuneCountInString(want)+3)/4 {
			t.Errorf("%s: reasoning_tokens %v; want %d", tc.alias, ho["reasoning_tokens"], (utf8.RuneCountInString(want)+3)/4)
		}
	}
}

// cancelProbe is a scripted reasoner that reasons, starts its answer,
// then goes on answering for seconds: it records when it wrote its first
// answer chunk and when its request's context ended.
type cancelProbe struct {
	mu      sync.Mutex
	answer  []time.Time // first answer chunk written (flushed)
	ended   []time.Time // r.Context().Done()
	written []int       // answer chunks written in all
}

const leakText = "LEAKED-ANSWER-"

func (p *cancelProbe) handle(_ int, w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	write := func(d string) { _, _ = io.WriteString(w, "data: "+d+"\n\n"); fl.Flush() }
	for _, p := range fakeReasoning {
		write(reasoningDelta(p))
	}
	first := time.Now() // before the write: the delay measured is never less than the real one
	write(contentDelta(leakText + "0 "))
	n := 1
	defer func() {
		p.mu.Lock()
		p.answer = append(p.answer, first)
		p.ended = append(p.ended, time.Now())
		p.written = append(p.written, n)
		p.mu.Unlock()
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.After(5 * time.Second); ; {
		select {
		case <-r.Context().Done():
			return
		case <-deadline:
			write(deltaChunk(`{}`, "stop"))
			write("[DONE]")
			return
		case <-tick.C:
			write(contentDelta(fmt.Sprintf("%s%d ", leakText, n)))
			n++
		}
	}
}

// TestHandoffCancelsReasoningLeg: at the hand-off point (the reasoning
// leg's first answer text) the relay closes the reasoning leg's request:
// the upstream sees its request's context end within a few milliseconds
// of writing that text, none of the reasoning leg's answer reaches the
// client, and the client still gets the answer leg's answer. The answer
// leg takes 600 ms to its first byte, so a reasoning leg closed only when
// the response ends would miss the bound.
func TestHandoffCancelsReasoningLeg(t *testing.T) {
	const bound = 250 * time.Millisecond
	probe := &cancelProbe{}
	talker := newFakeUpstream(t, probe.handle)
	models := `	model cancel-s {
		reason talker r
		to slow-echo sim-chat
	}
	model cancel-n {
		reason talker r
		to slow-echo sim-chat
	}
`
	startRelay(t, hoFailRelay(map[string]string{"talker": talker.v1()}, models), hoFailSimSite)
	reasoning := strings.Join(fakeReasoning, "")
	answer := echoOf("user", reasoning)
	runs := []struct {
		alias  string
		stream bool
	}{{"cancel-s", true}, {"cancel-n", false}, {"cancel-s", true}, {"cancel-n", false}, {"cancel-s", true}}
	for i, tc := range runs {
		start := time.Now()
		got := hoChat(t, tc.alias, tc.stream)
		took := time.Since(start)
		checkAnswered(t, tc.alias, got, tc.stream, reasoning, answer)
		if strings.Contains(got.body, leakText) {
			t.Errorf("%s: the reasoning leg's answer reached the client:\n%s", tc.alias, got.body)
		}
		if took > 3*time.Second {
			t.Errorf("%s: the answer took %s: the relay waited for the reasoning leg to end", tc.alias, took)
		}
		waitFor(t, 6*time.Second, "the reasoning leg's request to end", func() bool {
			probe.mu.Lock()
			defer probe.mu.Unlock()
			return len(probe.ended) > i
		})
	}
	probe.mu.Lock()
	defer probe.mu.Unlock()
	var delays []time.Duration
	for i := range probe.ended {
		d := probe.ended[i].Sub(probe.answer[i])
		delays = append(delays, d)
		if d > bound {
			t.Errorf("request %d: the reasoning leg's context ended %s after its first answer chunk (%d chunks written); want within %s", i+1, d, probe.written[i], bound)
		}
	}
	t.Logf("reasoning leg cancelled after its first answer chunk in: %v (answer chunks written: %v)", delays, probe.written)
}

// TestHandoffToolCallInReasoningLeg: a tool call from the reasoning leg is
// a hand-off point, never forwarded: the client gets the reasoning, then
// the answer leg's answer.
func TestHandoffToolCallInReasoningLeg(t *testing.T) {
	toolCaller := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		var datas []string
		for _, p := range fakeReasoning {
			datas = append(datas, reasoningDelta(p))
		}
		datas = append(datas,
			deltaChunk(`{"tool_calls":[{"index":0,"id":"call_leak","type":"function","function":{"name":"get_weather","arguments":""}}]}`, ""),
			deltaChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]}`, ""),
			deltaChunk(`{}`, "tool_calls"), "[DONE]")
		streamEvents(w, 0, datas...)
	})
	models := `	model tool-s {
		reason tool-caller r
		to echo-chat sim-chat
	}
	model tool-n {
		reason tool-caller r
		to echo-chat sim-chat
	}
`
	logFile := startRelay(t, hoFailRelay(map[string]string{"tool-caller": toolCaller.v1()}, models), hoFailSimSite)
	reasoning := strings.Join(fakeReasoning, "")
	answer := echoOf("user", reasoning)
	for _, tc := range []struct {
		alias  string
		stream bool
	}{{"tool-s", true}, {"tool-n", false}} {
		got := hoChat(t, tc.alias, tc.stream)
		checkAnswered(t, tc.alias, got, tc.stream, reasoning, answer)
		if strings.Contains(got.body, "call_leak") || strings.Contains(got.body, "get_weather") {
			t.Errorf("%s: the reasoning leg's tool call reached the client:\n%s", tc.alias, got.body)
		}
		if ho := handoffOf(t, relayedLine(t, logFile, tc.alias)); ho["why"] != "tool_call" {
			t.Errorf("%s: handoff why %v; want tool_call", tc.alias, ho["why"])
		}
	}
}

// TestHandoffUsageAndLogLine: a Chat client asking for its usage gets
// both legs': prompt and completion tokens the sum of the legs' (as the
// log line's handoff object counts them), reasoning tokens the reasoning
// leg's; the log line names each leg and the hand-off gap.
func TestHandoffUsageAndLogLine(t *testing.T) {
	models := `	model summed {
		reason reasoner sim-r1
		to echo-chat sim-chat
	}
	model summed-2 {
		reason reasoner sim-r1
		to echo-chat sim-chat
	}
	model summed-3 {
		reason reasoner sim-r1
		to echo-chat sim-chat
	}
`
	logFile := startRelay(t, hoFailRelay(nil, models), hoFailSimSite)
	reasoning := handoffReasoning(t)
	var gaps []string
	for _, alias := range []string{"summed", "summed-2", "summed-3"} {
		got := hoChat(t, alias, true)
		checkAnswered(t, alias, got, true, reasoning, echoOf("user", reasoning))
		if got.usage == nil {
			t.Fatalf("%s: no usage chunk with include_usage:\n%s", alias, got.body)
		}
		num := func(m map[string]any, k string) int { f, _ := m[k].(float64); return int(f) }
		details, _ := got.usage["completion_tokens_details"].(map[string]any)
		prompt, completion, rt := num(got.usage, "prompt_tokens"), num(got.usage, "completion_tokens"), num(details, "reasoning_tokens")

		e := relayedLine(t, logFile, alias)
		ho := handoffOf(t, e)
		for _, k := range []string{"reason_upstream", "answer_upstream", "reasoning_tokens", "gap", "reason_prompt_tokens", "answer_prompt_tokens", "answer_completion_tokens"} {
			if _, ok := ho[k]; !ok {
				t.Errorf("%s: the handoff object has no %s: %v", alias, k, ho)
			}
		}
		if ho["reason_upstream"] != "reasoner" || ho["answer_upstream"] != "echo-chat" || ho["why"] != "answer" {
			t.Errorf("%s: handoff %v", alias, ho)
		}
		wantR := (utf8.RuneCountInString(reasoning) + 3) / 4
		if rt != wantR || num(ho, "reasoning_tokens") != wantR {
			t.Errorf("%s: reasoning_tokens %d (usage), %d (log); want the reasoning leg's %d", alias, rt, num(ho, "reasoning_tokens"), wantR)
		}
		if p := num(ho, "reason_prompt_tokens") + num(ho, "answer_prompt_tokens"); prompt != p || num(ho, "reason_prompt_tokens") <= 0 || num(ho, "answer_prompt_tokens") <= 0 {
			t.Errorf("%s: prompt_tokens %d; want both legs' %d + %d", alias, prompt, num(ho, "reason_prompt_tokens"), num(ho, "answer_prompt_tokens"))
		}
		if c := wantR + num(ho, "answer_completion_tokens"); completion != c || num(ho, "answer_completion_tokens") <= 0 {
			t.Errorf("%s: completion_tokens %d; want the reasoning %d + the answer leg's %d", alias, completion, wantR, num(ho, "answer_completion_tokens"))
		}
		if total := num(got.usage, "total_tokens"); total != prompt+completion {
			t.Errorf("%s: total_tokens %d; want %d", alias, total, prompt+completion)
		}
		if num(e, "prompt_tokens") != prompt || num(e, "completion_tokens") != completion || num(e, "reasoning_tokens") != rt {
			t.Errorf("%s: the log line's tokens %v/%v/%v differ from the client's usage %d/%d/%d", alias, e["prompt_tokens"], e["completion_tokens"], e["reasoning_tokens"], prompt, completion, rt)
		}
		gap, _ := ho["gap"].(float64)
		if gap <= 0 {
			t.Errorf("%s: gap %v; want the hand-off point to the answer request's write, > 0", alias, ho["gap"])
		}
		gaps = append(gaps, fmt.Sprint(ho["gap"]))
		t.Logf("%s: usage %v; handoff %v", alias, got.usage, ho)
	}
	t.Logf("hand-off gaps logged: %s", strings.Join(gaps, ", "))
}

// TestHandoffAnswerCutShort: the answer leg's stream ends without [DONE]
// (its connection closed after some text), or sends a chunk the relay
// cannot give the client (an image content part). Neither may pass for a
// complete answer: a stream ends with the in-band error and no [DONE], a
// whole answer is an error status, never a 200 with part of the text.
func TestHandoffAnswerCutShort(t *testing.T) {
	cut := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		streamEvents(w, 0, contentDelta("Hello "), contentDelta("from the "))
	})
	unreadable := newFakeUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		streamEvents(w, 0, contentDelta("Here is a picture: "),
			deltaChunk(`{"content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}`, ""),
			deltaChunk(`{}`, "stop"), "[DONE]")
	})
	fakes := map[string]string{"cut": cut.v1(), "unreadable": unreadable.v1()}
	models := "\tmodel cut {\n\t\treason reasoner sim-r1\n\t\tto cut m\n\t}\n" +
		"\tmodel unreadable {\n\t\treason reasoner sim-r1\n\t\tto unreadable m\n\t}\n"
	startRelay(t, hoFailRelay(fakes, models), hoFailSimSite)
	for _, alias := range []string{"cut", "unreadable"} {
		got := hoChat(t, alias, true)
		if got.done || got.errorData == "" {
			t.Errorf("%s stream: [DONE] %v, error chunk %q; want the in-band error and no [DONE]", alias, got.done, got.errorData)
		}
		got = hoChat(t, alias, false)
		if got.status < 500 {
			t.Errorf("%s whole answer: status %d, body %s; want an error status", alias, got.status, got.body)
		}
	}
}
