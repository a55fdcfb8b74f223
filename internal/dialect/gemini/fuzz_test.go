package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat/chattest"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// The translators never panic, whatever the body; what they produce is
// JSON; request errors are *chat.RequestError.

func FuzzToChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
		`{"contents":[{"role":"model","parts":[{"functionCall":{"name":"f","args":{"a":1}},"thoughtSignature":"YQ=="}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"output":"x"}}},{"inlineData":{"mimeType":"image/png","data":"AA"}}]}],"systemInstruction":{"parts":[{"text":"s"},{"text":"t"}]},"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"OBJECT"}}]}],"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["f","g"]}},"generationConfig":{"responseMimeType":"application/json","thinkingConfig":{"thinkingLevel":"LOW"}}}`,
		`{"contents":null,"generationConfig":{"candidateCount":1,"thinkingConfig":{"thinkingBudget":-1}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := ToChatRequest(b, chat.Options{Model: "m"})
		checkTranslation(t, out, err)
	})
}

func FuzzFromChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"system","content":[{"type":"text","text":"s"}]},{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]},{"role":"assistant","tool_calls":[{"id":"c__sig_1YQ","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c__sig_1YQ","content":"r"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}},"reasoning_effort":"high","stop":["x"],"response_format":{"type":"json_object"}}`,
		`{"messages":null,"n":1,"temperature":3}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := FromChatRequest(b, chat.Options{})
		checkTranslation(t, out, err)
	})
}

func FuzzToChatResponse(f *testing.F) {
	f.Add([]byte(`{"candidates":[{"content":{"parts":[{"text":"a"},{"text":"t","thought":true},{"functionCall":{"name":"n","args":{"a":[1, 2]}}}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1}}`))
	f.Add([]byte(`{"promptFeedback":{"blockReason":"OTHER"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := ToChatResponse(b, chat.Options{Created: 1})
		if err == nil && !json.Valid(out) {
			t.Fatalf("invalid JSON: %s", out)
		}
	})
}

func FuzzFromChatResponse(f *testing.F) {
	f.Add([]byte(`{"id":"c","model":"m","choices":[{"message":{"content":"a","reasoning_content":"r","tool_calls":[{"id":"i__sig_0YWJj","function":{"name":"n","arguments":"{\"a\": \"b c\"}"}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":9}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := FromChatResponse(b, chat.Options{})
		if err == nil && !json.Valid(out) {
			t.Fatalf("invalid JSON: %s", out)
		}
	})
}

func FuzzErrors(f *testing.F) {
	f.Add(500, []byte(`{"error":{"code":500,"message":"x","status":"INTERNAL"}}`))
	f.Add(429, []byte(`[{"error":{"code":429,"message":"q","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1s"}]}}]`))
	f.Add(502, []byte(`<html>`))
	f.Fuzz(func(t *testing.T, status int, b []byte) {
		if _, out := ToChatError(status, b); !json.Valid(out) {
			t.Fatalf("ToChatError: invalid JSON: %s", out)
		}
		if _, out := FromChatError(status, b); !json.Valid(out) {
			t.Fatalf("FromChatError: invalid JSON: %s", out)
		}
		if d, ok := RetryDelay(b); ok && d < 0 {
			t.Fatalf("RetryDelay %v", d)
		}
	})
}

// FuzzCallID: any base64 signature rides in a tool call id, survives
// Anthropic's id rule, and comes back whole.
func FuzzCallID(f *testing.F) {
	f.Add("call_g0_1", []byte("\x00\xff\x10"))
	f.Add("fc-9", []byte("signature bytes"))
	f.Fuzz(func(t *testing.T, base string, sig []byte) {
		if strings.Contains(base, sigSep) {
			return
		}
		enc := b64(sig)
		id := withSignature(base, enc)
		gotBase, gotSig := splitSignature(id)
		if gotBase != base || gotSig != enc {
			t.Fatalf("%q %q → %q → %q %q", base, enc, id, gotBase, gotSig)
		}
		if tail := strings.TrimPrefix(id, base); strings.ContainsAny(tail, "+/=") {
			t.Fatalf("%q has bytes an Anthropic tool_use id cannot", tail)
		}
	})
}

// FuzzToChatStream: any bytes as a Gemini stream: no panic, every Chat
// event JSON (or [DONE], last), the stream ends in one of the ways the
// codec surface names.
func FuzzToChatStream(f *testing.F) {
	f.Add([]byte(`data: {"candidates":[{"content":{"parts":[{"text":"a","thought":true},{"text":"b"},{"functionCall":{"name":"f","args":{}}}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1}}` + "\n\n"))
	f.Add([]byte(`{"error":{"code":503,"message":"x","status":"UNAVAILABLE"}}` + "\n"))
	f.Add([]byte("data: [{\"error\":{}}]\n\ndata: {\"candidates\":[]}\n\n: c\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		evs, err := drain(ToChatStream(sse.NewReader(strings.NewReader(string(b)), 0), chat.Options{IncludeUsage: true}))
		var ue *chat.UnreadableError
		if err != nil && err.Error() != "EOF" && !errors.As(err, &ue) {
			t.Fatalf("error %v", err)
		}
		for i, ev := range evs {
			if string(ev.Data) == "[DONE]" {
				if i != len(evs)-1 {
					t.Fatal("[DONE] not last")
				}
				continue
			}
			if !json.Valid(ev.Data) {
				t.Fatalf("invalid JSON: %s", ev.Data)
			}
		}
	})
}

// FuzzFromChatStreamFaithful: a Chat stream in every shape providers
// send (chattest) becomes a Gemini stream that carries the same answer:
// reasoning, text, every call with its whole arguments, the finish; or
// ends in an error when the input was cut or unreadable.
func FuzzFromChatStreamFaithful(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, want := chattest.Stream(data)
		a, err := readGemini(t, FromChatStream(sse.NewReader(strings.NewReader(in), 0), chat.Options{Model: "m"}))
		if err != nil {
			t.Fatalf("%v\ninput:\n%s", err, in)
		}
		if err := checkGeminiAnswer(a, want); err != nil {
			t.Fatalf("%v\ninput:\n%s", err, in)
		}
		if a.end != "finish" {
			return
		}
		// And back to Chat: the same answer again.
		c, err := readChat(t, ToChatStream(FromChatStream(sse.NewReader(strings.NewReader(in), 0), chat.Options{}), chat.Options{IncludeUsage: true}))
		if err != nil || !c.done {
			t.Fatalf("back to Chat: %v, done %v\ninput:\n%s", err, c.done, in)
		}
		if c.content != want.Answer || c.reasoning != want.Reasoning || len(c.calls) != len(want.Calls) {
			t.Fatalf("back to Chat: %+v\ninput:\n%s", c, in)
		}
		for i, w := range want.Calls {
			g := c.calls[i]
			args := w.Args
			if args == "" {
				args = "{}"
			}
			if g.Function.Name != w.Name || !jsonEqual(g.Function.Arguments, args) || w.ID != "" && g.ID != w.ID {
				t.Fatalf("back to Chat: call %d %+v, want %+v", i, g, w)
			}
		}
		wantFinish := map[string]string{"length": "length", "content_filter": "content_filter"}[want.Finish]
		if wantFinish == "" {
			wantFinish = "stop"
			if len(want.Calls) > 0 {
				wantFinish = "tool_calls"
			}
		}
		if c.finish != wantFinish {
			t.Fatalf("back to Chat: finish %q, want %q", c.finish, wantFinish)
		}
	})
}

// fuzzSeeds are a few inputs for each way the generator goes.
var fuzzSeeds = [][]byte{
	nil,
	[]byte("\x00\x03\x01\x02\x05\x09\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b"),
	[]byte("\x01\x02\x01\x07\x03\x02\x02\x09\x01\x01\x01\x00\x00\x00\x01\x02\x03\x04\x05\x06\x07"),
	[]byte("\x02\x04\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff\x10\x20\x30"),
	[]byte("\x03\x03\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05"),
	[]byte("\x04\x04\x08\x18\x28\x38\x48\x58\x68\x78\x88\x98\xa8\xb8\xc8\xd8\xe8\xf8\x02\x02\x02"),
	[]byte("\x00\x00\x06\x06\x06\x06\x06\x06\x06\x06\x06\x06\x06\x06\x06\x06\x06\x06\x06\x06\x00"),
}

func checkGeminiAnswer(a *geminiAnswer, want chattest.Want) error {
	// Arguments cut short cannot become a functionCall's args object:
	// the stream must end in an error rather than drop or mend them.
	badArgs := false
	for _, c := range want.Calls {
		if c.Args != "" && !isObject([]byte(c.Args)) {
			badArgs = true
		}
	}
	if badArgs && a.end == "finish" {
		return fmt.Errorf("a clean end, yet a call's arguments are not a JSON object: %+v", want.Calls)
	}
	if a.end != "finish" {
		if want.Complete && !want.Unreadable && !badArgs {
			return fmt.Errorf("a whole, readable stream ended %q", a.end)
		}
		return nil // the client sees an error, or a cut stream
	}
	if !want.Complete || want.Unreadable {
		return fmt.Errorf("a clean end, yet the input was cut (%v) or unreadable (%v)", !want.Complete, want.Unreadable)
	}
	if a.thought != want.Reasoning {
		return fmt.Errorf("thought %q, want %q", a.thought, want.Reasoning)
	}
	if a.text != want.Answer {
		return fmt.Errorf("text %q, want %q", a.text, want.Answer)
	}
	if len(a.calls) != len(want.Calls) {
		return fmt.Errorf("%d calls, want %d: %+v", len(a.calls), len(want.Calls), a.calls)
	}
	for i, c := range want.Calls {
		g := a.calls[i]
		args := c.Args
		if args == "" {
			args = "{}"
		}
		if g.Name != c.Name || !jsonEqual(string(g.Args), args) || g.ID != c.ID {
			return fmt.Errorf("call %d: %+v (args %s), want %+v", i, g, g.Args, c)
		}
	}
	if wantFinish := GeminiFinishReason(want.Finish); a.finish != wantFinish {
		return fmt.Errorf("finish %q, want %q", a.finish, wantFinish)
	}
	return nil
}

func checkTranslation(t *testing.T, out []byte, err error) {
	t.Helper()
	if err != nil {
		var re *chat.RequestError
		if !errors.As(err, &re) {
			t.Fatalf("error %T %v, want a *chat.RequestError", err, err)
		}
		return
	}
	if !json.Valid(out) {
		t.Fatalf("invalid JSON: %s", out)
	}
}

// FuzzToChatStreamFastSlow: the hot path reads a chunk as the slow path
// does: the same events, the same end, for any bytes.
func FuzzToChatStreamFastSlow(f *testing.F) {
	for _, s := range []string{
		`data: {"candidates":[{"content":{"parts":[{"text":"a\u00e9\"","thought":true},{"text":"b","thoughtSignature":"x"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":1,"totalTokenCount":3},"modelVersion":"m","responseId":"r"}` + "\n\n",
		`data: {"candidates":[{"content":{"parts":[{"text":"b"}]},"finishReason":"STOP","index":1}]}` + "\n\n",
		`data: {"candidates":[{"content":{"parts":[{"Text":"b","text":"c"}]}}],"usageMetadata":{"promptTokenCount":1.5}}` + "\n\n",
		`data: {"candidates":[{"content":{"parts":[{"thought":true}]},"finishReason":"MAX_TOKENS"}]}` + "\n\ndata: {\"usageMetadata\":{\"candidatesTokenCount\":4}}\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sameFastSlow(t, b, func(src sse.Source) sse.Source { return ToChatStream(src, chat.Options{IncludeUsage: true}) })
	})
}

// FuzzFromChatStreamFastSlow: FromChatStream's hot paths (memoText for a
// text delta like the last, fastChunk and fastText for the others) read a
// Chat stream as the slow path does: the same events, the same end, for
// any bytes.
func FuzzFromChatStreamFastSlow(f *testing.F) {
	head := `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":`
	for _, s := range []string{
		head + `{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n" +
			head + `{"reasoning_content":"a\u00e9\""}}]}` + "\n\n" + head + `{"content":"b"}}]}` + "\n\n" +
			head + `{},"finish_reason":"stop"}]}` + "\n\n" +
			`data: {"id":"c1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":1},"completion_tokens_details":{"reasoning_tokens":2}}}` + "\n\ndata: [DONE]\n\n",
		head + `{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}}]}` + "\n\n" +
			head + `{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":1}"}}]},"finish_reason":"tool_calls"}]}` + "\n\n" +
			`data: {"choices":[],"usage":{"prompt_tokens":1.5,"total_tokens":null}}` + "\n\ndata: [DONE]\n\n",
		`data: {"ID":"x","id":"y","Model":"m","choices":[{"delta":{"content":"a"}}],"error":null,"message":5}` + "\n\n" +
			`data: {"choices":[{"delta":{"content":"b"}}],"usage":{"prompt_tokens":2,"prompt_tokens":3}}` + "\n\ndata: [DONE]\n\n",
		`data: {"id":"\u0063","model":"\xff","object":"error","message":"boom"}` + "\n\n",
		`data: {"choices":[{"delta":{"content":"a"}}],"error":{"message":"x","code":"rate_limit_exceeded"}}` + "\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(checkFromChatFastSlow)
}

// checkFromChatFastSlow: FromChatStream reads b the same with its hot
// paths and without.
func checkFromChatFastSlow(t *testing.T, b []byte) {
	sameFastSlow(t, b, func(src sse.Source) sse.Source { return FromChatStream(src, chat.Options{}) })
}

// sameFastSlow: translate reads the stream b the same with the package's
// hot paths and without (slowOnly): the same events, the same end.
func sameFastSlow(t *testing.T, b []byte, translate func(sse.Source) sse.Source) {
	t.Helper()
	run := func(slow bool) ([]sse.Event, string) {
		slowOnly = slow
		defer func() { slowOnly = false }()
		evs, err := drain(translate(sse.NewReader(strings.NewReader(string(b)), 0)))
		kind := "eof"
		if err != nil && err.Error() != "EOF" {
			kind = "error: " + err.Error()
		}
		return evs, kind
	}
	fast, fk := run(false)
	slow, sk := run(true)
	if fk != sk || len(fast) != len(slow) {
		t.Fatalf("fast: %d events, %s; slow: %d events, %s", len(fast), fk, len(slow), sk)
	}
	for i := range fast {
		if string(fast[i].Raw) != string(slow[i].Raw) {
			t.Fatalf("event %d: fast %q, slow %q", i, fast[i].Raw, slow[i].Raw)
		}
	}
}
