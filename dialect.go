package llmrelay

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/anthropic"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/gemini"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/responses"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/tagged"
	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
)

// Dialects. A client speaks one (chosen by the endpoint it calls), an
// upstream speaks one (chosen by its `api`); when the two differ, the
// relay translates the request on the way out and the answer on the way
// back, so that everything between (the commit point, the re-pacer,
// budgets, usage, metrics) sees the client's dialect only.
//
// The wire formats themselves live in pure packages
// (internal/dialect/chat, anthropic and responses, each with the same
// codec surface; internal/pace, internal/sse); this file only chooses
// between them, through one table (codecs).
type dialect uint8

const (
	// dialectChat is OpenAI Chat Completions, and OpenAI's other
	// endpoints, which the relay passes through.
	dialectChat dialect = iota
	// dialectMessages is Anthropic Messages (POST /v1/messages).
	dialectMessages
	// dialectResponses is the OpenAI Responses API (POST /v1/responses).
	// OpenAI upstreams speak it natively.
	dialectResponses
	// dialectGemini is the Gemini API (models/{model}:generateContent and
	// :streamGenerateContent?alt=sse), spoken by `api gemini` upstreams.
	// Gemini clients are served at the front door (gemini.go), as Chat
	// clients inside: no endpoint has this dialect.
	dialectGemini
)

func (d dialect) String() string {
	switch d {
	case dialectMessages:
		return "anthropic"
	case dialectResponses:
		return "responses"
	case dialectGemini:
		return "gemini"
	}
	return "openai"
}

// The values of an upstream's `api`.
const (
	apiOpenAI    = "openai"    // OpenAI's own API: every endpoint passes through
	apiChat      = "chat"      // a Chat Completions–only provider
	apiAnthropic = "anthropic" // Anthropic Messages
	apiGemini    = "gemini"    // the Gemini API (Google AI Studio's generativelanguage.googleapis.com/v1beta)
)

// checkAPI validates an upstream's `api`.
func checkAPI(api string) error {
	switch api {
	case "", apiOpenAI, apiChat, apiAnthropic, apiGemini:
		return nil
	}
	return fmt.Errorf("api %q is not known; use openai (OpenAI itself, the default), chat (any Chat Completions provider: DeepSeek, vLLM, Ollama, OpenRouter), anthropic (Anthropic Messages) or gemini (the Gemini API)", api)
}

// dialectOfAPI is the dialect an upstream speaks.
func dialectOfAPI(api string) dialect {
	switch api {
	case apiAnthropic:
		return dialectMessages
	case apiGemini:
		return dialectGemini
	}
	return dialectChat
}

// exchange is how one request meets one upstream: the two dialects, and
// the upstream endpoint the request goes to.
//
// Translations pivot on Chat Completions, the dialect every provider's
// API can be mapped to: a Responses request for Anthropic goes Responses →
// Chat → Messages, and its answer Messages → Chat → Responses. So each
// pure package translates to and from Chat only (internal/dialect/anthropic,
// internal/dialect/responses), and a new dialect adds two directions, not
// one per pair.
type exchange struct {
	ep               endpoint // the client's
	client, upstream dialect
	rest             string // the upstream endpoint, what follows the base URL
	api              string // the upstream's api (see Upstream.API)
	// reasoningField, for Chat Completions clients, renames the reasoning
	// text member of the answer (see Relay.ReasoningField); "": as sent.
	reasoningField string
	// think, for a Chat Completions upstream whose model writes its
	// reasoning inline, is the syntax of its tags (see InlineReasoning):
	// the answer's reasoning is moved into reasoning_content before
	// anything else reads it. nil: reasoning comes in fields.
	think *thinktag.Syntax
	// request is the client's body as sent; a translated Responses
	// answer echoes its settings, as OpenAI's does.
	request []byte
	// pivot: the answer is wanted as Chat Completions, whatever the
	// client speaks (a hand-off's legs, spliced on the pivot; see
	// handoff.go). The request is still translated from the client's
	// dialect.
	pivot bool
	// afterward: the answer is translated after the relay is through with
	// it (a Gemini client's, by gemini.go's writer), so it needs a usage
	// the upstream may not have sent, as an answer translated here does
	// (needsUsage).
	afterward bool
	// idBase, when set, is the base of a translated answer's ids
	// (chat.Options.ID): a journaled stream's own (journalIDBase), so
	// that a Responses response id names one stream even when the
	// upstream gives every answer the same chunk id.
	idBase string
}

