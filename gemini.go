package llmrelay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/anthropic"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/gemini"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// Gemini clients (the @google/genai SDKs, Gemini CLI with
// GOOGLE_GEMINI_BASE_URL at the relay) call the Gemini API's own paths:
//
//	POST {/v1beta|/v1}/models/{model}:generateContent
//	POST {/v1beta|/v1}/models/{model}:streamGenerateContent[?alt=sse]
//	POST {/v1beta|/v1}/models/{model}:countTokens
//	GET  /v1beta/models (and /v1/models with a Gemini credential)
//
// They are served at the relay's front door: the request is translated
// into the Chat Completions request it stands for (gemini.ToChatRequest,
// the model from the path), served as one (every alias, chain, failover,
// limit, the commit point, the pacer and the end-of-stream rules of Chat
// Completions, where [DONE] is the end event), and what the relay writes
// back is translated into Gemini's shape on its way out (geminiWriter):
// a whole answer by gemini.FromChatResponse, an error by
// gemini.FromChatError, a stream by gemini.FromChatStream, which turns
// [DONE] into the chunk with the finishReason (a Gemini stream's end) and
// an in-band error into the bare error object the SDK raises. A Chat
// stream that ends without [DONE] is a truncation to the relay as for
// any Chat client, and its in-band error reaches the Gemini client as
// that error object.
//
// Doing it at the front, rather than as a fourth client dialect inside
// the relay, keeps everything between on the dialect the relay reads
// best; what a Gemini client does not get from it is written in
// docs/gemini.md (heartbeats, the relay's own reasoning knobs in
// Gemini's words).

// geminiMethod is what a Gemini client asked for.
type geminiMethod uint8

const (
	geminiGenerate geminiMethod = iota + 1 // :generateContent
	geminiStream                           // :streamGenerateContent
	geminiCount                            // :countTokens
	geminiList                             // GET models
	// geminiResume is the stream URL (GET /v1/relay/streams/{id}) asked
	// for by a Gemini client, or of a Gemini client's stream: a replay
	// is translated as a stream is; errors too; anything else (the
	// DELETE's answer) passes as it is.
	geminiResume
)

// journalDialectGemini is the journal's name for a Gemini client's
// stream (journal.Meta.Dialect). Its journal holds the Chat events the
// front door translated, as every stream's holds what the relay wrote;
// a replay of it is translated again, from its first event (see
// geminiCall.skip).
const journalDialectGemini = "gemini"

// geminiCall is one Gemini client request, as its path says it: carried
// in the translated request's context, so that serve logs it as a Gemini
// request and answers a body that did not translate (refusal) after the
// key is checked, as every refusal is.
type geminiCall struct {
	method geminiMethod
	model  string // from the path, unescaped; "" for the list
	sse    bool   // ?alt=sse: the stream as SSE, else as one JSON array
	// refusal is the client's body that did not translate: answered with
	// it by serve once the key is let in.
	refusal *apiError
	// native is the client's generateContent body as sent, for a Gemini
	// target (requestBody.native).
	native []byte
	// skip is how many of the translated stream's events the client has
	// already (an alt=sse replay after Last-Event-ID <stream>.<k>, set by
	// replay): they are made and not sent. Gemini's stream readers take
	// no SSE ids (@google/genai drops an event that does not start with
	// data:, or fails on one with an id line after it), so a Gemini
	// stream carries none, and a position in it is the number of its
	// events a client received. Translation restarts at the journal's
	// first event because it holds state across events (a function
	// call's arguments are gathered until the call is whole).
	skip int
}

type geminiCallKey struct{}

// geminiCallOf is the Gemini call a request stands for, nil for others.
func geminiCallOf(ctx context.Context) *geminiCall {
	c, _ := ctx.Value(geminiCallKey{}).(*geminiCall)
	return c
}

