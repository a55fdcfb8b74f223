package chat

import (
	"errors"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// Codec is one dialect's translations to and from Chat Completions, the
// pivot: a request goes client → Chat → upstream, an answer upstream →
// Chat → client, so a dialect brings its two directions and no pair of
// dialects needs code of its own. Every dialect package exports its Codec
// (anthropic.Codec, responses.Codec; Pivot is Chat's own), whose fields
// are the package's functions of the same names. "To" is this dialect →
// Chat, "From" is Chat → this dialect.
//
// Every field is set. A direction a dialect does not have returns an
// error that wraps ErrNotSupported (a stream: from its first Next); the
// caller passes the target over as it does for a request its dialect
// cannot express.
type Codec struct {
	// ToChatRequest and FromChatRequest translate a request body; a
	// request that cannot be translated is refused with a *RequestError.
	ToChatRequest, FromChatRequest func(body []byte, opt Options) ([]byte, error)
	// ToChatResponse and FromChatResponse translate a whole (non-stream)
	// 2xx answer.
	ToChatResponse, FromChatResponse func(body []byte, opt Options) ([]byte, error)
	// ToChatError and FromChatError translate an error answer, whatever
	// its shape (an HTML page from a proxy too), and may change its
	// status.
	ToChatError, FromChatError func(status int, body []byte) (int, []byte)
	// ToChatStream and FromChatStream wrap a stream so that it yields the
	// other side's events, each translated as it arrives. Every stream
	// translator yields nothing before the first content (what comes
	// before is the upstream saying hello, and the relay commits to an
	// upstream at the first event it hands on); ends after the other
	// side's end (or in-band error) event, its next call returning
	// io.EOF; ends without one when src does (the relay reads that as
	// truncation), src's error returned as it is once the events made
	// before it are out; ends with a *UnreadableError, after the events
	// made before it, at an event it cannot translate faithfully; and
	// forwards BeforeRead to src (sse.BeforeReader).
	ToChatStream, FromChatStream func(src sse.Source, opt Options) sse.Source
}

// Options is what a translation may need of the exchange it serves. The
// same value goes to every direction, which reads the members its own doc
// names and ignores the rest.
type Options struct {
	// Created is the Unix time (seconds) to stamp on what is made: the
	// caller's clock, as the packages have none. 0 keeps the time the
	// source carries, where it carries one.
	Created int64
	// Model names the model in what a stream translator makes: the one
	// the client asked for. "" keeps the one the source names.
	Model string
	// Request is the client's request body as sent, for a dialect whose
	// answers repeat it (a Responses response echoes its settings).
	Request []byte
	// MaxTokensField, for ToChatRequest, names the output limit:
	// "max_tokens" (the default, which every Chat provider reads) or
	// "max_completion_tokens" (OpenAI itself, whose reasoning models
	// refuse max_tokens).
	MaxTokensField string
	// IncludeUsage, for ToChatStream, ends the stream with a usage chunk
	// (the client's stream_options.include_usage).
	IncludeUsage bool
	// KeepPauseTurn, for ToChatResponse and ToChatStream, gives a turn
	// the provider paused the finish_reason FinishPauseTurn instead of
	// Chat's "length": for an answer that goes on to a dialect that can
	// say it (Responses).
	KeepPauseTurn bool
	// InputTokens, for FromChatStream, is the prompt's size when the
	// dialect announces it before the Chat stream says (Messages'
	// message_start): the relay's estimate.
	InputTokens int
	// ID, for FromChatStream and FromChatResponse, is the base of the
	// ids of what is made (a Responses response's resp_<ID> and its
	// items'), instead of the source's chunk id: the caller's own, unique
	// where the source's may not be (a provider that sends one id for
	// every answer, or none). "" derives them from the source's.
	ID string
}

// FinishPauseTurn is the finish_reason of a turn the provider paused
// (Anthropic's stop reason pause_turn: sending the answer back continues
// it) when Options.KeepPauseTurn asks for it. Not a Chat value: it exists
// only between two translators.
const FinishPauseTurn = "pause_turn"

// ErrNotSupported is wrapped by the error of a direction a dialect does
// not have (see Codec).
var ErrNotSupported = errors.New("not supported")

// RequestError says why a request cannot be translated without changing
// what it asks for. Either the request is not valid in its own dialect
// (Invalid: the client's mistake, which no target could serve as sent;
// the relay answers 400 at once, naming Param), or it is valid but the
// other dialect cannot express it (the relay skips the target, as the
// next one may speak the client's dialect, and answers 400 when no
// target is left).
type RequestError struct {
	// Param is the JSON path of the member at fault, such as
	// "messages[2].content[0].type"; "" for the whole body.
	Param string
	// Message says what is wrong and what to do, for the client's user.
	Message string
	// Invalid says the request is not valid in its own dialect.
	Invalid bool
}

func (e *RequestError) Error() string {
	if e.Param == "" {
		return e.Message
	}
	return e.Param + ": " + e.Message
}

// Pivot is the Chat dialect's own Codec: Chat is the pivot, so every
// direction hands its input on as it is.
var Pivot = Codec{
	ToChatRequest: same, FromChatRequest: same,
	ToChatResponse: same, FromChatResponse: same,
	ToChatError: sameError, FromChatError: sameError,
	ToChatStream: sameStream, FromChatStream: sameStream,
}

func same(body []byte, _ Options) ([]byte, error)     { return body, nil }
func sameError(status int, body []byte) (int, []byte) { return status, body }
func sameStream(src sse.Source, _ Options) sse.Source { return src }
