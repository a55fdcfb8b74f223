package sse

// Source yields the blocks of a stream one at a time: a *Reader, or
// something wrapping one (a translator into another dialect, a meter).
// Once every block is out, Next returns the stream's error, io.EOF at its
// end.
type Source interface {
	Next() (Event, error)
}

// BeforeReader is the optional hook of a Source: f is called right before
// each read of the underlying stream (see [Reader.BeforeRead]), so that a
// relay flushes its output once per upstream read. A Source that wraps
// another yields its blocks while reading that one, so the inner reads are
// the stream's: it has the hook too and forwards it with
// [ForwardBeforeRead].
type BeforeReader interface {
	BeforeRead(f func())
}

// ForwardBeforeRead hands f to src when src has the hook, and reports
// whether it had.
func ForwardBeforeRead(src Source, f func()) bool {
	br, ok := src.(BeforeReader)
	if ok {
		br.BeforeRead(f)
	}
	return ok
}
