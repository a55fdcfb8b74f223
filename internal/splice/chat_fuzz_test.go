package splice

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// fuzzEvents makes a stream of the NUL-separated pieces of s: [DONE]; a
// comment (a piece starting with ':'); a JSON piece as the data of an
// event; any other piece as the content of a chunk. Every data is so
// [DONE] or JSON, as the relay's are.
func fuzzEvents(t *testing.T, s string) []sse.Event {
	var evs []sse.Event
	for _, p := range strings.Split(s, "\x00") {
		switch {
		case p == "[DONE]":
			evs = append(evs, doneEv(t))
		case strings.HasPrefix(p, ":"):
			evs = append(evs, block(t, string(sse.AppendComment(nil, p[1:]))))
		case json.Valid([]byte(p)):
			evs = append(evs, block(t, string(sse.AppendData(nil, []byte(p)))))
		default:
			evs = append(evs, chunkEv(t, `{"content":`+chatQuote(p)+`}`, "null"))
		}
	}
	return evs
}

// FuzzChatSplice breaks arbitrary streams anywhere and continues them
// with their own rest: no panic, and what the client gets is well-formed
// SSE whose every data is [DONE] or JSON.
func FuzzChatSplice(f *testing.F) {
	for i, path := range chatRecordingFiles(f) {
		// The first events and the last few: a seed the fuzzer can
		// mutate (and minimise) quickly.
		var ds []string
		evs := readRecording(f, path)
		for j, ev := range evs {
			if j < 10 || j >= len(evs)-4 {
				ds = append(ds, string(ev.Data))
			}
		}
		f.Add(strings.Join(ds, "\x00"), uint8(len(ds)/2), uint8(i))
	}
	f.Add("Hello there\x00"+chunkData(`{"tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":"{"}}]}`, "null")+"\x00:ping\x00[DONE]\x00there, world\x00[DONE]", uint8(2), uint8(5))
	f.Add(chunkData(`{"reasoning_content":"R"}`, "null")+"\x00"+chunkData(`{"content":[{"type":"thinking","thinking":"T"}]}`, "null")+"\x00"+`{"choices":[],"usage":{"prompt_tokens":1}}`, uint8(2), uint8(12))
	f.Fuzz(func(t *testing.T, stream string, brk, mode uint8) {
		evs := fuzzEvents(t, stream)
		k := int(brk) % (len(evs) + 1)
		max := 1 << 20
		if mode&16 != 0 {
			max = 1500
		}
		rec := NewRecorder(Chat, max)
		out := feed(rec, evs[:k]...)
		seam := rec.Seam()
		opts := Options{MaxOverlap: int(mode&3) - 1, Reasoning: ReasoningRestart(mode >> 2 & 1), Comment: "continued\nhere"}
		if mode&8 != 0 {
			opts.Earlier = usage.Usage{Prompt: 3, Completion: 2, Reasoning: 1, Cached: 1}
		}
		out = append(out, splice(seam.Splicer(opts), rec, evs[k:]...)...)

		var raw bytes.Buffer
		for _, ev := range out {
			raw.Write(ev.Raw)
			if !ev.IsComment() && !ev.IsDone() && !json.Valid(ev.Data) {
				t.Fatalf("data %q is neither [DONE] nor JSON", ev.Data)
			}
		}
		rd := sse.NewReader(&raw, 0)
		for i := 0; ; i++ {
			ev, err := rd.Next()
			if err == io.EOF {
				if i != len(out) {
					t.Fatalf("the output reads as %d events, want %d", i, len(out))
				}
				break
			}
			if err != nil || i >= len(out) || !bytes.Equal(ev.Data, out[i].Data) || ev.IsComment() != out[i].IsComment() || ev.Unterminated {
				t.Fatalf("event %d of the output reads back as %q (%v), want %q", i, ev.Raw, err, out[i].Raw)
			}
		}
	})
}
