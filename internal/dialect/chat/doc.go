// Package chat holds what the relay knows of OpenAI Chat Completions
// beyond what the re-pacer reads (internal/pace): its endpoints and
// headers, the wire types the translators of the other dialects write (Chat
// Completions is the pivot they translate through), and the reasoning
// field rename that gives clients one name for reasoning text whatever
// the provider calls it, and the assembler that turns a stream's chunks
// into one chat.completion (with a reasoning trace) for a client that
// asked for no stream.
//
// For the translators from Chat to the other dialects it also holds what
// they share: ReadDelta and ReadAnswer, which read a chunk's or an
// answer's one choice in every shape providers send (content as a string
// or an array of parts, reasoning under either name, refusals, tool calls
// with or without an index) and say when it cannot be read faithfully
// (UnreadableError); and the Sequencer, which orders a stream's
// interleaved text and tool calls into the one block at a time the
// Messages and Responses formats require.
//
// It declares the codec surface every dialect package has (Codec: a
// dialect's request, response, error and stream translations to and from
// Chat, with one Options; Pivot is Chat's own), with what the translators
// share: RequestError, UnreadableError and ErrNotSupported, OpenAI's
// error shape and status table (ErrorBody, ErrorType), and the
// ChunkWriter that writes the chunks of a stream translated into Chat.
//
// Pure: bytes in, bytes out, no Caddy imports.
package chat
