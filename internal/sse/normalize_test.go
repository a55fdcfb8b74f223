package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// normCases give an input and the exact Raw of every block a normalising
// reader returns when it reads the input in one piece.
var normCases = []struct {
	name string
	in   string
	raws []string
}{
	{"lf unchanged", "data: a\n\n: c\n\n", []string{"data: a\n\n", ": c\n\n"}},
	{"crlf unchanged", "data: a\r\ndata: b\r\n\r\n", []string{"data: a\r\ndata: b\r\n\r\n"}},
	{"cr only", "data: a\rdata: b\r\rdata: c\r\r", []string{"data: a\ndata: b\n\n", "data: c\n\n"}},
	{"cr cr", "data: a\r\r", []string{"data: a\n\n"}},
	{"lf then cr blank line", "data: a\n\rdata: b\n\r", []string{"data: a\n\n", "data: b\n\n"}},
	{"crlf in a block with a lone cr becomes lf", "data: a\r\ndata: b\r\r\n", []string{"data: a\ndata: b\n\n"}},
	{"lone cr only in the blank line", "event: x\r\ndata: a\r\n\rdata: b\r\n\r\n", []string{"event: x\ndata: a\n\n", "data: b\r\n\r\n"}},
	{"only the block with a lone cr changes", "data: a\n\ndata: b\r\rdata: c\r\n\r\n", []string{"data: a\n\n", "data: b\n\n", "data: c\r\n\r\n"}},
	{"leading cr blank lines", "\r\r\ndata: a\n\n", []string{"\n\ndata: a\n\n"}},
	{"blank lines between", "data: a\r\r\r\rdata: b\r\r", []string{"data: a\n\n", "\n\ndata: b\n\n"}},
	{"bom kept", "\xEF\xBB\xBFdata: a\r\r", []string{"\xEF\xBB\xBFdata: a\n\n"}},
	{"bom then cr blank line", "\xEF\xBB\xBF\rdata: a\r\r", []string{"\xEF\xBB\xBF\ndata: a\n\n"}},
	{"bom only", "\xEF\xBB\xBF", []string{"\xEF\xBB\xBF"}},
	{"unterminated", "data: a\rdata: b", []string{"data: a\ndata: b"}},
	{"unterminated done with cr", "data: [DONE]\r", []string{"data: [DONE]\n"}},
	{"unterminated after crlf block", "data: a\r\n\r\ndata: b\r", []string{"data: a\r\n\r\n", "data: b\n"}},
	{"trailing cr blank lines", "data: a\n\n\r\r", []string{"data: a\n\n", "\n\n"}},
	{"only cr blank lines", "\r\r\n\r", []string{"\n\n\n"}},
	{"comment", ": keep-alive\r\r", []string{": keep-alive\n\n"}},
	{"field bytes kept", "data:  x \r id: 1\rretry:9\r\r", []string{"data:  x \n id: 1\nretry:9\n\n"}},
}

func TestNormalizeCases(t *testing.T) {
	for _, tc := range normCases {
		t.Run(tc.name, func(t *testing.T) {
			rd := NewReader(strings.NewReader(tc.in), 0)
			rd.NormalizeLineEndings()
			evs, err := collect(rd)
			if err != nil {
				t.Fatal(err)
			}
			raws := []string{}
			for _, ev := range evs {
				raws = append(raws, string(ev.Raw))
			}
			if strings.Join(raws, "|") != strings.Join(tc.raws, "|") || len(raws) != len(tc.raws) {
				t.Errorf("Raw blocks %q, want %q", raws, tc.raws)
			}
			// Every read split: the properties of checkNormalized.
			for name, mk := range readers(tc.in) {
				t.Run(name, func(t *testing.T) {
					rd := NewReader(mk(), 0)
					rd.NormalizeLineEndings()
					evs, err := collect(rd)
					if err != nil {
						t.Fatal(err)
					}
					checkNormalized(t, []byte(tc.in), evs, true)
				})
			}
		})
	}
	// The reader's own table too.
	for _, tc := range readerCases {
		for name, mk := range readers(tc.in) {
			rd := NewReader(mk(), 0)
			rd.NormalizeLineEndings()
			evs, err := collect(rd)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.name, name, err)
			}
			checkNormalized(t, []byte(tc.in), evs, true)
		}
	}
}

