package gemini

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// benchWords are the deltas of the benchmark streams: a few tokens each,
// some with characters that need escaping.
var benchWords = []string{" the", " answer", " is", ",", " \"quoted\"", " naïve", "\n\n", " 42", ".", " Ok"}

func jsonStr(s string) string { return string(marshal(s)) }

// benchChat is a realistic Chat stream: mostly reasoning and text deltas,
// one tool call in fragments, finish, usage, [DONE].
func benchChat() string {
	var b strings.Builder
	head := `data: {"id":"chatcmpl-B","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":`
	tail := `,"logprobs":null,"finish_reason":null}]}` + "\n\n"
	b.WriteString(head + `{"role":"assistant","content":""}` + tail)
	for i := range 100 {
		b.WriteString(head + `{"reasoning_content":` + jsonStr(benchWords[i%len(benchWords)]) + `}` + tail)
	}
	for i := range 300 {
		b.WriteString(head + `{"content":` + jsonStr(benchWords[i%len(benchWords)]) + `}` + tail)
	}
	b.WriteString(head + `{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"search","arguments":""}}]}` + tail)
	b.WriteString(head + `{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\": \""}}]}` + tail)
	for i := range 18 {
		b.WriteString(head + fmt.Sprintf(`{"tool_calls":[{"index":0,"function":{"arguments":"word%d "}}]}`, i) + tail)
	}
	b.WriteString(head + `{"tool_calls":[{"index":0,"function":{"arguments":"\"}"}}]}` + tail)
	b.WriteString(`data: {"id":"chatcmpl-B","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}` + "\n\n")
	b.WriteString(`data: {"id":"chatcmpl-B","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":420,"total_tokens":520}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// benchGemini is a realistic Gemini stream: thought and text chunks of a
// few tokens, each with the running usage as Gemini sends it, one call,
// the finish.
func benchGemini() string {
	var b strings.Builder
	chunk := func(parts, finish string, n int) {
		fin := ""
		if finish != "" {
			fin = `,"finishReason":"` + finish + `"`
		}
		fmt.Fprintf(&b, `data: {"candidates":[{"content":{"parts":[%s],"role":"model"}%s,"index":0}],"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":%d,"totalTokenCount":%d,"thoughtsTokenCount":40},"modelVersion":"gemini-2.5-flash","responseId":"abcDEF123"}`+"\r\n\r\n", parts, fin, n, 140+n)
	}
	for i := range 100 {
		chunk(`{"text":`+jsonStr(benchWords[i%len(benchWords)])+`,"thought":true}`, "", 0)
	}
	for i := range 300 {
		chunk(`{"text":`+jsonStr(benchWords[i%len(benchWords)])+`}`, "", i)
	}
	chunk(`{"functionCall":{"name":"search","args":{"q":"word0 word1 word2 word3"}},"thoughtSignature":"CiQBVKhc7gVNlWrmzW9MEk/bjBDPDpxUEY9TBFuB8vn6CVjiCFgKeAFUqFzu"}`, "STOP", 300)
	return b.String()
}

// BenchmarkFromChatStream and BenchmarkToChatStream time the translators
// per upstream event (the budget: 2 µs).
func BenchmarkFromChatStream(b *testing.B) { benchStream(b, benchChat(), FromChatStream) }
func BenchmarkToChatStream(b *testing.B)   { benchStream(b, benchGemini(), ToChatStream) }

func benchStream(b *testing.B, text string, tr func(sse.Source, chat.Options) sse.Source) {
	evs := parseAll(b, text)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		src := tr(&sliceSource{evs: evs}, chat.Options{Model: "m", IncludeUsage: true})
		for {
			if _, err := src.Next(); err != nil {
				break
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}

// benchChatShort is a short answer as relaybench -translate-gemini's
// simulator sends it: the role chunk, 4 reasoning and 16 content deltas,
// the finish chunk, the usage chunk, [DONE] (every chunk before it with
// "usage":null, as include_usage asks of OpenAI). Per stream, the chunks off
// the text deltas' hot path weigh most.
func benchChatShort() string {
	var b strings.Builder
	head := `data: {"id":"chatcmpl-B","object":"chat.completion.chunk","created":1,"model":"sim-chat","choices":[{"index":0,"delta":`
	tail := `,"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"
	b.WriteString(head + `{"role":"assistant","content":""}` + tail)
	for i := range 4 {
		b.WriteString(head + `{"reasoning_content":` + jsonStr(benchWords[i%len(benchWords)]) + `}` + tail)
	}
	for i := range 16 {
		b.WriteString(head + `{"content":` + jsonStr(benchWords[i%len(benchWords)]) + `}` + tail)
	}
	b.WriteString(head + `{},"logprobs":null,"finish_reason":"stop"}],"usage":null}` + "\n\n")
	b.WriteString(`data: {"id":"chatcmpl-B","object":"chat.completion.chunk","created":1,"model":"sim-chat","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":20,"total_tokens":29,"completion_tokens_details":{"reasoning_tokens":4}}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

func BenchmarkFromChatStreamShort(b *testing.B) { benchStream(b, benchChatShort(), FromChatStream) }

// TestFromChatStreamHotPaths: every chunk of the usual Chat stream
// (benchChatShort, as OpenAI and the simulator send it: "usage":null on
// each chunk but the last) takes a hot path; none is left to
// json.Unmarshal.
func TestFromChatStreamHotPaths(t *testing.T) {
	src := FromChatStream(&sliceSource{evs: parseAll(t, benchChatShort())}, chat.Options{Model: "m"})
	evs, err := drain(src)
	if err != io.EOF || len(evs) != 21 {
		t.Fatalf("%d events, %v", len(evs), err)
	}
	if n := src.(*geminiStream).slowChunks; n != 0 {
		t.Errorf("%d chunks read by the slow path", n)
	}
	// The first reasoning delta and the first content delta are read
	// whole; the 18 others like the one before (memoText).
	if n := src.(*geminiStream).memoHits; n != 18 {
		t.Errorf("%d text deltas read by memoText, want 18", n)
	}
	// Written in place (push), each event is the one streamEvents makes.
	for i, ev := range evs {
		if want := streamEvents.Event("", ev.Data).Clone(); !reflect.DeepEqual(ev, want) {
			t.Errorf("event %d: %+v, want %+v", i, ev, want)
		}
	}
}

// TestAppendUsage: appendUsage writes what marshal writes, for counts
// zero (omitted), negative and large.
func TestAppendUsage(t *testing.T) {
	vals := []int{0, 1, -3, 42, 1 << 40}
	for i := range 6 * len(vals) {
		var u UsageMetadata
		n := []*int{&u.PromptTokenCount, &u.CandidatesTokenCount, &u.TotalTokenCount, &u.CachedContentTokenCount, &u.ToolUsePromptTokenCount, &u.ThoughtsTokenCount}
		for j, p := range n {
			*p = vals[(i+j*(i/len(vals)+1))%len(vals)]
		}
		if got, want := string(appendUsage(nil, u)), string(marshal(u)); got != want {
			t.Errorf("%+v: %s, want %s", u, got, want)
		}
	}
}

// TestFromChatStreamMemo: a chunk like the last text delta but for what
// stands where its text stood is read by memoText only when that is one
// string; otherwise as it is (here: a second content member, a cut
// string, a number, an escaped quote), as the slow path reads it.
func TestFromChatStreamMemo(t *testing.T) {
	head := `data: {"id":"c","choices":[{"index":0,"delta":{"content":`
	tail := `},"finish_reason":null}],"usage":null}` + "\n\n"
	for _, lit := range []string{`"a","content":"b"`, `"a`, `7`, `"a\"b"`, `"\ud800x"`, `""`, `"a"  `, `"a"` + "\n\n"} {
		in := head + `"x"` + tail + head + lit + tail + head + `"y"` + tail +
			`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
		t.Run(lit, func(t *testing.T) { checkFromChatFastSlow(t, []byte(in)) })
	}
}
