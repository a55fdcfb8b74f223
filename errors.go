package llmrelay

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/anthropic"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// apiError is an error the relay answers itself, in OpenAI's error shape
// (chat.ErrorBody): {"error":{"message","type","param","code"}}. Any
// OpenAI SDK turns it into its usual typed error (AuthenticationError,
// NotFoundError, ...).
type apiError struct {
	Status  int
	Message string
	Type    string
	Code    string
	// Param names the request member at fault (OpenAI's "param"); ""
	// is null. Anthropic's shape has no place for it: the message names
	// it too.
	Param string

	// RetryAfter, when positive, is sent as a Retry-After header (whole
	// seconds, rounded up), which the official SDKs' retry logic honours.
	RetryAfter time.Duration
	// NoRetry sends `x-should-retry: false`, which the official SDKs
	// (openai and anthropic, every language) obey over the status: for
	// an error retrying cannot fix, such as insufficient_quota.
	NoRetry bool

	// messagesBody is an upstream's own Anthropic error body, given to a
	// Messages client as it is (see upstreamError).
	messagesBody []byte
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// Errors of the relay's own, before any upstream is involved.
var (
	errUnauthorized = &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
		Message: "Missing or invalid API key. Send it as 'Authorization: Bearer <key>' or 'x-api-key: <key>'."}
	errInvalidJSON = &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_json",
		Message: "The request body is not a JSON object."}
	errMissingModel = &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "missing_model",
		Message: "The request body has no 'model' field; name one of the models listed at GET /v1/models."}
	errInvalidRelayField = &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_relay_options",
		Message: "The request body's 'relay' field must be an object such as {\"mode\": \"pace\"}."}
	errInvalidDispersion = &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_relay_options",
		Message: "The request body's 'reasoning_dispersion' field must be true or false."}
	errInvalidTrace = &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_relay_options",
		Message: "The request body's 'return_reasoning_trace' field must be true or false."}
	errKeyExpired = &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "key_expired",
		Message: "This API key is not valid now: it has expired or is not valid yet. Ask the relay's operator for a current key."}
	errIPNotAllowed = &apiError{Status: http.StatusForbidden, Type: "permission_error", Code: "ip_not_allowed",
		Message: "This API key is not accepted from your address."}
	errTooLarge = &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
		Message: "The request body exceeds this relay's max_body limit."}
)

// errInvalidSplitRatio answers a relay.split_ratio that is not a number
// from 0 to 1.
func errInvalidSplitRatio(value string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_relay_options", Param: "relay.split_ratio",
		Message: "relay.split_ratio must be a number from 0 to 1, the reasoning's share of the emissions in split-reasoning mode (such as 0.35), not " + value + "."}
}

func errModelNotFound(model string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_found",
		Message: "The model '" + model + "' does not exist on this relay; GET /v1/models lists the available ones."}
}

func errMethodNotAllowed(method, path string) *apiError {
	return &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: "method_not_allowed",
		Message: "Method " + method + " is not allowed on " + path + "."}
}

func errNoStoredResponses(method, path string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "stored_response_unavailable",
		Message: method + " " + path + ": stored responses are kept by the OpenAI upstream that made them, and this relay has no upstream with api openai to ask. Responses the relay translated for another provider are not stored anywhere."}
}

func errStoredFailed(upstream string, err error) *apiError {
	return &apiError{Status: http.StatusBadGateway, Type: "server_error", Code: "upstream_unreachable",
		Message: "Asking upstream " + upstream + " for the stored response failed: " + err.Error()}
}

func errUnknownURL(method, path string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url",
		Message: "Unknown URL (" + method + " " + path + "); this relay serves /v1/... paths."}
}

func errInvalidRelayMode(from, value string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_relay_mode",
		Message: "Invalid smoothing mode '" + value + "' in " + from + "; use off, pace or split-reasoning."}
}

func errInvalidReasoningBudget(v string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_reasoning_budget",
		Message: "Invalid X-Relay-Reasoning-Budget '" + v + "'; give a positive number of tokens."}
}

