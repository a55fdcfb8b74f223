package sse

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// splitReader returns data in chunks whose sizes cycle through splits
// (size = split+1). With no splits it returns everything at once. When a
// chunk empties the data and its split is odd, io.EOF comes with the data.
type splitReader struct {
	data   []byte
	splits []byte
	i      int
}

func (s *splitReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	n, eofWithData := len(s.data), false
	if len(s.splits) > 0 {
		sp := s.splits[s.i%len(s.splits)]
		s.i++
		n, eofWithData = int(sp)+1, sp%2 == 1
	}
	n = copy(p, s.data[:min(n, len(s.data))])
	s.data = s.data[n:]
	if len(s.data) == 0 && eofWithData {
		return n, io.EOF
	}
	return n, nil
}

// cutReader returns data in exactly the given chunks.
type cutReader struct{ chunks [][]byte }

func (c *cutReader) Read(p []byte) (int, error) {
	for len(c.chunks) > 0 && len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	return n, nil
}

// collect reads all blocks (cloned) until an error; io.EOF becomes nil.
func collect(rd *Reader) ([]Event, error) {
	var evs []Event
	for {
		ev, err := rd.Next()
		if err != nil {
			if err == io.EOF {
				// EOF must be sticky.
				if _, err2 := rd.Next(); err2 != io.EOF {
					return evs, errors.New("second Next after EOF did not return io.EOF")
				}
				err = nil
			}
			return evs, err
		}
		evs = append(evs, ev.Clone())
	}
}

// isBlankOnly reports whether ev is a block of nothing but blank lines (and
// the stream's BOM if it starts at offset 0 of input in).
func isBlankOnly(ev Event, off int, in []byte) bool {
	raw := ev.Raw
	if off == 0 && bytes.HasPrefix(in, []byte("\xEF\xBB\xBF")) {
		raw = raw[3:]
	}
	return len(bytes.Trim(raw, "\r\n")) == 0
}

// checkAgainstRef verifies that evs, read from in, is consistent with the
// reference parser: Raw concatenates to a prefix of in (the whole of in if
// complete), every block with content matches the reference block at the
// same position and ends where the reference says (or one byte earlier when
// the LF of a CRLF blank line was left for the next block), and blocks of
// only blank lines occur only at the end. It returns the number of bytes
// consumed and the number of reference blocks matched.
func checkAgainstRef(t *testing.T, in []byte, evs []Event, ref []refBlock, complete bool) (off, k int) {
	t.Helper()
	for i, ev := range evs {
		if !bytes.HasPrefix(in[off:], ev.Raw) {
			t.Fatalf("block %d: Raw %q is not the next part of the input %q", i, ev.Raw, in[off:])
		}
		if len(ev.Raw) == 0 {
			t.Fatalf("block %d: empty Raw", i)
		}
		if isBlankOnly(ev, off, in) {
			if i != len(evs)-1 || !complete {
				t.Fatalf("block %d: blank-only block %q before the end", i, ev.Raw)
			}
			if !ev.IsComment() || ev.HasData || ev.Data != nil || ev.Unterminated || ev.HasID || ev.Type != "" || ev.Retry != -1 {
				t.Fatalf("block %d: blank-only block %q has fields: %+v", i, ev.Raw, ev)
			}
			off += len(ev.Raw)
			continue
		}
		if k >= len(ref) {
			t.Fatalf("block %d: extra block %q; reference has %d blocks", i, ev.Raw, len(ref))
		}
		rb := ref[k]
		k++
		off += len(ev.Raw)
		if off != rb.end && off != rb.minEnd {
			t.Fatalf("block %d: ends at %d, reference at %d (min %d); Raw %q", i, off, rb.end, rb.minEnd, ev.Raw)
		}
		got := refBlock{
			end: rb.end, minEnd: rb.minEnd,
			Type: ev.Type, Data: string(ev.Data), HasData: ev.HasData,
			ID: ev.ID, HasID: ev.HasID, Retry: ev.Retry,
			Unterminated: ev.Unterminated, Comment: ev.IsComment(),
		}
		if got != rb {
			t.Fatalf("block %d (Raw %q):\n got %+v\nwant %+v", i, ev.Raw, got, rb)
		}
		if ev.HasData != (ev.Data != nil) {
			t.Fatalf("block %d: HasData %v but Data nil = %v", i, ev.HasData, ev.Data == nil)
		}
	}
	if complete {
		if off != len(in) {
			t.Fatalf("Raw covers %d of %d input bytes; rest %q", off, len(in), in[off:])
		}
		if k != len(ref) {
			t.Fatalf("got %d blocks with content, reference has %d", k, len(ref))
		}
	}
	return off, k
}

// checkInput runs in through readers with the given splits, a default and
// a tiny initial buffer, and a cap, checking everything against refParse.
func checkInput(t *testing.T, in, splits []byte) {
	t.Helper()
	defer func() {
		if t.Failed() {
			t.Logf("input %q, splits %v", in, splits)
		}
	}()
	ref := refParse(in)
	for _, bufSize := range []int{defaultBufSize, 1 + len(splits)%7} {
		rd := newReaderSize(&splitReader{data: in, splits: splits}, 0, bufSize)
		evs, err := collect(rd)
		if err != nil {
			t.Fatalf("bufSize %d: unexpected error %v", bufSize, err)
		}
		checkAgainstRef(t, in, evs, ref, true)
	}

	// With a cap: blocks up to the cap are returned, then ErrEventTooLarge
	// exactly when the next block cannot fit.
	maxEvent := 1 + len(in)/2
	if len(splits) > 0 {
		maxEvent = 1 + int(splits[0])%(len(in)+1)
	}
	rd := newReaderSize(&splitReader{data: in, splits: splits}, maxEvent, 1+len(in)%5)
	evs, err := collect(rd)
	for i, ev := range evs {
		if len(ev.Raw) > maxEvent {
			t.Fatalf("cap %d: block %d has %d bytes", maxEvent, i, len(ev.Raw))
		}
	}
	off, k := checkAgainstRef(t, in, evs, ref, err == nil)
	// Shortest and longest possible length of the block the reader was
	// working on when it stopped.
	minLen, maxLen := len(in)-off, len(in)-off
	if k < len(ref) {
		minLen, maxLen = ref[k].minEnd-off, ref[k].end-off
	}
	switch {
	case err == nil:
	case errors.Is(err, ErrEventTooLarge):
		if minLen <= maxEvent {
			t.Fatalf("cap %d: ErrEventTooLarge at offset %d but next block needs only %d..%d bytes", maxEvent, off, minLen, maxLen)
		}
		if _, err2 := rd.Next(); err2 != ErrEventTooLarge {
			t.Fatalf("ErrEventTooLarge not sticky: %v", err2)
		}
	default:
		t.Fatalf("cap %d: unexpected error %v", maxEvent, err)
	}
	if err == nil && k < len(ref) {
		t.Fatalf("cap %d: stopped without error", maxEvent)
	}
}