// TestNormalizeCRSplitAtBlockEnd: a read that ends between the CR and LF of
// the blank line that ends a block. The block is returned at once, its CR
// written as LF; the LF that follows is dropped, not written again: no blank
// line is lost or doubled, and what a relay appends after the first block
// already starts on a fresh line.
func TestNormalizeCRSplitAtBlockEnd(t *testing.T) {
	src := &blockingReader{chunks: []string{"data: a\r\n\r", "\ndata: b\r\n\r\n"}}
	rd := NewReader(src, 0)
	rd.NormalizeLineEndings()
	ev, err := rd.Next()
	if err != nil || string(ev.Raw) != "data: a\n\n" || string(ev.Data) != "a" {
		t.Fatalf("first: %q %q %v", ev.Raw, ev.Data, err)
	}
	if src.reads != 1 {
		t.Fatalf("reader made %d reads for a complete block, want 1", src.reads)
	}
	ev, err = rd.Next()
	if err != nil || string(ev.Raw) != "data: b\r\n\r\n" || string(ev.Data) != "b" {
		t.Fatalf("second: %q %q %v", ev.Raw, ev.Data, err)
	}
	if _, err := rd.Next(); err != io.EOF {
		t.Fatalf("want io.EOF, got %v", err)
	}

	// The same with nothing after the LF: no empty final block.
	evs, err := collect(func() *Reader {
		rd := NewReader(&blockingReader{chunks: []string{"data: a\r\n\r", "\n"}}, 0)
		rd.NormalizeLineEndings()
		return rd
	}())
	if err != nil || len(evs) != 1 || string(evs[0].Raw) != "data: a\n\n" {
		t.Fatalf("got %d blocks %+v, %v", len(evs), evs, err)
	}
}

// TestNormalizeCRAtEveryReadBoundary reads CR-heavy streams one byte at a
// time and with tiny initial buffers (so that the buffer is compacted and
// grown while a CR decision is pending).
func TestNormalizeCRAtEveryReadBoundary(t *testing.T) {
	for _, in := range []string{
		"data: a\r\rdata: b\r\n\r\n\r\r\ndata: c\n\r: x\r\r",
		"\xEF\xBB\xBF\r\n\rdata: a\r\n\rdata: b\r\r\n",
		"data: " + strings.Repeat("x", 100) + "\r\r" + "data: " + strings.Repeat("y", 50) + "\r\n\r\n\r",
	} {
		for bufSize := 1; bufSize <= 9; bufSize++ {
			for _, splits := range [][]byte{{0}, {1}, {0, 2}, {6, 0, 1}} {
				rd := newReaderSize(&splitReader{data: []byte(in), splits: splits}, 0, bufSize)
				rd.NormalizeLineEndings()
				evs, err := collect(rd)
				if err != nil {
					t.Fatal(err)
				}
				checkNormalized(t, []byte(in), evs, true)
			}
		}
	}
}

// TestNormalizeUnderCap: a block whose final LF does not fit under the cap
// ends at its CR; normalised, that CR is its LF and the extra LF is dropped.
func TestNormalizeUnderCap(t *testing.T) {
	in := "data: a\r\n\r\ndata: b\r\n\r\n"
	rd := NewReader(strings.NewReader(in), len("data: a\r\n\r"))
	rd.NormalizeLineEndings()
	evs, err := collect(rd)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || string(evs[0].Raw) != "data: a\n\n" || string(evs[1].Raw) != "data: b\n\n" {
		t.Fatalf("blocks %q", raws(evs))
	}
}

// raws lists the Raw of every block.
func raws(evs []Event) []string {
	var r []string
	for _, ev := range evs {
		r = append(r, string(ev.Raw))
	}
	return r
}

