package sse

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// want describes the expected parse of one block. Retry is stored +1 so
// that the zero value means "absent" (-1).
type want struct {
	Type    string
	Data    string
	HasData bool
	ID      string
	HasID   bool
	Retry1  int // Retry + 1
	Unterm  bool
	Comment bool
}

func d(data string) want { return want{Data: data, HasData: true} }

func gotWant(ev Event) want {
	return want{
		Type: ev.Type, Data: string(ev.Data), HasData: ev.HasData,
		ID: ev.ID, HasID: ev.HasID, Retry1: ev.Retry + 1,
		Unterm: ev.Unterminated, Comment: ev.IsComment(),
	}
}

const openAIStream = "data: {\"id\":\"chatcmpl-9x\",\"object\":\"chat.completion.chunk\",\"created\":1718000000,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n" +
	": OPENROUTER PROCESSING\n\n" +
	"data: {\"id\":\"chatcmpl-9x\",\"object\":\"chat.completion.chunk\",\"created\":1718000000,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n" +
	"data: {\"id\":\"chatcmpl-9x\",\"object\":\"chat.completion.chunk\",\"created\":1718000000,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo \\u00e9\\n世界\"},\"finish_reason\":null}]}\n\n" +
	"data: {\"id\":\"chatcmpl-9x\",\"object\":\"chat.completion.chunk\",\"created\":1718000000,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
	"data: [DONE]\n\n"

