package sse

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

const (
	// DefaultMaxEvent is the block size cap used when NewReader is given a
	// cap <= 0.
	DefaultMaxEvent = 16 << 20

	defaultBufSize = 4 << 10 // initial buffer size; grows as needed
	minReadSize    = 512     // compact before reading into less than this
	maxEmptyReads  = 100     // consecutive (0, nil) reads before io.ErrNoProgress
)

var bom = []byte{0xEF, 0xBB, 0xBF}

// Reader splits an event stream into blocks. It is not safe for concurrent
// use.
//
// Reader keeps its own growable buffer (rather than a bufio.Scanner, whose
// token size is capped at 64 KiB by default) so that Raw and single-line Data
// can be returned without copying. The buffer grows as needed up to the cap
// given to NewReader (plus one byte) and is not shrunk afterwards.
type Reader struct {
	src io.Reader
	max int

	buf []byte
	w   int   // end of valid data in buf
	err error // read error (sticky, but for ErrPending), ErrEventTooLarge, or io.EOF

	// Scan state. All positions are absolute indices into buf; compact
	// shifts them.
	r         int  // start of the current block (its Raw)
	p         int  // next byte to examine
	ls        int  // start of the current line
	lf        int  // a known '\n' at or after p (stale if < p)
	lfChecked int  // no '\n' in [p, lfChecked) when lf is stale
	skipLF    bool // previous line ended with CR: skip an LF at p
	bomDone   bool // the start of the stream has been checked for a BOM

	// Line ending normalisation; see NormalizeLineEndings.
	normalize bool
	loneCR    bool   // the current block has a CR line ending not followed by LF
	dropLF    bool   // the last block ended in a CR, written as LF: drop an LF at p
	norm      []byte // Raw of the last normalised block

	// State of the block being parsed.
	content  bool // block has a non-blank line
	hasField bool
	dataN    int    // number of data fields
	dataS    int    // first data value is buf[dataS:dataE] (when dataN == 1)
	dataE    int    //
	dataBuf  []byte // joined data values (when dataN > 1)
	typ      string
	id       string
	hasID    bool
	retry    int

	// Last converted strings, reused when the same value repeats.
	lastType string
	lastID   string

	beforeRead func() // called before each read of src; see BeforeRead
}

// BeforeRead sets a function called right before each read of the
// underlying stream, that is, whenever every complete block already
// received has been returned. A relay flushes its output there: one flush
// per upstream read instead of one per event, with no event held back.
func (r *Reader) BeforeRead(f func()) { r.beforeRead = f }

// NormalizeLineEndings makes the reader re-emit, in Raw, every block that
// has a lone CR line ending (a CR not followed by LF) with LF line endings:
// the same lines in the same order with the same bytes, the BOM and leading
// blank lines included, only every line ending of the block (CR, and CRLF
// too) becomes one LF. Blocks whose line endings are all LF or CRLF keep
// their exact bytes (but see the last paragraph), and the parsed fields
// never change. Call it before the first Next. It returns r, so that it
// can follow NewReader:
//
//	rd := sse.NewReader(body, 0).NormalizeLineEndings()
//
// A relay needs this because the official OpenAI SDKs (and most LF-only
// parsers) split lines on LF and not on a lone CR: a CR-only stream reaches
// them as one endless line, and an event the relay writes after a block that
// ends in a bare CR ("\r\r", "\n\r") is glued to that block's last line.
// With normalisation every complete block ends in LF, so whatever follows it
// starts on a fresh line.
//
// A block whose final CR is the last byte read so far is returned at once,
// as always, so its Raw ends in an LF written for that CR; if the next byte
// turns out to be the LF of a CRLF, that LF is dropped rather than starting
// the next block's Raw. Concatenating Raw then reproduces the input with
// some line endings changed, never a line added or lost.
func (r *Reader) NormalizeLineEndings() *Reader {
	r.normalize = true
	return r
}

// NewReader returns a Reader that reads blocks from src. maxEvent caps the
// size of one block (the length of its Raw) in bytes; maxEvent <= 0 means
// DefaultMaxEvent (16 MiB). A block whose blank line ends in CRLF is
// accepted if it fits without the final LF; the LF then starts the next
// block, as when the CR is the last byte of a read.
func NewReader(src io.Reader, maxEvent int) *Reader {
	return newReaderSize(src, maxEvent, defaultBufSize)
}