// toLF returns b with every line ending written as LF.
func toLF(b []byte) []byte { return appendLF(nil, b) }

// hasLoneCR reports whether b has a CR not followed by LF.
func hasLoneCR(b []byte) bool {
	for i, c := range b {
		if c == '\r' && (i+1 == len(b) || b[i+1] != '\n') {
			return true
		}
	}
	return false
}

// checkNormalized checks what a normalising reader returned for in (all of
// it if complete, else a prefix):
//   - the blocks parse as the reference parser parses in (same type, data,
//     id, retry, in the same order), and so does their concatenated Raw
//     under a plain reader: normalising changes no event;
//   - the concatenated Raw has no lone CR, and every complete block ends in
//     LF (a stream made of a BOM alone aside): whatever follows a block
//     starts on a fresh line;
//   - the concatenated Raw is in with some line endings changed (the same
//     text once every line ending is LF), and equals in byte for byte when
//     in has no lone CR and was read in one piece;
//   - blocks without a lone CR are byte-exact: Raw is a slice of the input.
func checkNormalized(t *testing.T, in []byte, evs []Event, complete bool) {
	t.Helper()
	var out []byte
	for i, ev := range evs {
		if !ev.Unterminated && !bytes.HasSuffix(ev.Raw, []byte("\n")) && !(i == 0 && string(ev.Raw) == "\xEF\xBB\xBF") {
			t.Fatalf("input %q: complete block %d does not end in LF: %q", in, i, ev.Raw)
		}
		out = append(out, ev.Raw...)
	}
	if hasLoneCR(out) {
		t.Fatalf("input %q: output has a lone CR: %q", in, out)
	}
	lfIn, lfOut := toLF(in), toLF(out)
	if complete && !bytes.Equal(lfOut, lfIn) || !complete && !bytes.HasPrefix(lfIn, lfOut) {
		t.Fatalf("input %q: output %q is not the input with line endings changed", in, out)
	}
	if complete && !hasLoneCR(in) && !bytes.Equal(out, in) {
		// Only a CRLF split between two reads may have become LF: the
		// output is the input with some CRLF written as LF.
		if !bytes.Equal(bytes.ReplaceAll(out, []byte("\r\n"), []byte("\n")), bytes.ReplaceAll(in, []byte("\r\n"), []byte("\n"))) {
			t.Fatalf("input %q has no lone CR but output is %q", in, out)
		}
	}

	ref := refParse(in)
	check := func(what string, evs []Event) {
		t.Helper()
		k := 0
		for _, ev := range evs {
			if ev.IsComment() && len(bytes.Trim(bytes.TrimPrefix(ev.Raw, bom), "\r\n")) == 0 {
				continue // blank lines (and a BOM) only
			}
			if k >= len(ref) {
				t.Fatalf("input %q, %s: extra block %q", in, what, ev.Raw)
			}
			rb := ref[k]
			k++
			got := refBlock{
				end: rb.end, minEnd: rb.minEnd,
				Type: ev.Type, Data: string(ev.Data), HasData: ev.HasData,
				ID: ev.ID, HasID: ev.HasID, Retry: ev.Retry,
				Unterminated: ev.Unterminated, Comment: ev.IsComment(),
			}
			if !complete && k == len(evs) {
				got.Unterminated = rb.Unterminated
			}
			if got != rb {
				t.Fatalf("input %q, %s: block %d (Raw %q):\n got %+v\nwant %+v", in, what, k-1, ev.Raw, got, rb)
			}
		}
		if complete && k != len(ref) {
			t.Fatalf("input %q, %s: %d blocks with content, reference has %d", in, what, k, len(ref))
		}
	}
	check("normalising reader", evs)
	if complete {
		again, err := collect(NewReader(bytes.NewReader(out), 0))
		if err != nil {
			t.Fatal(err)
		}
		check("plain reader on the output", again)
	}
}

