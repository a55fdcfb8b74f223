package sse

import (
	"bytes"
	"strings"
	"testing"
)

func TestAppendData(t *testing.T) {
	for _, tc := range []struct{ payload, want string }{
		{`{"a":1}`, "data: {\"a\":1}\n\n"},
		{"", "data: \n\n"},
		{"[DONE]", "data: [DONE]\n\n"},
		{"a\nb", "data: a\ndata: b\n\n"},
		{"a\r\nb\rc", "data: a\ndata: b\ndata: c\n\n"},
		{"a\n", "data: a\ndata: \n\n"},
		{"\n", "data: \ndata: \n\n"},
		{"\r\n\r", "data: \ndata: \ndata: \n\n"},
	} {
		prefix := []byte("prev")
		got := AppendData(prefix, []byte(tc.payload))
		if string(got) != "prev"+tc.want {
			t.Errorf("AppendData(%q) = %q, want %q", tc.payload, got[4:], tc.want)
		}
	}
}

func TestAppendComment(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"keep-alive", ": keep-alive\n\n"},
		{"", ": \n\n"},
		{"a\r\nb", ": a\n: b\n\n"},
	} {
		if got := AppendComment(nil, tc.text); string(got) != tc.want {
			t.Errorf("AppendComment(%q) = %q, want %q", tc.text, got, tc.want)
		}
		ev, err := NewReader(bytes.NewReader(AppendComment(nil, tc.text)), 0).Next()
		if err != nil || !ev.IsComment() || ev.Unterminated {
			t.Errorf("AppendComment(%q) does not read back as a comment: %+v %v", tc.text, ev, err)
		}
	}
}

// normalizeNewlines turns CRLF and CR into LF, as an SSE round trip does.
func normalizeNewlines(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
}

// FuzzAppendData checks that AppendData output reads back as one complete
// block with the payload as Data (line breaks normalized to '\n').
func FuzzAppendData(f *testing.F) {
	for _, s := range []string{"", "x", "a\nb", "a\r\nb\rc\n", "\r", "data: x\n\n", ": c", "\xEF\xBB\xBF"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		buf := AppendData(nil, payload)
		rd := NewReader(bytes.NewReader(buf), 0)
		ev, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ev.Raw, buf) || ev.Unterminated || !ev.HasData {
			t.Fatalf("AppendData(%q) = %q read back as Raw %q, Unterminated %v", payload, buf, ev.Raw, ev.Unterminated)
		}
		if want := normalizeNewlines(string(payload)); string(ev.Data) != want {
			t.Fatalf("AppendData(%q): Data %q, want %q", payload, ev.Data, want)
		}
	})
}

func TestNewEventRoundTrip(t *testing.T) {
	for _, tc := range []struct{ typ, data, raw string }{
		{"content_block_delta", `{"a":1}`, "event: content_block_delta\ndata: {\"a\":1}\n\n"},
		{"", `{"a":1}`, "data: {\"a\":1}\n\n"},
		{"x", "two\nlines", "event: x\ndata: two\ndata: lines\n\n"},
	} {
		ev := NewEvent(tc.typ, []byte(tc.data))
		if string(ev.Raw) != tc.raw || ev.Type != tc.typ || string(ev.Data) != tc.data || !ev.HasData || ev.IsComment() || ev.Retry != -1 {
			t.Errorf("NewEvent(%q, %q) = %+v", tc.typ, tc.data, ev)
		}
	}
}
