package llmrelay_test

// Usage that is never silently zero (issue 34): recorded Chat streams whose
// only usage is a provider's own member (Groq's x_groq.usage, Moonshot's
// usage in the choice), and the same Groq stream with no usage at all,
// through every client dialect, stream and not, with the official SDKs.
// The recordings and their origin: testdata/recordings/usage/README.md.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// usageRecording reads a stream of testdata/recordings/usage.
func usageRecording(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "recordings", "usage", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// xGroqUsage is the Groq recording's usage member, inside x_groq.
var xGroqUsage = regexp.MustCompile(`,"usage":\{[^}]*\}`)

// streamUpstream answers every request with body as an event stream, or,
// for a request without "stream": true, with answer as JSON.
func streamUpstream(t *testing.T, body, answer string) *fakeUpstream {
	var self atomic.Pointer[fakeUpstream]
	f := newFakeUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if answer != "" && self.Load().requests()[n-1].body["stream"] != true {
			answerJSON(w, http.StatusOK, answer)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	})
	self.Store(f)
	return f
}

// relayedLog waits for the n-th "relayed" line of the log and decodes it.
func relayedLog(t *testing.T, logFile string, n int) map[string]any {
	t.Helper()
	var lines []string
	waitFor(t, 5*time.Second, "relayed log line "+strconv.Itoa(n), func() bool {
		lines = lines[:0]
		for _, l := range strings.Split(readLog(t, logFile), "\n") {
			if strings.Contains(l, `"msg":"relayed"`) {
				lines = append(lines, l)
			}
		}
		return len(lines) >= n
	})
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[n-1]), &m); err != nil {
		t.Fatalf("log line %q: %v", lines[n-1], err)
	}
	return m
}

// clientUsage is what one client dialect saw of the usage, and the
// answer's text and tool call arguments.
type clientUsage struct {
	in, out int64
	text    string
	args    string
}

// chatStreamUsage streams a Chat Completions request with openai-go.
func chatStreamUsage(t *testing.T, model string) clientUsage {
	t.Helper()
	client := openai.NewClient(option.WithBaseURL(relayBase+"/v1"), option.WithAPIKey("sk-none"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Call the test tool.")},
	})
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatalf("chat stream: %v", err)
	}
	u := clientUsage{in: acc.Usage.PromptTokens, out: acc.Usage.CompletionTokens}
	if len(acc.Choices) > 0 {
		u.text = acc.Choices[0].Message.Content
		for _, tc := range acc.Choices[0].Message.ToolCalls {
			u.args += tc.Function.Arguments
		}
	}
	return u
}

// messagesUsage sends a Messages request with anthropic-sdk-go, streamed
// (its accumulated message) or not.
func messagesUsage(t *testing.T, model string, stream bool) clientUsage {
	t.Helper()
	client := anthropicClient(relayBase, "sk-none")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Call the test tool."))},
	}
	var msg anthropic.Message
	if stream {
		s := client.Messages.NewStreaming(ctx, params)
		for s.Next() {
			if err := msg.Accumulate(s.Current()); err != nil {
				t.Fatalf("accumulate: %v", err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("messages stream: %v", err)
		}
	} else {
		m, err := client.Messages.New(ctx, params)
		if err != nil {
			t.Fatalf("messages: %v", err)
		}
		msg = *m
	}
	u := clientUsage{in: msg.Usage.InputTokens, out: msg.Usage.OutputTokens}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			u.text += b.Text
		case "tool_use":
			u.args += string(b.Input)
		}
	}
	return u
}

