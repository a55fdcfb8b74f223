package splice

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

func rawOf(evs []sse.Event) []byte {
	var b []byte
	for _, e := range evs {
		b = append(b, e.Raw...)
	}
	return b
}

// FuzzResponsesSplice: any first stream, break point and continuation
// (and a second break in it): no panic, and every event the splicer makes
// is one well-formed SSE block, a comment or data that is valid JSON.
func FuzzResponsesSplice(f *testing.F) {
	// Small seeds: the recordings' events carry kilobytes of
	// encrypted_content, which only slow the fuzzer down.
	short := rspBuild("resp_1", []rspItem{{typ: "reasoning", id: "r", text: "think"}, {typ: "message", id: "m", text: "Hello world, again."},
		{typ: "function_call", id: "f", name: "f", text: `{"a":1}`}}, 8)
	cont := rawOf(rspBuild("resp_2", []rspItem{{typ: "reasoning", id: "r2", text: "again"}, {typ: "message", id: "m2", text: "world, again. More"}}, 8))
	for k := 0; k < len(short); k += 3 {
		f.Add(rawOf(short), cont, uint8(k), uint8(k/2), uint8(k%8))
	}
	f.Add([]byte("data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"m\"}}\n\n"+
		"data: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"ab\\u00e9\"}\n\n"),
		[]byte("data: {\"type\":\"response.output_item.added\",\"output_index\":5,\"item\":{\"type\":\"message\"}}\n\ndata: [DONE]\n\n: x\n\n"), uint8(2), uint8(1), uint8(1))
	f.Fuzz(fuzzResponses)
}

func fuzzResponses(t *testing.T, first, next []byte, k, j, flags uint8) {
	{
		a := readAll(first)
		b := readAll(next)
		o := Options{Reasoning: ReasoningRestart(flags & 1), MaxOverlap: int(flags>>1&3) - 1, Comment: "c"}
		rec := NewRecorder(Responses, 1<<16)
		for _, e := range a[:min(int(k), len(a))] {
			rec.Pass(e)
		}
		sp := rec.Seam().Splicer(o)
		for i, e := range b {
			if i == int(j) {
				sp = rec.Seam().Splicer(o)
			}
			for _, s := range sp.Next(e) {
				checkBlock(t, s)
				rec.Pass(s)
			}
		}
	}
}

func readAll(raw []byte) []sse.Event {
	rd := sse.NewReader(bytes.NewReader(raw), 1<<16)
	var out []sse.Event
	for {
		ev, err := rd.Next()
		if err != nil {
			return out
		}
		out = append(out, ev.Clone())
	}
}

// checkBlock: e is one block as a reader reads it back, a comment or JSON
// data.
func checkBlock(t *testing.T, e sse.Event) {
	t.Helper()
	rd := sse.NewReader(bytes.NewReader(e.Raw), 0)
	got, err := rd.Next()
	if err != nil || got.Unterminated {
		t.Fatalf("%q: %v", e.Raw, err)
	}
	if _, err := rd.Next(); err != io.EOF {
		t.Fatalf("%q: more than one block", e.Raw)
	}
	if got.IsComment() != e.IsComment() || !bytes.Equal(got.Data, e.Data) {
		t.Fatalf("%q reads back as another event", e.Raw)
	}
	if !e.IsComment() && !json.Valid(e.Data) {
		t.Fatalf("data is not JSON: %q", e.Data)
	}
}