// newReaderSize lets tests start with a tiny buffer to exercise growth and
// compaction.
func newReaderSize(src io.Reader, maxEvent, bufSize int) *Reader {
	if maxEvent <= 0 {
		maxEvent = DefaultMaxEvent
	}
	if bufSize > maxEvent+1 {
		bufSize = maxEvent + 1
	}
	var buf []byte
	if bufSize == defaultBufSize {
		buf = *readBuffers.Get().(*[]byte)
	} else {
		buf = make([]byte, bufSize)
	}
	return &Reader{src: src, max: maxEvent, buf: buf, lf: -1, retry: -1}
}

// readBuffers are the initial buffers of readers, given back by Release.
var readBuffers = sync.Pool{New: func() any { b := make([]byte, defaultBufSize); return &b }}

// ErrReleased is what a Reader returns after Release.
var ErrReleased = errors.New("sse: reader released")

// ErrPending is what a stream that is fed rather than read says when it
// has no more bytes for now: the underlying io.Reader returns it (with
// no bytes) to a Reader driven from its writer's own call, which has
// handed over everything it was given and must not block. Unlike every
// other error it is not sticky: Next returns it once every complete
// block is out (a partial block stays buffered), and reads on at the
// next call. A [Pump] passes it on without keeping it either.
var ErrPending = errors.New("sse: no more bytes for now")

// Release hands the reader's buffer back for a later reader, when the
// stream is over: the events it returned point into that buffer and must
// not be used after. Next returns ErrReleased from then on.
func (r *Reader) Release() {
	if r.buf == nil {
		return
	}
	if cap(r.buf) == defaultBufSize { // a grown buffer is left to the collector
		b := r.buf[:defaultBufSize]
		readBuffers.Put(&b)
	}
	r.buf, r.err = nil, ErrReleased
}

// Next returns the next block of the stream.
//
// Blocks without data (comment-only keep-alives, blocks with only event, id
// or retry fields) are returned too. Blank lines outside any block are
// prepended to Raw of the next block (see the package documentation).
//
// At EOF with a pending partial block, Next returns that block with
// Unterminated set and a nil error, and io.EOF on the following call; a clean
// EOF returns io.EOF. A block longer than the cap yields ErrEventTooLarge.
// Read errors from the underlying reader are returned as they are, after the
// complete blocks already buffered; bytes of a partial block pending at that
// point are dropped. All errors but ErrPending are sticky.
//
// The slices of the returned Event are valid only until the next call to
// Next; use [Event.Clone] to keep them.
func (r *Reader) Next() (Event, error) {
	if r.buf == nil {
		return Event{}, ErrReleased
	}
	for {
		if r.err == ErrEventTooLarge {
			return Event{}, r.err
		}
		if r.scan() {
			if r.p-r.r > r.max {
				r.err = ErrEventTooLarge
				return Event{}, r.err
			}
			return r.dispatch(r.p, false), nil
		}
		if r.err == ErrPending {
			r.err = nil // the next call reads again: see ErrPending
			return Event{}, ErrPending
		}
		if r.err != nil {
			if r.err == io.EOF && r.w > r.r {
				return r.finishEOF()
			}
			return Event{}, r.err
		}
		if r.w-r.r > r.max {
			r.err = ErrEventTooLarge
			return Event{}, r.err
		}
		r.fill()
	}
}

// scan parses buffered lines until a block is complete, in which case it
// returns true with r.p just past the block. Otherwise it consumes all
// buffered complete lines and returns false.
func (r *Reader) scan() bool {
	buf := r.buf[:r.w]
	if !r.bomDone {
		n := r.w // r.r == 0 before the first block
		// More bytes may follow: the stream has not ended or failed.
		more := r.err == nil || r.err == ErrPending
		if n < len(bom) && more && bytes.HasPrefix(bom, buf[:n]) {
			return false // need more bytes to decide
		}
		if bytes.HasPrefix(buf, bom) {
			r.p, r.ls = len(bom), len(bom)
		}
		r.bomDone = true
	}
	for {
		if r.skipLF {
			if r.p == r.w {
				return false
			}
			r.skipLF = false
			if buf[r.p] == '\n' {
				r.p++
				r.ls = r.p
				if r.dropLF {
					// The CR before it ended the last block and
					// went out as LF: this LF is already written.
					r.r = r.p
				}
			} else if r.p > r.r {
				r.loneCR = true
			}
			r.dropLF = false
		}
		// Find the next line terminator: the first CR or LF at or after p.
		end := r.nextLF()
		lim := end
		if lim < 0 {
			lim = r.w
		}
		t := bytes.IndexByte(buf[r.p:lim], '\r')
		if t >= 0 {
			t += r.p
		} else if end >= 0 {
			t = end
		} else {
			r.p = r.w
			return false
		}
		line := buf[r.ls:t]
		r.p = t + 1
		if buf[t] == '\r' {
			r.skipLF = true
		}
		if len(line) == 0 {
			if r.content {
				// Blank line: the block ends here. Take the LF of a
				// CRLF along if it is already buffered and fits
				// under the cap.
				if r.skipLF && r.p < r.w && buf[r.p] == '\n' && r.p-r.r < r.max {
					r.p++
					r.skipLF = false
				}
				return true
			}
			// Blank line before any content: kept in Raw, no meaning.
		} else {
			r.content = true
			r.parseLine(r.ls, t)
		}
		r.ls = r.p
	}
}