// responsesUsage sends a Responses request with openai-go, streamed (its
// response.completed) or not.
func responsesUsage(t *testing.T, model string, stream bool) clientUsage {
	t.Helper()
	client := openai.NewClient(option.WithBaseURL(relayBase+"/v1"), option.WithAPIKey("sk-none"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	params := responses.ResponseNewParams{
		Model: model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Call the test tool.")},
	}
	var resp *responses.Response
	if stream {
		s := client.Responses.NewStreaming(ctx, params)
		for s.Next() {
			if ev := s.Current(); ev.Type == "response.completed" {
				r := ev.Response
				resp = &r
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("responses stream: %v", err)
		}
		if resp == nil {
			t.Fatal("no response.completed")
		}
	} else {
		var err error
		if resp, err = client.Responses.New(ctx, params); err != nil {
			t.Fatalf("responses: %v", err)
		}
	}
	u := clientUsage{in: resp.Usage.InputTokens, out: resp.Usage.OutputTokens, text: resp.OutputText()}
	for _, item := range resp.Output {
		if item.Type == "function_call" {
			u.args += item.Arguments.OfString
		}
	}
	return u
}

// A Chat upstream whose only usage is its own member: every client dialect
// is accounted from it (not estimated), and the Messages and Responses
// clients see its figures.
func TestProviderUsageEveryDialect(t *testing.T) {
	// Not streamed, the same members in a whole answer (built: the
	// recordings are streams), with the recordings' figures.
	const groqAnswer = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gemma2-9b-it","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_O17Uplv4lJvD6DVdIvFFeRMw","type":"function","function":{"name":"test-tool","arguments":"{\"value\":\"Sparkle Day\"}"}}]},"finish_reason":"tool_calls"}],"x_groq":{"id":"req_01jadadp0femyae9kav1gpkhe8","usage":{"queue_time":0.061348671,"prompt_tokens":18,"prompt_time":0.000211569,"completion_tokens":439,"completion_time":0.798181818,"total_tokens":457,"total_time":0.798393387}}}`
	const kimiAnswer = `{"id":"chatcmpl-2","object":"chat.completion","created":1,"model":"kimi-k2.5","choices":[{"index":0,"message":{"role":"assistant","content":"OK."},"finish_reason":"stop","usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"completion_tokens_details":{"reasoning_tokens":1}}}]}`
	groq := streamUpstream(t, usageRecording(t, "groq-x-groq-usage.sse"), groqAnswer)
	kimi := streamUpstream(t, usageRecording(t, "kimi-choice-usage.sse"), kimiAnswer)
	logFile := startRelay(t, `llm_relay {
		upstream groq `+groq.v1()+` {
			api chat
		}
		upstream kimi `+kimi.v1()+` {
			api chat
		}
		model groq {
			to groq
		}
		model kimi {
			to kimi
		}
	}`)
	n := 0
	for _, c := range []struct {
		model              string
		prompt, completion int64
		text, args         string
	}{
		// The figures are the recordings' own: x_groq.usage 18 in, 439
		// out; Moonshot's 12 in, 5 out (1 reasoning).
		{model: "groq", prompt: 18, completion: 439, args: `{"value":"Sparkle Day"}`},
		{model: "kimi", prompt: 12, completion: 5, text: "OK."},
	} {
		check := func(dialect string, got clientUsage, seen bool) {
			t.Helper()
			n++
			line := relayedLog(t, logFile, n)
			if line["completion_tokens"] != float64(c.completion) || line["prompt_tokens"] != float64(c.prompt) || line["usage_estimated"] != false {
				t.Errorf("%s, %s client: logged %v in, %v out, estimated %v; want the provider's %d in, %d out, not estimated",
					c.model, dialect, line["prompt_tokens"], line["completion_tokens"], line["usage_estimated"], c.prompt, c.completion)
			}
			if got.text != c.text || got.args != c.args {
				t.Errorf("%s, %s client: text %q, arguments %q; want %q, %q", c.model, dialect, got.text, got.args, c.text, c.args)
			}
			if seen && (got.in != c.prompt || got.out != c.completion) {
				t.Errorf("%s, %s client: usage %d in, %d out; want the provider's %d, %d", c.model, dialect, got.in, got.out, c.prompt, c.completion)
			}
		}
		// Chat: passed through as it came; the client sees the provider's
		// member itself (the SDK does not read it).
		check("chat", chatStreamUsage(t, c.model), false)
		check("messages", messagesUsage(t, c.model, true), true)
		check("responses", responsesUsage(t, c.model, true), true)
		resp := post(t, `{"model":"`+c.model+`","messages":[{"role":"user","content":"Call the test tool."}]}`)
		if body := readAll(t, resp); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s, chat: %d %s", c.model, resp.StatusCode, body)
		}
		check("chat non-stream", clientUsage{text: c.text, args: c.args}, false)
		check("messages non-stream", messagesUsage(t, c.model, false), true)
		check("responses non-stream", responsesUsage(t, c.model, false), true)
	}
}

// The same Groq stream without its usage, and a Chat answer without one:
// every client dialect, stream and not, gets a usage that is not zero,
// accounted as estimated, and the client sees the figure the relay
// accounted where its dialect carries usage.
func TestMissingUsageEstimatedEveryDialect(t *testing.T) {
	noUsage := xGroqUsage.ReplaceAllString(usageRecording(t, "groq-x-groq-usage.sse"), "")
	if strings.Contains(noUsage, `"usage"`) || !strings.Contains(noUsage, `"x_groq":{"id":"req_01jadadp0femyae9kav1gpkhe8"}`) {
		t.Fatalf("the usage was not removed: %s", noUsage)
	}
	const answer = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there: this answer has a dozen words or so in it."},"finish_reason":"stop"}]}`
	up := streamUpstream(t, noUsage, answer)
	logFile := startRelay(t, `llm_relay {
		upstream plain `+up.v1()+` {
			api chat
		}
		model m {
			to plain
		}
	}`)
	n := 0
	check := func(what string, got clientUsage, seen bool) {
		t.Helper()
		n++
		line := relayedLog(t, logFile, n)
		out, _ := line["completion_tokens"].(float64)
		in, _ := line["prompt_tokens"].(float64)
		if out <= 0 || in <= 0 || line["usage_estimated"] != true {
			t.Errorf("%s: logged %v in, %v out, estimated %v; want an estimate above zero, marked as one", what, in, out, line["usage_estimated"])
		}
		if seen && (got.out != int64(out) || got.in != int64(in)) {
			t.Errorf("%s: the client saw %d in, %d out; the relay accounted %v, %v", what, got.in, got.out, in, out)
		}
	}
	check("chat stream", chatStreamUsage(t, "m"), false)
	check("messages stream", messagesUsage(t, "m", true), true)
	check("responses stream", responsesUsage(t, "m", true), true)
	check("messages", messagesUsage(t, "m", false), true)
	check("responses", responsesUsage(t, "m", false), true)
	resp := post(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if body := readAll(t, resp); resp.StatusCode != http.StatusOK || strings.Contains(body, `"usage"`) {
		t.Fatalf("chat: %d %s; want the answer as it came, without a usage it did not have", resp.StatusCode, body)
	}
	check("chat", clientUsage{}, false)
}

// A stream that breaks after some of its answer went out was still
// generated and billed by the provider: it is accounted with an estimate,
// marked as one, in every client dialect, not left at zero.
func TestBrokenStreamUsageEstimated(t *testing.T) {
	up := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamEvents(w, 0, chunk("The first part of an answer that"), chunk(" breaks off before it is done"))
		panic(http.ErrAbortHandler) // no [DONE], no usage
	})
	logFile := startRelay(t, `llm_relay {
		upstream plain `+up.v1()+` {
			api chat
		}
		model m {
			to plain
		}
	}`)
	for n, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/messages", `{"model":"m","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"model":"m","stream":true,"input":"hi"}`},
	} {
		resp := postPath(t, c.path, c.body)
		if body := readAll(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(body, "breaks off") {
			t.Fatalf("%s: %d %s", c.path, resp.StatusCode, body)
		}
		line := relayedLog(t, logFile, n+1)
		out, _ := line["completion_tokens"].(float64)
		if out <= 0 || line["usage_estimated"] != true || line["stream_error"] == nil {
			t.Errorf("%s: logged %v out, estimated %v, stream_error %v; want an estimate above zero, marked as one, for a broken stream",
				c.path, out, line["usage_estimated"], line["stream_error"])
		}
	}
}
