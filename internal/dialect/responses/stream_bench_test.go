package responses

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// sliceSource replays parsed events: the benchmark times the translator,
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

// benchWords are the deltas of the benchmark stream: a few tokens each,
// as models stream them, some with characters that need escaping.
var benchWords = []string{" the", " answer", " is", ",", " \"quoted\"", " naïve", "\n\n", " 42", ".", " Ok"}

func jsonStr(s string) string { b, _ := json.Marshal(s); return string(b) }

// benchChat is a realistic Chat stream: mostly reasoning and text deltas,
// one tool call in 20 fragments.
func benchChat() string {
	var b strings.Builder
	b.WriteString(delta(`{"role":"assistant","content":""}`, ""))
	for i := range 100 {
		b.WriteString(delta(`{"reasoning_content":`+jsonStr(benchWords[i%len(benchWords)])+`}`, ""))
	}
	for i := range 300 {
		b.WriteString(delta(`{"content":`+jsonStr(benchWords[i%len(benchWords)])+`}`, ""))
	}
	b.WriteString(delta(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"search","arguments":""}}]}`, ""))
	for i := range 20 {
		b.WriteString(delta(fmt.Sprintf(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"q%d\": "}}]}`, i), ""))
	}
	b.WriteString(delta(`{}`, "tool_calls") + usageChunk + doneChunk)
	return b.String()
}

// BenchmarkResponsesStream reports ns per upstream event (budget: 2 µs).
func BenchmarkResponsesStream(b *testing.B) {
	rd := sse.NewReader(strings.NewReader(benchChat()), 0)
	var evs []sse.Event
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		evs = append(evs, ev.Clone())
	}
	src := &sliceSource{evs: evs}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		src.i = 0
		tr := FromChatStream(src, chat.Options{Created: 1})
		for {
			if _, err := tr.Next(); err != nil {
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}
