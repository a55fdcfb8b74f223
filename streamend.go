package llmrelay

import (
	"errors"
	"strconv"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
)

// brokenEnd is what the relay makes of a stream that ended without its
// end event, however it was read (pace.Run relaying it to the client, or
// an answer assembled from it): why, for the failover log, and the in-band
// error a committed stream ends with. The one place that words these.
type brokenEnd struct {
	why       string // for the failover log and the 502 summary
	code, msg string // the client's in-band error (committed streams); "": none is added
	idle      bool   // stream_idle_timeout cut it off
	health    bool   // counted against the target (recordBroken)
}

// classifyEnd says what a stream's end means. ok is false for a clean
// end: the end event, an end at EOF where the endpoint's streams have no
// end event, the client gone, the reasoning budget (handled by its
// action), or the upstream's own error event forwarded to the client by
// Run (sawError, with nothing to add). err is the read error of
// pace.EndBroken, cause the attempt's context's cause.
func (h *Relay) classifyEnd(ep endpoint, end pace.End, sawError bool, err, cause error, errCode string) (b brokenEnd, ok bool) {
	switch end {
	case pace.EndEOF:
		if sawError || !ep.endsWithEvent() {
			return b, false
		}
		return brokenEnd{why: "stream ended before it was complete", health: true,
			code: "upstream_stream_truncated", msg: "The upstream closed the stream before it was complete."}, true
	case pace.EndUnterminated:
		return brokenEnd{why: "stream ended in the middle of an event", health: true,
			code: "upstream_stream_truncated", msg: "The upstream closed the stream in the middle of an event."}, true
	case pace.EndErrorEvent:
		return brokenEnd{why: "error event after data: " + errCode, health: true}, true
	case pace.EndTooLarge:
		return brokenEnd{why: "stream larger than " + strconv.Itoa(maxAnswer>>20) + " MiB: not assembled"}, true
	case pace.EndBroken:
		if ue, isUnreadable := errors.AsType[*chat.UnreadableError](err); isUnreadable {
			// A translator met an upstream event it cannot translate
			// faithfully: what came before it is out, what follows is
			// not sent, and the client is told, in every dialect the same
			// way. The reason names what was wrong, never the upstream's
			// bytes.
			return brokenEnd{why: ue.Error(), health: true, code: "upstream_event_unreadable",
				msg: "The upstream sent an event the relay cannot read (" + ue.Reason + "); the stream was ended."}, true
		}
		if errors.Is(cause, errStreamIdle) {
			return brokenEnd{why: "stream idle for stream_idle_timeout " + h.streamIdle.String(), idle: true, health: true,
				code: "upstream_timeout", msg: "The upstream sent nothing for " + h.streamIdle.String() + " (stream_idle_timeout); the stream was ended."}, true
		}
		return brokenEnd{why: logDetail(&publicError{msg: "stream broke", cause: err}), health: true,
			code: "upstream_stream_interrupted", msg: "The upstream stream broke off before it was complete."}, true
	}
	return b, false
}