var readerCases = []struct {
	name string
	in   string
	want []want
	raws []string // exact Raw of every block when read in one piece (optional)
}{
	{"empty", "", nil, []string{}},
	{"lf", "data: hello\n\n", []want{d("hello")}, []string{"data: hello\n\n"}},
	{"crlf", "data: a\r\ndata: b\r\n\r\n", []want{d("a\nb")}, nil},
	{"cr", "data: a\rdata: b\r\rdata: c\r\r", []want{d("a\nb"), d("c")}, []string{"data: a\rdata: b\r\r", "data: c\r\r"}},
	{"mixed endings", "data: a\r\ndata: b\rdata: c\n\r\n", []want{d("a\nb\nc")}, nil},
	{"cr then lf is one ending", "data: a\r\n\r\n", []want{d("a")}, []string{"data: a\r\n\r\n"}},
	{"lf then cr is two endings", "data: a\n\rdata: b\n\n", []want{d("a"), d("b")}, []string{"data: a\n\r", "data: b\n\n"}},
	{"comment", ": keep-alive\n\n", []want{{Comment: true, Retry1: 0}}, nil},
	{"comment without space", ":\n\n", []want{{Comment: true}}, nil},
	{"heartbeats around data", ": ping\n\ndata: x\n\n: ping\r\n\r\n",
		[]want{{Comment: true}, d("x"), {Comment: true}},
		[]string{": ping\n\n", "data: x\n\n", ": ping\r\n\r\n"}},
	{"comment inside block", ": c\ndata: x\n: c2\n\n", []want{d("x")}, nil},
	{"multi-line data", "data: a\ndata: b\ndata: c\n\n", []want{d("a\nb\nc")}, nil},
	{"multi-line data with empties", "data\ndata:\ndata: \ndata: z\n\n", []want{d("\n\n\nz")}, nil},
	{"data without colon", "data\n\n", []want{d("")}, nil},
	{"data empty value", "data:\n\n", []want{d("")}, nil},
	{"one space removed", "data:  x \n\n", []want{d(" x ")}, nil},
	{"no space", "data:x\n\n", []want{d("x")}, nil},
	{"colon in value", "data: a:b: c\n\n", []want{d("a:b: c")}, nil},
	{"tab not removed", "data:\tx\n\n", []want{d("\tx")}, nil},
	{"name with space is unknown", "data : x\n\n", []want{{}}, nil},
	{"unknown field", "foo: bar\n\n", []want{{}}, nil},
	{"bom stripped", "\xEF\xBB\xBFdata: x\n\n", []want{d("x")}, []string{"\xEF\xBB\xBFdata: x\n\n"}},
	{"bom before comment", "\xEF\xBB\xBF: hi\n\n", []want{{Comment: true}}, nil},
	{"second bom kept", "\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\ndata: y\n\n", []want{{}, d("y")}, nil},
	{"bom later kept", "data: x\n\n\xEF\xBB\xBFdata: y\n\n", []want{d("x"), {}}, nil},
	{"partial bom", "\xEF\xBBdata: x\n\n", []want{{}}, nil},
	{"only bom", "\xEF\xBB\xBF", nil, []string{"\xEF\xBB\xBF"}},
	{"event type", "event: ping\ndata: x\n\n", []want{{Type: "ping", Data: "x", HasData: true}}, nil},
	{"last event wins", "event: a\nevent: b\n\n", []want{{Type: "b"}}, nil},
	{"empty event", "event:\n\n", []want{{}}, nil},
	{"event type per block", "event: a\ndata: 1\n\ndata: 2\n\n", []want{{Type: "a", Data: "1", HasData: true}, d("2")}, nil},
	{"id", "id: 42\ndata: x\n\n", []want{{ID: "42", HasID: true, Data: "x", HasData: true}}, nil},
	{"empty id", "id\n\n", []want{{HasID: true}}, nil},
	{"id with nul ignored", "id: a\x00b\ndata: x\n\n", []want{d("x")}, nil},
	{"id with nul keeps earlier id", "id: 1\nid: \x00\n\n", []want{{ID: "1", HasID: true}}, nil},
	{"retry", "retry: 1500\n\n", []want{{Retry1: 1501}}, nil},
	{"retry zero", "retry: 0\n\n", []want{{Retry1: 1}}, nil},
	{"retry invalid", "retry: 10a\n\nretry:\n\nretry: -5\n\nretry: 1 \n\n", []want{{}, {}, {}, {}}, nil},
	{"retry overflow", "retry: 99999999999999999999999\n\n", []want{{}}, nil},
	{"retry invalid keeps valid", "retry: 5\nretry: x\n\n", []want{{Retry1: 6}}, nil},
	{"leading blank lines", "\n\r\n\rdata: x\n\n", []want{d("x")}, []string{"\n\r\n\rdata: x\n\n"}},
	{"extra blank lines between", "data: x\n\n\n\ndata: y\n\n", []want{d("x"), d("y")}, []string{"data: x\n\n", "\n\ndata: y\n\n"}},
	{"trailing blank lines", "data: x\n\n\n\n", []want{d("x")}, []string{"data: x\n\n", "\n\n"}},
	{"only blank lines", "\n\r\n\r", nil, []string{"\n\r\n\r"}},
	{"unterminated done", "data: [DONE]", []want{{Data: "[DONE]", HasData: true, Unterm: true}}, []string{"data: [DONE]"}},
	{"unterminated done with lf", "data: [DONE]\n", []want{{Data: "[DONE]", HasData: true, Unterm: true}}, nil},
	{"unterminated after block", "data: a\n\ndata: b\r\ndata: c\r", []want{d("a"), {Data: "b\nc", HasData: true, Unterm: true}}, nil},
	{"unterminated comment", ": x", []want{{Comment: true, Unterm: true}}, nil},
	{"utf8", "data: h\u00e9llo \u4e16\u754c \U0001F389\n\n", []want{d("h\u00e9llo \u4e16\u754c \U0001F389")}, nil},
	{"openai stream", openAIStream, []want{
		d(`{"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1718000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`),
		{Comment: true},
		d(`{"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1718000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`),
		d(`{"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1718000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"lo \u00e9\n世界"},"finish_reason":null}]}`),
		d(`{"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1718000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`),
		d("[DONE]"),
	}, nil},
}

