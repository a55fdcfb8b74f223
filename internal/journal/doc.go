// Package journal keeps what a client was sent of a stream, event by
// event, so that a client whose connection broke can resume it: from a
// cursor (the SSE Last-Event-ID, or a Responses sequence_number), on any
// edge that can read the journal, while the stream is still being written
// and for a while after it ended.
//
// It is pure: no network, the clock a parameter. Three pieces:
//
//   - Splitter cuts the bytes the relay writes to a client into SSE event
//     blocks, whatever their line endings, and says which are comments
//     only (heartbeats, the relay's own notes): those go to a connected
//     client but are not journaled, since a resumed client has no use
//     for a heartbeat that was due minutes ago.
//   - Render writes a journaled event as a client is sent it, live or
//     replayed: an `id:` line naming the stream and the event's position,
//     the first event also a `retry:` hint, then the block itself. A
//     replay is byte for byte what the live client got.
//   - Buffer is one stream's journal in memory, bounded in bytes (the
//     oldest events go first, counted), with a channel that wakes the
//     readers that follow it live; Store holds the buffers of one
//     instance, bounded in number, each kept for a TTL after its end, and
//     the indexes that find a stream again: by a Responses id, by an
//     Idempotency-Key, or by the hash of the request that started it.
//
// Ids are unguessable (128 random bits) and every lookup names the key
// that asks: a stream belongs to the key name that started it, and to no
// other, which finds nothing rather than a refusal.
package journal
