package llmrelay_test

// Non-stream Chat Completions answers the relay assembles from a stream
// (reasoningtrace.go), end to end through a real Caddy: the reasoning
// trace asked for with return_reasoning_trace, reasoning budgets on
// non-stream requests, failover of the streamed attempt, an Anthropic
// upstream, and the official openai-go client reading the answer.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"
)

// traceCompletion is an assembled answer as a client decodes it.
type traceCompletion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role             string  `json:"role"`
			Content          *string `json:"content"`
			ReasoningContent string  `json:"reasoning_content"`
			Reasoning        string  `json:"reasoning"`
			ToolCalls        []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			ReasoningTrace *[]struct {
				Position float64 `json:"position"`
				Text     string  `json:"text"`
			} `json:"reasoning_trace"`
		} `json:"message"`
		FinishReason       string `json:"finish_reason"`
		ReasoningTruncated bool   `json:"relay_reasoning_truncated"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func decodeCompletion(t *testing.T, resp *http.Response) traceCompletion {
	t.Helper()
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q: %s", ct, body)
	}
	var c traceCompletion
	if err := json.Unmarshal([]byte(body), &c); err != nil || c.Object != "chat.completion" || len(c.Choices) == 0 {
		t.Fatalf("not a chat.completion (%v): %s", err, body)
	}
	return c
}

// checkTrace checks a reasoning trace: one entry per delta, texts that
// join to the reasoning, positions non-decreasing within [0, 1].
func checkTrace(t *testing.T, c traceCompletion, reasoning string, deltas int) {
	t.Helper()
	tr := c.Choices[0].Message.ReasoningTrace
	if tr == nil {
		t.Fatal("no reasoning_trace")
	}
	if len(*tr) != deltas {
		t.Errorf("%d trace entries, want one per reasoning delta (%d)", len(*tr), deltas)
	}
	var joined strings.Builder
	last := 0.0
	for i, e := range *tr {
		if e.Position < last || e.Position > 1 {
			t.Errorf("entry %d at %v, after %v", i, e.Position, last)
		}
		last = e.Position
		joined.WriteString(e.Text)
	}
	if joined.String() != reasoning {
		t.Errorf("trace texts %q, want the reasoning %q", joined.String(), reasoning)
	}
}

// reasoningStream is what a Chat upstream streams: a role chunk, reasoning
// deltas and content deltas gap apart, the finish and the usage chunk.
func reasoningStream(w http.ResponseWriter, gap time.Duration, reasoning, content []string) {
	datas := []string{`{"id":"up1","object":"chat.completion.chunk","created":5,"model":"up-model","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`}
	for _, r := range reasoning {
		b, _ := json.Marshal(r)
		datas = append(datas, `{"id":"up1","object":"chat.completion.chunk","created":5,"model":"up-model","choices":[{"index":0,"delta":{"reasoning_content":`+string(b)+`},"finish_reason":null}]}`)
	}
	for _, c := range content {
		datas = append(datas, chunk(c))
	}
	datas = append(datas,
		`{"id":"up1","object":"chat.completion.chunk","created":5,"model":"up-model","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`{"id":"up1","object":"chat.completion.chunk","created":5,"model":"up-model","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":9,"total_tokens":16,"completion_tokens_details":{"reasoning_tokens":4}}}`,
		"[DONE]")
	streamEvents(w, gap, datas...)
}

var (
	traceReasoning = []string{"Let ", "me ", "think ", "<hard>."}
	traceContent   = []string{"The ", "answer."}
)

// TestReasoningTraceNonStream: a non-stream request with
// return_reasoning_trace is streamed upstream (with include_usage, without
// the field) and answered as one chat.completion whose message carries
// the reasoning and its trace; the usage is accounted. With stream true
// the field is only stripped; false asks for nothing; another value is a
// 400 that reaches nobody.
func TestReasoningTraceNonStream(t *testing.T) {
	up := streamingUpstream(t)
	logFile := startRelay(t, fmt.Sprintf(`llm_relay {
		key sk-test-client
		upstream a %s
		model chat {
			to a
		}
	}`, up.v1()))
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	auth := []string{"Authorization", "Bearer sk-test-client"}

	c := decodeCompletion(t, post(t, `{"model":"chat","return_reasoning_trace":true,`+msgs+`}`, auth...))
	m := c.Choices[0].Message
	if c.ID != "up1" || c.Model != "up-model" || m.Role != "assistant" || m.Content == nil ||
		*m.Content != strings.Join(traceContent, "") || m.ReasoningContent != strings.Join(traceReasoning, "") {
		t.Fatalf("assembled %+v", c)
	}
	if c.Choices[0].FinishReason != "stop" || c.Choices[0].ReasoningTruncated || c.Usage == nil || c.Usage.CompletionTokens != 9 {
		t.Fatalf("finish %q, truncated %v, usage %+v", c.Choices[0].FinishReason, c.Choices[0].ReasoningTruncated, c.Usage)
	}
	checkTrace(t, c, strings.Join(traceReasoning, ""), len(traceReasoning))
	tr := *m.ReasoningTrace
	if tr[len(tr)-1].Position >= 1 || tr[len(tr)-1].Position-tr[0].Position < 0.2 {
		t.Errorf("positions %v … %v: the deltas came 25ms apart over ~200ms, before the answer", tr[0].Position, tr[len(tr)-1].Position)
	}
	seen := up.requests()
	if len(seen) != 1 {
		t.Fatalf("%d upstream requests", len(seen))
	}
	if _, ok := seen[0].body["return_reasoning_trace"]; ok || seen[0].body["stream"] != true {
		t.Errorf("the upstream got %v: want stream true and no return_reasoning_trace", seen[0].body)
	}
	if so, _ := seen[0].body["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("the upstream was not asked for usage: %v", seen[0].body)
	}
	waitFor(t, 5*time.Second, "the request's log line", func() bool {
		return strings.Contains(readLog(t, logFile), `"completion_tokens":9`)
	})
	mustContain(t, readLog(t, logFile), `"prompt_tokens":7`, `"reasoning_tokens":4`, `"usage_estimated":false`)

	// A stream: accepted, stripped, the deltas stream as they come.
	resp := post(t, `{"model":"chat","stream":true,"return_reasoning_trace":true,`+msgs+`}`, auth...)
	if p := parseStream(t, readAll(t, resp)); resp.StatusCode != 200 || !p.done || p.reasoning != strings.Join(traceReasoning, "") {
		t.Fatalf("stream: status %d, %+v", resp.StatusCode, p)
	}
	// false: nothing asked, the request goes as it came.
	plain := readAll(t, post(t, `{"model":"chat","return_reasoning_trace":false,`+msgs+`}`, auth...))
	if strings.Contains(plain, "reasoning_trace") || !strings.Contains(plain, `"hello"`) {
		t.Fatalf("return_reasoning_trace false: %s", plain)
	}
	seen = up.requests()
	if len(seen) != 3 {
		t.Fatalf("%d upstream requests", len(seen))
	}
	for i, s := range seen[1:] {
		if _, ok := s.body["return_reasoning_trace"]; ok {
			t.Errorf("request %d: return_reasoning_trace reached the upstream", i+2)
		}
	}
	if _, ok := seen[2].body["stream"]; ok {
		t.Errorf("return_reasoning_trace false was sent as a stream: %v", seen[2].body)
	}

	for _, v := range []string{`"yes"`, `1`, `{}`} {
		resp := post(t, `{"model":"chat","return_reasoning_trace":`+v+`,`+msgs+`}`, auth...)
		b := readAll(t, resp)
		if e := decodeErr(t, b); resp.StatusCode != 400 || e.Error.Code != "invalid_relay_options" || !strings.Contains(e.Error.Message, "return_reasoning_trace") {
			t.Errorf("return_reasoning_trace %s: status %d, %s", v, resp.StatusCode, b)
		}
	}
	if n := len(up.requests()); n != 3 {
		t.Errorf("refused requests reached the upstream (%d requests)", n)
	}
}

// streamingUpstream answers a stream request with reasoningStream, its
// deltas 25ms apart, and anything else with okCompletion.
func streamingUpstream(t *testing.T) *fakeUpstream {
	var self atomic.Pointer[fakeUpstream] // set before any request comes
	up := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if self.Load().requests()[n-1].body["stream"] == true {
			reasoningStream(w, 25*time.Millisecond, traceReasoning, traceContent)
			return
		}
		answerJSON(w, 200, okCompletion)
	})
	self.Store(up)
	return up
}

// TestReasoningTraceOpenAIGo: the official openai-go client parses the
// assembled answer of the simulator's clustered stream, and the trace
// shows the clusters: one entry per upstream delta, in bursts.
func TestReasoningTraceOpenAIGo(t *testing.T) {
	startPaced(t, offRelay, pacedSimSite)
	wantR, wantC := pacedPieces()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := openaiClient("sk-test-client")
	comp, err := client.Chat.Completions.New(ctx, chatParams("sim-reasoner"), option.WithJSONSet("return_reasoning_trace", true))
	if err != nil {
		t.Fatal(err)
	}
	if comp.Object != "chat.completion" || len(comp.Choices) != 1 {
		t.Fatalf("completion %+v", comp)
	}
	ch := comp.Choices[0]
	if ch.Message.Content != strings.Join(wantC, "") || ch.FinishReason != "stop" || ch.Message.Role != "assistant" {
		t.Fatalf("content %q finish %q role %q", ch.Message.Content, ch.FinishReason, ch.Message.Role)
	}
	if comp.Usage.CompletionTokensDetails.ReasoningTokens != int64(len(wantR)) || comp.Usage.TotalTokens == 0 {
		t.Errorf("usage %+v", comp.Usage)
	}
	var reasoning string
	if f, ok := ch.Message.JSON.ExtraFields["reasoning_content"]; !ok || json.Unmarshal([]byte(f.Raw()), &reasoning) != nil || reasoning != strings.Join(wantR, "") {
		t.Fatalf("reasoning_content %q", reasoning)
	}
	var trace []struct {
		Position float64 `json:"position"`
		Text     string  `json:"text"`
	}
	f, ok := ch.Message.JSON.ExtraFields["reasoning_trace"]
	if !ok || json.Unmarshal([]byte(f.Raw()), &trace) != nil {
		t.Fatalf("reasoning_trace %q", f.Raw())
	}
	if len(trace) != len(wantR) {
		t.Fatalf("%d trace entries, the upstream sent %d reasoning deltas", len(trace), len(wantR))
	}
	bursts := 1
	for i, e := range trace {
		if e.Text != wantR[i] {
			t.Errorf("entry %d text %q, want %q", i, e.Text, wantR[i])
		}
		if i > 0 {
			if e.Position < trace[i-1].Position || e.Position > 1 {
				t.Errorf("entry %d at %v after %v", i, e.Position, trace[i-1].Position)
			}
			if e.Position-trace[i-1].Position > 0.05 {
				bursts++
			}
		}
	}
	// 60 deltas in bursts of 15, 200ms apart, in a ~1.4s answer.
	if bursts < 3 || bursts > 6 {
		t.Errorf("the trace shows %d bursts, the simulator sent 4: %v", bursts, trace)
	}
}

// TestReasoningBudgetNonStream: a route's reasoning budget cuts a
// non-stream request as it cuts a stream, the answer assembled from the
// stream the relay asked for: truncate drops the reasoning past the
// budget and keeps the answer; error ends the answer at the budget with
// finish_reason length; failover takes the next target's whole answer,
// or, with none left, the cut one. Cut reasoning is marked
// relay_reasoning_truncated, and the upstream's usage is accounted.
func TestReasoningBudgetNonStream(t *testing.T) {
	bigR, bigC := simTexts(3, 60, 10)
	smallR, smallC := simTexts(4, 3, 10)
	const body = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	for _, action := range []string{"truncate", "error", "failover", "failover alone"} {
		t.Run(action, func(t *testing.T) {
			chain := "to big\n\t\t\t\t\tto small"
			if action == "failover alone" {
				chain = "to big"
			}
			logFile := startRelay(t, `llm_relay {
				key sk-test-client
				upstream big http://127.0.0.1:9083/big/v1
				upstream small http://127.0.0.1:9083/small/v1
				model m {
					`+chain+`
					reasoning_budget 10 `+strings.Fields(action)[0]+`
				}
			}`, usageSims)
			c := decodeCompletion(t, post(t, body, "Authorization", "Bearer sk-test-client"))
			ch := c.Choices[0]
			content := ""
			if ch.Message.Content != nil {
				content = *ch.Message.Content
			}
			r := ch.Message.ReasoningContent
			cutR := r != "" && strings.HasPrefix(bigR, r) && len(r) < len(bigR)
			if ch.Message.ReasoningTrace != nil {
				t.Errorf("a trace nobody asked for")
			}
			switch action {
			case "truncate":
				if content != bigC || !cutR || ch.FinishReason != "stop" || !ch.ReasoningTruncated {
					t.Fatalf("truncate: content exact %v, reasoning %d of %d bytes (cut %v), finish %q, marked %v",
						content == bigC, len(r), len(bigR), cutR, ch.FinishReason, ch.ReasoningTruncated)
				}
				// The accounting has the upstream's own usage, past the budget.
				waitFor(t, 5*time.Second, "the overrun warning", func() bool {
					return strings.Contains(readLog(t, logFile), `"msg":"reasoning budget overrun"`)
				})
				mustContain(t, readLog(t, logFile), `"reasoning_tokens":60`, `"usage_estimated":false`)
			case "error", "failover alone":
				if content != "" || !cutR || ch.FinishReason != "length" || !ch.ReasoningTruncated {
					t.Fatalf("%s: content %q, reasoning %d of %d bytes (cut %v), finish %q, marked %v",
						action, content, len(r), len(bigR), cutR, ch.FinishReason, ch.ReasoningTruncated)
				}
			case "failover":
				if content != smallC || r != smallR || ch.FinishReason != "stop" || ch.ReasoningTruncated {
					t.Fatalf("failover: content %q (want %q), reasoning %q (want %q), finish %q, marked %v",
						content, smallC, r, smallR, ch.FinishReason, ch.ReasoningTruncated)
				}
				waitFor(t, 5*time.Second, "the log line", func() bool {
					return strings.Contains(readLog(t, logFile), `"reasoning_budget_failovers":1`)
				})
			}
		})
	}
}

// TestReasoningTraceFailover: the streamed attempt of a non-stream
// request fails over like any other: on a 429, on a stream that dies
// before any data, and, with after_commit error (nothing having been sent
// yet), on one that dies after some: the next target answers whole (the
// default, continue, is TestReasoningTraceContinued).
func TestReasoningTraceFailover(t *testing.T) {
	limited := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		answerJSON(w, http.StatusTooManyRequests, `{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limited"}}`)
	})
	empty := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		streamEvents(w, 0) // headers, then the end
	})
	broken := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		streamEvents(w, 0, chunk("half an ans")) // and no [DONE]
	})
	good := streamingUpstream(t)
	logFile := startRelay(t, fmt.Sprintf(`llm_relay {
		upstream limited %s
		upstream empty %s
		upstream broken %s
		upstream good %s
		model chat {
			to limited
			to empty
			to broken
			to good
		}
		failover {
			backoff 1ms 1ms
			after_commit error
		}
	}`, limited.v1(), empty.v1(), broken.v1(), good.v1()))
	resp := post(t, `{"model":"chat","return_reasoning_trace":true,"messages":[{"role":"user","content":"hi"}]}`)
	if got := resp.Header.Get("X-Relay-Upstream"); got != "good" {
		t.Errorf("X-Relay-Upstream %q", got)
	}
	c := decodeCompletion(t, resp)
	if m := c.Choices[0].Message; m.Content == nil || *m.Content != strings.Join(traceContent, "") {
		t.Fatalf("answer %+v", c)
	}
	checkTrace(t, c, strings.Join(traceReasoning, ""), len(traceReasoning))
	for _, f := range []*fakeUpstream{limited, empty, broken, good} {
		if n := len(f.requests()); n != 1 {
			t.Errorf("%s: %d requests", f.URL, n)
		}
	}
	waitFor(t, 5*time.Second, "the log line", func() bool {
		return strings.Contains(readLog(t, logFile), `"attempts":4`)
	})
	mustContain(t, readLog(t, logFile), "stream ended before it was complete (nothing sent yet: failing over)")
}