// checkNormalizedInput runs in through normalising readers as checkInput
// does for plain ones: with read splits, a default and a tiny initial
// buffer, and a cap.
func checkNormalizedInput(t *testing.T, in, splits []byte) {
	t.Helper()
	for _, bufSize := range []int{defaultBufSize, 1 + len(splits)%7} {
		rd := newReaderSize(&splitReader{data: in, splits: splits}, 0, bufSize)
		rd.NormalizeLineEndings()
		evs, err := collect(rd)
		if err != nil {
			t.Fatalf("input %q, splits %v, bufSize %d: %v", in, splits, bufSize, err)
		}
		checkNormalized(t, in, evs, true)
	}
	checkAgainstPlain(t, in, splits)

	maxEvent := 1 + len(in)/2
	if len(splits) > 0 {
		maxEvent = 1 + int(splits[0])%(len(in)+1)
	}
	rd := newReaderSize(&splitReader{data: in, splits: splits}, maxEvent, 1+len(in)%5)
	rd.NormalizeLineEndings()
	evs, err := collect(rd)
	if err != nil && !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("cap %d: %v", maxEvent, err)
	}
	for i, ev := range evs {
		if len(ev.Raw) > maxEvent {
			t.Fatalf("cap %d: block %d has %d bytes", maxEvent, i, len(ev.Raw))
		}
	}
	checkNormalized(t, in, evs, err == nil)
}

// checkAgainstPlain compares the blocks of a normalising reader with those
// of a plain one: a block without a lone CR (in the plain reader's view: a
// final CR whose LF has not been read yet counts as lone) is returned
// unchanged, byte for byte; any other is returned with LF line endings. The
// one other difference: after a block whose final CR became LF, an LF that
// follows (the rest of a CRLF) is dropped from the next block. Both readers
// get a buffer larger than the input, so that they see the same reads.
func checkAgainstPlain(t *testing.T, in, splits []byte) {
	t.Helper()
	bufSize := len(in) + minReadSize + 1
	rd := newReaderSize(&splitReader{data: in, splits: splits}, 0, bufSize)
	rd.NormalizeLineEndings()
	evs, err := collect(rd)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := collect(newReaderSize(&splitReader{data: in, splits: splits}, 0, bufSize))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for j, ev := range plain {
		raw := ev.Raw
		if j > 0 && bytes.HasSuffix(plain[j-1].Raw, []byte("\r")) && len(raw) > 0 && raw[0] == '\n' {
			raw = raw[1:]
		}
		if len(raw) == 0 {
			// The dropped LF was all that was left.
			if j != len(plain)-1 {
				t.Fatalf("input %q, splits %v: empty block %d of %d", in, splits, j, len(plain))
			}
			continue
		}
		want := raw
		if hasLoneCR(raw) {
			want = toLF(raw)
		}
		if n >= len(evs) || !bytes.Equal(evs[n].Raw, want) {
			t.Fatalf("input %q, splits %v: plain block %q, want %q, got blocks %q", in, splits, ev.Raw, want, raws(evs))
		}
		n++
	}
	if n != len(evs) {
		t.Fatalf("input %q, splits %v: %d blocks, plain reader %d", in, splits, len(evs), len(plain))
	}
}

// FuzzNormalize: for any input and read splits, a normalising reader
// returns the same events as the reference parser, its output has no lone
// CR and parses to the same events again, and it is the input byte for
// byte when the input has no lone CR (and no CRLF split between reads).
func FuzzNormalize(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add([]byte(s), []byte(nil))
		f.Add([]byte(s), []byte{0})
		f.Add([]byte(s), []byte{byte(i), 2, 1})
	}
	for _, c := range normCases {
		f.Add([]byte(c.in), []byte{0})
	}
	f.Fuzz(func(t *testing.T, in, splits []byte) {
		checkNormalizedInput(t, in, splits)
	})
}

// TestNormalizeRandomStreams is FuzzNormalize over the random streams of
// TestRandomStreams.
func TestNormalizeRandomStreams(t *testing.T) {
	forRandomStreams(t, checkNormalizedInput)
}
