package pace

import (
	"fmt"
	"time"
)

// Mode selects what the pacer does with text.
type Mode uint8

const (
	// ModeOff forwards every block unchanged, as it arrives (heartbeats
	// still fill silences).
	ModeOff Mode = iota
	// ModePace paces all text on one lane with MaxDelay.
	ModePace
	// ModeSplit paces reasoning and answer text on separate lanes, each
	// with its own delay bound and rate; queued reasoning drains at a
	// steady rate within ReasoningDrain when the answer starts.
	ModeSplit
)

// ParseMode parses the mode names of the Caddyfile and X-Relay-Mode.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "off":
		return ModeOff, nil
	case "pace":
		return ModePace, nil
	case "split-reasoning":
		return ModeSplit, nil
	}
	return 0, fmt.Errorf("unknown smoothing mode %q (want off, pace or split-reasoning)", s)
}

func (m Mode) String() string {
	switch m {
	case ModePace:
		return "pace"
	case ModeSplit:
		return "split-reasoning"
	}
	return "off"
}

// Format is the SSE dialect of a stream.
type Format uint8

const (
	// FormatChat is an OpenAI Chat Completions stream: data-only
	// chat.completion.chunk events, text in choices[0].delta, [DONE] at
	// the end, usage in a chunk of its own.
	FormatChat Format = iota
	// FormatMessages is an Anthropic Messages stream: typed events
	// (an "event:" line naming the data's "type"), text in
	// content_block_delta events, message_stop at the end, usage split
	// between message_start and message_delta.
	FormatMessages
	// FormatResponses is an OpenAI Responses stream: typed events whose
	// data carries a "sequence_number", text in response.output_text.delta
	// and the reasoning deltas, response.completed (or .incomplete) at the
	// end with the usage inside its response object.
	FormatResponses
)

func (f Format) String() string {
	switch f {
	case FormatMessages:
		return "messages"
	case FormatResponses:
		return "responses"
	}
	return "chat"
}

// BudgetAction is what a stream does when its reasoning passes the budget.
type BudgetAction uint8

const (
	// BudgetTruncate stops forwarding reasoning and lets the answer
	// through.
	BudgetTruncate BudgetAction = iota
	// BudgetFailover ends the stream so the relay can move to the next
	// target, when no answer text has been sent yet (else it truncates).
	BudgetFailover
	// BudgetError ends the stream with an in-band error.
	BudgetError
)

// ParseBudgetAction parses truncate, failover or error.
func ParseBudgetAction(s string) (BudgetAction, error) {
	switch s {
	case "", "truncate":
		return BudgetTruncate, nil
	case "failover":
		return BudgetFailover, nil
	case "error":
		return BudgetError, nil
	}
	return 0, fmt.Errorf("unknown reasoning budget action %q (want truncate, failover or error)", s)
}

// String is the action's name in the config (ParseBudgetAction's).
func (a BudgetAction) String() string {
	switch a {
	case BudgetFailover:
		return "failover"
	case BudgetError:
		return "error"
	}
	return "truncate"
}

// Defaults for zero Config fields.
const (
	DefaultMaxDelay          = 400 * time.Millisecond
	DefaultReasoningMaxDelay = 1500 * time.Millisecond
	DefaultMinInterval       = 30 * time.Millisecond
	DefaultFlush             = 100 * time.Millisecond
	DefaultReasoningDrain    = 300 * time.Millisecond
	DefaultQueueBytes        = 1 << 20
	DefaultTailBytes         = 64 << 10
)

