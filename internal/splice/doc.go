// Package splice joins a continuation onto a stream that broke after its
// commit point, in the client's own dialect (Chat Completions, Anthropic
// Messages or the Responses API), so the client sees one stream.
//
// It is pure: no clock, no I/O. The relay hands a Recorder every event of
// the committed stream, in the client's dialect, before the pacer gets it;
// the Recorder forwards most at once and holds a few back (from the first
// tool call, or the answer's finish, to the stream's end event), so that a
// break never leaves the client half a tool call or a finish followed by
// more text. When the stream breaks, the Recorder's Seam says what the
// client was handed: the answer text (the continuation's prefix), the
// reasoning, where the break fell. The relay asks the next target to
// continue, and the Seam's Splicer rewrites that target's stream, event by
// event, into the rest of the first: one id, indices and sequence numbers
// that go on, no second start, the text that repeats the seam's tail
// dropped (see Overlap). The spliced events go through the same Recorder,
// so a continuation that breaks in turn can be continued again.
package splice
