package gemini

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// recordedText is the text of the recorded stream_text.sse, its parts
// joined, read independently of the translator.
func recordedParts(tb testing.TB, name string) (text string, last generateResponse) {
	tb.Helper()
	for _, ev := range parseAll(tb, string(readFile(tb, name))) {
		var r generateResponse
		if err := json.Unmarshal(ev.Data, &r); err != nil {
			tb.Fatal(err)
		}
		for _, p := range r.Candidates[0].Content.Parts {
			if p.Text != nil {
				text += *p.Text
			}
		}
		last = r
	}
	return text, last
}

// TestToChatStreamRecordedText: a recorded Gemini 2.0 Flash stream (11
// chunks, running usage on each, finishReason and the totals on the last)
// becomes the same text, stop, the last chunk's usage and [DONE].
func TestToChatStreamRecordedText(t *testing.T) {
	want, last := recordedParts(t, "stream_text.sse")
	a, err := readChat(t, ToChatStream(reader(string(readFile(t, "stream_text.sse"))), chat.Options{Model: "gemini-2.0-flash", Created: 7, IncludeUsage: true}))
	if err != nil {
		t.Fatal(err)
	}
	if a.content != want || a.reasoning != "" || len(a.calls) != 0 {
		t.Fatalf("content %q, want %q (reasoning %q, calls %v)", a.content, want, a.reasoning, a.calls)
	}
	if a.finish != "stop" || !a.done {
		t.Fatalf("finish %q done %v", a.finish, a.done)
	}
	u := last.UsageMetadata
	if a.usage["prompt_tokens"] != float64(u.PromptTokenCount) || a.usage["completion_tokens"] != float64(u.CandidatesTokenCount) ||
		a.usage["total_tokens"] != float64(u.TotalTokenCount) {
		t.Fatalf("usage %v, want the last chunk's %+v", a.usage, u)
	}
}

