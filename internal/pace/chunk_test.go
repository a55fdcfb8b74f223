package pace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/llmrelay/caddy-llm-relay/internal/jsontest"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// readEvents parses a raw SSE stream into cloned events.
func readEvents(tb testing.TB, raw string) []sse.Event {
	tb.Helper()
	r := sse.NewReader(strings.NewReader(raw), 1<<20)
	var evs []sse.Event
	for {
		ev, err := r.Next()
		if err != nil {
			if err != io.EOF {
				tb.Fatalf("reading %q: %v", raw, err)
			}
			return evs
		}
		evs = append(evs, ev.Clone())
	}
}

func oneEvent(tb testing.TB, raw string) sse.Event {
	tb.Helper()
	evs := readEvents(tb, raw)
	if len(evs) != 1 {
		tb.Fatalf("%q: got %d events, want 1", raw, len(evs))
	}
	return evs[0]
}

var kindNames = [...]string{"comment", "text", "other", "done", "error", "ping"}

func kindName(k Kind) string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// decodeJSON decodes data with numbers kept as json.Number.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data")
	}
	return v, nil
}

// deltaOf returns choices[0].delta of a decoded chunk.
func deltaOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	ch, _ := m["choices"].([]any)
	if len(ch) == 0 {
		return nil
	}
	c, _ := ch[0].(map[string]any)
	d, _ := c["delta"].(map[string]any)
	return d
}

const (
	openAIFirst = `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_fc9f1d7035","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"Vx3"}`
	openAIText  = `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_fc9f1d7035","choices":[{"index":0,"delta":{"content":" Hello, world! How can I help you today?"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"Vx3kQ2"}`
	openAIStop  = `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_fc9f1d7035","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`
	openAIUsage = `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_fc9f1d7035","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}`
	openAITool  = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}]}`
	openAIToolC = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"x","tool_calls":[{"index":0,"function":{"arguments":"{\""}}]},"logprobs":null,"finish_reason":null}]}`
	openAILogp  = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":{"content":[{"token":"Hi","logprob":-0.01,"bytes":[72,105],"top_logprobs":[]}],"refusal":null},"finish_reason":null}]}`
	openAIN2    = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null},{"index":1,"delta":{"content":"Hi ✓"},"logprobs":null,"finish_reason":null}]}`
	openAIRef   = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Sure","refusal":null,"tool_calls":null,"function_call":null},"logprobs":null,"finish_reason":null}],"usage":null}`
	deepSeekR   = `{"id":"8a7b0c","object":"chat.completion.chunk","created":1738000000,"model":"deepseek-reasoner","system_fingerprint":"fp_7e73fd9a08_prod0225","choices":[{"index":0,"delta":{"content":null,"reasoning_content":"Okay, the user"},"logprobs":null,"finish_reason":null}]}`
	deepSeekA   = `{"id":"8a7b0c","object":"chat.completion.chunk","created":1738000000,"model":"deepseek-reasoner","system_fingerprint":"fp_7e73fd9a08_prod0225","choices":[{"index":0,"delta":{"content":"Hello","reasoning_content":null},"logprobs":null,"finish_reason":null}]}`
	deepSeekUse = `{"id":"8a7b0c","object":"chat.completion.chunk","created":1738000000,"model":"deepseek-reasoner","choices":[{"index":0,"delta":{"content":"","reasoning_content":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":13,"completion_tokens":5,"total_tokens":18}}`
	orReasonD   = `{"id":"gen-1751-abc","provider":"OpenAI","model":"openai/o4-mini","object":"chat.completion.chunk","created":1751,"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"**Plan**","reasoning_details":[{"type":"reasoning.text","text":"**Plan**","format":"unknown","index":0}]},"finish_reason":null,"native_finish_reason":null,"logprobs":null}]}`
	orReason    = `{"id":"gen-1751-abc","provider":"Chutes","model":"deepseek/deepseek-r1","object":"chat.completion.chunk","created":1751,"choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning":" think"},"finish_reason":null,"native_finish_reason":null,"logprobs":null}]}`
	orText      = `{"id":"gen-1751-abc","provider":"OpenAI","model":"openai/gpt-4o","object":"chat.completion.chunk","created":1751,"choices":[{"index":0,"delta":{"role":"assistant","content":"Bonjour"},"finish_reason":null,"native_finish_reason":null,"logprobs":null}],"system_fingerprint":"fp_1"}`
)

type classifyCase struct {
	name      string
	raw       string
	kind      Kind
	field     string // KindText
	text      string // KindText
	role      bool
	answer    int
	reasoning int
}

