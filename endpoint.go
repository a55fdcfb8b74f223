package llmrelay

import (
	"net/url"
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/anthropic"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// endpoint is the client endpoint a request came to: the client's dialect,
// what followed /v1/, and what kind of endpoint that is. It is built once,
// when the request comes (serve), and everything that differs by endpoint
// is asked of it: the pacer's format, the events held before the commit
// point, what a clean end of stream is, the error body and the in-band
// error event in the client's shape, where a reasoning effort goes,
// whether usage is estimated. The rest of the relay asks instead of
// switching on dialects and paths (as Envoy AI Gateway's endpoint specs
// are asked), so a new dialect adds a kind here and a codec in dialect.go.
type endpoint struct {
	dialect dialect // the client's: errors and streams are in its shape
	// rest is what followed the first /v1/ of the path, escaped as the
	// client sent it (that is how it goes upstream); "" when the path has
	// no /v1/.
	rest string
	kind endpointKind
}

// endpointKind is what an endpoint is to the relay.
type endpointKind uint8

const (
	// kindUnknown: the path has no /v1/<something>: 404.
	kindUnknown endpointKind = iota
	// kindPassthrough: another OpenAI endpoint (embeddings, images,
	// audio, moderations, ...), and anything under /v1/messages/ but
	// count_tokens: relayed byte for byte, the relay's stream rules do
	// not apply (EOF is a clean end), no usage is estimated.
	kindPassthrough
	kindChat        // POST /v1/chat/completions
	kindCompletions // POST /v1/completions, the legacy text completions
	kindMessages    // POST /v1/messages, Anthropic Messages
	kindCountTokens // POST /v1/messages/count_tokens
	kindResponses   // POST /v1/responses, the Responses API
	kindStored      // GET /v1/responses/{id}[/input_items]: a stored response, asked of OpenAI upstreams
	kindModels      // GET /v1/models[/<alias>]: answered by the relay
	kindBalance     // GET /v1/balance: answered by the relay
	kindStream      // GET or DELETE /v1/relay/streams/{id}: a journaled stream (resume_serve.go)
)

// Endpoints the relay understands, by what follows /v1/.
const (
	restChat        = chat.Path
	restCompletions = chat.CompletionsPath
	restMessages    = anthropic.Path
	restCountTokens = anthropic.CountTokensPath
	restResponses   = "responses"
	restStreams     = "relay/streams/"
	restModels      = "models"
	restBalance     = "balance"
)

// endpointOf reads the endpoint of a request's URL. bad reports a path the
// relay refuses to forward (see v1Rest); the dialect is known even then,
// so the refusal reaches the client in its shape, as a 401 does.
func endpointOf(u *url.URL) (ep endpoint, bad bool) {
	ep.dialect = clientDialect(u.Path)
	rest, ok, bad := v1Rest(u)
	if bad || !ok {
		return ep, bad
	}
	ep.rest = rest
	switch {
	case rest == restChat:
		ep.kind = kindChat
	case rest == restCompletions:
		ep.kind = kindCompletions
	case rest == restMessages:
		ep.kind = kindMessages
	case rest == restCountTokens:
		ep.kind = kindCountTokens
	case rest == restResponses:
		ep.kind = kindResponses
	case isStored(rest):
		ep.kind = kindStored
	case rest == restModels || strings.HasPrefix(rest, restModels+"/"):
		ep.kind = kindModels
	case rest == restBalance:
		ep.kind = kindBalance
	case strings.HasPrefix(rest, restStreams):
		ep.kind = kindStream
	default:
		ep.kind = kindPassthrough
	}
	return ep, false
}

// v1Rest returns what follows the first `/v1/` of the request's path, so
// the relay works both at the site root and under a `handle /prefix/*`
// block. rest is taken from the path as the client escaped it, which is
// how it is sent upstream: decoding first would turn `%2F` into a path
// separator and `%3F` into a query. bad reports a rest the relay refuses
// to forward: a dot segment (`..`, `%2e%2e`, `.`), which would climb
// out of the upstream's base path, or an encoded `/`, `?`, `#` or `\`,
// or a raw `\`.
func v1Rest(u *url.URL) (rest string, ok, bad bool) {
	path := u.EscapedPath()
	i := strings.Index(path, "/v1/")
	if i < 0 {
		return "", false, false
	}
	rest = path[i+len("/v1/"):]
	if rest == "" {
		return "", false, false
	}
	if strings.ContainsRune(rest, '\\') {
		return "", false, true
	}
	for _, enc := range []string{"%2f", "%3f", "%23", "%5c"} {
		if containsFold(rest, enc) {
			return "", false, true
		}
	}
	for seg := range strings.SplitSeq(rest, "/") {
		if dec, err := url.PathUnescape(seg); err != nil || dec == "." || dec == ".." {
			return "", false, true
		}
	}
	return rest, true, false
}

// containsFold reports whether s contains the ASCII string sub, in any case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// clientDialect is the dialect of a client request, by its path: Anthropic
// clients call /v1/messages (and /v1/messages/count_tokens), Responses
// clients POST /v1/responses, everything else is Chat Completions' (or
// another OpenAI endpoint, passed through). It is decided before anything
// else, so that even a 401 reaches an Anthropic SDK in the shape it raises
// as a typed error.
func clientDialect(path string) dialect {
	i := strings.Index(path, "/v1/")
	if i < 0 {
		return dialectChat
	}
	rest := path[i+len("/v1/"):]
	if rest == restMessages || strings.HasPrefix(rest, restMessages+"/") {
		return dialectMessages
	}
	if rest == restResponses {
		return dialectResponses
	}
	return dialectChat
}

// isStored reports whether rest names a stored response (GET
// /v1/responses/{id} and its input_items).
func isStored(rest string) bool {
	id, ok := strings.CutPrefix(rest, restResponses+"/")
	return ok && id != ""
}

// conversation reports whether the endpoint is a conversation turn (a
// chat completion, a message, a response): where usage is estimated when
// the upstream reports none, and a non-stream answer is kept for it.
func (e endpoint) conversation() bool {
	return e.kind == kindChat || e.kind == kindMessages || e.kind == kindResponses
}

// chatRules reports whether the relay's Chat Completions rules apply:
// streams end with [DONE], usage is asked for and its chunk dropped unless
// the client asked, and the re-pacer and reasoning rules understand the
// chunks.
func (e endpoint) chatRules() bool { return e.kind == kindChat || e.kind == kindCompletions }

// understood reports whether the relay reads the endpoint's streams (the
// re-pacer, reasoning rules, budgets): Chat Completions, legacy
// completions, Messages and Responses. Any other stream passes byte for
// byte: no pacing, no reasoning rules, no usage injection.
func (e endpoint) understood() bool {
	return e.chatRules() || e.kind == kindMessages || e.kind == kindResponses
}

// format is the pacer's view of the endpoint's streams.
func (e endpoint) format() pace.Format {
	switch e.kind {
	case kindMessages:
		return pace.FormatMessages
	case kindResponses:
		return pace.FormatResponses
	}
	return pace.FormatChat
}

// endsWithEvent reports whether a complete stream of the endpoint ends
// with its own end event ([DONE] for Chat Completions and legacy
// completions, message_stop for Messages, response.completed or
// .incomplete for Responses), so that an EOF before it is a truncation;
// other streams end at EOF when complete.
func (e endpoint) endsWithEvent() bool { return e.understood() }

// beforeContent reports whether an event of the endpoint's streams comes
// before any content and does not commit a stream: Anthropic's message
// and block starts and pings, the Responses API's lifecycle and empty item
// and part announcements. Failover after them stays invisible, since the
// client has seen none of them yet.
func (e endpoint) beforeContent(typ string) bool {
	switch e.dialect {
	case dialectMessages:
		return typ == "message_start" || typ == "content_block_start" || typ == "ping"
	case dialectResponses:
		switch typ {
		case "response.created", "response.in_progress", "response.queued",
			"response.output_item.added", "response.content_part.added",
			"response.reasoning_summary_part.added":
			return true
		}
	}
	return false
}

// budgetFailoverOnStream reports whether a stream whose reasoning passed
// its budget may fail over to the next target on the same stream: a Chat
// Completions stream is a sequence of chunks a second upstream's can
// follow; a Messages stream is one message and a Responses stream one
// response, which cannot restart on the same stream.
func (e endpoint) budgetFailoverOnStream() bool { return e.dialect == dialectChat }

// assemblesTrace reports whether a non-stream request may be sent as a
// stream and its chunks assembled (return_reasoning_trace, a reasoning
// budget without a stream): Chat Completions only.
func (e endpoint) assemblesTrace() bool { return e.kind == kindChat }

// effortForm is where a request of the endpoint states its reasoning
// effort.
type effortForm uint8

const (
	effortNone     effortForm = iota // the endpoint has none
	effortFlat                       // "reasoning_effort" (Chat Completions, legacy completions)
	effortNested                     // "reasoning": {"effort"} (Responses)
	effortThinking                   // "thinking": {"budget_tokens"} (Messages)
)

// effort is where the endpoint's requests state a reasoning effort.
func (e endpoint) effort() effortForm {
	switch e.kind {
	case kindChat, kindCompletions:
		return effortFlat
	case kindResponses:
		return effortNested
	case kindMessages:
		return effortThinking
	}
	return effortNone
}

// errorBody renders one of the relay's errors as a body in the client's
// shape (see apiError.bodyIn).
func (e endpoint) errorBody(ae *apiError) []byte { return ae.bodyIn(e.dialect) }

// errorEvent renders an in-band error event in the client's dialect,
// which its official SDKs raise as an API error: OpenAI's
// `data: {"error":{...}}`, Anthropic's `event: error` with
// `{"type":"error","error":{...}}`, or the Responses API's `event: error`
// (see responsesErrorData).
func (e endpoint) errorEvent(ae *apiError) []byte {
	switch e.dialect {
	case dialectMessages:
		return sse.NewEvent("error", ae.bodyIn(e.dialect)).Raw
	case dialectResponses:
		return sse.NewEvent("error", ae.responsesErrorData()).Raw
	}
	return sse.AppendData(nil, ae.body())
}

// upstreamErrorEvent is the in-band error event for an upstream's error
// body already in the client's shape (translated if need be): errObj is
// its "error" member. An early-committed stream ends with it when the
// answer came as an error after the headers were out.
func (e endpoint) upstreamErrorEvent(body, errObj []byte) []byte {
	switch e.dialect {
	case dialectMessages:
		return sse.NewEvent("error", body).Raw
	case dialectResponses:
		return sse.NewEvent("error", apiErrorIn(errObj).responsesErrorData()).Raw
	}
	return sse.AppendData(nil, body)
}

// String names the client's API, for the log line.
func (e endpoint) String() string { return e.dialect.String() }