// TestToChatStreamRecordedCall: a recorded Gemini 2.5 call with a
// thoughtSignature becomes a tool call whose id carries the signature
// and whose arguments are the call's args.
func TestToChatStreamRecordedCall(t *testing.T) {
	text := string(readFile(t, "stream_function_call.sse"))
	var rec generateResponse
	if err := json.Unmarshal(parseAll(t, text)[0].Data, &rec); err != nil {
		t.Fatal(err)
	}
	p := rec.Candidates[0].Content.Parts[0]
	a, err := readChat(t, ToChatStream(reader(text), chat.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.calls) != 1 || a.finish != "tool_calls" || !a.done {
		t.Fatalf("calls %+v finish %q done %v", a.calls, a.finish, a.done)
	}
	c := a.calls[0]
	if c.Function.Name != p.FunctionCall.Name || !jsonEqual(c.Function.Arguments, string(p.FunctionCall.Args)) {
		t.Fatalf("call %+v, want %s %s", c, p.FunctionCall.Name, p.FunctionCall.Args)
	}
	base, sig := SplitCallID(c.ID)
	if sig != p.ThoughtSignature || base != CallID(0, 0) {
		t.Fatalf("id %q splits into %q and %q, want %q and the recorded signature %q", c.ID, base, sig, CallID(0, 0), p.ThoughtSignature)
	}
	if strings.ContainsAny(c.ID, "+/=") {
		t.Fatalf("id %q has bytes an Anthropic tool_use id cannot", c.ID)
	}
}

// TestToChatStreamThoughts: thought parts go to reasoning_content, text to
// content; usage is the last running total, with reasoning and cached
// tokens.
func TestToChatStreamThoughts(t *testing.T) {
	in := `data: {"candidates":[{"content":{"parts":[{"text":"Let me think","thought":true}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":10,"totalTokenCount":10},"modelVersion":"gemini-2.5-flash","responseId":"r1"}` + "\r\n\r\n" +
		`data: {"candidates":[{"content":{"parts":[{"text":"Hello"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":1,"thoughtsTokenCount":5,"totalTokenCount":16},"modelVersion":"gemini-2.5-flash","responseId":"r1"}` + "\r\n\r\n" +
		`data: {"candidates":[{"content":{"parts":[{"text":" world"}],"role":"model"},"finishReason":"MAX_TOKENS","index":0}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":2,"thoughtsTokenCount":5,"cachedContentTokenCount":4,"totalTokenCount":17},"modelVersion":"gemini-2.5-flash","responseId":"r1"}` + "\r\n\r\n"
	a, err := readChat(t, ToChatStream(reader(in), chat.Options{IncludeUsage: true}))
	if err != nil {
		t.Fatal(err)
	}
	if a.reasoning != "Let me think" || a.content != "Hello world" || a.finish != "length" || !a.done {
		t.Fatalf("%+v", a)
	}
	got, _ := json.Marshal(a.usage)
	want := `{"completion_tokens":7,"completion_tokens_details":{"reasoning_tokens":5},"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":4},"total_tokens":17}`
	if string(got) != want {
		t.Fatalf("usage %s, want %s", got, want)
	}
}

// TestToChatStreamUsageAfterFinish: a chunk of usage only after the
// finishReason counts; [DONE] comes at the end of the stream.
func TestToChatStreamUsageAfterFinish(t *testing.T) {
	in := `data: {"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"totalTokenCount":3}}` + "\n\n" +
		`data: {"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1,"totalTokenCount":4}}` + "\n\n"
	a, err := readChat(t, ToChatStream(reader(in), chat.Options{IncludeUsage: true}))
	if err != nil {
		t.Fatal(err)
	}
	if a.usage["total_tokens"] != 4.0 || !a.done || a.finish != "stop" {
		t.Fatalf("%+v", a)
	}
}

// TestToChatStreamCutAfterFinish: a chunk cut off by EOF after the
// finishReason may be the usage chunk: the stream ends as truncated (no
// [DONE]), not cleanly with the usage before it.
func TestToChatStreamCutAfterFinish(t *testing.T) {
	in := `data: {"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"totalTokenCount":3}}` + "\n\n" +
		`data: {"usageMetadata":{"promptTokenCount":3,"candidatesTok`
	a, err := readChat(t, ToChatStream(reader(in), chat.Options{IncludeUsage: true}))
	if err != nil || a.done || a.content != "Hi" {
		t.Fatalf("%+v %v, want Hi and no [DONE]", a, err)
	}
	// A last chunk whole but for its blank line is read.
	in = in[:strings.LastIndex(in, "data: ")] + `data: {"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1,"totalTokenCount":4}}`
	if a, err = readChat(t, ToChatStream(reader(in), chat.Options{IncludeUsage: true})); err != nil || !a.done || a.usage["total_tokens"] != 4.0 {
		t.Fatalf("%+v %v, want the usage of 4 and [DONE]", a, err)
	}
}

// TestToChatStreamEnds: without a finishReason the stream ends cut (no
// [DONE]); nothing comes before the first content; errors, as a data
// event or as the bare JSON the Gemini API writes, become a Chat error
// chunk; content after the finish is unreadable.
func TestToChatStreamEnds(t *testing.T) {
	chunk := `data: {"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"}}]}` + "\n\n"
	t.Run("cut", func(t *testing.T) {
		a, err := readChat(t, ToChatStream(reader(chunk), chat.Options{}))
		if err != nil || a.done || a.content != "Hi" {
			t.Fatalf("%+v %v", a, err)
		}
	})
	t.Run("nothing before content", func(t *testing.T) {
		src := ToChatStream(reader(`data: {"candidates":[{"content":{"parts":[{"text":""}],"role":"model"}}],"usageMetadata":{"promptTokenCount":3}}`+"\n\n"), chat.Options{})
		if evs, err := drain(src); len(evs) != 0 || err != io.EOF {
			t.Fatalf("%d events, %v", len(evs), err)
		}
	})
	for name, errEv := range map[string]string{
		"data":           `data: {"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}` + "\n\n",
		"bare":           `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}` + "\n",
		"array":          `data: [{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}]` + "\n\n",
		"pretty, at EOF": "{\n  \"error\": {\n    \"code\": 503,\n    \"message\": \"The model is overloaded.\",\n    \"status\": \"UNAVAILABLE\"\n  }\n}",
	} {
		t.Run("error "+name, func(t *testing.T) {
			a, err := readChat(t, ToChatStream(reader(chunk+errEv), chat.Options{}))
			if err != nil || a.done || a.errBody == nil {
				t.Fatalf("%+v %v", a, err)
			}
			if a.errBody["code"] != "UNAVAILABLE" || a.errBody["message"] != "The model is overloaded." || a.errBody["type"] != "server_error" {
				t.Fatalf("error %v", a.errBody)
			}
		})
	}
	t.Run("content after finish", func(t *testing.T) {
		in := `data: {"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"finishReason":"STOP"}]}` + "\n\n" + chunk
		_, err := drain(ToChatStream(reader(in), chat.Options{}))
		if !errors.As(err, new(*chat.UnreadableError)) {
			t.Fatalf("err %v, want unreadable", err)
		}
	})
	t.Run("a part of an unknown kind", func(t *testing.T) {
		// Decoded, it has none of the members the package knows: left out,
		// the answer would end clean with a piece missing.
		in := chunk + `data: {"candidates":[{"content":{"parts":[{"toolCall":{"name":"search","args":{"q":"x"}}}],"role":"model"},"finishReason":"STOP"}]}` + "\n\n"
		_, err := drain(ToChatStream(reader(in), chat.Options{}))
		if !errors.As(err, new(*chat.UnreadableError)) {
			t.Fatalf("err %v, want unreadable", err)
		}
		if _, err := ToChatResponse([]byte(`{"candidates":[{"content":{"parts":[{"toolCall":{"name":"search"}}],"role":"model"},"finishReason":"STOP"}]}`), chat.Options{}); !errors.As(err, new(*chat.UnreadableError)) {
			t.Fatalf("ToChatResponse: err %v, want unreadable", err)
		}
	})
	t.Run("a signature alone", func(t *testing.T) {
		in := chunk + `data: {"candidates":[{"content":{"parts":[{"thoughtSignature":"c2ln"}],"role":"model"},"finishReason":"STOP"}]}` + "\n\n"
		a, err := readChat(t, ToChatStream(reader(in), chat.Options{}))
		if err != nil || a.content != "Hi" {
			t.Fatalf("%+v %v", a, err)
		}
	})
	t.Run("args not an object", func(t *testing.T) {
		in := `data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":[1]}}],"role":"model"},"finishReason":"STOP"}]}` + "\n\n"
		_, err := drain(ToChatStream(reader(in), chat.Options{}))
		if !errors.As(err, new(*chat.UnreadableError)) {
			t.Fatalf("err %v, want unreadable", err)
		}
	})
}

// TestFromChatStream: text, reasoning and tool call fragments become
// Gemini chunks, the calls whole at the end with the finishReason and
// usage; the signature a call id carries goes back on its part.
func TestFromChatStream(t *testing.T) {
	head := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":`
	tail := `,"finish_reason":null}]}` + "\n\n"
	id := withSignature("call_a", "CiQBVKhc7+/w==")
	in := head + `{"role":"assistant","content":""}` + tail +
		head + `{"reasoning_content":"hmm"}` + tail +
		head + `{"content":"Hel"}` + tail +
		head + `{"content":"lo"}` + tail +
		head + `{"tool_calls":[{"index":0,"id":"` + id + `","type":"function","function":{"name":"read","arguments":""}}]}` + tail +
		head + `{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\": "}}]}` + tail +
		head + `{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"ls","arguments":"{}"}}]}` + tail +
		head + `{"tool_calls":[{"index":0,"function":{"arguments":"\"a b.txt\"}"}}]}` + tail +
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n" +
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":9,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":8},"completion_tokens_details":{"reasoning_tokens":3}}}` + "\n\n" +
		"data: [DONE]\n\n"
	a, err := readGemini(t, FromChatStream(reader(in), chat.Options{Model: "gemini-2.5-flash", ID: "resp-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if a.end != "finish" || a.finish != "STOP" || a.text != "Hello" || a.thought != "hmm" || a.model != "gemini-2.5-flash" || a.id != "resp-1" {
		t.Fatalf("%+v", a)
	}
	if len(a.calls) != 2 || a.calls[0].Name != "read" || string(a.calls[0].Args) != `{"path":"a b.txt"}` || a.calls[0].ID != "call_a" ||
		a.sigs[0] != "CiQBVKhc7+/w==" || a.calls[1].Name != "ls" || string(a.calls[1].Args) != `{}` || a.sigs[1] != "" {
		t.Fatalf("calls %+v sigs %q", a.calls, a.sigs)
	}
	want := UsageMetadata{PromptTokenCount: 20, CandidatesTokenCount: 6, ThoughtsTokenCount: 3, CachedContentTokenCount: 8, TotalTokenCount: 29}
	if a.usage == nil || *a.usage != want {
		t.Fatalf("usage %+v, want %+v", a.usage, want)
	}
}

// TestFromChatStreamEnds: nothing before the first content; no [DONE], no
// finishReason; an in-band error becomes the bare error object the SDK
// raises; arguments that are not an object are unreadable, not dropped.
func TestFromChatStreamEnds(t *testing.T) {
	role := `data: {"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"
	text := `data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}` + "\n\n"
	t.Run("nothing before content", func(t *testing.T) {
		evs, err := drain(FromChatStream(reader(role), chat.Options{}))
		if len(evs) != 0 || err != io.EOF {
			t.Fatalf("%d events, %v", len(evs), err)
		}
	})
	t.Run("cut", func(t *testing.T) {
		a, err := readGemini(t, FromChatStream(reader(role+text), chat.Options{}))
		if err != nil || a.end != "" || a.text != "Hi" {
			t.Fatalf("%+v %v", a, err)
		}
	})
	t.Run("error", func(t *testing.T) {
		in := role + text + `data: {"error":{"message":"Rate limit reached","type":"rate_limit_error","param":null,"code":null}}` + "\n\n"
		a, err := readGemini(t, FromChatStream(reader(in), chat.Options{}))
		if err != nil || a.end != "error" {
			t.Fatalf("%+v %v", a, err)
		}
		if e := a.errBody.Error; e.Code != 429 || e.Status != "RESOURCE_EXHAUSTED" || e.Message != "Rate limit reached" {
			t.Fatalf("error %+v", e)
		}
	})
	t.Run("a Gemini error through Chat keeps its status", func(t *testing.T) {
		in := role + text + `data: {"error":{"message":"overloaded","type":"server_error","param":null,"code":"UNAVAILABLE"}}` + "\n\n"
		a, _ := readGemini(t, FromChatStream(reader(in), chat.Options{}))
		if a.errBody == nil || a.errBody.Error.Code != 503 || a.errBody.Error.Status != "UNAVAILABLE" {
			t.Fatalf("%+v", a.errBody)
		}
	})
	t.Run("bad args", func(t *testing.T) {
		in := role + `data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":"{\"a\":"}}]},"finish_reason":null}]}` + "\n\n" + "data: [DONE]\n\n"
		a, err := readGemini(t, FromChatStream(reader(in), chat.Options{}))
		if err != nil || a.end != "unreadable" {
			t.Fatalf("%+v %v", a, err)
		}
	})
}

