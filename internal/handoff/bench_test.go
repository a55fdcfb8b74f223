package handoff

import (
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// The splice's per-event cost on an answer leg's text chunk and a
// reasoning leg's reasoning chunk: the hot path (…Event) against the full
// parse.
const (
	benchText      = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}`
	benchReasoning = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":" token"},"logprobs":null,"finish_reason":null}]}`
)

func BenchmarkSplicerAnswerParse(b *testing.B) {
	s := &Splicer{Model: "m"}
	s.Begin("x")
	for b.Loop() {
		_, _ = s.Answer([]byte(benchText))
	}
}

func BenchmarkSplicerAnswerEvent(b *testing.B) {
	s := &Splicer{Model: "m"}
	s.Begin("x")
	ev := sse.NewEvent("", []byte(benchText))
	for b.Loop() {
		_, _ = s.AnswerEvent(&ev)
	}
}

func BenchmarkSplicerReasonParse(b *testing.B) {
	s := &Splicer{Model: "m"}
	s.Begin("x")
	for b.Loop() {
		s.Reason([]byte(benchReasoning))
		s.reasoning.Reset()
	}
}

func BenchmarkSplicerReasonEvent(b *testing.B) {
	s := &Splicer{Model: "m"}
	s.Begin("x")
	ev := sse.NewEvent("", []byte(benchReasoning))
	for b.Loop() {
		s.ReasonEvent(&ev)
		s.reasoning.Reset()
	}
}