// Config tunes one paced stream. Zero fields take the defaults above,
// except Heartbeat, where zero means no heartbeats.
type Config struct {
	Mode Mode

	// Format is the stream's dialect: FormatChat (the zero value) for
	// OpenAI chat.completion.chunk streams ending in [DONE],
	// FormatMessages for Anthropic Messages streams (typed events ending
	// in message_stop), FormatResponses for OpenAI Responses streams
	// (typed events ending in response.completed or .incomplete). It decides what is text, what ends the stream,
	// where usage is, and how reasoning is hidden.
	Format Format

	// MaxDelay bounds how long answer text (all text in ModePace) may be
	// held; ReasoningMaxDelay does the same for reasoning text in
	// ModeSplit.
	MaxDelay          time.Duration
	ReasoningMaxDelay time.Duration

	// ReasoningDrain bounds, in ModeSplit, how long reasoning still queued
	// when the answer starts may take: it drains at a steady rate over at
	// most this long while the answer flows beside it. Default 300 ms.
	ReasoningDrain time.Duration

	// MinInterval is the spacing of paced emissions: at most one tick per
	// interval while there is a backlog.
	MinInterval time.Duration

	// SplitRatio, in ModeSplit, is the reasoning lane's share of the
	// emissions while both lanes have text queued (0.35: about a third
	// of those ticks send reasoning, the rest answer); each lane's delay
	// bound still holds over it (see share). nil: every tick sends a
	// piece of each lane that has one. Other modes ignore it.
	SplitRatio *float64

	// Heartbeat: after this much silence towards the client, send an SSE
	// comment. Zero: never.
	Heartbeat time.Duration

	// HideReasoning drops reasoning text (reasoning_content, reasoning)
	// from the output; it is still counted. It applies in every mode.
	// In a Messages stream it drops whole thinking and redacted_thinking
	// blocks and renumbers the blocks after them. In a Responses stream
	// it drops the reasoning_text and reasoning_summary_text deltas and
	// the events that repeat their text (their .done events,
	// reasoning_summary_part.added/.done), and renumbers the rest; the
	// reasoning output item itself, and the final response object, are
	// passed as they are.
	HideReasoning bool

	// ReasoningBudget caps the reasoning tokens (estimated from the
	// text) of a stream; 0 = no cap. BudgetAction says what happens when
	// the count passes it.
	ReasoningBudget int
	BudgetAction    BudgetAction

	// Tail, in ModeOff, passes what the upstream sends after the stream's
	// end event ([DONE], message_stop, response.completed or
	// .incomplete), as it comes, until the upstream's body ends, Tail has
	// passed since the end event, or TailBytes more have come; at the
	// bound the upstream read is aborted and the stream ends complete.
	// Zero: the stream ends at its end event. The relay sets it for
	// streams it does not translate, so that `off` is byte-identical to
	// the end (OpenRouter ends its Responses streams with `data: [DONE]`
	// after response.completed).
	Tail time.Duration
	// TailBytes bounds the tail; 0 with a Tail is DefaultTailBytes.
	TailBytes int

	// DropUsage drops the usage-only chunk (empty choices, a usage
	// object), for clients that did not ask for it; its usage is still
	// read. Chat only: Messages and Responses streams always carry their
	// usage.
	DropUsage bool

	// Flush bounds how long queued text may still take once a barrier
	// event, the end event ([DONE], message_stop), an error or the
	// upstream's end arrived.
	Flush time.Duration

	// QueueBytes is the backlog size at which the stream stops reading the
	// upstream until the client has taken some (back-pressure).
	QueueBytes int

	// Timeline, when set, records every event's arrival and emission
	// (and each heartbeat) for the status page; nil records nothing.
	Timeline *Timeline
}

func (c Config) withDefaults() Config {
	if c.MaxDelay <= 0 {
		c.MaxDelay = DefaultMaxDelay
	}
	if c.ReasoningMaxDelay <= 0 {
		c.ReasoningMaxDelay = DefaultReasoningMaxDelay
	}
	if c.MinInterval <= 0 {
		c.MinInterval = DefaultMinInterval
	}
	if c.Flush <= 0 {
		c.Flush = DefaultFlush
	}
	if c.ReasoningDrain <= 0 {
		c.ReasoningDrain = DefaultReasoningDrain
	}
	if c.QueueBytes <= 0 {
		c.QueueBytes = DefaultQueueBytes
	}
	if c.Tail > 0 && c.TailBytes <= 0 {
		c.TailBytes = DefaultTailBytes
	}
	return c
}
