package llmrelay

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestReadWhole checks the whole-answer read the cost header needs: the
// body as announced, more than announced, less than announced (an error,
// never a short answer taken for whole), and no Content-Length.
func TestReadWhole(t *testing.T) {
	body := strings.Repeat("x", 1000)
	for _, c := range []struct {
		name    string
		cl      int64
		in      io.Reader
		want    string
		wantErr bool
	}{
		{"as announced", 1000, strings.NewReader(body), body, false},
		{"no length", -1, strings.NewReader(body), body, false},
		{"more than announced", 10, strings.NewReader(body), body, false},
		{"less than announced", 2000, strings.NewReader(body), body, true},
		{"cut by the upstream", 1000, io.MultiReader(strings.NewReader(body[:500]), errReader{io.ErrUnexpectedEOF}), body[:500], true},
		{"empty", 0, strings.NewReader(""), "", false},
	} {
		got, err := readWhole(c.in, c.cl)
		if (err != nil) != c.wantErr {
			t.Errorf("%s: err %v, want error %v", c.name, err, c.wantErr)
		}
		if !bytes.Equal(got, []byte(c.want)) {
			t.Errorf("%s: read %d bytes, want %d", c.name, len(got), len(c.want))
		}
	}
	if _, err := readWhole(errReader{errors.New("boom")}, 10); err == nil {
		t.Error("a read error was not returned")
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