// restFor is the upstream endpoint of a request for model, streamed or
// not: x.rest, but for a Gemini upstream, whose endpoint names both
// (models/{model}:generateContent, :streamGenerateContent?alt=sse).
func (x exchange) restFor(model string, stream bool) string {
	if x.upstream != dialectGemini {
		return x.rest
	}
	method := gemini.GenerateMethod
	if stream {
		method = gemini.StreamMethod
	}
	return gemini.Path(model, method)
}

// crosses reports whether the request and its answer are translated.
func (x exchange) crosses() bool { return x.client != x.upstream }

// needsUsage reports whether a Chat upstream's answer must carry a usage
// when it reaches the client: it is translated, here or afterward, and
// the client reads the figure the relay accounted in its own dialect
// (usagemeter.go). A Chat client's answer passes as it came.
func (x exchange) needsUsage() bool {
	return (x.crosses() || x.afterward) && x.upstream == dialectChat
}

// query is the query string the upstream gets: the client's, unless the
// request is translated. A query belongs to the endpoint it was written
// for (Claude Code calls /v1/messages?beta=true); a Chat provider that
// gets the translated request has no use for it, and some reject what
// they do not know.
func (x exchange) query(client string) string {
	if x.crosses() {
		return ""
	}
	return client
}

// rewritesAnswer reports whether the answer is changed on its way back:
// translated, or its reasoning field renamed. A non-stream answer is then
// read whole.
func (x exchange) rewritesAnswer() bool {
	return x.crosses() || x.reasoningField != "" || x.think != nil || x.needsUsage()
}

// exchangeFor decides how a client request for endpoint rest, in dialect
// client, is sent to upstream up. ok is false when the upstream cannot
// serve it (an OpenAI-only endpoint such as embeddings on an Anthropic
// upstream, or count_tokens on a Chat upstream): the target is skipped.
func exchangeFor(ep endpoint, up *upstreamRuntime, think *thinktag.Syntax, reasoningField string) (x exchange, ok bool) {
	client := ep.dialect
	x = exchange{ep: ep, client: client, upstream: up.dialect, rest: ep.rest, api: up.api}
	if ep.kind == kindChat {
		x.reasoningField = reasoningField
	}
	if client == dialectResponses && up.api == apiOpenAI {
		x.upstream = dialectResponses // OpenAI speaks it itself
	}
	if x.upstream == dialectChat && ep.conversation() {
		// Only a Chat answer's content is read for tags (a legacy
		// completion's text, an embedding have none).
		x.think = think
	}
	if !x.crosses() {
		return x, true
	}
	switch {
	case x.upstream == dialectGemini && ep.conversation():
		// Per model and per stream: see restFor.
		x.rest = ""
	case ep.kind == kindChat,
		ep.kind == kindResponses && x.upstream == dialectMessages:
		x.rest = restMessages
	case ep.kind == kindMessages,
		ep.kind == kindResponses && x.upstream == dialectChat:
		x.rest = restChat
	default:
		return x, false
	}
	return x, true
}

// untranslatableError is a request a translator refused: valid in the
// client's dialect, but a field the upstream's dialect cannot express
// without changing the answer. The target is skipped (the next one may
// speak the client's dialect).
type untranslatableError struct{ msg, api string }

func (e *untranslatableError) Error() string {
	return e.msg + " (translating for an api " + e.api + " upstream)"
}

// target names the target the request could not be translated for, as
// the client's 400 says it: which upstream and model to leave out of the
// chain, or to call with the other dialect.
func (e *untranslatableError) target(upstream, model string) string {
	return "upstream " + upstream + ", model " + model + ", api " + e.api
}

