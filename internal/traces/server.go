package traces

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// maxBody bounds the request body the handler reads.
const maxBody = 1 << 20

// Handler returns a loopback upstream that replays the traces. It routes
// by path suffix, so it can be mounted under any prefix:
//
//	POST .../chat/completions   replays the trace named by the body's
//	                            "model" ("stream" must be true)
//	GET  .../models             lists the trace names
//
// A replay answers 200 text/event-stream at once and writes each step at
// its offset from the moment the headers were written, flushing after
// each step, then ends the response (for "error" and "eof" traces without
// [DONE]; an "eof" trace's cut-off block is written as is). Offsets are
// measured from a fixed start, so late wake-ups do not accumulate. It
// stops as soon as the client goes away. Unknown models get a 404 and bad
// requests a 400, with an OpenAI-style error body.
func Handler() http.Handler { return handler{} }

type handler struct{}

func (handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case strings.HasSuffix(p, "/chat/completions"):
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, "use POST for chat completions", "method_not_allowed", "")
			return
		}
		chat(w, r)
	case strings.HasSuffix(p, "/models"):
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "use GET to list models", "method_not_allowed", "")
			return
		}
		models(w)
	default:
		writeError(w, http.StatusNotFound, "unknown path "+r.URL.Path, "unknown_url", "")
	}
}

func chat(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error(), "invalid_json", "")
		return
	}
	t, ok := ByName(req.Model)
	if !ok {
		writeError(w, http.StatusNotFound, "The model `"+req.Model+"` does not exist (known traces: "+
			strings.Join(Names(), ", ")+")", "model_not_found", "model")
		return
	}
	if !req.Stream {
		writeError(w, http.StatusBadRequest, "traces are streamed only: set \"stream\": true", "stream_required", "stream")
		return
	}
	replay(w, r, t)
}

// replay writes the trace's steps at their offsets.
func replay(w http.ResponseWriter, r *http.Request, t Trace) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	start := time.Now()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for _, s := range t.Steps {
		if d := time.Until(start.Add(s.At)); d > 0 {
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			select {
			case <-timer.C:
			case <-r.Context().Done():
				return
			}
		}
		if _, err := w.Write(s.Raw); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

func models(w http.ResponseWriter) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, name := range Names() {
		list.Data = append(list.Data, model{name, "model", chunkCreated, "traces"})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

// writeError writes an OpenAI-style error body.
func writeError(w http.ResponseWriter, status int, msg, code, param string) {
	typ := "invalid_request_error"
	var p *string
	if param != "" {
		p = &param
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": msg, "type": typ, "param": p, "code": code,
	}})
}
