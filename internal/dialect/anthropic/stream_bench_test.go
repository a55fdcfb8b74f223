package anthropic

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// sliceSource replays parsed events: the benchmarks time the translator,
// not sse.Reader.
type sliceSource struct {
	evs []sse.Event
	i   int
}

func (s *sliceSource) Next() (sse.Event, error) {
	if s.i == len(s.evs) {
		return sse.Event{}, io.EOF
	}
	s.i++
	return s.evs[s.i-1], nil
}

func parseAll(tb testing.TB, text string) []sse.Event {
	rd := sse.NewReader(strings.NewReader(text), 0)
	var evs []sse.Event
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return evs
		}
		if err != nil {
			tb.Fatal(err)
		}
		evs = append(evs, ev.Clone())
	}
}

// benchWords are the deltas of the benchmark streams: a few tokens each,
// as models stream them, some with characters that need escaping.
var benchWords = []string{" the", " answer", " is", ",", " \"quoted\"", " naïve", "\n\n", " 42", ".", " Ok"}

// benchMessages is a realistic Messages stream: mostly thinking and text
// deltas, one tool call.
func benchMessages() string {
	var b strings.Builder
	b.WriteString(msgEv("message_start", tStart) + msgEv("ping", `{"type": "ping"}`))
	b.WriteString(msgBlockStart("0", `{"type":"thinking","thinking":"","signature":""}`))
	for i := range 100 {
		b.WriteString(msgBlockDelta("0", `{"type":"thinking_delta","thinking":`+streamJSONStr(benchWords[i%len(benchWords)])+`}`))
	}
	b.WriteString(msgBlockDelta("0", `{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA"}`))
	b.WriteString(msgEv("content_block_stop", `{"type":"content_block_stop","index":0}`))
	b.WriteString(msgBlockStart("1", `{"type":"text","text":""}`))
	for i := range 300 {
		b.WriteString(msgBlockDelta("1", `{"type":"text_delta","text":`+streamJSONStr(benchWords[i%len(benchWords)])+`}`))
	}
	b.WriteString(msgEv("content_block_stop", `{"type":"content_block_stop","index":1}`))
	b.WriteString(msgBlockStart("2", `{"type":"tool_use","id":"toolu_01","name":"search","input":{}}`))
	// Arguments a client can parse: ToChatStream checks them at the end.
	b.WriteString(msgBlockDelta("2", `{"type":"input_json_delta","partial_json":"{\"q\": \""}`))
	for i := range 18 {
		b.WriteString(msgBlockDelta("2", fmt.Sprintf(`{"type":"input_json_delta","partial_json":"word%d "}`, i)))
	}
	b.WriteString(msgBlockDelta("2", `{"type":"input_json_delta","partial_json":"\"}"}`))
	b.WriteString(msgEv("content_block_stop", `{"type":"content_block_stop","index":2}`))
	b.WriteString(msgEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":420}}`))
	b.WriteString(msgEv("message_stop", `{"type":"message_stop"}`))
	return b.String()
}

// benchChat is the same answer as a Chat stream.
func benchChat() string {
	var b strings.Builder
	b.WriteString(ccRole)
	for i := range 100 {
		b.WriteString(cc(`"reasoning_content":` + streamJSONStr(benchWords[i%len(benchWords)])))
	}
	for i := range 300 {
		b.WriteString(cc(`"content":` + streamJSONStr(benchWords[i%len(benchWords)])))
	}
	b.WriteString(cc(`"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"search","arguments":""}}]`))
	for i := range 20 {
		b.WriteString(cc(fmt.Sprintf(`"tool_calls":[{"index":0,"function":{"arguments":"{\"q%d\": "}}]`, i)))
	}
	b.WriteString(ccFinish("tool_calls"))
	b.WriteString(chatEv(`{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":500,"completion_tokens":420,"prompt_tokens_details":{"cached_tokens":100}}}`))
	return b.String() + ccDone
}

func benchTranslate(b *testing.B, text string, wrap func(sse.Source) sse.Source) {
	evs := parseAll(b, text)
	src := &sliceSource{evs: evs}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		src.i = 0
		tr := wrap(src)
		for {
			if _, err := tr.Next(); err != nil {
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}

func BenchmarkChatStream(b *testing.B) {
	benchTranslate(b, benchMessages(), func(s sse.Source) sse.Source {
		return ToChatStream(s, chat.Options{Model: "m", Created: 1, IncludeUsage: true})
	})
}

func BenchmarkMessagesStream(b *testing.B) {
	benchTranslate(b, benchChat(), func(s sse.Source) sse.Source {
		return FromChatStream(s, chat.Options{Model: "m", InputTokens: 500})
	})
}
