package handoff

import (
	"bytes"
	"fmt"
	"testing"
)

// fastCorpus are chunks of reasoning and answer legs as providers write
// them, and the near misses the fast readers must leave to encoding/json
// (names in another case or escaped, members twice, other types, finish,
// usage, errors, broken JSON).
var fastCorpus = []string{
	`{"id":"chatcmpl-sim-1","object":"chat.completion.chunk","created":1,"model":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"chatcmpl-sim-1","object":"chat.completion.chunk","created":1,"model":"x","choices":[{"index":0,"delta":{"reasoning_content":"Let me think"},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"d1","choices":[{"index":0,"delta":{"content":null,"reasoning_content":" about <it> & \"that\""},"logprobs":null,"finish_reason":null}],"usage":null}`,
	`{"id":"v1","choices":[{"index":0,"delta":{"reasoning":"vLLM's \u00e9 \ud83d\ude00 \u2028"}}]}`,
	`{"id":"v1","choices":[{"index":0,"delta":{"reasoning_content":"","reasoning":"second"}}]}`,
	`{"id":"v1","choices":[{"index":0,"delta":{"reasoning_content":null,"reasoning":"null first"}}]}`,
	`{"id":"v1","choices":[{"index":0,"delta":{"reasoning_content":5,"reasoning":"number first"}}]}`,
	`{"id":"v1","choices":[{"index":0,"delta":{"reasoning_content":"lone \ud800 surrogate and bad ` + "\xff" + ` byte"}}]}`,
	`{"id":"v1","choices":[{"index":0,"delta":{"reasoning\u005fcontent":"escaped name"}}]}`,
	`{"id":"v1","choices":[{"index":0,"delta":{"Reasoning_content":"other case: not reasoning"}}]}`,
	`{"id":"v1","choices":[{"index":0,"delta":{"reasoning_content":"a","reasoning_content":"twice"}}]}`,
	`{"ID":"upper","choices":[{"index":0,"delta":{"reasoning_content":"a"}}]}`,
	`{"id":"a","id":"b","choices":[{"index":0,"delta":{"reasoning_content":"a"}}]}`,
	`{"id":7,"choices":[{"index":0,"delta":{"reasoning_content":"a"}}]}`,
	`{"id":null,"choices":[{"index":0,"delta":{"reasoning_content":"a"}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning_content":"no id"}}]}`,
	`{"id":"x","choices":[{"index":1,"delta":{"reasoning_content":"index 1"}},{"index":0,"delta":{"reasoning_content":"then 0"}}]}`,
	`{"id":"x","choices":[{"delta":{"reasoning_content":"no index"}}]}`,
	`{"id":"x","choices":[{"index":0.0,"delta":{"reasoning_content":"float index"}}]}`,
	`{"id":"x","choices":[{"index":00,"delta":{"reasoning_content":"bad index"}}]}`,
	`{"id":"x","choices":[{"Index":0,"Delta":{"reasoning_content":"case"}}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"r","content":"answer"}}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"r","content":5}}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"r","refusal":"no"}}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"r","tool_calls":[]}}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"r","tool_calls":[ ]}}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"r","tool_calls":null,"function_call":null}}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t","function":{"name":"f","arguments":""}}]}}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"function_call":{"name":"f"}}}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"r"},"finish_reason":"stop"}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`,
	`{"id":"x","choices":[{"index":0,"delta":null}]}`,
	`{"id":"x","choices":[{"index":0,"delta":"text"}]}`,
	`{"id":"x","choices":[]}`,
	`{"id":"x","choices":null}`,
	`{"id":"x","choices":[1]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"r"}}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`,
	`{"id":"x","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`,
	`{"id":"x","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"content":" <b>world</b> \u2029 ` + "\xc3" + `"}}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"content":""}}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":"with role"}}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"content":"t"},"finish_reason":"stop"}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"content":"t"},"logprobs":{"content":[]}}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"content":"t"},"Logprobs":{"content":[]}}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"content":"t"}}],"usage":null}`,
	`{"id":"x","choices":[{"index":0,"delta":{"content":"t"}}],"Usage":{"prompt_tokens":1}}`,
	`{"id":"x","choices":[{"index":0,"delta":{"content":"t"}},{"index":1,"delta":{"content":"u"}}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"content":"t"}}],"error":null}`,
	`{"error":{"message":"overloaded","type":"server_error"}}`,
	`{"id":"x","choices":[{"index":0,"delta":{"content":"t"}}]} trailing`,
	`{"id":"x","choices":[{"index":0,"delta":{"content":"t"}}]`,
	`  {"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"spaced"}}]}  `,
	`{ "id" : "x" , "choices" : [ { "index" : 0 , "delta" : { "content" : "spaced answer" } } ] }`,
	`[]`,
	``,
}

