package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Behaviour is what the misbehaving upstream does with one request. The
// relay's config routes each behaviour as its own upstream model name,
// so the upstream picks it from the request body's "model".
type Behaviour string

const (
	Healthy     Behaviour = "healthy"     // a well-formed answer
	StallFirst  Behaviour = "stall-first" // 200 and headers, then silence before any data
	StallAfter  Behaviour = "stall-after" // stream: two events, then silence; non-stream: half the body, then silence
	CROnly      Behaviour = "cr-only"     // stream: a complete stream whose lines end in bare CR
	CRTail      Behaviour = "cr-tail"     // stream: an event ending "\n\r", then the connection drops
	NonSSE      Behaviour = "non-sse"     // stream: 200 application/json, a complete non-stream answer
	Redirect    Behaviour = "redirect"    // 302 with a Location naming an internal address and a token
	Garbage     Behaviour = "garbage"     // bytes that are not HTTP, then the connection closes
	Drop        Behaviour = "drop"        // stream: two events, then the connection drops; non-stream: half the body, then drops
	EOFNoDone   Behaviour = "eof"         // stream: two events, then a clean end without [DONE]
	RateLimited Behaviour = "429"         // 429 with Retry-After
	Storm503    Behaviour = "503-storm"   // 503 during storm windows, healthy between them
	Responses   Behaviour = "responses"   // a complete /v1/responses answer (stream ends without [DONE])
)

// RedirectLocation is what a Redirect answer points at: an internal
// address with a token, which must never reach a client.
const RedirectLocation = "http://10.11.12.13:8443/internal/admin?token=chaos-secret-token"

// UpstreamParams tunes the misbehaving upstream.
type UpstreamParams struct {
	// MaxStall bounds every stall, so nothing waits forever even when
	// nobody cancels; a stall also ends when the request's context does
	// or the upstream is closed.
	MaxStall time.Duration
	// StormPeriod: Storm503 answers 503 during the first half of each
	// period (counted from Start) and healthy answers in the second.
	StormPeriod time.Duration
	Start       time.Time
	// RetryAfter is the Retry-After value of 429 answers, in seconds.
	RetryAfter int
	// Seed picks the garbage bytes.
	Seed uint64
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Upstream is the misbehaving upstream, an http.Handler for
// POST .../chat/completions and POST .../responses.
type Upstream struct {
	p         UpstreamParams
	closed    chan struct{}
	closeOnce sync.Once
	mu        sync.Mutex
	counts    map[Behaviour]int
	rng       *rand.Rand       // the continuation behaviours' break points (under mu)
	contBroke map[string]bool  // the last answer per target broke (under mu)
	hits      map[string][]Hit // the resume cases' requests by nonce (under mu)
}

// NewUpstream returns the upstream.
func NewUpstream(p UpstreamParams) *Upstream {
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.MaxStall <= 0 {
		p.MaxStall = 2 * time.Minute
	}
	if p.StormPeriod <= 0 {
		p.StormPeriod = 4 * time.Second
	}
	if p.Start.IsZero() {
		p.Start = p.Now()
	}
	return &Upstream{p: p, closed: make(chan struct{}), counts: map[Behaviour]int{},
		rng: rand.New(rand.NewPCG(p.Seed, 0x636f6e74)), contBroke: map[string]bool{}, hits: map[string][]Hit{}}
}

// Close ends every stall, current and future.
func (u *Upstream) Close() { u.closeOnce.Do(func() { close(u.closed) }) }

// Counts returns how many requests each behaviour received.
func (u *Upstream) Counts() map[Behaviour]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[Behaviour]int, len(u.counts))
	for k, v := range u.counts {
		out[k] = v
	}
	return out
}

// TakeHits returns the requests that carried nonce (a resume case's, in
// its prompt), and forgets them.
func (u *Upstream) TakeHits(nonce string) []Hit {
	u.mu.Lock()
	defer u.mu.Unlock()
	h := u.hits[nonce]
	delete(u.hits, nonce)
	return h
}

// StormActive reports whether a 503 storm is on at now: the first half of
// every period since start.
func StormActive(now, start time.Time, period time.Duration) bool {
	if period <= 0 {
		return false
	}
	return now.Sub(start)%period < period/2
}

