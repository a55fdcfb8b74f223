// Package sse reads and writes Server-Sent Events (text/event-stream) in a
// form suited to a byte-exact streaming relay.
//
// # Parsing rules
//
// [Reader] follows the event-stream parsing rules of the WHATWG HTML
// standard (§9.2.6 "Interpreting an event stream"):
//
//   - One UTF-8 byte order mark (EF BB BF) at the very start of the stream is
//     ignored. A BOM anywhere else, including a second one right after the
//     first, is ordinary data.
//   - Lines end with CRLF, a lone CR or a lone LF. A CR that is the last byte
//     of a read may be the first half of a CRLF; the reader never waits for
//     the next byte to decide, it ends the line at the CR and skips an LF that
//     immediately follows it.
//   - A blank line ends a block. Blank lines before the first line of a block
//     do not end anything; see "Blank lines" below.
//   - A line starting with ':' is a comment.
//   - "name:value" is a field; one space directly after the colon is removed
//     from the value. A line without a colon is a field whose name is the
//     whole line and whose value is empty.
//   - "data" values are joined with '\n'; "event" sets the event type; "id"
//     sets the event ID unless the value contains NUL; "retry" is used only if
//     its value is a non-empty string of ASCII digits that fits in an int.
//     Unknown fields are ignored.
//
// Two deliberate departures from the standard, both needed by a relay:
//
//   - A block is returned even if it has no data (comments, keep-alives,
//     blocks with only event/id/retry fields), because a relay forwards them.
//   - A final block cut off by EOF before its blank line is returned, with
//     [Event.Unterminated] set, instead of being discarded. A trailing line
//     without a line ending is parsed as if it had one. This lets the relay
//     see an unterminated "data: [DONE]".
//
// The ID of an event is reported per block ([Event.ID], [Event.HasID]); the
// standard's "last event ID" that persists across events is left to the
// caller.
//
// # Raw bytes
//
// Every [Event] carries Raw, the exact bytes of its block as received. A
// relay that forwards Raw instead of re-encoding the parsed fields keeps the
// upstream framing byte for byte (line endings, comments, field order,
// spacing, unknown fields), so the downstream client sees exactly what the
// upstream sent, and the relay never has to decide how to re-serialize
// something it does not understand. Concatenating Raw of every block that
// Next returns reproduces the input exactly.
//
// The one exception is opt-in: with [Reader.NormalizeLineEndings], a block
// that has a lone CR line ending is re-emitted with LF line endings, because
// the official OpenAI SDKs and most other clients split lines on LF only. A
// relay forwarding such Raw keeps every line and field byte, and every block
// it forwards ends in LF, so the events it writes itself (heartbeats, error
// events) always start on a fresh line.
//
// # Blank lines
//
// Blank lines that appear where no block has started (for example the third
// "\n" in "data: x\n\n\n") carry no meaning. They are kept at the start of Raw
// of the next block so that no byte is lost. If the stream ends after such
// blank lines, they are returned as a final block that has no fields
// ([Event.IsComment] reports true) and Unterminated false.
//
// Because the reader never waits after a CR, the LF of a CRLF that ends a
// block may, when the CR was the last byte of a read, show up as the first
// byte of the next block's Raw instead of the last byte of this one. The
// parsed fields do not depend on how the input was split into reads.
//
// # Writing
//
// [AppendData] and [AppendComment] build well-formed blocks for events the
// relay generates itself; [Templates] makes the blocks a translator
// writes, as [NewEvent] does, at a fraction of its cost.
//
// # Sources
//
// A [Source] yields blocks one at a time: a Reader, or something that
// wraps one, such as a translator into another dialect ([Pump] is its
// pull loop). Its optional [BeforeReader] hook runs before each read of
// the underlying stream; a wrapper forwards it with [ForwardBeforeRead].
package sse
