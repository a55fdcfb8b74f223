// Package chat holds what the relay knows of OpenAI Chat Completions
// beyond what the re-pacer reads (internal/pace): its endpoints and
// headers, the wire types the translators of the other dialects write (Chat
// Completions is the pivot they translate through), and the reasoning
// field rename that gives clients one name for reasoning text whatever
// the provider calls it, and the assembler that turns a stream's chunks
// into one chat.completion (with a reasoning trace) for a client that
// asked for no stream.
//
// Pure: bytes in, bytes out, no Caddy imports.
package chat