// TestReasoningTraceContinued: a non-stream request streamed upstream (for
// its reasoning trace) whose stream breaks after some answer is continued
// by the next target: one assembled answer, the broken attempt's text
// followed by the continuation, marked with X-Relay-Continued.
func TestReasoningTraceContinued(t *testing.T) {
	broken := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		streamEvents(w, 0, chunk("half an ans")) // and no [DONE]
	})
	good := newFakeUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		streamEvents(w, 0, chunk("wer."), "[DONE]")
	})
	startRelay(t, fmt.Sprintf(`llm_relay {
		upstream broken %s
		upstream good %s
		model chat {
			to broken
			to good
		}
	}`, broken.v1(), good.v1()))
	resp := post(t, `{"model":"chat","return_reasoning_trace":true,"messages":[{"role":"user","content":"hi"}]}`)
	if got := resp.Header.Get("X-Relay-Continued"); !strings.HasPrefix(got, "upstream=good; from=broken; at_token=") || !strings.HasSuffix(got, "; where=answer") {
		t.Errorf("X-Relay-Continued %q", got)
	}
	c := decodeCompletion(t, resp)
	if m := c.Choices[0].Message; m.Content == nil || *m.Content != "half an answer." {
		t.Fatalf("answer %+v, want the broken attempt's text and the continuation", c)
	}
	asked, _ := json.Marshal(good.requests()[0].body["messages"])
	if !strings.Contains(string(asked), `{"content":"half an ans","role":"assistant"}`) {
		t.Errorf("the continuation was asked %s; want the answer so far in it", asked)
	}
}

// TestReasoningTraceAnthropicUpstream: an Anthropic upstream's thinking,
// translated to Chat chunks as a stream's is, makes the trace too.
func TestReasoningTraceAnthropicUpstream(t *testing.T) {
	startPaced(t, `llm_relay {
		upstream claude http://127.0.0.1:9082/v1 {
			api anthropic
		}
		model c {
			to claude sim-reasoner
		}
	}`, pacedSimSite)
	wantR, wantC := pacedPieces()
	c := decodeCompletion(t, post(t, `{"model":"c","reasoning_effort":"low","return_reasoning_trace":true,"messages":[{"role":"user","content":"hi"}]}`))
	m := c.Choices[0].Message
	if m.Content == nil || *m.Content != strings.Join(wantC, "") || c.Choices[0].FinishReason != "stop" || c.Usage == nil {
		t.Fatalf("answer %+v", c)
	}
	if m.ReasoningContent != strings.Join(wantR, "") {
		t.Fatalf("reasoning %q", m.ReasoningContent)
	}
	checkTrace(t, c, strings.Join(wantR, ""), len(wantR))
}