// invalidRequestError is a request that is not valid in the client's own
// dialect, found while translating it (a turn with no content, a
// tool_choice without a name...): the client's mistake, which no target
// could serve as sent. The client gets a 400 at once, naming param, and
// no upstream is called.
type invalidRequestError struct{ param, msg string }

func (e *invalidRequestError) Error() string { return e.msg }

// codecs is each dialect's translations to and from Chat Completions,
// the pivot (see chat.Codec): a request goes client → Chat → upstream, an
// answer upstream → Chat → client. Chat's own is the identity. A new
// dialect is a package with the same surface and one entry here.
var codecs = [...]chat.Codec{
	dialectChat:      chat.Pivot,
	dialectMessages:  anthropic.Codec,
	dialectResponses: responses.Codec,
	dialectGemini:    gemini.Codec,
}

// codec is d's entry in codecs.
func (d dialect) codec() *chat.Codec { return &codecs[d] }

// translateRequest turns a client body (already given the target's model)
// into the upstream's dialect, through Chat Completions. Refusals are
// *invalidRequestError or *untranslatableError.
func (x exchange) translateRequest(b []byte) ([]byte, error) {
	if !x.crosses() {
		return b, nil
	}
	opt := chat.Options{MaxTokensField: "max_tokens"}
	if x.api == apiOpenAI {
		// OpenAI's reasoning models refuse max_tokens.
		opt.MaxTokensField = "max_completion_tokens"
	}
	b, err := x.client.codec().ToChatRequest(b, opt)
	if err == nil && x.upstream != dialectGemini {
		// Thought signatures ride in tool call ids for Gemini alone:
		// others refuse ids that long, or with '+' and '/'.
		b = gemini.StripSignatures(b)
	}
	// own: err comes from the translator that reads the client's own
	// dialect. Only it can tell the client's request invalid: a member
	// the second step (Chat → Messages, for a Responses client) finds at
	// fault is the first step's Chat, which the client never wrote.
	own := true
	if err == nil {
		b, err = x.upstream.codec().FromChatRequest(b, opt)
		own = x.client == dialectChat
	}
	if re, ok := errors.AsType[*chat.RequestError](err); ok {
		return nil, x.refused(re.Param, re.Message, re.Invalid && own)
	}
	if errors.Is(err, chat.ErrNotSupported) {
		return nil, &untranslatableError{err.Error(), x.api}
	}
	return b, err
}

// refused is the error of a member a translator refused: the client's
// message names the member, says why, and for a refusal that is this
// upstream's, the api it was translated for.
func (x exchange) refused(param, msg string, invalid bool) error {
	if param != "" && !strings.HasPrefix(msg, param) {
		msg = param + ": " + msg
	}
	if invalid {
		return &invalidRequestError{param: param, msg: msg}
	}
	return &untranslatableError{msg, x.api}
}

// translateStream wraps an upstream stream so that it yields the client's
// dialect (through Chat Completions), with the reasoning field renamed if
// asked. A stream with inline reasoning is read through tagSource first.
func (x exchange) translateStream(src pace.Source, model string, includeUsage bool, inputTokens int) pace.Source {
	if x.pivot {
		opt := chat.Options{Model: model, Created: time.Now().Unix(), Request: x.request, IncludeUsage: true, InputTokens: inputTokens}
		return x.upstream.codec().ToChatStream(src, opt)
	}
	if x.crosses() {
		opt := chat.Options{Model: model, Created: time.Now().Unix(), Request: x.request,
			IncludeUsage: includeUsage || x.client != dialectChat, KeepPauseTurn: x.client == dialectResponses,
			InputTokens: inputTokens, ID: x.idBase}
		src = x.upstream.codec().ToChatStream(src, opt)
		src = x.client.codec().FromChatStream(src, opt)
	}
	if x.renames() {
		src = &renamingSource{src: src, to: x.reasoningField}
	}
	return src
}

