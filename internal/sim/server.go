package sim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxBody bounds the request body a chat completion may have.
const maxBody = 16 << 20

// modelsCreated is the fixed "created" time of listed models.
const modelsCreated = 1700000000

// Server is the simulator, an http.Handler. It routes by path suffix,
// so it can be mounted under any prefix:
//
//	POST .../chat/completions        chat completion, streaming or not
//	POST .../messages                Anthropic Messages, streaming or not
//	POST .../responses               OpenAI Responses, streaming or not
//	POST .../messages/count_tokens   Anthropic token count
//	GET  .../models                  the configured models
//	POST .../models/{model}:generateContent        Gemini, whole
//	POST .../models/{model}:streamGenerateContent  Gemini, streamed (?alt=sse: SSE; else a JSON array)
//	POST .../models/{model}:countTokens            Gemini token count
//	GET  .../v1beta/models[/{model}]               the models in Gemini's shape (also
//	                                               under /v1 with x-goog-api-key or ?key=)
//
// Anything else gets a 404 (or 405) with an OpenAI error JSON body; the
// Messages endpoints answer every error in Anthropic's shape, the Gemini
// ones in Google's. API keys (Authorization, x-api-key, x-goog-api-key
// or ?key=) are not checked.
type Server struct {
	cfg                Config
	reasoning, content []string
	signature          string // of every thinking block

	requests  atomic.Int64
	closed    chan struct{}
	closeOnce sync.Once
	watched   sync.Map // *http.Server whose shutdown closes s
}

// New validates cfg, applies its defaults and returns a Server.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, closed: make(chan struct{})}
	s.reasoning, s.content = Texts(cfg)
	s.signature = signature(cfg.Seed)
	return s, nil
}

// Requests returns the number of requests received so far on the
// chat completions, messages, count_tokens, responses and Gemini
// endpoints together, whatever their outcome (model listings and unknown
// paths do not count). The n-th request (from 1) is the n-th fault draw
// and has ID "chatcmpl-sim-<n>", "msg_sim_<n>", "resp_sim_<n>" or (Gemini's
// responseId) "gen_sim_<n>".
func (s *Server) Requests() int64 { return s.requests.Load() }

// Close ends stalled requests, current and future, by aborting their
// connections, so a "stall" fault cannot hold a server shutdown forever.
// Other responses are unaffected; their waits are bounded by the config.
// Close is idempotent. It is also called when the http.Server serving a
// stalled request starts shutting down (http.Server.RegisterOnShutdown),
// which covers Caddy's graceful shutdown and reloads.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closed) })
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if (waiter{r.Context()}).wait(s.cfg.Latency) != nil {
		return // the client left
	}
	p := strings.TrimSuffix(r.URL.Path, "/")
	if model, method, ok := geminiRoute(p); ok {
		s.gemini(w, r, model, method)
		return
	}
	switch {
	case strings.HasSuffix(p, "/chat/completions"):
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, "use POST for chat completions", "invalid_request_error", "method_not_allowed")
			return
		}
		s.chat(w, r)
	case strings.HasSuffix(p, "/responses"):
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, "use POST for responses", "invalid_request_error", "method_not_allowed")
			return
		}
		s.responses(w, r)
	case strings.HasSuffix(p, "/messages/count_tokens"):
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeAnthropicError(w, http.StatusMethodNotAllowed, "use POST to count tokens")
			return
		}
		s.countTokens(w, r)
	case strings.HasSuffix(p, "/messages"):
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeAnthropicError(w, http.StatusMethodNotAllowed, "use POST for messages")
			return
		}
		s.messages(w, r)
	case strings.HasSuffix(p, "/models"):
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "use GET to list models", "invalid_request_error", "method_not_allowed")
			return
		}
		if geminiListing(r) {
			s.geminiModels(w, "")
			return
		}
		s.models(w)
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) && geminiListing(r) && strings.Contains(p, "/models/"):
		s.geminiModels(w, p[strings.LastIndex(p, "/models/")+len("/models/"):])
	default:
		writeError(w, http.StatusNotFound, "unknown simulator path "+r.URL.Path, "invalid_request_error", "unknown_url")
	}
}

// head is the id/object/created/model prefix shared by every chunk.
func (s *Server) head(req *chatRequest, n int64, object string) chunk {
	return chunk{
		ID:      "chatcmpl-sim-" + strconv.FormatInt(n, 10),
		Object:  object,
		Created: time.Now().Unix(),
		Model:   req.Model,
	}
}

func (s *Server) models(w http.ResponseWriter) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list"}
	for _, id := range s.cfg.Models {
		list.Data = append(list.Data, model{id, "model", modelsCreated, "llm-simulator"})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}