// nextLF returns the index of the first '\n' in buf[p:w], or -1, caching the
// result so that lines ending in lone CRs do not rescan the buffer.
func (r *Reader) nextLF() int {
	if r.lf >= r.p {
		return r.lf
	}
	from := max(r.p, r.lfChecked)
	if i := bytes.IndexByte(r.buf[from:r.w], '\n'); i >= 0 {
		r.lf = from + i
		r.lfChecked = r.lf
		return r.lf
	}
	r.lf = -1
	r.lfChecked = r.w
	return -1
}

// finishEOF returns the pending bytes at EOF as a final block.
func (r *Reader) finishEOF() (Event, error) {
	if r.w-r.r > r.max {
		r.err = ErrEventTooLarge
		return Event{}, r.err
	}
	// scan returned false, so r.p == r.w and buf[r.ls:r.w] is the
	// trailing line without a line ending.
	if r.ls < r.w {
		r.content = true
		r.parseLine(r.ls, r.w)
	}
	r.p, r.ls = r.w, r.w
	return r.dispatch(r.w, r.content), nil
}

// dispatch builds the Event for buf[r.r:end] and resets the block state.
func (r *Reader) dispatch(end int, unterminated bool) Event {
	raw := r.buf[r.r:end:end]
	r.dropLF = false
	if r.normalize && (r.loneCR || r.skipLF) {
		// skipLF: the block ends in a CR whose next byte is not here
		// yet. It becomes LF now; a following LF is dropped.
		r.norm = appendLF(r.norm[:0], raw)
		raw = r.norm[:len(r.norm):len(r.norm)]
		r.dropLF = r.skipLF
	}
	ev := Event{
		Raw:          raw,
		Type:         r.typ,
		HasData:      r.dataN > 0,
		ID:           r.id,
		HasID:        r.hasID,
		Retry:        r.retry,
		Unterminated: unterminated,
		hasField:     r.hasField,
	}
	switch {
	case r.dataN == 1:
		ev.Data = r.buf[r.dataS:r.dataE:r.dataE]
	case r.dataN > 1:
		ev.Data = r.dataBuf[:len(r.dataBuf):len(r.dataBuf)]
	}
	r.r = end
	r.ls = r.p
	r.content = false
	r.loneCR = false
	r.hasField = false
	r.dataN = 0
	r.typ = ""
	r.id = ""
	r.hasID = false
	r.retry = -1
	return ev
}

// appendLF appends raw to dst with every line ending (CR, LF or CRLF)
// written as LF. In SSE a CR is always a line ending.
func appendLF(dst, raw []byte) []byte {
	for {
		i := bytes.IndexByte(raw, '\r')
		if i < 0 {
			return append(dst, raw...)
		}
		dst = append(dst, raw[:i]...)
		dst = append(dst, '\n')
		raw = raw[i+1:]
		if len(raw) > 0 && raw[0] == '\n' {
			raw = raw[1:]
		}
	}
}

// fill reads more data into the buffer, compacting or growing it first if
// needed. It reads at least one byte or sets r.err.
func (r *Reader) fill() {
	if r.r > 0 && len(r.buf)-r.w < minReadSize {
		r.compact()
	}
	if r.w == len(r.buf) {
		// r.r == 0 here, and Next guarantees r.w <= r.max.
		n := min(2*len(r.buf), r.max+1)
		nb := make([]byte, n)
		copy(nb, r.buf[:r.w])
		r.buf = nb
	}
	if r.beforeRead != nil {
		r.beforeRead()
	}
	for range maxEmptyReads {
		n, err := r.src.Read(r.buf[r.w:])
		if n < 0 || n > len(r.buf)-r.w {
			panic("sse: reader returned invalid count")
		}
		r.w += n
		if err != nil {
			r.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.err = io.ErrNoProgress
}

// compact moves the current partial block to the start of the buffer.
func (r *Reader) compact() {
	s := r.r
	copy(r.buf, r.buf[s:r.w])
	r.w -= s
	r.r = 0
	r.p -= s
	r.ls -= s
	r.lf -= s
	r.lfChecked -= s
	r.dataS -= s
	r.dataE -= s
}
