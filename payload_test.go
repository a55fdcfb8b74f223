package llmrelay

import (
	"bytes"
	"io"
	"net/http"
	"reflect"
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
			r := p.reader()
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

// A body under joinBelow is sent as one *bytes.Reader, which net/http
// writes together with the request's headers; a larger one from its
// pieces.
func TestPayloadSmallBodyInMemory(t *testing.T) {
	small := piecesPayload([][]byte{[]byte(`{"model":`), []byte(`"m"`), []byte(`}`)})
	large := piecesPayload([][]byte{[]byte(`{"x":"`), bytes.Repeat([]byte("a"), joinBelow), []byte(`"}`)})
	for _, tc := range []struct {
		p        payload
		inMemory bool
	}{{small, true}, {large, false}} {
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/", nil)
		tc.p.attach(req)
		for range 2 {
			_, inMemory := unwrapNop(req.Body).(*bytes.Reader)
			if inMemory != tc.inMemory {
				t.Fatalf("body of %d bytes: %T, in memory %v, want %v", tc.p.size, unwrapNop(req.Body), inMemory, tc.inMemory)
			}
			if got, _ := io.ReadAll(req.Body); !bytes.Equal(got, tc.p.Bytes()) {
				t.Fatalf("body of %d bytes reads %d bytes", tc.p.size, len(got))
			}
			req.Body, _ = req.GetBody()
		}
	}
}

// unwrapNop is the reader inside io.NopCloser, as net/http unwraps it.
func unwrapNop(rc io.ReadCloser) io.Reader {
	v := reflect.ValueOf(rc)
	if v.Kind() == reflect.Struct && v.NumField() == 1 {
		if r, ok := v.Field(0).Interface().(io.Reader); ok {
			return r
		}
	}
	return rc
}