// errBudgetExceeded answers a key over its budget, with Retry-After set to
// when the budget renews (the next UTC day or month).
func errBudgetExceeded(key, period string, now time.Time) *apiError {
	return &apiError{Status: http.StatusTooManyRequests, Type: "insufficient_quota", Code: "budget_exceeded",
		Message:    "The key '" + key + "' has used up its " + period + " budget on this relay; it renews at the start of the next " + period + " (UTC).",
		RetryAfter: periodEnd(period, now).Sub(now)}
}

// periodEnd is when the UTC budget period ("day" or "month") holding now
// ends.
func periodEnd(period string, now time.Time) time.Time {
	y, m, d := now.UTC().Date()
	if period == "month" {
		return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

// errRateLimited answers a request whose every attempt was answered 429:
// the client should wait, not see a gateway failure. retryAfter is the
// soonest upstream Retry-After still running (0: none was given).
func errRateLimited(summary string, retryAfter time.Duration) *apiError {
	return &apiError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "rate_limit_exceeded",
		Message: "Every upstream is rate limiting: " + summary, RetryAfter: retryAfter}
}

// errNotStreaming answers a stream request that every upstream answered
// with a body that is not an event stream.
func errNotStreaming(summary string) *apiError {
	return &apiError{Status: http.StatusBadGateway, Type: "server_error", Code: "upstream_not_streaming",
		Message: "The upstreams answered this stream request without a stream: " + summary}
}

func errInvalidPath(path string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_path",
		Message: "The path '" + path + "' has a dot segment or an encoded '/', '?', '#' or '\\'; the relay does not forward such paths."}
}

func errAllFailed(summary string) *apiError {
	return &apiError{Status: http.StatusBadGateway, Type: "server_error", Code: "all_upstreams_failed",
		Message: "All upstream attempts failed: " + summary}
}

func errUpstreamTimeout(summary string) *apiError {
	return &apiError{Status: http.StatusGatewayTimeout, Type: "server_error", Code: "upstream_timeout",
		Message: "try_duration ran out before an upstream answered: " + summary}
}

// body renders {"error":{...}}.
func (e *apiError) body() []byte {
	b, _ := json.Marshal(chat.ErrorBody{Error: e.object()})
	return b
}

// object is e in OpenAI's shape, shared with the in-band stream error
// event.
func (e *apiError) object() chat.ErrorObject {
	return chat.ErrorObject{Message: e.Message, Type: e.Type, Param: e.param(), Code: &e.Code}
}

// apiErrorIn reads the error object of an answer in OpenAI's shape (its
// "error" member): its type, code and message.
func apiErrorIn(raw json.RawMessage) *apiError {
	var o chat.ErrorObject
	_ = json.Unmarshal(raw, &o) // what did not decode stays empty
	e := &apiError{Type: o.Type, Message: o.Message}
	if o.Code != nil {
		e.Code = *o.Code
	}
	return e
}

// param is e.Param as the wire has it: null when there is none.
func (e *apiError) param() *string {
	if e.Param == "" {
		return nil
	}
	return &e.Param
}

// bodyIn renders e in a client's dialect: OpenAI's {"error":{...}}, or
// Anthropic's {"type":"error","error":{"type","message"}}, whose type the
// Anthropic SDKs turn into their typed errors (by status) and show.
func (e *apiError) bodyIn(d dialect) []byte {
	if d != dialectMessages {
		return e.body()
	}
	if e.messagesBody != nil {
		return e.messagesBody
	}
	b, _ := json.Marshal(anthropic.ErrorBody{Type: "error", Error: anthropic.ErrorObject{Type: e.messagesType(), Message: e.Message}})
	return b
}

// responsesErrorData is the data of a Responses API `event: error`: the
// API's own members (type, code, message, param) and, beside them, an
// "error" object. The official SDKs (openai-go, openai-node) raise a
// stream error only on data with a top-level "error" member, so without it
// an error event reads as one more event and the stream as a clean,
// shorter answer. sequence_number is left out: the relay's event follows
// the upstream's numbering it cannot see (SDKs do not require it).
func (e *apiError) responsesErrorData() []byte {
	b, _ := json.Marshal(struct {
		Type    string           `json:"type"`
		Code    string           `json:"code,omitempty"`
		Message string           `json:"message"`
		Param   *string          `json:"param"`
		Error   chat.ErrorObject `json:"error"`
	}{"error", e.Code, e.Message, e.param(), e.object()})
	return b
}

