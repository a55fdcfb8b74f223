// Package chat holds what the relay knows of OpenAI Chat Completions
// beyond what the re-pacer reads (internal/pace): the reasoning field
// rename that gives clients one name for reasoning text whatever the
// provider calls it.
//
// Pure: bytes in, bytes out, no Caddy imports.
package chat
