// Package pace re-paces an OpenAI chat.completion.chunk SSE stream, an
// Anthropic Messages stream or an OpenAI Responses stream (Config.Format): it
// turns clustered upstream text (hundreds of deltas in a few milliseconds,
// then seconds of silence) into a steady flow of events, with a hard bound
// on the delay it adds, and without losing, reordering or corrupting a byte
// of text.
//
// The pieces, each usable alone:
//
//   - [Classify] (chunk.go) decides what an upstream block is: a splittable
//     text delta, or anything else, which passes unsplit (a barrier).
//     [ClassifyMessages] (chunk_messages.go) does the same for Messages
//     events; messages.go holds the Pacer's Messages-only rules (thinking
//     blocks hidden whole and later blocks renumbered, usage merged).
//     [ClassifyResponses] (chunk_responses.go) and responses.go do the same
//     for Responses events (sequence numbers rewritten, reasoning events
//     hidden, usage from response.completed).
//   - [Pacer] (pacer.go) is the scheduler: a FIFO of items and per-lane rate
//     control, driven by explicit times, with no goroutines and no clock of
//     its own, so it is tested on made-up timelines.
//   - share (share.go) divides split-reasoning's ticks between the lanes
//     by Config.SplitRatio while both have text queued, each lane's bound
//     kept over it.
//   - [Run] (stream.go) drives a Pacer for one HTTP stream: a reader
//     goroutine, one timer, heartbeats and back-pressure.
//
// Rules that hold whatever the timing:
//
//   - One FIFO for everything: a text item may be split (its front sent,
//     the rest kept at the head) or merged with the next ones, but it never
//     overtakes anything, so per channel the output text equals the input.
//   - Only the text value of a chunk changes; the rest of its JSON is kept
//     byte for byte (a Messages block index lowered after hidden thinking
//     blocks, and a Responses sequence_number renumbered so it stays
//     strictly increasing, are the exceptions). A chunk sent whole is sent
//     as the upstream's exact bytes, but for those numbers.
//   - Every text byte leaves by its arrival time plus its lane's max delay.
//
// The package has no Caddy imports.
package pace