// readers returns the ways each table case is fed to the Reader: in one
// piece, one byte at a time, with io.EOF on the last data, and cut in two
// and three pieces at every position.
func readers(in string) map[string]func() io.Reader {
	m := map[string]func() io.Reader{
		"whole":    func() io.Reader { return strings.NewReader(in) },
		"onebyte":  func() io.Reader { return iotest.OneByteReader(strings.NewReader(in)) },
		"dataerr":  func() io.Reader { return iotest.DataErrReader(strings.NewReader(in)) },
		"halfread": func() io.Reader { return iotest.HalfReader(strings.NewReader(in)) },
	}
	for i := 1; i < len(in); i++ {
		m["cut"+strconv.Itoa(i)] = func() io.Reader {
			return &cutReader{chunks: [][]byte{[]byte(in[:i]), []byte(in[i:])}}
		}
		if len(in) <= 64 {
			for j := i + 1; j < len(in); j++ {
				m["cut"+strconv.Itoa(i)+","+strconv.Itoa(j)] = func() io.Reader {
					return &cutReader{chunks: [][]byte{[]byte(in[:i]), []byte(in[i:j]), []byte(in[j:])}}
				}
			}
		}
	}
	return m
}

func TestReaderCases(t *testing.T) {
	for _, tc := range readerCases {
		t.Run(tc.name, func(t *testing.T) {
			// The table and the reference parser must agree.
			ref := refParse([]byte(tc.in))
			if len(ref) != len(tc.want) {
				t.Fatalf("reference parser gives %d blocks, table %d", len(ref), len(tc.want))
			}
			for name, mk := range readers(tc.in) {
				evs, err := collect(NewReader(mk(), 0))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				checkAgainstRef(t, []byte(tc.in), evs, ref, true)
				var got []want
				for i, ev := range evs {
					off := 0
					for _, e := range evs[:i] {
						off += len(e.Raw)
					}
					if !isBlankOnly(ev, off, []byte(tc.in)) {
						got = append(got, gotWant(ev))
					}
				}
				if len(got) != len(tc.want) {
					t.Fatalf("%s: got %d blocks %+v, want %d %+v", name, len(got), got, len(tc.want), tc.want)
				}
				for i := range got {
					if got[i] != tc.want[i] {
						t.Errorf("%s: block %d:\n got %+v\nwant %+v", name, i, got[i], tc.want[i])
					}
				}
				if name == "whole" && tc.raws != nil {
					raws := []string{}
					for _, ev := range evs {
						raws = append(raws, string(ev.Raw))
					}
					if strings.Join(raws, "|") != strings.Join(tc.raws, "|") || len(raws) != len(tc.raws) {
						t.Errorf("Raw blocks %q, want %q", raws, tc.raws)
					}
				}
			}
		})
	}
}

// TestCRSplitAtBlockEnd pins what happens when a read ends between the CR
// and LF of the blank line that ends a block: the block is returned at once
// (no waiting for the next read) and the LF starts the next block's Raw.
func TestCRSplitAtBlockEnd(t *testing.T) {
	src := &blockingReader{chunks: []string{"data: a\r\n\r", "\ndata: b\r\n\r\n"}}
	rd := NewReader(src, 0)
	ev, err := rd.Next()
	if err != nil || string(ev.Raw) != "data: a\r\n\r" || string(ev.Data) != "a" {
		t.Fatalf("first: %q %q %v", ev.Raw, ev.Data, err)
	}
	if src.reads != 1 {
		t.Fatalf("reader made %d reads for a complete block, want 1", src.reads)
	}
	ev, err = rd.Next()
	if err != nil || string(ev.Raw) != "\ndata: b\r\n\r\n" || string(ev.Data) != "b" {
		t.Fatalf("second: %q %q %v", ev.Raw, ev.Data, err)
	}
	if _, err := rd.Next(); err != io.EOF {
		t.Fatalf("want io.EOF, got %v", err)
	}
}

// blockingReader fails the test if it is read past its chunks before the
// test expects it (it returns io.EOF then).
type blockingReader struct {
	chunks []string
	reads  int
}

func (b *blockingReader) Read(p []byte) (int, error) {
	b.reads++
	if len(b.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.chunks[0])
	b.chunks[0] = b.chunks[0][n:]
	if b.chunks[0] == "" {
		b.chunks = b.chunks[1:]
	}
	return n, nil
}

