package sse

import (
	"bytes"
	"errors"
)

// ErrEventTooLarge is returned when one block exceeds the reader's cap.
var ErrEventTooLarge = errors.New("sse: event exceeds size limit")

var doneData = []byte("[DONE]")

// Event is one block of an SSE stream: everything up to and including the
// blank line that ends it.
//
// The slices of an Event returned by [Reader.Next] point into the reader's
// buffer and are valid only until the next call to Next. Use [Event.Clone]
// to keep an Event longer. The strings are ordinary Go strings and stay
// valid.
type Event struct {
	// Raw holds the exact bytes of the block as received, including its
	// terminating blank line, any blank lines that preceded it, and the BOM
	// if this is the first block. Writing Raw of every block in order
	// reproduces the input byte for byte, unless the reader normalises
	// line endings (see [Reader.NormalizeLineEndings]).
	Raw []byte

	// Type is the value of the last "event" field, "" if none.
	Type string

	// Data holds the values of the "data" fields joined with '\n' (no
	// trailing '\n'). It is nil if the block had no data field and empty,
	// not nil, if it had only empty ones.
	Data []byte

	// HasData reports whether at least one data field was present.
	HasData bool

	// ID is the value of the last valid "id" field of this block; HasID
	// reports whether there was one. An id value containing NUL is ignored.
	ID    string
	HasID bool

	// Retry is the value of the last valid "retry" field, or -1 when absent
	// or invalid.
	Retry int

	// Unterminated is true for a final block that ended at EOF without a
	// blank line.
	Unterminated bool

	// hasField records whether the block had any field line at all,
	// including ignored ones (unknown names, invalid id or retry).
	hasField bool
}

// IsComment reports whether the block had no fields at all (only comment
// lines, or only blank lines), e.g. ": keep-alive\n\n". A block with an
// unknown or invalid field is not a comment.
func (e *Event) IsComment() bool { return !e.hasField }

// IsDone reports whether Data is exactly "[DONE]" (the OpenAI stream
// terminator).
func (e *Event) IsDone() bool { return bytes.Equal(e.Data, doneData) }

// Clone returns a copy of e whose slices do not alias the reader's buffer.
// Nil slices stay nil and empty ones stay empty.
func (e Event) Clone() Event {
	c := e
	c.Raw = cloneBytes(e.Raw)
	c.Data = cloneBytes(e.Data)
	return c
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}
