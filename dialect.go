package llmrelay

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/anthropic"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// Dialects. A client speaks one (chosen by the endpoint it calls), an
// upstream speaks one (chosen by its `api`); when the two differ, the
// relay translates the request on the way out and the answer on the way
// back, so that everything between (the commit point, the re-pacer,
// budgets, usage, metrics) sees the client's dialect only.
//
// The wire formats themselves live in pure packages
// (internal/dialect/anthropic, internal/pace, internal/sse); this file
// only chooses between them.
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
)

func (d dialect) String() string {
	switch d {
	case dialectMessages:
		return "anthropic"
	case dialectResponses:
		return "responses"
	}
	return "openai"
}

// The values of an upstream's `api`.
const (
	apiOpenAI    = "openai"    // OpenAI's own API: every endpoint passes through
	apiChat      = "chat"      // a Chat Completions–only provider
	apiAnthropic = "anthropic" // Anthropic Messages
)

// checkAPI validates an upstream's `api`.
func checkAPI(api string) error {
	switch api {
	case "", apiOpenAI, apiChat, apiAnthropic:
		return nil
	}
	return fmt.Errorf("api %q is not known; use openai (OpenAI itself, the default), chat (any Chat Completions provider: DeepSeek, vLLM, Ollama, OpenRouter) or anthropic (Anthropic Messages)", api)
}

// dialectOfAPI is the dialect an upstream speaks.
func dialectOfAPI(api string) dialect {
	if api == apiAnthropic {
		return dialectMessages
	}
	return dialectChat
}

// Endpoints the relay understands, by what follows /v1/.
const (
	restChat        = chat.Path
	restCompletions = chat.CompletionsPath
	restMessages    = anthropic.Path
	restCountTokens = anthropic.CountTokensPath
	restResponses   = "responses"
)

// clientDialect is the dialect of a client request, by its path: Anthropic
// clients call /v1/messages (and /v1/messages/count_tokens), Responses
// clients POST /v1/responses, everything else is Chat Completions' (or
// another OpenAI endpoint, passed through). It is decided before anything else, so that even a
// 401 reaches an Anthropic SDK in the shape it raises as a typed error.
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

// exchange is how one request meets one upstream: the two dialects, and
// the upstream endpoint the request goes to.
type exchange struct {
	client, upstream dialect
	rest             string // the upstream endpoint, what follows the base URL
	api              string // the upstream's api (see Upstream.API)
	// reasoningField, for Chat Completions clients, renames the reasoning
	// text member of the answer (see Relay.ReasoningField); "": as sent.
	reasoningField string
}

// crosses reports whether the request and its answer are translated.
func (x exchange) crosses() bool { return x.client != x.upstream }

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
func (x exchange) rewritesAnswer() bool { return x.crosses() || x.reasoningField != "" }

// exchangeFor decides how a client request for endpoint rest, in dialect
// client, is sent to upstream up. ok is false when the upstream cannot
// serve it (an OpenAI-only endpoint such as embeddings on an Anthropic
// upstream, or count_tokens on a Chat upstream): the target is skipped.
func exchangeFor(client dialect, rest string, up *upstreamRuntime, reasoningField string) (x exchange, ok bool) {
	x = exchange{client: client, upstream: up.dialect, rest: rest, api: up.api}
	if client == dialectChat && rest == restChat {
		x.reasoningField = reasoningField
	}
	if client == dialectResponses && up.dialect == dialectChat {
		// OpenAI speaks Responses itself. Chat providers get it as it is
		// too, until the relay translates it for them (as they did
		// before the relay knew the Responses API).
		x.upstream = dialectResponses
	}
	if !x.crosses() {
		return x, true
	}
	switch {
	case client == dialectChat && rest == restChat:
		x.rest = restMessages
	case client == dialectMessages && rest == restMessages:
		x.rest = restChat
	default:
		return x, false
	}
	return x, true
}

// format is the pacer's view of a client dialect.
func (d dialect) format() pace.Format {
	if d == dialectMessages {
		return pace.FormatMessages
	}
	return pace.FormatChat
}

// translateRequest turns a client body (already given the target's model)
// into the upstream's dialect. Errors are *anthropic.RequestError: fields
// that cannot be translated without changing the answer.
func (x exchange) translateRequest(b []byte) ([]byte, error) {
	switch {
	case !x.crosses():
		return b, nil
	case x.upstream == dialectMessages:
		return anthropic.FromChatRequest(b)
	default:
		opt := anthropic.ChatRequestOptions{MaxTokensField: "max_tokens"}
		if x.api == apiOpenAI || x.api == "" {
			// OpenAI's reasoning models refuse max_tokens.
			opt.MaxTokensField = "max_completion_tokens"
		}
		return anthropic.ToChatRequest(b, opt)
	}
}

// translateStream wraps an upstream stream so that it yields the client's
// dialect, with the reasoning field renamed if asked.
func (x exchange) translateStream(src pace.Source, model string, includeUsage bool, inputTokens int) pace.Source {
	switch {
	case !x.crosses():
	case x.upstream == dialectMessages:
		src = anthropic.ChatStream(src, anthropic.ChatStreamOptions{Model: model, Created: time.Now().Unix(), IncludeUsage: includeUsage})
	default:
		src = anthropic.MessagesStream(src, anthropic.MessagesStreamOptions{Model: model, InputTokens: inputTokens})
	}
	if x.reasoningField != "" {
		src = &renamingSource{src: src, to: x.reasoningField}
	}
	return src
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
func (r *renamingSource) BeforeRead(f func()) {
	if br, ok := r.src.(interface{ BeforeRead(func()) }); ok {
		br.BeforeRead(f)
	}
}

// translateAnswer turns a whole (non-stream) upstream answer into the
// client's dialect: a 2xx body is a response object, anything else an
// error object. A 2xx body that does not translate becomes a 502 in the
// client's dialect: passing it on would hand the client a shape its SDK
// cannot read.
func (x exchange) translateAnswer(status int, body []byte) (int, []byte) {
	status, body = x.translateBody(status, body)
	if x.reasoningField != "" && status >= 200 && status < 300 {
		body, _ = chat.RenameReasoning(body, x.reasoningField)
	}
	return status, body
}

func (x exchange) translateBody(status int, body []byte) (int, []byte) {
	if !x.crosses() {
		return status, body
	}
	ok := status >= 200 && status < 300
	switch {
	case x.upstream == dialectMessages && ok:
		out, err := anthropic.ToChatResponse(body, time.Now().Unix())
		if err != nil {
			return http.StatusBadGateway, errUntranslatable(err).bodyIn(x.client)
		}
		return status, out
	case x.upstream == dialectMessages:
		return anthropic.ToChatError(status, body)
	case ok:
		out, err := anthropic.FromChatResponse(body)
		if err != nil {
			return http.StatusBadGateway, errUntranslatable(err).bodyIn(x.client)
		}
		return status, out
	default:
		return anthropic.FromChatError(status, body)
	}
}