// geminiCallFor reads a Gemini request off r's path: the call and the
// part of the path before /v1beta/ or /v1/ (the relay may be mounted
// under a prefix). nil: not a Gemini request. Under /v1/, where the
// OpenAI endpoints are too, only a POST to one of the three methods is
// Gemini's, and the models list only when it comes with a Gemini
// credential (x-goog-api-key or ?key=): a GET /v1/models without one is
// an OpenAI client's.
func geminiCallFor(r *http.Request) (c *geminiCall, prefix string) {
	path := r.URL.Path
	i, beta := strings.Index(path, "/v1beta/"), true
	if i < 0 {
		i, beta = strings.Index(path, "/v1/"), false
		if i < 0 {
			return nil, ""
		}
	}
	prefix = path[:i]
	rest := path[i+len("/v1/"):]
	if beta {
		rest = path[i+len("/v1beta/"):]
	}
	if rest == gemini.ModelsPath {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return nil, ""
		}
		if !beta && r.Header.Get(gemini.AuthHeader) == "" && !r.URL.Query().Has("key") {
			return nil, ""
		}
		return &geminiCall{method: geminiList}, prefix
	}
	name, ok := strings.CutPrefix(rest, gemini.ModelsPath+"/")
	if !ok || r.Method != http.MethodPost {
		return nil, ""
	}
	j := strings.LastIndexByte(name, ':')
	if j <= 0 {
		return nil, ""
	}
	c = &geminiCall{model: name[:j]}
	switch name[j+1:] {
	case gemini.GenerateMethod:
		c.method = geminiGenerate
	case gemini.StreamMethod:
		c.method = geminiStream
		c.sse = r.URL.Query().Get("alt") == "sse"
	case gemini.CountTokensMethod:
		c.method = geminiCount
	default:
		return nil, ""
	}
	return c, prefix
}

// takeQueryKey moves a key given as ?key= into the x-goog-api-key header
// (unless a credential header is there already) and out of the URL, so
// that nothing the relay logs, forwards or hands to a placeholder carries
// it. Caddy's access log records the URL as it came, before any handler:
// docs/gemini.md shows the log filter that deletes it there.
func takeQueryKey(r *http.Request) {
	if !strings.Contains(r.URL.RawQuery, "key=") {
		return
	}
	q := r.URL.Query()
	if !q.Has("key") {
		return
	}
	if clientToken(r) == "" {
		r.Header.Set(gemini.AuthHeader, q.Get("key"))
	}
	q.Del("key")
	r.URL.RawQuery = q.Encode()
	r.RequestURI = r.URL.RequestURI()
}

// serveGemini serves a Gemini client's request c (see the top of this
// file): it translates the request, serves it as the OpenAI or
// Anthropic request it stands for, and translates the answer back.
func (h *Relay) serveGemini(w http.ResponseWriter, r *http.Request, c *geminiCall, prefix string) {
	takeQueryKey(r)
	// A shallow copy with its own URL (r.Clone's deep copy of the headers
	// only where they change: the relay reads a request's headers, never
	// writes them).
	r2 := r.WithContext(context.WithValue(r.Context(), geminiCallKey{}, c))
	u := *r.URL
	r2.URL = &u
	r2.URL.RawQuery = "" // alt=sse is Gemini's: the upstream gets none
	r2.URL.RawPath = ""
	if c.method == geminiList {
		r2.URL.Path = prefix + "/v1/" + restModels
	} else {
		body, refusal := h.geminiBody(r, c)
		c.refusal = refusal
		r2.URL.Path = prefix + "/v1/" + restChat
		if c.method == geminiCount {
			r2.URL.Path = prefix + "/v1/" + restCountTokens
		}
		r2.Body = io.NopCloser(bytes.NewReader(body))
		r2.ContentLength = int64(len(body))
		if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Content-Encoding") != "" {
			r2.Header = r.Header.Clone()
			r2.Header.Set("Content-Type", "application/json")
			r2.Header.Del("Content-Encoding")
		}
	}
	r2.RequestURI = r2.URL.RequestURI()
	gw := &geminiWriter{w: w, rc: http.NewResponseController(w), call: c, header: http.Header{}}
	h.serve(gw, r2)
	gw.finish()
}

// geminiStreamWriter answers the stream URL in Gemini's shape (see
// geminiResume): w wrapped, and r carrying the call replay reads skip
// from. finish must be called once the answer is written.
func geminiStreamWriter(w http.ResponseWriter, r *http.Request) (*geminiWriter, *http.Request) {
	c := geminiCallOf(r.Context())
	if c == nil {
		c = &geminiCall{method: geminiResume, sse: true}
		r = r.WithContext(context.WithValue(r.Context(), geminiCallKey{}, c))
	}
	gw := &geminiWriter{w: w, rc: http.NewResponseController(w), call: c, header: http.Header{}}
	return gw, r
}