// TestStreamRoundTrip: a recorded Gemini stream through Chat and back
// carries the same text, calls, signatures and finish.
func TestStreamRoundTrip(t *testing.T) {
	for _, name := range []string{"stream_text.sse", "stream_function_call.sse", "stream_text_signature.sse"} {
		t.Run(name, func(t *testing.T) {
			text := string(readFile(t, name))
			direct, err := readGemini(t, reader(text))
			if err != nil {
				t.Fatal(err)
			}
			back, err := readGemini(t, FromChatStream(ToChatStream(reader(text), chat.Options{IncludeUsage: true}), chat.Options{}))
			if err != nil {
				t.Fatal(err)
			}
			if back.text != direct.text || back.thought != direct.thought || back.finish != direct.finish || back.end != "finish" {
				t.Fatalf("back %+v\nwant %+v", back, direct)
			}
			if len(back.calls) != len(direct.calls) {
				t.Fatalf("calls %+v, want %+v", back.calls, direct.calls)
			}
			for i, c := range direct.calls {
				if back.calls[i].Name != c.Name || !jsonEqual(string(back.calls[i].Args), string(c.Args)) || back.sigs[i] != direct.sigs[i] {
					t.Fatalf("call %d: %+v sig %q, want %+v sig %q", i, back.calls[i], back.sigs[i], c, direct.sigs[i])
				}
			}
			if direct.usage != nil && (back.usage == nil || back.usage.TotalTokenCount != direct.usage.TotalTokenCount ||
				back.usage.PromptTokenCount != direct.usage.PromptTokenCount) {
				t.Fatalf("usage %+v, want %+v", back.usage, direct.usage)
			}
		})
	}
}

// TestToChatStreamPartialArgs: a recorded Vertex AI stream whose call
// streams its arguments (partialArgs, willContinue) is refused at its
// first chunk, before any tool call is made: a call with "{}" for the
// arguments still to come would lose them.
func TestToChatStreamPartialArgs(t *testing.T) {
	a, err := readChat(t, ToChatStream(reader(string(readFile(t, "stream_partial_args_vertex.sse"))), chat.Options{}))
	if !errors.As(err, new(*chat.UnreadableError)) || len(a.calls) != 0 || a.done {
		t.Fatalf("err %v, calls %+v, done %v", err, a.calls, a.done)
	}
}
