package chat

import "fmt"

// UnreadableError is what a stream translator returns from Next when an
// upstream event cannot be translated faithfully: a chunk that is not
// JSON, a choice the request never asked for, an event of the upstream's
// own dialect that contradicts what came before. Every translator (to
// and from Chat, whatever the pair) returns this one type after the
// events it made before the bad one, and nothing after it, so that the
// relay ends every dialect's stream the same way: failover before the
// commit point, one in-band error event after it, never a clean end with
// something missing.
type UnreadableError struct {
	// Event is the upstream event's type ("" for a data-only block).
	Event string
	// Reason says what was wrong, for the log and the client's message:
	// no upstream bytes, which may hold anything.
	Reason string
}

func (e *UnreadableError) Error() string {
	if e.Event != "" {
		return fmt.Sprintf("unreadable upstream event %q: %s", e.Event, e.Reason)
	}
	return "unreadable upstream event: " + e.Reason
}