// splicerState is what a Splicer shows after a call, for comparing.
func splicerState(s *Splicer) string {
	return fmt.Sprintf("id=%q begun=%v role=%v reasoning=%q runes=%d answerReasoning=%d answerUsage=%d/%d",
		s.ID, s.begun, s.roleSent, s.Reasoning(), s.runes, s.answerReasoning, s.AnswerPrompt, s.AnswerCompletion)
}

// compareFast feeds data to Reason and then to Answer of two splicers in
// the same state, one reading with the fast readers and one without, and
// reports the first difference.
func compareFast(t *testing.T, fast, slow *Splicer, data []byte) {
	t.Helper()
	defer func() { fastChunks = true }()
	call := func(s *Splicer, on bool, reason bool) string {
		fastChunks = on
		if reason {
			out, h := s.Reason(data)
			return fmt.Sprintf("%q %v %s", bytes.Join(out, []byte("|")), h, splicerState(s))
		}
		return fmt.Sprintf("%q %s", s.Answer(data), splicerState(s))
	}
	for _, reason := range []bool{true, false} {
		if got, want := call(fast, true, reason), call(slow, false, reason); got != want {
			t.Fatalf("chunk %q (Reason %v):\nfast %s\nslow %s", data, reason, got, want)
		}
	}
}

func newSplicers() (*Splicer, *Splicer) {
	return &Splicer{Model: "alias", Created: 1, MaxReasoning: 6}, &Splicer{Model: "alias", Created: 1, MaxReasoning: 6}
}

// TestSplicerFastSameAsSlow: each chunk of the corpus, alone and in
// sequence, gives the same chunks, hand-off and state with the fast
// readers as with encoding/json.
func TestSplicerFastSameAsSlow(t *testing.T) {
	for _, c := range fastCorpus {
		fast, slow := newSplicers()
		compareFast(t, fast, slow, []byte(c))
	}
	fast, slow := newSplicers()
	for _, c := range fastCorpus {
		compareFast(t, fast, slow, []byte(c))
	}
}

// TestSplicerFastTakesTheCommonChunks: the chunks that make most of a
// stream are read by the fast readers (else they only add a cost).
func TestSplicerFastTakesTheCommonChunks(t *testing.T) {
	for i, want := range map[int]bool{0: true, 1: true, 2: true, 3: true, 29: false} {
		if _, _, ok := reasoningChunk([]byte(fastCorpus[i]), nil); ok != want {
			t.Errorf("reasoningChunk(%s): ok %v, want %v", fastCorpus[i], ok, want)
		}
	}
	for i, want := range map[int]bool{38: true, 39: true, 40: false, 46: true, 36: false} {
		if _, _, ok := answerChunk([]byte(fastCorpus[i]), nil); ok != want {
			t.Errorf("answerChunk(%s): ok %v, want %v", fastCorpus[i], ok, want)
		}
	}
}

// FuzzSplicerFast: any input, fast or slow, same result.
func FuzzSplicerFast(f *testing.F) {
	for _, c := range fastCorpus {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, slow := newSplicers()
		compareFast(t, fast, slow, data)
	})
}

func BenchmarkSplicerReason(b *testing.B) {
	data := []byte(fastCorpus[1])
	for _, on := range []bool{true, false} {
		b.Run(fmt.Sprintf("fast=%v", on), func(b *testing.B) {
			defer func() { fastChunks = true }()
			fastChunks = on
			s := &Splicer{Model: "alias"}
			for b.Loop() {
				s.Reason(data)
			}
		})
	}
}

func BenchmarkSplicerAnswer(b *testing.B) {
	data := []byte(fastCorpus[38])
	for _, on := range []bool{true, false} {
		b.Run(fmt.Sprintf("fast=%v", on), func(b *testing.B) {
			defer func() { fastChunks = true }()
			fastChunks = on
			s := &Splicer{Model: "alias"}
			for b.Loop() {
				s.Answer(data)
			}
		})
	}
}