// messagesType is the Anthropic error type of one of the relay's errors:
// by its status, or for in-band errors (status 200) by its code.
func (e *apiError) messagesType() string {
	if e.Code == codeInsufficientQuota {
		return "billing_error" // Anthropic's word for it
	}
	if e.Status != http.StatusOK {
		return anthropic.ErrorType(e.Status)
	}
	switch e.Code {
	case "upstream_timeout":
		return "timeout_error"
	case "rate_limit_exceeded":
		return "rate_limit_error"
	}
	return "api_error"
}

// writeAPIError answers the client with e, in the client's dialect.
func writeAPIError(w http.ResponseWriter, e *apiError, ep endpoint) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64((e.RetryAfter+time.Second-1)/time.Second), 10))
		// The OpenAI SDKs prefer this one: the exact wait.
		h.Set("Retry-After-Ms", strconv.FormatInt(max(e.RetryAfter.Milliseconds(), 1), 10))
	}
	if e.NoRetry {
		h.Set("X-Should-Retry", "false")
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(ep.errorBody(e))
}

// errUntranslatable answers a 2xx upstream answer that could not be
// translated into the client's dialect.
func errUntranslatable(err error) *apiError {
	return &apiError{Status: http.StatusBadGateway, Type: "server_error", Code: "untranslatable_answer",
		Message: "The upstream's answer could not be translated into this API's format: " + err.Error()}
}

// errUntranslatableRequest answers a request that no target of its chain
// could take: each that needed a translation refused a field (see the
// mapping tables in docs/anthropic.md and docs/responses.md).
func errUntranslatableRequest(msg string, targets []string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "untranslatable_request",
		Message: msg + " (translating for " + strings.Join(targets, "; ") + ")"}
}

// errInvalidRequest answers a request that is not valid in the client's
// own dialect, found while translating it; param is the member at fault,
// and message already names it. No upstream was called.
func errInvalidRequest(param, message string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_request",
		Param: param, Message: message}
}

// asAPIError returns err as an *apiError if it is one.
func asAPIError(err error) (*apiError, bool) {
	var e *apiError
	ok := errors.As(err, &e)
	return e, ok
}

// errKeyRateLimited answers a key over its rpm or tpm (what: "requests"
// or "tokens"), with the wait until it has room again.
func errKeyRateLimited(key, what string, limit int, wait time.Duration) *apiError {
	return &apiError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "rate_limit_exceeded",
		Message:    "The key '" + key + "' is over its limit of " + strconv.Itoa(limit) + " " + what + " a minute on this relay; retry after " + wait.Round(time.Millisecond).String() + ".",
		RetryAfter: wait}
}

// errKeyConcurrency answers a key with max requests in flight already.
func errKeyConcurrency(key string, max int64) *apiError {
	return &apiError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "rate_limit_exceeded",
		Message:    "The key '" + key + "' already has " + strconv.FormatInt(max, 10) + " requests in flight on this relay, its max_concurrent; retry when one ends.",
		RetryAfter: time.Second}
}

// errOverloaded answers a request whose chain had no target with room
// (every capped target at shed_at) within queue_timeout. Anthropic
// clients get overloaded_error, their SDKs' signal to back off.
func errOverloaded(summary string, queued time.Duration) *apiError {
	msg := "Every target for this model is at its concurrency cap"
	if queued > 0 {
		msg += " and none had room within queue_timeout " + queued.String()
	}
	return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "overloaded",
		Message: msg + ": " + summary + ". Retry shortly.", RetryAfter: time.Second}
}

// Upstream errors passed on.
//
// An upstream may describe its own failure: an error event before any
// data (a Responses stream's response.failed, Anthropic's `event: error`,
// OpenAI's `{"error":…}` chunk), a 429 insufficient_quota, an Anthropic
// 200 whose body is an error. Such an attempt fails over as usual; when
// it is the chain's last attempt, the client gets that error, in its
// dialect (with the status it means), rather than the relay's
// all_upstreams_failed: its code and message are what the client can act
// on. The failover log keeps them too (upstreamError.describe).

