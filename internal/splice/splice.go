package splice

import (
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// Dialect is the wire format of the client's stream.
type Dialect uint8

const (
	Chat      Dialect = iota // OpenAI Chat Completions chunks, ending with [DONE]
	Messages                 // Anthropic Messages events, ending with message_stop
	Responses                // OpenAI Responses events, ending with response.completed (or .incomplete)
)

func (d Dialect) String() string {
	switch d {
	case Messages:
		return "messages"
	case Responses:
		return "responses"
	}
	return "chat"
}

// Recorder watches one committed stream. Every event of the stream goes
// through Pass, in order: the pre-commit events the relay held (comments,
// Anthropic's message_start), the rest as read, and later the Splicer's
// output for a continuation.
type Recorder interface {
	// Pass takes one event (its slices valid only during the call) and
	// returns the events to forward to the client now, in order: none when
	// it is held, several when a held group is released. The returned
	// events stay valid until the next call of Pass.
	Pass(ev sse.Event) []sse.Event
	// Seam describes what the client was handed, when the stream broke:
	// what Pass returned so far (held events are discarded: the client
	// never gets them). Called at most once per break; Pass may be called
	// again after it, with the continuation's spliced events.
	Seam() *Seam
	// Overflow reports that the stream outgrew the recorder's bound
	// (NewRecorder's maxBytes): it can no longer describe a seam, and a
	// break ends the stream with an error as without continuation.
	Overflow() bool
	// Release hands the recorder's memory back for another stream's,
	// once the stream is over: nothing of it (or of a Seam's splicer) is
	// used after. Optional to call; a recorder is not used after it.
	Release()
}

// NewRecorder returns the Recorder for streams of dialect d, keeping at
// most maxBytes of what it needs to describe a seam.
func NewRecorder(d Dialect, maxBytes int) Recorder {
	switch d {
	case Messages:
		return newMessagesRecorder(maxBytes)
	case Responses:
		return newResponsesRecorder(maxBytes)
	}
	return newChatRecorder(maxBytes)
}

// Seam is where a stream broke: what its client was handed.
type Seam struct {
	// Answer is the answer text the client was handed (all its text
	// blocks, items or content, in order): the continuation's prefix.
	Answer string
	// Reasoning is the reasoning text the client was handed.
	Reasoning string
	// InReasoning: the break fell in the reasoning, before any answer text
	// or tool call. The next target starts over (it cannot continue
	// another model's hidden reasoning): Options.Reasoning says what the
	// client's reasoning lane gets.
	InReasoning bool
	// Discarded counts the held events dropped at the break (a partial
	// tool call, a finish without its end event): never sent.
	Discarded int
	// InToolCall: the discarded events hold a tool call (its start, or
	// part of it): the break fell inside one, not only after a finish
	// held for its end event.
	InToolCall bool
	// ToolCalls counts the complete tool calls the client was handed
	// (with holding on, 0: they are held to the end of the stream).
	ToolCalls int
	// OutputTokens estimates the tokens the client was handed (answer and
	// reasoning), for usage when the broken attempt reported none.
	OutputTokens int

	splicer func(Options) Splicer // the dialect's
}

// Splicer returns the rewriter of a continuation stream for this seam.
func (s *Seam) Splicer(o Options) Splicer { return s.splicer(o) }

// Splicer rewrites a continuation's stream, in the client's dialect, into
// the rest of the broken stream.
type Splicer interface {
	// Next takes one event of the continuation (slices valid only during
	// the call) and returns what the client gets for it, in order: none
	// (a second start, a role chunk, text that repeats the seam, text
	// held while the overlap is being decided), one, or several. The
	// returned events stay valid until the next call.
	Next(ev sse.Event) []sse.Event
}

// ReasoningRestart is what the client's reasoning lane gets when the
// break fell in the reasoning and the next target reasons again.
type ReasoningRestart uint8

const (
	// Mark sends Marker on the reasoning lane, then the new reasoning.
	Mark ReasoningRestart = iota
	// Hide drops the continuation's reasoning: the client's reasoning
	// stops at the break, and the answer follows.
	Hide
)

// Marker separates the broken reasoning from the new target's, on the
// client's reasoning lane (docs/continuation.md).
const Marker = "\n\n[reasoning restarted on another model]\n\n"

// Options configure a Splicer.
type Options struct {
	// Reasoning: what the reasoning lane gets when Seam.InReasoning.
	// After the answer began, the continuation's own reasoning is always
	// dropped (counted in its usage, never shown after answer text).
	Reasoning ReasoningRestart
	// MaxOverlap bounds the continuation's leading text dropped because
	// it repeats the seam's tail, in runes: 0 is DefaultMaxOverlap, < 0
	// drops nothing.
	MaxOverlap int
	// Earlier is the usage of the attempts before the continuation (the
	// relay's estimate when they reported none): added to the
	// continuation's in every usage field the client reads, so the client
	// is told what it pays for.
	Earlier usage.Usage
	// Comment, when set, is sent as one SSE comment block (": " Comment)
	// before the continuation's first event, so a reader of the raw
	// stream sees the seam. SDKs ignore comments.
	Comment string
}

// DefaultMaxOverlap is Options.MaxOverlap's default, in runes.
const DefaultMaxOverlap = 256