// markGeminiResume marks a request for the stream URL that carries its
// key as a Gemini client does (x-goog-api-key, or ?key=, which is moved
// off the URL here): it is answered in Gemini's shape, even when there
// is no stream to replay (serveStream). The mark is made before the key
// is checked, which takes the credential header off the request.
func markGeminiResume(r *http.Request) *http.Request {
	takeQueryKey(r)
	if r.Header.Get(gemini.AuthHeader) == "" {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), geminiCallKey{}, &geminiCall{method: geminiResume, sse: true}))
}

// geminiBody reads the client's Gemini body and translates it into the
// body of the relay's endpoint: a Chat Completions request (the model
// from the path; a stream with its usage for :streamGenerateContent), or
// for :countTokens the Anthropic count_tokens request it stands for,
// which Anthropic targets answer and the relay estimates for the rest.
// A body that does not read or translate is the refusal, and an empty
// body goes on (serve answers the refusal once the key is let in).
func (h *Relay) geminiBody(r *http.Request, c *geminiCall) ([]byte, *apiError) {
	raw, _, err := readBody(r, h.MaxBody, false)
	if err != nil {
		if e, ok := asAPIError(err); ok {
			return nil, e
		}
		return nil, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_body",
			Message: "The request body could not be read: " + err.Error()}
	}
	if c.method == geminiCount {
		raw, err = gemini.CountTokensRequest(raw)
	} else {
		c.native = raw
	}
	var body []byte
	if err == nil && c.method == geminiStream {
		body, err = gemini.ToChatStreamRequest(raw, chat.Options{Model: c.model})
	} else if err == nil {
		body, err = gemini.ToChatRequest(raw, chat.Options{Model: c.model})
	}
	if err == nil && c.method == geminiCount {
		body, err = anthropic.FromChatRequest(body, chat.Options{MaxTokensField: "max_tokens"})
	}
	if err != nil {
		msg := err.Error()
		if re, ok := errors.AsType[*chat.RequestError](err); ok && re.Param != "" && !strings.HasPrefix(re.Message, re.Param) {
			msg = re.Param + ": " + re.Message
		} else if ok {
			msg = re.Message
		}
		return nil, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_request", Message: msg}
	}
	return body, nil
}

// geminiWriter is the ResponseWriter the relay answers a Gemini client's
// translated request through: it translates what the relay writes into
// Gemini's shape. A whole answer (and every error) is gathered and
// translated at the end (finish); an event stream is translated as it is
// written, in the relay's own Write: the complete Chat events of what it
// writes are translated and written to the client at once, a partial one
// waits for the rest, and the client's writer is flushed when the relay
// flushes (once per burst, as a stream passed through is).
type geminiWriter struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	call   *geminiCall
	header http.Header // what the relay sets; copied out when the answer starts

	status int
	body   bytes.Buffer // a whole answer

	// A stream (translating set): the relay's Chat stream is fed to rd,
	// src translates it.
	translating bool
	mu          sync.Mutex // the relay's heartbeat timer may write too
	feed        streamFeed
	rd          *sse.Reader
	src         sse.Source
	over        bool  // the translation has ended: the rest is dropped
	dirty       bool  // written to the client since its last flush
	werr        error // the client's write error: every later Write fails with it
}

func (g *geminiWriter) Header() http.Header { return g.header }

// Unwrap lets http.ResponseController reach the client's writer (for
// deadlines); Flush is this writer's own.
func (g *geminiWriter) Unwrap() http.ResponseWriter { return g.w }

func (g *geminiWriter) WriteHeader(code int) {
	if g.status != 0 || code < 200 {
		return
	}
	g.status = code
	if code < 300 && isEventStream(g.header) {
		g.startStream()
	}
}

