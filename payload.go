package llmrelay

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"slices"
)

// payload is the body of one upstream request as pieces written one after
// the other: the client's own bytes where the relay changed nothing, the
// relay's edits between them (see jsonobj.Pieces). A megabyte prompt goes
// to the upstream straight from the buffer it was read into, never copied
// into a second one.
type payload struct {
	parts [][]byte // nil: no body at all
	size  int
	buf   *bodyBuffer // the pooled buffer the parts point into, or nil
}

func piecesPayload(parts [][]byte) payload {
	p := payload{parts: parts}
	for _, b := range parts {
		p.size += len(b)
	}
	return p
}

// bytesPayload is the body b (nil: none).
func bytesPayload(b []byte) payload {
	if b == nil {
		return payload{}
	}
	return payload{parts: [][]byte{b}, size: len(b)}
}

// Bytes is the body in one slice, for the few readers that need one (a
// prompt estimate, tests). One piece is returned as it is.
func (p payload) Bytes() []byte {
	if len(p.parts) == 1 {
		return p.parts[0]
	}
	return bytes.Join(p.parts, nil)
}

// attach makes p the body of req, with GetBody, so the transport can send
// it again on a fresh connection when a reused one turns out closed.
func (p payload) attach(req *http.Request) {
	req.ContentLength = int64(p.size)
	if p.size == 0 {
		req.Body, req.GetBody = http.NoBody, func() (io.ReadCloser, error) { return http.NoBody, nil }
		return
	}
	if p.size < joinBelow && len(p.parts) > 1 {
		p.parts, p.buf = [][]byte{p.Bytes()}, nil // a copy: the buffer is not needed
	}
	body := func() io.ReadCloser {
		if p.buf == nil {
			return io.NopCloser(p.reader())
		}
		// The transport may read the body after RoundTrip returns (an
		// answer that came before the whole body went out); it closes
		// the body when done, and only then may the buffer be reused.
		return &heldBody{Reader: p.reader(), release: p.buf.hold()}
	}
	req.Body = body()
	req.GetBody = func() (io.ReadCloser, error) { return body(), nil }
}

// heldBody is an upstream request body read from a pooled buffer, which it
// holds until closed.
type heldBody struct {
	io.Reader
	release func()
}

func (b *heldBody) Close() error {
	b.release()
	return nil
}

// joinBelow is the body size under which the pieces are joined into one
// slice. net/http writes a request's headers and a body it knows to be in
// memory (a *bytes.Reader) in one write, but flushes the headers on their
// own before any other body: a system call per request, more than joining
// a small body costs. A large body is sent from its pieces (one extra
// write, against a copy of the whole prompt).
const joinBelow = 64 << 10

// reader reads the body from its start: one piece as a *bytes.Reader,
// several as net.Buffers (its own copy of the slice headers, which
// reading consumes; the bytes are shared and never written).
func (p payload) reader() io.Reader {
	if len(p.parts) == 1 {
		return bytes.NewReader(p.parts[0])
	}
	bufs := net.Buffers(slices.Clone(p.parts))
	return &bufs
}