// TestNoReadWhenBlockBuffered checks that Next does not read while a
// complete block is already buffered, so a relay never waits for the next
// upstream event before forwarding the current one.
func TestNoReadWhenBlockBuffered(t *testing.T) {
	src := &blockingReader{chunks: []string{"data: 1\n\ndata: 2\n\ndata: 3\n"}}
	rd := NewReader(src, 0)
	for i := range 2 {
		if _, err := rd.Next(); err != nil {
			t.Fatal(err)
		}
		if src.reads != 1 {
			t.Fatalf("after block %d: %d reads, want 1", i, src.reads)
		}
	}
}

func TestIsDone(t *testing.T) {
	for in, done := range map[string]bool{
		"data: [DONE]\n\n":   true,
		"data:[DONE]\n\n":    true,
		"data: [DONE]":       true,
		"data: [DONE] \n\n":  false,
		"data:  [DONE]\n\n":  false,
		"data: [done]\n\n":   false,
		": [DONE]\n\n":       false,
		"data: [DONE]\ndata": false,
	} {
		ev, err := NewReader(strings.NewReader(in), 0).Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.IsDone() != done {
			t.Errorf("%q: IsDone() = %v, want %v", in, ev.IsDone(), done)
		}
	}
	var zero Event
	if zero.IsDone() || !zero.IsComment() {
		t.Error("zero Event: want !IsDone and IsComment")
	}
}

func TestHugeEvent(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	in := "data: a\n\ndata: " + string(big) + "\r\ndata: " + string(big[:1000]) + "\n\ndata: [DONE]\n\n"
	for _, bufSize := range []int{defaultBufSize, 7} {
		rd := newReaderSize(&splitReader{data: []byte(in), splits: []byte{200, 255, 3}}, 0, bufSize)
		evs, err := collect(rd)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 3 || !bytes.Equal(evs[1].Data, append(append(append([]byte{}, big...), '\n'), big[:1000]...)) || !evs[2].IsDone() {
			t.Fatalf("huge event not read back correctly (%d blocks)", len(evs))
		}
	}
	// A single 1 MiB line, read at once.
	evs, err := collect(NewReader(strings.NewReader("data:"+string(big)+"\n\n"), 0))
	if err != nil || len(evs) != 1 || !bytes.Equal(evs[0].Data, big) {
		t.Fatalf("single huge line: %d blocks, %v", len(evs), err)
	}
}

func TestEventTooLarge(t *testing.T) {
	block := "data: 0123456789\n\n" // 18 bytes
	for _, tc := range []struct {
		in      string
		max     int
		blocks  int
		tooBig  bool
		comment string
	}{
		{block + block, 18, 2, false, "exactly at the cap"},
		{block + block, 17, 0, true, "one over the cap"},
		{"data: 1\n\n" + block, 17, 1, true, "earlier small block returned first"},
		{"data: 0123456789\n", 17, 1, false, "unterminated 17 bytes at EOF"},
		{"data: 0123456789\n\r", 17, 0, true, "blank-line CR is the 18th byte"},
		{"data: 0123456789\n\r\n", 17, 0, true, "CRLF blank line"},
		{"data: 0123456789\r\n\r", 19, 1, false, "CR blank line exactly at the cap"},
		{"data: 0123456789\r\n\r\n", 19, 1, false, "LF of CRLF left for the next block to fit"},
		{"\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n", 17, 0, true, "blank lines count"},
	} {
		for name, mk := range readers(tc.in) {
			evs, err := collect(NewReader(mk(), tc.max))
			if tc.tooBig != errors.Is(err, ErrEventTooLarge) || (!tc.tooBig && err != nil) {
				t.Errorf("%s (%s): err %v", tc.comment, name, err)
			}
			nonBlank := 0
			for _, ev := range evs {
				if len(bytes.Trim(ev.Raw, "\r\n")) > 0 {
					nonBlank++
				}
			}
			if nonBlank != tc.blocks {
				t.Errorf("%s (%s): %d blocks, want %d", tc.comment, name, nonBlank, tc.blocks)
			}
		}
	}
	// Default cap: 16 MiB.
	if rd := NewReader(strings.NewReader(""), -1); rd.max != DefaultMaxEvent {
		t.Errorf("default cap %d", rd.max)
	}
}