var classifyCases = []classifyCase{
	// OpenAI.
	{name: "openai text", raw: "data: " + openAIText + "\n\n", kind: KindText, field: "content", text: " Hello, world! How can I help you today?", answer: 40},
	{name: "openai first role chunk with empty content", raw: "data: " + openAIFirst + "\n\n", kind: KindOther},
	{name: "openai finish_reason", raw: "data: " + openAIStop + "\n\n", kind: KindOther},
	{name: "openai usage with empty choices", raw: "data: " + openAIUsage + "\n\n", kind: KindOther},
	{name: "openai tool_calls", raw: "data: " + openAITool + "\n\n", kind: KindOther},
	{name: "openai tool_calls with content", raw: "data: " + openAIToolC + "\n\n", kind: KindOther, answer: 1},
	{name: "openai logprobs", raw: "data: " + openAILogp + "\n\n", kind: KindOther, answer: 2},
	{name: "openai n=2", raw: "data: " + openAIN2 + "\n\n", kind: KindOther, answer: 9},
	{name: "openai null members", raw: "data: " + openAIRef + "\n\n", kind: KindText, field: "content", text: "Sure", answer: 4},
	{name: "openai usage non-null with text", raw: `data: {"choices":[{"index":0,"delta":{"content":"ab"}}],"usage":{"total_tokens":3}}` + "\n\n", kind: KindOther, answer: 2},
	// DeepSeek.
	{name: "deepseek reasoning", raw: "data: " + deepSeekR + "\n\n", kind: KindText, field: "reasoning_content", text: "Okay, the user", reasoning: 14},
	{name: "deepseek answer", raw: "data: " + deepSeekA + "\n\n", kind: KindText, field: "content", text: "Hello", answer: 5},
	{name: "deepseek final usage", raw: "data: " + deepSeekUse + "\n\n", kind: KindOther},
	// OpenRouter.
	{name: "openrouter reasoning_details", raw: "data: " + orReasonD + "\n\n", kind: KindOther, reasoning: 8},
	{name: "openrouter reasoning", raw: "data: " + orReason + "\n\n", kind: KindText, field: "reasoning", text: " think", role: true, reasoning: 6},
	{name: "openrouter text", raw: "data: " + orText + "\n\n", kind: KindText, field: "content", text: "Bonjour", role: true, answer: 7},
	{name: "openrouter comment", raw: ": OPENROUTER PROCESSING\n\n", kind: KindComment},

	// Errors.
	{name: "event error", raw: "event: error\ndata: {\"error\":{\"message\":\"overloaded\"}}\n\n", kind: KindError},
	{name: "event error with text", raw: "event: error\ndata: {\"choices\":[{\"delta\":{\"content\":\"ab\"}}]}\n\n", kind: KindError, answer: 2},
	{name: "event error no data", raw: "event: error\n\n", kind: KindError},
	{name: "event error non-JSON", raw: "event: error\ndata: boom\n\n", kind: KindError},
	{name: "event error DONE", raw: "event: error\ndata: [DONE]\n\n", kind: KindError},
	{name: "error member", raw: `data: {"error":{"message":"Rate limit","type":"rate_limit_error","code":429}}` + "\n\n", kind: KindError},
	{name: "error member string", raw: `data: {"error":"boom"}` + "\n\n", kind: KindError},
	{name: "error member with choices", raw: `data: {"choices":[{"delta":{"content":"x"}}],"error":{"message":"m"}}` + "\n\n", kind: KindError, answer: 1},
	{name: "object error", raw: `data: {"object":"error","message":"This model's maximum context length is 4096 tokens","type":"BadRequestError","param":null,"code":400}` + "\n\n", kind: KindError},
	{name: "object error escaped", raw: `data: {"object":"\u0065rror","message":"m"}` + "\n\n", kind: KindError},
	{name: "error null is not an error", raw: `data: {"error":null,"choices":[{"index":0,"delta":{"content":"ok"}}]}` + "\n\n", kind: KindText, field: "content", text: "ok", answer: 2},
	{name: "object chunk is not an error", raw: `data: {"object":"errors","choices":[{"delta":{"content":"ok"}}]}` + "\n\n", kind: KindText, field: "content", text: "ok", answer: 2},
	{name: "error member in invalid JSON", raw: `data: {"error":{"message":"m"}` + "\n\n", kind: KindOther},

	// Done.
	{name: "done", raw: "data: [DONE]\n\n", kind: KindDone},
	{name: "done no space", raw: "data:[DONE]\n\n", kind: KindDone},
	{name: "done unterminated", raw: "data: [DONE]", kind: KindDone},
	{name: "done with trailing space", raw: "data: [DONE] \n\n", kind: KindOther},

	// Comments and non-data blocks.
	{name: "keep-alive", raw: ": keep-alive\n\n", kind: KindComment},
	{name: "empty comment", raw: ":\n\n", kind: KindComment},
	{name: "trailing blank lines at EOF", raw: "\n\n\n", kind: KindComment},
	{name: "event only", raw: "event: ping\n\n", kind: KindOther},
	{name: "id only", raw: "id: 7\n\n", kind: KindOther},
	{name: "unknown field", raw: "foo: bar\n\n", kind: KindOther},

	// SSE shape.
	{name: "no space after colon", raw: `data:{"choices":[{"index":0,"delta":{"content":"ab"}}]}` + "\n\n", kind: KindText, field: "content", text: "ab", answer: 2},
	{name: "CRLF", raw: `data: {"choices":[{"index":0,"delta":{"content":"ab"}}]}` + "\r\n\r\n", kind: KindText, field: "content", text: "ab", answer: 2},
	{name: "CR", raw: `data: {"choices":[{"index":0,"delta":{"content":"ab"}}]}` + "\r\r", kind: KindText, field: "content", text: "ab", answer: 2},
	{name: "BOM and leading blank lines", raw: "\xEF\xBB\xBF\n\r\n" + `data: {"choices":[{"delta":{"content":"ab"}}]}` + "\n\n", kind: KindText, field: "content", text: "ab", answer: 2},
	{name: "event message", raw: "event: message\n" + `data: {"choices":[{"delta":{"content":"ab"}}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "event foo", raw: "event: foo\n" + `data: {"choices":[{"delta":{"content":"ab"}}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "empty event field", raw: "event:\n" + `data: {"choices":[{"delta":{"content":"ab"}}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "id field", raw: `data: {"choices":[{"delta":{"content":"ab"}}]}` + "\nid: 3\n\n", kind: KindOther, answer: 2},
	{name: "retry field", raw: "retry: 1000\n" + `data: {"choices":[{"delta":{"content":"ab"}}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "invalid retry field", raw: "retry: x\n" + `data: {"choices":[{"delta":{"content":"ab"}}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "comment line in block", raw: ": hi\n" + `data: {"choices":[{"delta":{"content":"ab"}}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "comment line after data", raw: `data: {"choices":[{"delta":{"content":"ab"}}]}` + "\n: hi\n\n", kind: KindOther, answer: 2},
	{name: "two data lines", raw: "data: {\"choices\":[{\"delta\":\n" + `data: {"content":"ab"}}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "unterminated", raw: `data: {"choices":[{"delta":{"content":"ab"}}]}` + "\n", kind: KindOther, answer: 2},
	{name: "unterminated no newline", raw: `data: {"choices":[{"delta":{"content":"ab"}}]}`, kind: KindOther, answer: 2},

	// JSON shape.
	{name: "not JSON", raw: "data: hello\n\n", kind: KindOther},
	{name: "empty data", raw: "data:\n\n", kind: KindOther},
	{name: "JSON array", raw: "data: [1,2]\n\n", kind: KindOther},
	{name: "JSON string", raw: "data: \"x\"\n\n", kind: KindOther},
	{name: "trailing garbage", raw: `data: {"choices":[{"delta":{"content":"ab"}}]} x` + "\n\n", kind: KindOther},
	{name: "two objects", raw: `data: {"choices":[{"delta":{"content":"ab"}}]}{}` + "\n\n", kind: KindOther},
	{name: "trailing comma", raw: `data: {"choices":[{"delta":{"content":"ab"},}]}` + "\n\n", kind: KindOther},
	{name: "surrounding whitespace", raw: "data:  \t{ \"choices\" : [ { \"delta\" : { \"content\" : \"ab\" } } ] } \t\n\n", kind: KindText, field: "content", text: "ab", answer: 2},
	{name: "no choices", raw: `data: {"id":"x"}` + "\n\n", kind: KindOther},
	{name: "choices null", raw: `data: {"choices":null}` + "\n\n", kind: KindOther},
	{name: "choice not object", raw: `data: {"choices":["x"]}` + "\n\n", kind: KindOther},
	{name: "no delta", raw: `data: {"choices":[{"index":0}]}` + "\n\n", kind: KindOther},
	{name: "delta null", raw: `data: {"choices":[{"index":0,"delta":null}]}` + "\n\n", kind: KindOther},
	{name: "message not delta", raw: `data: {"choices":[{"index":0,"message":{"content":"ab"}}]}` + "\n\n", kind: KindOther},
	{name: "index string", raw: `data: {"choices":[{"index":"0","delta":{"content":"ab"}}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "index null", raw: `data: {"choices":[{"index":null,"delta":{"content":"ab"}}]}` + "\n\n", kind: KindText, field: "content", text: "ab", answer: 2},
	{name: "index negative float", raw: `data: {"choices":[{"index":-1.5e3,"delta":{"content":"ab"}}]}` + "\n\n", kind: KindText, field: "content", text: "ab", answer: 2},
	{name: "unknown choice member non-null", raw: `data: {"choices":[{"index":0,"delta":{"content":"ab"},"native_finish_reason":"stop"}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "unknown choice member number", raw: `data: {"choices":[{"index":0,"delta":{"content":"ab"},"seq":3}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "content null only", raw: `data: {"choices":[{"delta":{"content":null}}]}` + "\n\n", kind: KindOther},
	{name: "content number", raw: `data: {"choices":[{"delta":{"content":5}}]}` + "\n\n", kind: KindOther},
	{name: "content object", raw: `data: {"choices":[{"delta":{"content":{"type":"text"}}}]}` + "\n\n", kind: KindOther},
	{name: "content empty reasoning set", raw: `data: {"choices":[{"delta":{"content":"","reasoning_content":"ab"}}]}` + "\n\n", kind: KindText, field: "reasoning_content", text: "ab", reasoning: 2},
	{name: "content and reasoning", raw: `data: {"choices":[{"delta":{"content":"a","reasoning_content":"b"}}]}` + "\n\n", kind: KindOther, answer: 1, reasoning: 1},
	{name: "reasoning and reasoning_content", raw: `data: {"choices":[{"delta":{"reasoning":"a","reasoning_content":"bc"}}]}` + "\n\n", kind: KindOther, reasoning: 3},
	{name: "role null", raw: `data: {"choices":[{"delta":{"role":null,"content":"ab"}}]}` + "\n\n", kind: KindText, field: "content", text: "ab", answer: 2},
	{name: "role number", raw: `data: {"choices":[{"delta":{"role":1,"content":"ab"}}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "role only", raw: `data: {"choices":[{"delta":{"role":"assistant"}}]}` + "\n\n", kind: KindOther},
	{name: "refusal text", raw: `data: {"choices":[{"delta":{"refusal":"I can't"}}]}` + "\n\n", kind: KindOther},
	{name: "tool_calls empty array", raw: `data: {"choices":[{"delta":{"content":"ab","tool_calls":[]}}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "audio member", raw: `data: {"choices":[{"delta":{"content":"ab","audio":{"id":"a"}}}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "unknown top-level members kept", raw: `data: {"x":[1,{"y":null}],"choices":[{"delta":{"content":"ab"}}],"provider":{"n":"p"},"z":true}` + "\n\n", kind: KindText, field: "content", text: "ab", answer: 2},

	// Keys.
	{name: "duplicate content", raw: `data: {"choices":[{"delta":{"content":"a","content":"b"}}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "duplicate content null", raw: `data: {"choices":[{"delta":{"content":null,"content":"b"}}]}` + "\n\n", kind: KindOther, answer: 1},
	{name: "duplicate role", raw: `data: {"choices":[{"delta":{"role":"assistant","role":"user","content":"b"}}]}` + "\n\n", kind: KindOther, answer: 1},
	{name: "duplicate delta", raw: `data: {"choices":[{"delta":{"content":"a"},"delta":{}}]}` + "\n\n", kind: KindOther, answer: 1},
	{name: "duplicate index", raw: `data: {"choices":[{"index":0,"index":1,"delta":{"content":"a"}}]}` + "\n\n", kind: KindOther, answer: 1},
	{name: "duplicate choices", raw: `data: {"choices":[{"delta":{"content":"a"}}],"choices":[]}` + "\n\n", kind: KindOther, answer: 1},
	{name: "duplicate usage", raw: `data: {"choices":[{"delta":{"content":"a"}}],"usage":null,"usage":null}` + "\n\n", kind: KindOther, answer: 1},
	{name: "duplicate via escape", raw: `data: {"choices":[{"delta":{"content":"a","\u0063ontent":"b"}}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "escaped key", raw: `data: {"ch\u006fices":[{"delta":{"con\u0074ent":"ab"}}]}` + "\n\n", kind: KindText, field: "content", text: "ab", answer: 2},
	{name: "case-folded content", raw: `data: {"choices":[{"delta":{"Content":"ab"}}]}` + "\n\n", kind: KindOther},
	{name: "case-folded content beside content", raw: `data: {"choices":[{"delta":{"content":"ab","CONTENT":null}}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "case-folded usage", raw: `data: {"choices":[{"delta":{"content":"ab"}}],"Usage":{"total_tokens":1}}` + "\n\n", kind: KindOther, answer: 2},
	{name: "long s folds to s", raw: "data: {\"choice\u017f\":[],\"choices\":[{\"delta\":{\"content\":\"ab\"}}]}\n\n", kind: KindOther, answer: 2},
	{name: "kelvin folds to k", raw: "data: {\"choices\":[{\"delta\":{\"content\":\"ab\"},\"logprobs\":null,\"\u212Aey\":null}]}\n\n", kind: KindText, field: "content", text: "ab", answer: 2},

	// Text encoding.
	{name: "escaped CJK", raw: `data: {"choices":[{"delta":{"content":"\u4f60\u597d"}}]}` + "\n\n", kind: KindText, field: "content", text: "你好", answer: 2},
	{name: "raw CJK", raw: `data: {"choices":[{"delta":{"content":"你好，世界"}}]}` + "\n\n", kind: KindText, field: "content", text: "你好，世界", answer: 5},
	{name: "surrogate pair", raw: `data: {"choices":[{"delta":{"content":"a\ud83d\ude00b"}}]}` + "\n\n", kind: KindText, field: "content", text: "a😀b", answer: 3},
	{name: "upper-case surrogate pair", raw: `data: {"choices":[{"delta":{"content":"\uD83D\uDE00"}}]}` + "\n\n", kind: KindText, field: "content", text: "😀", answer: 1},
	{name: "escapes", raw: `data: {"choices":[{"delta":{"content":"a\"b\\c\/d\n\r\t\b\fe\u0000\u001f<>&\u2028"}}]}` + "\n\n", kind: KindText, field: "content", text: "a\"b\\c/d\n\r\t\b\fe\x00\x1f<>&\u2028", answer: 19},
	{name: "lone high surrogate", raw: `data: {"choices":[{"delta":{"content":"a\ud800b"}}]}` + "\n\n", kind: KindOther, answer: 3},
	{name: "lone high surrogate at end", raw: `data: {"choices":[{"delta":{"content":"a\ud800"}}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "lone low surrogate", raw: `data: {"choices":[{"delta":{"content":"\udc00x"}}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "reversed surrogates", raw: `data: {"choices":[{"delta":{"content":"\ude00\ud83d"}}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "high then high", raw: `data: {"choices":[{"delta":{"content":"\ud83d\ud83d\ude00"}}]}` + "\n\n", kind: KindOther, answer: 2},
	{name: "invalid UTF-8 byte", raw: "data: {\"choices\":[{\"delta\":{\"content\":\"a\xffb\"}}]}\n\n", kind: KindOther, answer: 3},
	{name: "encoded surrogate", raw: "data: {\"choices\":[{\"delta\":{\"content\":\"a\xed\xa0\x80\"}}]}\n\n", kind: KindOther, answer: 4},
	{name: "truncated UTF-8", raw: "data: {\"choices\":[{\"delta\":{\"content\":\"a\xe4\xbd\"}}]}\n\n", kind: KindOther, answer: 3},
	{name: "invalid UTF-8 elsewhere is kept", raw: "data: {\"id\":\"\xff\",\"choices\":[{\"delta\":{\"content\":\"ab\"}}]}\n\n", kind: KindText, field: "content", text: "ab", answer: 2},
	{name: "raw control char", raw: "data: {\"choices\":[{\"delta\":{\"content\":\"a\tb\"}}]}\n\n", kind: KindOther},
	{name: "bad escape", raw: `data: {"choices":[{"delta":{"content":"a\xb"}}]}` + "\n\n", kind: KindOther},
	{name: "short unicode escape", raw: `data: {"choices":[{"delta":{"content":"a\u12"}}]}` + "\n\n", kind: KindOther},
}

func TestClassify(t *testing.T) {
	for _, tc := range classifyCases {
		t.Run(tc.name, func(t *testing.T) {
			ev := oneEvent(t, tc.raw)
			scratch := []byte("keep")
			c, out := Classify(&ev, scratch)
			if c.Kind != tc.kind {
				t.Fatalf("Kind = %s, want %s", kindName(c.Kind), kindName(tc.kind))
			}
			if c.AnswerRunes != tc.answer || c.ReasoningRunes != tc.reasoning {
				t.Errorf("runes = %d/%d, want %d/%d", c.AnswerRunes, c.ReasoningRunes, tc.answer, tc.reasoning)
			}
			if string(out[:4]) != "keep" {
				t.Errorf("scratch prefix clobbered: %q", out)
			}
			if c.Kind != KindText {
				if len(out) != 4 || c.Field != "" || c.Channel != ChanNone || c.Prefix != nil || c.Suffix != nil || c.Text != nil || c.HasRole {
					t.Errorf("non-text chunk carries text fields: %+v (scratch %q)", c, out)
				}
				return
			}
			if c.Field != tc.field || string(c.Text) != tc.text || c.HasRole != tc.role {
				t.Errorf("got field %q text %q role %v, want %q %q %v", c.Field, c.Text, c.HasRole, tc.field, tc.text, tc.role)
			}
			wantChan := ChanReasoning
			if tc.field == "content" {
				wantChan = ChanAnswer
			}
			if c.Channel != wantChan {
				t.Errorf("Channel = %d, want %d", c.Channel, wantChan)
			}
			if string(out) != "keep"+tc.text {
				t.Errorf("returned scratch = %q", out)
			}
			checkText(t, &ev, &c, -1)
		})
	}
}

// checkText checks the properties of a KindText classification of ev:
// the byte layout, the round trip through AppendTextEvent, and that
// splitting the text in two at rune boundaries (at most maxSplits of them;
// <0: all) changes nothing but the text.
func checkText(tb testing.TB, ev *sse.Event, c *Chunk, maxSplits int) {
	tb.Helper()
	data := ev.Data
	if len(c.Prefix)+len(c.Suffix) > len(data) || !bytes.HasPrefix(data, c.Prefix) || !bytes.HasSuffix(data, c.Suffix) {
		tb.Fatalf("Prefix %q / Suffix %q do not frame %q", c.Prefix, c.Suffix, data)
	}
	if cap(c.Prefix) != len(c.Prefix) || cap(c.Suffix) != len(c.Suffix) {
		tb.Errorf("Prefix/Suffix capacity not capped")
	}
	if len(c.Prefix) > 0 && &c.Prefix[0] != &data[0] || len(c.Suffix) > 0 && &c.Suffix[len(c.Suffix)-1] != &data[len(data)-1] {
		tb.Errorf("Prefix/Suffix do not alias Data")
	}
	lit := data[len(c.Prefix) : len(data)-len(c.Suffix)]
	var s string
	if len(lit) < 2 || lit[0] != '"' || json.Unmarshal(lit, &s) != nil || s != string(c.Text) {
		tb.Fatalf("literal %q does not decode to Text %q", lit, c.Text)
	}
	if len(c.Text) == 0 || !utf8.Valid(c.Text) {
		tb.Fatalf("Text %q empty or invalid UTF-8", c.Text)
	}
	n := utf8.RuneCount(c.Text)
	if c.Channel == ChanAnswer && (c.AnswerRunes != n || c.ReasoningRunes != 0) ||
		c.Channel == ChanReasoning && (c.ReasoningRunes != n || c.AnswerRunes != 0) {
		tb.Errorf("runes %d/%d for %d-rune text on channel %d", c.AnswerRunes, c.ReasoningRunes, n, c.Channel)
	}
	if (c.Field == "content") != (c.Channel == ChanAnswer) {
		tb.Errorf("Field %q on channel %d", c.Field, c.Channel)
	}

	orig, err := decodeJSON(data)
	if err != nil {
		tb.Fatalf("KindText data is not valid JSON: %v: %q", err, data)
	}
	if got, _ := deltaOf(orig)[c.Field].(string); got != string(c.Text) {
		tb.Fatalf("encoding/json sees delta.%s = %q, Text = %q", c.Field, got, c.Text)
	}

	// Round trip.
	whole := AppendTextEvent(nil, c, c.Text)
	v := eventJSON(tb, whole)
	if !reflect.DeepEqual(v, orig) {
		tb.Fatalf("round trip differs:\n got %s\nwant %s", whole, data)
	}

	// Splits.
	origD := deltaOf(orig)
	delete(origD, c.Field)
	var buf []byte
	splits := 0
	for k := 1; k < len(c.Text); k++ {
		if !utf8.RuneStart(c.Text[k]) {
			continue
		}
		if maxSplits >= 0 && splits >= maxSplits {
			break
		}
		splits++
		var got string
		for _, piece := range [][]byte{c.Text[:k], c.Text[k:]} {
			buf = AppendTextEventParts(buf[:0], c.Prefix, piece, c.Suffix)
			pv := eventJSON(tb, buf)
			d := deltaOf(pv)
			s, ok := d[c.Field].(string)
			if !ok {
				tb.Fatalf("piece %q lost its text field", buf)
			}
			got += s
			delete(d, c.Field)
			if !reflect.DeepEqual(pv, orig) {
				tb.Fatalf("piece %q differs from %q beyond the text", buf, data)
			}
		}
		if got != string(c.Text) {
			tb.Fatalf("pieces decode to %q, want %q", got, c.Text)
		}
	}
}

// eventJSON parses one rendered event with the SSE reader and decodes its
// data.
func eventJSON(tb testing.TB, ev []byte) any {
	tb.Helper()
	if !bytes.HasPrefix(ev, []byte("data: ")) || !bytes.HasSuffix(ev, []byte("\n\n")) {
		tb.Fatalf("bad event framing %q", ev)
	}
	evs := readEvents(tb, string(ev))
	if len(evs) != 1 || !bytes.Equal(evs[0].Data, ev[6:len(ev)-2]) || evs[0].Unterminated {
		tb.Fatalf("event %q does not parse back as one data event", ev)
	}
	v, err := decodeJSON(evs[0].Data)
	if err != nil {
		tb.Fatalf("rendered event %q: %v", ev, err)
	}
	return v
}

func TestClassifyStream(t *testing.T) {
	// A whole stream, including blocks that follow a BOM-less CRLF mix.
	raw := ": OPENROUTER PROCESSING\n\n" +
		"data: " + openAIFirst + "\r\n\r\n" +
		"data: " + openAIText + "\r\n\r\n" +
		"\n" + // stray blank line, attached to the next block's Raw
		"data: " + deepSeekR + "\n\n" +
		"data: " + openAIStop + "\n\n" +
		"data: " + openAIUsage + "\n\n" +
		"data: [DONE]\n\n"
	want := []Kind{KindComment, KindOther, KindText, KindText, KindOther, KindOther, KindDone}
	evs := readEvents(t, raw)
	if len(evs) != len(want) {
		t.Fatalf("%d events", len(evs))
	}
	var scratch []byte
	for i := range evs {
		var c Chunk
		c, scratch = Classify(&evs[i], scratch[:0])
		if c.Kind != want[i] {
			t.Errorf("event %d (%q): %s, want %s", i, evs[i].Raw, kindName(c.Kind), kindName(want[i]))
		}
	}
}

func TestClassifyScratchReuse(t *testing.T) {
	ev := oneEvent(t, "data: "+openAIText+"\n\n")
	scratch := make([]byte, 0, 8)
	c, out := Classify(&ev, scratch)
	if string(c.Text) != " Hello, world! How can I help you today?" || string(out) != string(c.Text) {
		t.Fatalf("Text %q out %q", c.Text, out)
	}
	if cap(c.Text) != len(c.Text) {
		t.Errorf("Text capacity not capped")
	}
	big := make([]byte, 3, 1024)
	c, out = Classify(&ev, big)
	if &out[0] != &big[0] || len(out) != 3+len(c.Text) {
		t.Errorf("scratch with room was not reused")
	}
}

func TestClassifyAllocs(t *testing.T) {
	for _, raw := range []string{openAIText, openAIFirst, deepSeekR, orReasonD, openAIN2, openAIUsage, `{"ch\u006fices":[{"delta":{"con\u0074ent":"\u4f60"}}]}`} {
		ev := oneEvent(t, "data: "+raw+"\n\n")
		scratch := make([]byte, 0, 1024)
		allocs := testing.AllocsPerRun(100, func() {
			_, scratch = Classify(&ev, scratch[:0])
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocs per Classify", raw, allocs)
		}
	}
}

func TestAppendString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{`a"b\c`, `"a\"b\\c"`},
		{"\n\r\t\b\f", `"\n\r\t\b\f"`},
		{"\x00\x01\x1f\x7f", `"\u0000\u0001\u001f` + "\x7f\""},
		{"<a href='x'>&amp;</a>", `"<a href='x'>&amp;</a>"`},
		{"你好 😀 \u2028\u2029", "\"你好 😀 \u2028\u2029\""},
		{"/", `"/"`},
	}
	for _, tc := range cases {
		got := AppendString([]byte("x"), []byte(tc.in))
		if string(got) != "x"+tc.want {
			t.Errorf("AppendString(%q) = %q, want %q", tc.in, got[1:], tc.want)
		}
		var back string
		if err := json.Unmarshal(got[1:], &back); err != nil || back != tc.in {
			t.Errorf("%q does not decode back to %q: %v", got[1:], tc.in, err)
		}
	}
	// Every byte value.
	all := make([]byte, 0, 128)
	for c := range 128 {
		all = append(all, byte(c))
	}
	var back string
	if err := json.Unmarshal(AppendString(nil, all), &back); err != nil || back != string(all) {
		t.Errorf("all ASCII: %v", err)
	}
}

func TestAppendTextEvent(t *testing.T) {
	ev := oneEvent(t, "data: "+deepSeekR+"\n\n")
	c, _ := Classify(&ev, nil)
	if c.Kind != KindText {
		t.Fatal(kindName(c.Kind))
	}
	got := AppendTextEvent([]byte("x"), &c, []byte("a\"\n"))
	want := "x" + "data: " + strings.Replace(deepSeekR, `"Okay, the user"`, `"a\"\n"`, 1) + "\n\n"
	if string(got) != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := AppendTextEventParts(nil, []byte("{\"a\":"), []byte("b"), []byte("}")); string(got) != "data: {\"a\":\"b\"}\n\n" {
		t.Errorf("AppendTextEventParts = %q", got)
	}
}

func TestStripReasoning(t *testing.T) {
	cases := []struct {
		in, want string
		removed  int
		ok       bool
	}{
		{`{"choices":[{"delta":{"content":null,"reasoning_content":"abc"}}]}`, `{"choices":[{"delta":{"content":null}}]}`, 3, true},
		{`{"choices":[{"delta":{"reasoning":"ab","content":"x"}}]}`, `{"choices":[{"delta":{"content":"x"}}]}`, 2, true},
		{`{"choices":[{"delta":{"reasoning":null}}]}`, `{"choices":[{"delta":{}}]}`, 0, true},
		{`{"choices":[{"delta":{"reasoning":"a","reasoning_content":"b"}}]}`, `{"choices":[{"delta":{}}]}`, 2, true},
		{`{"choices":[{"delta":{ "reasoning" : "a" , "content" : "x" , "reasoning_content" : null }}]}`, `{"choices":[{"delta":{ "content" : "x" }}]}`, 1, true},
		{`{"choices":[{"delta":{"role":"assistant","reasoning":"a","content":"","reasoning_content":"bc","x":1}}]}`, `{"choices":[{"delta":{"role":"assistant","content":"","x":1}}]}`, 3, true},
		{`{"choices":[{"delta":{"reasoning":"a","reasoning_content":"b","content":"c","reasoning":null}}]}`, `{"choices":[{"delta":{"content":"c"}}]}`, 2, true},
		{`{"choices":[{"delta":{"content":"c","reasoning":"a","reasoning_content":"b"}}]}`, `{"choices":[{"delta":{"content":"c"}}]}`, 2, true},
		// Objects, arrays and other values stay; so do other members.
		{`{"choices":[{"delta":{"reasoning":{"text":"x"},"reasoning_content":["y"],"reasoning_details":[{"text":"z"}]}}]}`, `{"choices":[{"delta":{"reasoning":{"text":"x"},"reasoning_content":["y"],"reasoning_details":[{"text":"z"}]}}]}`, 0, true},
		{`{"choices":[{"delta":{"reasoning":1,"reasoning_content":false}}]}`, `{"choices":[{"delta":{"reasoning":1,"reasoning_content":false}}]}`, 0, true},
		// Several choices; escaped keys; not case-folded; outside delta untouched.
		{`{"reasoning":"t","choices":[{"index":0,"delta":{"reasoning_content":"你好"}},{"index":1,"delta":{"re\u0061soning":"\ud83d\ude00","content":"x"},"message":{"reasoning":"m"}}],"usage":null}`,
			`{"reasoning":"t","choices":[{"index":0,"delta":{}},{"index":1,"delta":{"content":"x"},"message":{"reasoning":"m"}}],"usage":null}`, 3, true},
		{`{"choices":[{"delta":{"Reasoning":"a","content":"x"}}]}`, `{"choices":[{"delta":{"Reasoning":"a","content":"x"}}]}`, 0, true},
		{` { "choices" : [ ] , "x" : 1 } `, ` { "choices" : [ ] , "x" : 1 } `, 0, true},
		{`{"choices":[1,null,{"delta":null},{"delta":{}}]}`, `{"choices":[1,null,{"delta":null},{"delta":{}}]}`, 0, true},
		// Not a JSON object with a choices array.
		{`{"id":"x"}`, "", 0, false},
		{`{"choices":null}`, "", 0, false},
		{`[{"choices":[]}]`, "", 0, false},
		{`{"choices":[{"delta":{"reasoning":"a"}}]} x`, "", 0, false},
		{`{"choices":[{"delta":{"reasoning":"a",}}]}`, "", 0, false},
		{`{"choices":[{"delta":{"reasoning":"a\x"}}]}`, "", 0, false},
		{`[DONE]`, "", 0, false},
		{``, "", 0, false},
	}
	for _, tc := range cases {
		dst := []byte("pre")
		out, removed, ok := StripReasoning(dst, []byte(tc.in))
		if ok != tc.ok || removed != tc.removed {
			t.Errorf("StripReasoning(%s): removed %d ok %v, want %d %v", tc.in, removed, ok, tc.removed, tc.ok)
			continue
		}
		if !ok {
			if string(out) != "pre" {
				t.Errorf("StripReasoning(%s) failed but changed dst: %q", tc.in, out)
			}
			continue
		}
		if string(out) != "pre"+tc.want {
			t.Errorf("StripReasoning(%s)\n got %s\nwant %s", tc.in, out[3:], tc.want)
		}
		if _, dups := jsontest.Shape([]byte(tc.in)); !dups {
			checkStrip(t, []byte(tc.in), out[3:], removed)
		}
	}
}

// checkStrip checks StripReasoning's output against encoding/json: the
// input with the string or null reasoning members removed from every delta.
// The input must have no duplicate keys.
func checkStrip(tb testing.TB, in, out []byte, removed int) {
	tb.Helper()
	want, err := decodeJSON(in)
	if err != nil {
		tb.Fatalf("input %q: %v", in, err)
	}
	got, err := decodeJSON(out)
	if err != nil {
		tb.Fatalf("output %q is not valid JSON: %v", out, err)
	}
	n := 0
	if chs, ok := want.(map[string]any)["choices"].([]any); ok {
		for _, ch := range chs {
			c, _ := ch.(map[string]any)
			d, _ := c["delta"].(map[string]any)
			for _, k := range []string{"reasoning_content", "reasoning"} {
				v, ok := d[k]
				if s, isStr := v.(string); isStr {
					n += utf8.RuneCountInString(s)
				} else if !ok || v != nil {
					continue
				}
				delete(d, k)
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		tb.Fatalf("StripReasoning(%s) = %s, not the input minus reasoning", in, out)
	}
	if n != removed {
		tb.Fatalf("StripReasoning(%s): removed = %d, want %d", in, removed, n)
	}
}

func TestStripReasoningAllocs(t *testing.T) {
	data := []byte(deepSeekR)
	dst := make([]byte, 0, 1024)
	allocs := testing.AllocsPerRun(100, func() {
		dst, _, _ = StripReasoning(dst[:0], data)
	})
	if allocs != 0 {
		t.Errorf("%v allocs per StripReasoning", allocs)
	}
}

// benchChunks are the chunks the classifier benchmarks read.
var benchChunks = []struct{ name, data string }{
	{"openai", openAIText},
	{"deepseek", deepSeekR},
	{"openrouter-other", orReasonD},
}

func BenchmarkClassify(b *testing.B) {
	for _, bc := range benchChunks {
		b.Run(bc.name, func(b *testing.B) {
			ev := oneEvent(b, "data: "+bc.data+"\n\n")
			scratch := make([]byte, 0, 1024)
			b.SetBytes(int64(len(ev.Data)))
			b.ReportAllocs()
			for b.Loop() {
				var c Chunk
				c, scratch = Classify(&ev, scratch[:0])
				if c.Kind == KindComment {
					b.Fatal("unexpected kind")
				}
			}
		})
	}
}

// ClassifyCount, what a stream in mode off reads of each chunk.
func BenchmarkClassifyCount(b *testing.B) {
	for _, bc := range benchChunks {
		b.Run(bc.name, func(b *testing.B) {
			ev := oneEvent(b, "data: "+bc.data+"\n\n")
			b.SetBytes(int64(len(ev.Data)))
			b.ReportAllocs()
			for b.Loop() {
				if c, _ := ClassifyCount(&ev, nil); c.Kind == KindComment {
					b.Fatal("unexpected kind")
				}
			}
		})
	}
}

func BenchmarkAppendTextEvent(b *testing.B) {
	ev := oneEvent(b, "data: "+openAIText+"\n\n")
	c, _ := Classify(&ev, nil)
	text := []byte("Hello, \"world\"!\nHow can I help you today? 你好")
	dst := make([]byte, 0, 1024)
	b.SetBytes(int64(len(ev.Data)))
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendTextEvent(dst[:0], &c, text)
	}
}

func BenchmarkStripReasoning(b *testing.B) {
	data := []byte(deepSeekR)
	dst := make([]byte, 0, 1024)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		dst, _, _ = StripReasoning(dst[:0], data)
	}
}