// tagSource is src with its inline reasoning moved into reasoning_content
// (see InlineReasoning), nil when the upstream sends reasoning in fields.
// An attempt keeps it, to ask at the end whether the reasoning closed.
func (x exchange) tagSource(src pace.Source) *tagged.Source {
	if x.think == nil {
		return nil
	}
	return tagged.NewSource(src, x.think, chat.FieldReasoningContent)
}

// untagStream is an upstream stream with its inline reasoning moved into
// reasoning_content, when the upstream writes it inline (x.think); src as
// it is otherwise. Everything that reads an upstream's answer (an
// attempt's stream through tagSource, a shadow copy's) reads it so.
func (x exchange) untagStream(src pace.Source) pace.Source {
	if ts := x.tagSource(src); ts != nil {
		return ts
	}
	return src
}

// untagAnswer is untagStream for a whole answer: a 2xx body, with its
// inline reasoning moved into reasoning_content.
func (x exchange) untagAnswer(status int, body []byte) []byte {
	if x.think != nil && status >= 200 && status < 300 {
		body, _, _ = tagged.Answer(body, x.think, chat.FieldReasoningContent)
	}
	return body
}

// renames reports whether the reasoning field is renamed on the way in,
// before the pacer: one name for the other. both and inline are written on
// the way out, after it (see reasoningOutput), so that the pacer sees one
// reasoning field and paces it on its lane.
func (x exchange) renames() bool {
	return x.reasoningField == chat.FieldReasoningContent || x.reasoningField == chat.FieldReasoning
}

// renamingSource renames the reasoning member of each chunk (see
// chat.RenameReasoning); chunks without one pass as they are.
type renamingSource struct {
	src pace.Source
	to  string
}

func (r *renamingSource) Next() (sse.Event, error) {
	ev, err := r.src.Next()
	if err != nil || !ev.HasData || ev.IsDone() || ev.HasID || ev.Retry >= 0 {
		// Nothing to rename, or a block with more than event and data
		// lines, which is kept whole rather than rebuilt without them.
		return ev, err
	}
	if data, changed := chat.RenameReasoning(ev.Data, r.to); changed {
		return sse.NewEvent(ev.Type, data), nil
	}
	return ev, nil
}

// BeforeRead forwards the pacer's per-read hook (see pace.Run).
func (r *renamingSource) BeforeRead(f func()) { sse.ForwardBeforeRead(r.src, f) }

// translateAnswer turns a whole (non-stream) upstream answer into the
// client's dialect: a 2xx body is a response object, anything else an
// error object. A 2xx body that does not translate becomes a 502 in the
// client's dialect: passing it on would hand the client a shape its SDK
// cannot read.
func (x exchange) translateAnswer(status int, body []byte) (int, []byte) {
	return x.translateUntagged(status, x.untagAnswer(status, body))
}

// translateUntagged is translateAnswer for a body already read through
// untagAnswer.
func (x exchange) translateUntagged(status int, body []byte) (int, []byte) {
	status, body = x.translateBody(status, body)
	if status >= 200 && status < 300 {
		switch x.reasoningField {
		case "":
		case chat.ReasoningBoth:
			body, _ = chat.DuplicateReasoning(body)
		case chat.ReasoningInline:
			var in chat.Inliner
			body, _ = in.Message(body)
		default:
			body, _ = chat.RenameReasoning(body, x.reasoningField)
		}
	}
	return status, body
}

func (x exchange) translateBody(status int, body []byte) (int, []byte) {
	if !x.crosses() {
		return status, body
	}
	up, client := x.upstream.codec(), x.client.codec()
	if status < 200 || status >= 300 {
		status, body = up.ToChatError(status, body)
		return client.FromChatError(status, body)
	}
	opt := chat.Options{Created: time.Now().Unix(), Request: x.request, KeepPauseTurn: x.client == dialectResponses}
	body, err := up.ToChatResponse(body, opt)
	if err == nil {
		body, err = client.FromChatResponse(body, opt)
	}
	if err != nil {
		return http.StatusBadGateway, errUntranslatable(err).bodyIn(x.client)
	}
	return status, body
}