// ServeHTTP answers one request with the behaviour its model names.
func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil || json.Unmarshal(body, &req) != nil {
		writeError(w, http.StatusBadRequest, "bad request body", "invalid_request_error")
		return
	}
	b := Behaviour(req.Model)
	if name, _, ok := strings.Cut(req.Model, "@"); ok && isCont(Behaviour(name)) {
		b = Behaviour(name) // "cont-drop@<tag>": a target of its own (see cont)
	}
	nonce := findNonce(body)
	u.mu.Lock()
	u.counts[b]++
	if nonce != "" {
		u.hits[nonce] = append(u.hits[nonce], Hit{Path: r.URL.Path, Fresh: answerSoFar(body) == ""})
	}
	u.mu.Unlock()
	if isCont(b) {
		u.cont(w, r, b, req.Model, body, req.Stream)
		return
	}
	responses := strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), "/responses")
	if b == Responses || responses {
		u.responses(w, req.Stream)
		return
	}
	switch b {
	case Healthy:
		u.healthy(w, req.Stream)
	case StallFirst:
		if req.Stream {
			sseHeaders(w)
			_, _ = io.WriteString(w, ": waiting\n\n")
		} else {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
		}
		flush(w)
		u.stall(r)
	case StallAfter:
		if req.Stream {
			u.events(w, 2, "\n")
		} else {
			halfBody(w)
		}
		u.stall(r)
	case CROnly:
		if !req.Stream {
			u.healthy(w, false)
			return
		}
		u.events(w, 4, "\r")
		_, _ = io.WriteString(w, "data: [DONE]\r\r")
	case CRTail:
		if !req.Stream {
			u.healthy(w, false)
			return
		}
		u.events(w, 2, "\n")
		// A block ended by LF then a bare CR: a WHATWG parser dispatches
		// here; an LF-only one glues whatever comes next to this line.
		_, _ = io.WriteString(w, "data: "+chunkJSON("tail", "")+"\n\r")
		flush(w)
		panic(http.ErrAbortHandler)
	case NonSSE:
		u.healthy(w, false)
	case Redirect:
		w.Header().Set("Location", RedirectLocation)
		w.WriteHeader(http.StatusFound)
	case Garbage:
		u.garbage(w)
	case Drop:
		if req.Stream {
			u.events(w, 2, "\n")
		} else {
			halfBody(w)
		}
		panic(http.ErrAbortHandler)
	case EOFNoDone:
		if !req.Stream {
			u.healthy(w, false)
			return
		}
		u.events(w, 2, "\n")
	case RateLimited:
		w.Header().Set("Retry-After", strconv.Itoa(u.p.RetryAfter))
		writeError(w, http.StatusTooManyRequests, "rate limited (chaos)", "rate_limit_error")
	case Storm503:
		if StormActive(u.p.Now(), u.p.Start, u.p.StormPeriod) {
			writeError(w, http.StatusServiceUnavailable, "overloaded (chaos storm)", "server_error")
			return
		}
		u.healthy(w, req.Stream)
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown chaos behaviour %q", req.Model), "invalid_request_error")
	}
}

// stall waits until the request ends, the upstream closes or MaxStall.
func (u *Upstream) stall(r *http.Request) {
	t := time.NewTimer(u.p.MaxStall)
	defer t.Stop()
	select {
	case <-r.Context().Done():
	case <-u.closed:
	case <-t.C:
	}
}

// healthy writes a complete chat completion.
func (u *Upstream) healthy(w http.ResponseWriter, stream bool) {
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, completionJSON)
		return
	}
	u.events(w, 4, "\n")
	_, _ = io.WriteString(w, "data: "+chunkJSON("", "stop")+"\n\ndata: [DONE]\n\n")
}

// events writes SSE headers and n content events, each block ended by
// two eol, flushing after each.
func (u *Upstream) events(w http.ResponseWriter, n int, eol string) {
	sseHeaders(w)
	for i := range n {
		_, _ = io.WriteString(w, "data: "+chunkJSON("word"+strconv.Itoa(i)+" ", "")+eol+eol)
		flush(w)
	}
}

// garbage hijacks the connection and writes bytes that are not HTTP.
func (u *Upstream) garbage(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	conn, buf, err := rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer conn.Close()
	_, _ = buf.Write(GarbageBytes(u.p.Seed, 256))
	_ = buf.Flush()
}

// GarbageBytes returns n seeded bytes that do not start like an HTTP
// response.
func GarbageBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 0x6761726261676521))
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(rng.Uint32())
	}
	if n > 0 {
		out[0] = 0xff // never 'H'
	}
	return out
}

// responses writes a complete Responses API answer: a stream of typed
// events that ends with response.completed and no [DONE], or a response
// object.
func (u *Upstream) responses(w http.ResponseWriter, stream bool) {
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"resp_chaos","object":"response","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]}]}`)
		return
	}
	sseHeaders(w)
	for _, ev := range []struct{ typ, data string }{
		{"response.created", `{"type":"response.created","response":{"id":"resp_chaos","status":"in_progress"}}`},
		{"response.output_text.delta", `{"type":"response.output_text.delta","delta":"hel"}`},
		{"response.output_text.delta", `{"type":"response.output_text.delta","delta":"lo"}`},
		{"response.completed", `{"type":"response.completed","response":{"id":"resp_chaos","status":"completed"}}`},
	} {
		_, _ = io.WriteString(w, "event: "+ev.typ+"\ndata: "+ev.data+"\n\n")
		flush(w)
	}
}

// completionJSON is a complete non-stream chat completion.
const completionJSON = `{"id":"chatcmpl-chaos","object":"chat.completion","created":1700000000,"model":"chaos","choices":[{"index":0,"message":{"role":"assistant","content":"hello from chaos"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`

// halfBody writes a 200 with the whole answer's Content-Length and half
// of its bytes.
func halfBody(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(completionJSON)))
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, completionJSON[:len(completionJSON)/2])
	flush(w)
}

// chunkJSON is one chat.completion.chunk.
func chunkJSON(content, finish string) string {
	fr := "null"
	if finish != "" {
		fr = strconv.Quote(finish)
	}
	c, _ := json.Marshal(content)
	return `{"id":"chatcmpl-chaos","object":"chat.completion.chunk","created":1700000000,"model":"chaos","choices":[{"index":0,"delta":{"content":` +
		string(c) + `},"finish_reason":` + fr + `}]}`
}

func sseHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

func flush(w http.ResponseWriter) { _ = http.NewResponseController(w).Flush() }

// writeError writes an OpenAI error JSON answer.
func writeError(w http.ResponseWriter, status int, msg, typ string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": nil}})
	_, _ = w.Write(b)
}
