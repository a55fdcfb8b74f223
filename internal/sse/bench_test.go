package sse

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

// openAIChunk is a typical chat.completion.chunk event (~230 bytes).
const openAIChunk = "data: {\"id\":\"chatcmpl-AbCdEfGhIjKlMnOpQrStUvWxYz012\",\"object\":\"chat.completion.chunk\",\"created\":1718000000,\"model\":\"gpt-4o-mini-2024-07-18\",\"system_fingerprint\":\"fp_0123456789\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" token\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n"

// loopReader returns stream over and over, at most chunk bytes per Read.
type loopReader struct {
	stream string
	off    int
	chunk  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	if l.off == len(l.stream) {
		l.off = 0
	}
	n := copy(p[:min(len(p), l.chunk)], l.stream[l.off:])
	l.off += n
	return n, nil
}

// BenchmarkReaderOpenAIChunks measures one Next call per event (so ns/op is
// ns per event) on an endless stream of OpenAI chunks, delivered either one
// event per Read (as tokens trickle in from upstream) or in 4 KiB reads.
func BenchmarkReaderOpenAIChunks(b *testing.B) {
	for _, tc := range []struct {
		name  string
		chunk int
	}{
		{"read=event", len(openAIChunk)},
		{"read=4KiB", 4096},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rd := NewReader(&loopReader{stream: strings.Repeat(openAIChunk, 32), chunk: tc.chunk}, 0)
			b.SetBytes(int64(len(openAIChunk)))
			b.ReportAllocs()
			for b.Loop() {
				ev, err := rd.Next()
				if err != nil || len(ev.Data) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReaderLineEndings compares LF, CRLF and CR streams with a
// multi-line event type and id, read in 4 KiB pieces.
func BenchmarkReaderLineEndings(b *testing.B) {
	for _, nl := range []string{"\n", "\r\n", "\r"} {
		ev := "event: delta" + nl + "id: 7" + nl + "data: {\"a\":1}" + nl + "data: {\"b\":2}" + nl + nl
		b.Run(fmt.Sprintf("%q", nl), func(b *testing.B) {
			rd := NewReader(&loopReader{stream: strings.Repeat(ev, 16), chunk: 4096}, 0)
			b.SetBytes(int64(len(ev)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rd.Next(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReaderNormalize is BenchmarkReaderLineEndings with
// NormalizeLineEndings: LF and CRLF blocks are returned as they are, CR
// blocks are copied with LF endings.
func BenchmarkReaderNormalize(b *testing.B) {
	for _, nl := range []string{"\n", "\r\n", "\r"} {
		ev := "event: delta" + nl + "id: 7" + nl + "data: {\"a\":1}" + nl + "data: {\"b\":2}" + nl + nl
		b.Run(fmt.Sprintf("%q", nl), func(b *testing.B) {
			rd := NewReader(&loopReader{stream: strings.Repeat(ev, 16), chunk: 4096}, 0)
			rd.NormalizeLineEndings()
			b.SetBytes(int64(len(ev)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rd.Next(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSteadyStateAllocs checks the zero-allocation hot path: after warm-up,
// Next allocates nothing for single-line data, multi-line data or repeated
// event types and ids, with or without line ending normalisation (whose
// buffer is reused).
func TestSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	for name, stream := range map[string]string{
		"openai":     openAIChunk,
		"multi-line": "event: x\r\nid: 1\r\ndata: a\r\ndata: b\r\n\r\n: ping\r\n\r\n",
		"cr":         "event: x\rid: 1\rdata: a\rdata: b\r\r: ping\r\r" + strings.Replace(openAIChunk, "\n\n", "\r\r", 1),
		"mixed":      openAIChunk + "data: a\n\r: ping\r\n\r",
	} {
		for _, c := range []struct {
			chunk     int
			normalize bool
		}{{7, false}, {4096, false}, {7, true}, {4096, true}} {
			chunk, name := c.chunk, name
			rd := NewReader(&loopReader{stream: stream, chunk: chunk}, 0)
			if c.normalize {
				rd.NormalizeLineEndings()
				name += ", normalised"
			}
			next := func() {
				if _, err := rd.Next(); err != nil && err != io.EOF {
					t.Fatal(err)
				}
			}
			for range 100 {
				next()
			}
			if a := testing.AllocsPerRun(1000, next); a != 0 {
				t.Errorf("%s, %d-byte reads: %v allocs per Next, want 0", name, chunk, a)
			}
		}
	}
}

// NewEvent is on the translators' hot path (one call per translated or
// renamed event).
func BenchmarkNewEvent(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hello there"},"logprobs":null,"finish_reason":null}]}`)
	b.ReportAllocs()
	for b.Loop() {
		NewEvent("content_block_delta", data)
	}
}