type errAfter struct {
	data string
	err  error
}

func (e *errAfter) Read(p []byte) (int, error) {
	if e.data == "" {
		return 0, e.err
	}
	n := copy(p, e.data)
	e.data = e.data[n:]
	return n, nil
}

func TestReadError(t *testing.T) {
	boom := errors.New("boom")
	rd := NewReader(&errAfter{data: "data: 1\n\ndata: 2\n\ndata: partial", err: boom}, 0)
	evs, err := collect(rd)
	if len(evs) != 2 || err != boom {
		t.Fatalf("got %d blocks, err %v; want 2, boom", len(evs), err)
	}
	if _, err := rd.Next(); err != boom {
		t.Fatalf("error not sticky: %v", err)
	}

	// Data and a non-EOF error from the same Read.
	rd = NewReader(iotest.TimeoutReader(&splitReader{data: []byte("data: 1\n\ndata: 2\n\n"), splits: []byte{8}}), 0)
	evs, err = collect(rd)
	if len(evs) != 1 || err != iotest.ErrTimeout {
		t.Fatalf("timeout: got %d blocks, err %v", len(evs), err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestNoProgress(t *testing.T) {
	if _, err := NewReader(zeroReader{}, 0).Next(); err != io.ErrNoProgress {
		t.Fatalf("got %v, want io.ErrNoProgress", err)
	}
}

func TestClone(t *testing.T) {
	rd := NewReader(strings.NewReader("data: a\n\ndata: b\ndata: c\n\ndata: d\n\n:x\n\n"), 0)
	var kept []Event
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, ev.Clone())
	}
	wantData := []string{"a", "b\nc", "d", ""}
	for i, ev := range kept {
		if string(ev.Data) != wantData[i] {
			t.Errorf("block %d: Data %q, want %q", i, ev.Data, wantData[i])
		}
	}
	if kept[3].Data != nil {
		t.Error("Clone turned nil Data into non-nil")
	}
	e := Event{Data: []byte{}}
	if c := e.Clone(); c.Data == nil {
		t.Error("Clone turned empty Data into nil")
	}
}

// TestAppendDoesNotClobber checks that appending to Raw or Data of a
// returned Event cannot overwrite the reader's buffered input.
func TestAppendDoesNotClobber(t *testing.T) {
	rd := NewReader(strings.NewReader("data: a\n\ndata: b\n\n"), 0)
	ev, _ := rd.Next()
	_ = append(ev.Raw, "XXXXXXXX"...)
	_ = append(ev.Data, "XXXXXXXX"...)
	ev, _ = rd.Next()
	if string(ev.Raw) != "data: b\n\n" {
		t.Fatalf("buffer clobbered: %q", ev.Raw)
	}
}

func TestBeforeReadRunsBeforeEachRead(t *testing.T) {
	in := "data: a\n\ndata: b\n\n"
	reads := 0
	src := readFunc(func(p []byte) (int, error) {
		reads++
		if reads > 2 {
			return 0, io.EOF
		}
		// Two events arrive in the first read, none in the second.
		if reads == 1 {
			return copy(p, in), nil
		}
		return 0, nil
	})
	r := NewReader(src, 0)
	calls := 0
	r.BeforeRead(func() { calls++ })
	for i := 0; i < 2; i++ {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		if calls != 1 {
			t.Fatalf("after event %d: %d BeforeRead calls, want 1 (both events came in one read)", i+1, calls)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("err %v", err)
	}
	if calls < 2 {
		t.Errorf("BeforeRead not called before the read that hit EOF")
	}
}

type readFunc func([]byte) (int, error)

func (f readFunc) Read(p []byte) (int, error) { return f(p) }

// A released reader gives its buffer back and answers ErrReleased; a new
// reader may get the buffer and reads its own stream correctly.
func TestReaderRelease(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\ndata: b\n\n"), 0)
	if ev, err := r.Next(); err != nil || string(ev.Data) != "a" {
		t.Fatalf("first event %q, %v", ev.Data, err)
	}
	r.Release()
	r.Release() // twice is harmless
	if _, err := r.Next(); err != ErrReleased {
		t.Fatalf("after Release: %v", err)
	}
	for range 3 {
		r2 := NewReader(strings.NewReader("data: c\n\n"), 0)
		if ev, err := r2.Next(); err != nil || string(ev.Data) != "c" {
			t.Fatalf("a reader after a release: %q, %v", ev.Data, err)
		}
		r2.Release()
	}
}

// pendingReader hands out its chunks one at a time with ErrPending after
// each, as a stream fed by its writer does, then io.EOF.
type pendingReader struct {
	chunks  [][]byte
	pending bool // ErrPending is due before the next chunk
}

func (p *pendingReader) Read(b []byte) (int, error) {
	if p.pending {
		p.pending = false
		return 0, ErrPending
	}
	if len(p.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.chunks[0])
	if p.chunks[0] = p.chunks[0][n:]; len(p.chunks[0]) == 0 {
		p.chunks, p.pending = p.chunks[1:], true
	}
	return n, nil
}

// A fed stream reads as the same stream read whole: ErrPending between
// its pieces loses, adds and changes nothing (a partial block waits in
// the buffer), and is not sticky; the other errors still are. A Pump
// passes it on without keeping it.
func TestPendingIsNotSticky(t *testing.T) {
	forRandomStreams(t, func(t *testing.T, in, splits []byte) {
		var chunks, again [][]byte
		for i, rest := 0, in; len(rest) > 0; i++ {
			n := len(rest)
			if len(splits) > 0 {
				n = min(n, int(splits[i%len(splits)])+1)
			}
			chunks, again = append(chunks, rest[:n]), append(again, rest[:n])
			rest = rest[n:]
		}
		want, wantErr := collect(NewReader(&cutReader{chunks: again}, 0))
		rd := NewReader(&pendingReader{chunks: chunks}, 0)
		var got []Event
		pendings := 0
		var err error
		for {
			var ev Event
			if ev, err = rd.Next(); err == ErrPending {
				pendings++
				continue
			}
			if err != nil {
				break
			}
			got = append(got, ev.Clone())
		}
		if err == io.EOF {
			err = nil
		}
		if err != wantErr || len(got) != len(want) {
			t.Fatalf("%q split %v: %d events, err %v; read whole: %d, err %v", in, splits, len(got), err, len(want), wantErr)
		}
		for i := range got {
			g, w := got[i], want[i]
			if !bytes.Equal(g.Raw, w.Raw) || !bytes.Equal(g.Data, w.Data) || g.Type != w.Type || g.ID != w.ID ||
				g.HasData != w.HasData || g.Retry != w.Retry || g.Unterminated != w.Unterminated || g.IsComment() != w.IsComment() {
				t.Fatalf("%q split %v: event %d is %+v fed, %+v read whole", in, splits, i, g, w)
			}
		}
		if pendings != len(chunks) {
			t.Fatalf("%q split %v: ErrPending %d times, want once per piece (%d)", in, splits, pendings, len(chunks))
		}
	})

	// A Pump hands ErrPending on and reads Src again at the next Pull.
	src := NewReader(&pendingReader{chunks: [][]byte{[]byte("data: a\n\ndata: "), []byte("b\n\n")}}, 0)
	p := &Pump{Src: src}
	h := handlerFunc(func(ev *Event) { p.Q.Push(ev.Clone()) })
	var seen []string
	for {
		ev, err := p.Pull(h)
		if err == ErrPending {
			seen = append(seen, "pending")
			continue
		}
		if err != nil {
			seen = append(seen, err.Error())
			break
		}
		seen = append(seen, string(ev.Data))
	}
	if got, want := strings.Join(seen, " "), "a pending b pending EOF"; got != want {
		t.Errorf("Pump yields %q, want %q", got, want)
	}
}

type handlerFunc func(ev *Event)

func (f handlerFunc) Handle(ev *Event) { f(ev) }
