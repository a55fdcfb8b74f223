package llmrelay

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"
)

// Stored responses. The Responses API keeps what it answered at the
// provider: GET /v1/responses/{id} (and its input_items, cancel and
// DELETE) ask the provider that made it. The relay remembers nothing of
// what it relayed, so it asks its `api openai` upstreams in config order
// and hands back the first answer that is not a 404 (a 404 from the last
// one is the answer). Responses the relay translated from another
// dialect were never stored anywhere; a relay without an OpenAI upstream
// says so with a 400 rather than guessing.

// storedTimeout bounds one stored-response call to one upstream.
const storedTimeout = 30 * time.Second

func (h *Relay) serveStored(w http.ResponseWriter, r *http.Request, req *requestState) {
	rest := req.ep.rest
	var ups []*upstreamRuntime
	for _, u := range h.Upstreams {
		if rt := h.upstreams[u.Name]; rt != nil && rt.api == apiOpenAI {
			ups = append(ups, rt)
		}
	}
	if len(ups) == 0 {
		h.reject(w, req, errNoStoredResponses(r.Method, r.URL.Path))
		return
	}
	ups, e := storedInRegion(ups, r) // regions.go
	if e != nil {
		h.reject(w, req, e)
		return
	}
	body, _, err := readBody(r, h.MaxBody, false)
	if err != nil {
		if e, ok := asAPIError(err); ok {
			h.reject(w, req, e)
		} else {
			req.status = statusClientClosed
		}
		return
	}
	if len(body) == 0 {
		body = nil
	}
	for i, up := range ups {
		last := i == len(ups)-1
		if done := h.askStored(w, r, req, up, rest, body, last); done {
			return
		}
	}
}

// askStored sends the call to one upstream. It reports false when the
// upstream answered 404 (or failed) and another is left to ask.
func (h *Relay) askStored(w http.ResponseWriter, r *http.Request, req *requestState, up *upstreamRuntime, rest string, body []byte, last bool) bool {
	ctx, cancel := context.WithTimeout(r.Context(), storedTimeout)
	defer cancel()
	ureq, err := up.newRequest(ctx, r.Method, up.url(rest, r.URL.RawQuery), r.Header, bytesPayload(body))
	if err != nil {
		h.reject(w, req, errStoredFailed(up.name, err))
		return true
	}
	resp, err := up.transport.RoundTrip(ureq)
	if err != nil {
		if !last {
			return false
		}
		h.reject(w, req, errStoredFailed(up.name, err))
		return true
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && !last {
		return false
	}
	req.upstream = up.name
	req.status = resp.StatusCode
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	// A background response is retrieved as a stream (?stream=true):
	// every read goes out at once.
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return true
			}
			_ = rc.Flush()
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				req.streamError = "upstream_broken"
			}
			return true
		}
	}
}
