package llmrelay

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// A payload reads as its pieces joined, whatever the size of the reads,
// and GetBody reads it again from the start.
func TestPayloadReads(t *testing.T) {
	for _, parts := range [][][]byte{
		{[]byte(`{`), []byte(`"a":1`), {}, []byte(`,`), []byte(`"b":"xyz"`), []byte(`}`)},
		{[]byte(`{"model":"m"}`)},
		{{}, {}},
	} {
		p := piecesPayload(parts)
		want := bytes.Join(parts, nil)
		if p.size != len(want) || !bytes.Equal(p.Bytes(), want) {
			t.Fatalf("size %d, Bytes %q, want %q", p.size, p.Bytes(), want)
		}
		for size := 1; size <= len(want)+2; size++ {
			r := &partsReader{parts: parts}
			var got []byte
			buf := make([]byte, size)
			for {
				n, err := r.Read(buf)
				got = append(got, buf[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil || n == 0 {
					t.Fatalf("read %d: n %d, err %v", size, n, err)
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("reads of %d: %q, want %q", size, got, want)
			}
		}
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/", nil)
		p.attach(req)
		for range 2 {
			got, _ := io.ReadAll(req.Body)
			if !bytes.Equal(got, want) || req.ContentLength != int64(len(want)) {
				t.Fatalf("body %q (length %d), want %q", got, req.ContentLength, want)
			}
			req.Body, _ = req.GetBody()
		}
	}
}