// codeInsufficientQuota is OpenAI's error code (and type) for an account
// out of credit: a billing problem, not a rate limit.
const codeInsufficientQuota = "insufficient_quota"

// maxDescribed bounds an upstream's message in the failover log.
const maxDescribed = 300

// upstreamErrorOf reads an upstream's error object, in any of the shapes
// the dialects use:
//
//	{"error":{"message","type","code"}}                    OpenAI (code a string, a number or null)
//	{"object":"error","message","type","code"}             vLLM
//	{"type":"error","code","message"}                      the Responses API's error event
//	{"type":"response.failed","response":{"error":{"code","message"}}}
//	{"type":"error","error":{"type","message"}}            Anthropic
//
// and returns it as the error the client gets: the status it means (an
// Anthropic error type's, a numeric code's, 429 for a rate limit or for
// insufficient_quota, which is also never to be retried, else 502), its
// code (Anthropic's type when it has no other) and message. nil: b is
// none of these.
func upstreamErrorOf(b []byte) *apiError {
	type object struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	var v struct {
		object
		Object   string  `json:"object"`
		Error    *object `json:"error"`
		Response struct {
			Error *object `json:"error"`
		} `json:"response"`
	}
	if json.Unmarshal(b, &v) != nil {
		return nil
	}
	var o object
	anthropicShape := false
	switch {
	case v.Type == "response.failed" && v.Response.Error != nil:
		o = *v.Response.Error
	case v.Error != nil:
		o = *v.Error
		anthropicShape = v.Type == "error" && len(o.Code) == 0 && o.Type != ""
	case v.Type == "error" || v.Object == "error":
		o = v.object
		o.Type = ""
		if v.Object == "error" {
			o.Type = v.Type
		}
	default:
		return nil
	}
	code := rawCode(o.Code)
	e := &apiError{Status: http.StatusBadGateway, Type: o.Type, Code: code, Message: o.Message}
	if n, err := strconv.Atoi(code); err == nil && n >= 400 && n <= 599 {
		e.Status = n
	}
	switch {
	case anthropicShape:
		e.Status, e.Code = anthropicStatus(o.Type), o.Type
		e.Type = chat.ErrorType(e.Status)
	case code == codeInsufficientQuota || o.Type == codeInsufficientQuota:
		e.Status, e.Type, e.Code, e.NoRetry = http.StatusTooManyRequests, codeInsufficientQuota, codeInsufficientQuota, true
	case code == "rate_limit_exceeded" || o.Type == "rate_limit_error":
		e.Status = http.StatusTooManyRequests
	}
	if e.Type == "" {
		e.Type = chat.ErrorType(e.Status)
	}
	if e.Code == "" {
		e.Code = "upstream_error"
	}
	if e.Message == "" {
		e.Message = "The upstream failed without a message (" + e.Code + ")."
	}
	return e
}

// rawCode is an error's code as text: a string's value, a number's
// digits, "" for null or none.
func rawCode(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return strconv.FormatInt(n, 10)
	}
	return ""
}

// anthropicStatus is the status an Anthropic error type means: the
// inverse of anthropic.ErrorType (overloaded_error is 529; an unknown
// type, api_error's 500).
func anthropicStatus(typ string) int {
	for _, st := range []int{anthropic.StatusOverloaded, http.StatusBadRequest, http.StatusUnauthorized, http.StatusPaymentRequired,
		http.StatusForbidden, http.StatusNotFound, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusGatewayTimeout} {
		if anthropic.ErrorType(st) == typ {
			return st
		}
	}
	return http.StatusInternalServerError
}

// describe is the error for the failover log: code and message, the
// message cut at maxDescribed bytes.
func (e *apiError) describe() string {
	msg := e.Message
	if len(msg) > maxDescribed {
		msg = strings.ToValidUTF8(msg[:maxDescribed], "") + "…"
	}
	return e.Code + ": " + msg
}
