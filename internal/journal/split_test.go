package journal

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// refBlock is a block as refSplit cuts it.
type refBlock struct {
	raw     string
	comment bool
}

// refSplit is the splitter's specification, written plainly: lines end
// with \r\n, \n or \r (a \r at the very end ends its line only when the
// stream ended); a blank line ends a block; id and retry lines are
// dropped from a finished block; a block is a comment when it has no
// other field. It returns the finished blocks and the unfinished tail.
func refSplit(in []byte, eof bool) (blocks []refBlock, rest string) {
	var lines []string // with their endings
	s := string(in)
	for {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 || s[i] == '\r' && i+1 == len(s) && !eof {
			break
		}
		n := i + 1
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			n++
		}
		lines, s = append(lines, s[:n]), s[n:]
	}
	var cur []string
	for _, l := range lines {
		body := strings.TrimRight(l, "\r\n")
		if body == "" {
			b := refBlock{comment: true}
			for _, c := range cur {
				cb := strings.TrimRight(c, "\r\n")
				name, _, _ := strings.Cut(cb, ":")
				if name == "id" || name == "retry" {
					continue
				}
				if !strings.HasPrefix(cb, ":") {
					b.comment = false
				}
				b.raw += c
			}
			b.raw += l
			blocks, cur = append(blocks, b), nil
			continue
		}
		cur = append(cur, l)
	}
	return blocks, strings.Join(cur, "") + s
}

// splitAll runs the Splitter over in, cut at the sizes sizes names.
func splitAll(in, sizes []byte, close bool) (blocks []refBlock, rest string) {
	var s Splitter
	emit := func(b Block) { blocks = append(blocks, refBlock{string(b.Raw), b.Comment}) }
	for i := 0; len(in) > 0; i++ {
		n := len(in)
		if len(sizes) > 0 {
			n = min(n, 1+int(sizes[i%len(sizes)]))
		}
		s.Write(in[:n], emit)
		in = in[n:]
	}
	if close {
		return blocks, string(s.Close(emit))
	}
	return blocks, string(s.Rest())
}

func checkSplit(t *testing.T, in, sizes []byte) {
	for _, eof := range []bool{false, true} {
		got, gotRest := splitAll(in, sizes, eof)
		want, wantRest := refSplit(in, eof)
		if len(got) != len(want) {
			t.Fatalf("eof %v: %d blocks, want %d\n got %+v\nwant %+v", eof, len(got), len(want), got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("eof %v: block %d is %+v, want %+v", eof, i, got[i], want[i])
			}
		}
		if gotRest != wantRest {
			t.Fatalf("eof %v: rest %q, want %q", eof, gotRest, wantRest)
		}
	}
}

// TestSplitterCloseEndsCRLine: a stream whose lines end with a bare \r
// (the SSE spec allows it) ends with \r\r; the last \r of the last write
// could be the start of a \r\n, so Write holds the block back, and the
// end of the stream must release it, or the last event is sent but
// never journaled (a resumed client would miss it).
func TestSplitterCloseEndsCRLine(t *testing.T) {
	var s Splitter
	var got []string
	emit := func(b Block) { got = append(got, string(b.Raw)) }
	s.Write([]byte("data: a\r\rdata: [DONE]\r\r"), emit)
	if len(got) != 1 {
		t.Fatalf("Write emitted %q", got)
	}
	if rest := s.Close(emit); len(rest) != 0 || len(got) != 2 || got[1] != "data: [DONE]\r\r" {
		t.Fatalf("Close emitted %q and left %q", got, rest)
	}
}

func TestSplitterCases(t *testing.T) {
	for _, in := range []string{
		"",
		"data: a\n\n",
		"id: 7\nretry: 10\ndata: a\n\n",
		": heartbeat\n\n",
		"id: 7\n\n",
		"\n\n\n",
		"event: e\r\ndata: a\r\n\r\ndata: b\r\rdata: c\n\n",
		"data: a\r",
		"data: a\n\ndata: unfinished",
		"id\nretry\ndata\n\n",
		"idx: 1\ndata: a\n\n",
		": c\nid: 1\n\n",
	} {
		for _, sizes := range [][]byte{nil, {0}, {1}, {2, 0, 5}} {
			checkSplit(t, []byte(in), sizes)
		}
	}
}

func FuzzSplitter(f *testing.F) {
	f.Add([]byte("event: e\ndata: a\n\n: hb\n\nid: 3\ndata: b\r\n\r\n"), []byte{0, 3, 7})
	f.Add([]byte("data: a\r\rretry: 5\rdata: b\r\r"), []byte{1})
	f.Add([]byte("data: x\n\ndata: tail"), []byte(nil))
	f.Fuzz(func(t *testing.T, in, sizes []byte) {
		checkSplit(t, in, sizes)
	})
}

// TestParseIDRoundTrip: what Render writes, ParseID reads back.
func TestParseIDRoundTrip(t *testing.T) {
	id := NewID()
	for _, n := range []uint64{1, 2, 99, 1 << 53, 1<<64 - 1} {
		line := Render(nil, id, n, 0, nil)
		v := strings.TrimSuffix(strings.TrimPrefix(string(line), "id: "), "\n")
		s, got, ok := ParseID(v)
		if !ok || s != id || got != n {
			t.Fatalf("ParseID(%q) = %q %d %v", v, s, got, ok)
		}
	}
	for _, bad := range []string{"", ".", id, id + ".", id + ".x", id + ".-1", id + ".+1", "rs_short.1", "." + id, id + ".1 ", id[:len(id)-1] + "!.1"} {
		if _, _, ok := ParseID(bad); ok {
			t.Fatalf("ParseID(%q) accepted", bad)
		}
	}
}

func FuzzParseID(f *testing.F) {
	f.Add(NewID() + ".12")
	f.Add("rs_AAAAAAAAAAAAAAAAAAAAAA.18446744073709551615")
	f.Add("rs_AAAAAAAAAAAAAAAAAAAAAA.0.1")
	f.Add("x.1")
	f.Fuzz(func(t *testing.T, id string) {
		s, n, ok := ParseID(id)
		if !ok {
			return
		}
		if !ValidID(s) || !strings.HasPrefix(id, s+".") {
			t.Fatalf("ParseID(%q) = %q", id, s)
		}
		// Read back from what Render writes for it: the same.
		line := Render(nil, s, n, 0, nil)
		v := strings.TrimSuffix(strings.TrimPrefix(string(line), "id: "), "\n")
		if s2, n2, ok2 := ParseID(v); !ok2 || s2 != s || n2 != n {
			t.Fatalf("%q: Render wrote %q, read back %q %d %v", id, v, s2, n2, ok2)
		}
		if v != s+"."+strconv.FormatUint(n, 10) || bytes.ContainsAny([]byte(v), "\r\n") {
			t.Fatalf("Render wrote %q", v)
		}
	})
}