func (g *geminiWriter) Write(p []byte) (int, error) {
	if g.status == 0 {
		g.WriteHeader(http.StatusOK)
	}
	if !g.translating {
		return g.body.Write(p)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.over {
		g.feed.p = p
		g.translateStream()
		g.feed.p = nil
	}
	if g.werr != nil {
		return 0, g.werr
	}
	return len(p), nil
}

// FlushError flushes a stream's translation to the client: the relay
// flushes once per read of its upstream, after the events of that read.
// A whole answer is written at the end.
func (g *geminiWriter) FlushError() error {
	if !g.translating {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.flush()
}

// flush flushes what was written since the last flush; g.mu is held.
func (g *geminiWriter) flush() error {
	if g.werr != nil || !g.dirty {
		return g.werr
	}
	g.dirty = false
	if err := g.rc.Flush(); err != nil {
		g.werr = err
	}
	return g.werr
}

// Flush is FlushError for callers that look for http.Flusher.
func (g *geminiWriter) Flush() { _ = g.FlushError() }

// startStream writes the headers of a Gemini stream (SSE with alt=sse,
// else the JSON array streamGenerateContent answers without it), flushed
// with the first flush, and readies the translation.
func (g *geminiWriter) startStream() {
	h := g.w.Header()
	for k, v := range g.header {
		h[k] = v
	}
	h.Del("Content-Length")
	if !g.call.sse {
		h.Set("Content-Type", "application/json; charset=UTF-8")
	}
	g.w.WriteHeader(g.status)
	g.translating, g.dirty = true, true
	g.rd = sse.NewReader(&g.feed, 0)
	g.src = gemini.FromChatStream(&heartbeatTap{src: g.rd, beat: g.beat}, chat.Options{Model: g.call.model})
	if !g.call.sse {
		g.src = gemini.JSONArray(g.src)
	}
}

// streamFeed is the relay's Chat stream as the translation reads it: the
// bytes of the Write being translated, then sse.ErrPending (nothing more
// until the relay's next Write), and io.EOF once the relay is through.
type streamFeed struct {
	p      []byte
	closed bool
}

func (f *streamFeed) Read(b []byte) (int, error) {
	if len(f.p) == 0 {
		if f.closed {
			return 0, io.EOF
		}
		return 0, sse.ErrPending
	}
	n := copy(b, f.p)
	f.p = f.p[n:]
	return n, nil
}

// beat writes a heartbeat (an SSE comment from the relay) as a bare line
// break, which both Gemini stream readers skip (see geminiHeartbeat), and
// flushes it; g.mu is held.
func (g *geminiWriter) beat() {
	if g.werr != nil {
		return
	}
	if _, err := g.w.Write(geminiHeartbeat); err != nil {
		g.werr = err
		return
	}
	g.dirty = true
	_ = g.flush()
}

// translateStream writes the Gemini events of the Chat events complete in what
// the relay has written so far; g.mu is held. When the translation is
// over (the finishReason chunk, an in-band error, a chunk it cannot read
// or an event too large to read, which the client is told of as an
// error, the client gone), g.over is set and the rest of the relay's
// stream (its trailing cost comment) is dropped; when the client is gone,
// the relay's Write fails.
func (g *geminiWriter) translateStream() {
	for g.werr == nil {
		ev, err := g.src.Next()
		if err == sse.ErrPending {
			return // the rest of the relay's write is buffered in rd
		}
		if err != nil {
			g.over = true
			if err != io.EOF {
				// A chunk the translation cannot read, or the reader's own
				// error (an event over its cap): what came before is out;
				// the client is told, as a Gemini stream error, rather than
				// left with a cut answer that looks whole.
				why := err.Error()
				if ue, ok := errors.AsType[*chat.UnreadableError](err); ok {
					why = ue.Reason
				}
				e := gemini.StreamError(http.StatusBadGateway, "The relay could not translate the answer ("+why+"); the stream was ended.")
				raw := e.Raw
				if g.call.sse {
					raw = sseAndBareError(e)
				}
				g.write(raw)
				_ = g.flush()
			}
			return
		}
		if g.call.skip > 0 && g.call.sse && ev.Type != "error" {
			g.call.skip-- // the client has it (a replay after a position)
			continue
		}
		raw := ev.Raw
		if ev.Type == "error" && g.call.sse {
			raw = sseAndBareError(ev)
		}
		g.write(raw)
	}
	g.over = true
}

// write writes raw to the client; g.mu is held.
func (g *geminiWriter) write(raw []byte) {
	if _, err := g.w.Write(raw); err != nil {
		g.werr = err
		return
	}
	g.dirty = true
}

// finish ends the answer once the relay is through: translates and
// flushes the rest of a stream, or translates a whole answer and writes
// it.
func (g *geminiWriter) finish() {
	if g.translating {
		g.mu.Lock()
		defer g.mu.Unlock()
		if !g.over {
			// The relay is through: a partial event left in rd is read
			// as cut off, then the translation ends.
			g.feed.closed = true
			g.translateStream()
		}
		_ = g.flush()
		g.rd.Release()
		return
	}
	if g.status == 0 {
		return // nothing was written (the client went away)
	}
	status, body := g.translate(g.status, g.body.Bytes())
	h := g.w.Header()
	for k, v := range g.header {
		h[k] = v
	}
	h.Del("Content-Length")
	h.Set("Content-Type", "application/json; charset=UTF-8")
	if g.call.method == geminiStream && g.call.sse && status < 300 {
		h.Set("Content-Type", "text/event-stream")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	g.w.WriteHeader(status)
	_, _ = g.w.Write(body)
}

// translate turns one of the relay's whole answers into Gemini's shape.
func (g *geminiWriter) translate(status int, body []byte) (int, []byte) {
	if status < 200 || status >= 300 {
		return gemini.FromChatError(status, body)
	}
	var err error
	out := body
	switch g.call.method {
	case geminiResume:
		return status, body // the stream URL's DELETE: the relay's own JSON
	case geminiList:
		var list struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if err = json.Unmarshal(body, &list); err == nil {
			names := make([]string, 0, len(list.Data))
			for _, m := range list.Data {
				names = append(names, m.ID)
			}
			out = gemini.ModelsList(names)
		}
	case geminiCount:
		var n struct {
			InputTokens *int `json:"input_tokens"`
		}
		if err = json.Unmarshal(body, &n); err == nil && n.InputTokens == nil {
			err = errors.New("no input_tokens")
		}
		if err == nil {
			out = gemini.CountTokensAnswer(*n.InputTokens)
		}
	case geminiStream:
		// A stream asked for, answered whole (an upstream that does not
		// stream): one chunk, or the array of it.
		out, err = gemini.FromChatResponse(body, chat.Options{Model: g.call.model})
		if err == nil && !g.call.sse {
			out = append(append([]byte("["), out...), ']')
		} else if err == nil {
			out = sse.AppendData(nil, out)
		}
	default:
		out, err = gemini.FromChatResponse(body, chat.Options{Model: g.call.model})
	}
	if err != nil {
		return http.StatusBadGateway, gemini.GeminiError(http.StatusBadGateway,
			"The relay could not translate the answer for a Gemini client: "+err.Error())
	}
	return status, out
}

// sseAndBareError is how an in-band error (gemini.StreamError) is
// written to an alt=sse stream: as a data event, then bare. @google/genai
// from 2.x (2.32.0 is pinned in e2e/node) raises an ApiError on a data
// event whose JSON has an "error" object, however the reads fall; the
// older copy bundled in Gemini CLI raises only on a read that is the bare
// object whole, and takes the data event for one more (empty) response.
// Written both ways, the first raises the ApiError at the data event and
// the second on the bare object when it comes in a read of its own (and
// otherwise as an incomplete JSON segment at the end: an error still,
// never a clean shorter answer).
func sseAndBareError(ev sse.Event) []byte {
	return append(sse.AppendData(nil, ev.Data), ev.Raw...)
}

// geminiHeartbeat is what a heartbeat is to a Gemini client: a bare line
// break, not an SSE comment (": keep-alive"). In the JSON array
// streamGenerateContent writes without alt=sse a comment is not JSON
// (whitespace between elements is); the SDK's SSE reader trims each
// event, and the regex reader of the older copy bundled in Gemini CLI,
// /^\s*data: (.*)(?:\n\n|…)/, is anchored and skips whitespace only (a
// comment at its head would stop it, though the CLI was seen to read
// through comments too: TestGeminiClientsAcceptHeartbeats runs both).
var geminiHeartbeat = []byte("\n")

// heartbeatTap passes a Chat stream's events on, but calls beat for each
// comment (the relay's heartbeats, which FromChatStream would drop) and
// drops it.
type heartbeatTap struct {
	src  sse.Source
	beat func()
}

func (h *heartbeatTap) Next() (sse.Event, error) {
	for {
		ev, err := h.src.Next()
		if err == nil && ev.IsComment() {
			h.beat()
			continue
		}
		return ev, err
	}
}
