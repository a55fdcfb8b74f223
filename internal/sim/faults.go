package sim

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// pickFault returns the fault to apply to the n-th request (of any
// endpoint), or nil. Each fault's draw is a pure function of (seed, n,
// fault index), so for a given seed the outcome of the n-th request
// never depends on scheduling.
func (s *Server) pickFault(n uint64) *Fault {
	for i := range s.cfg.Faults {
		f := &s.cfg.Faults[i]
		if f.Rate >= 1 || newRNG(uint64(s.cfg.Seed), n, uint64(i)).float() < f.Rate {
			return f
		}
	}
	return nil
}

// writeStatusFault answers a "status" or "overloaded" fault on chat
// completions.
func writeStatusFault(w http.ResponseWriter, f *Fault) {
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	if f.Kind == FaultOverloaded {
		// OpenAI has no 529: an overloaded OpenAI-compatible provider
		// answers 503, which clients retry the same way.
		writeError(w, http.StatusServiceUnavailable, "simulated upstream overloaded", "server_error", "overloaded")
		return
	}
	typ, code := "server_error", "simulated"
	switch {
	case f.Status == http.StatusTooManyRequests:
		typ, code = "rate_limit_error", "rate_limit_exceeded"
	case f.Status == http.StatusUnauthorized:
		typ, code = "authentication_error", "invalid_api_key"
	case f.Status < 500:
		typ = "invalid_request_error"
	}
	writeError(w, f.Status, "simulated upstream status "+strconv.Itoa(f.Status), typ, code)
}

// apiError is the OpenAI error body.
type apiError struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    string `json:"code"`
}

// inBandError is the event an "error" fault sends inside a stream.
var inBandError = apiError{errorDetail{
	Message: "simulated upstream error",
	Type:    "server_error",
	Code:    "simulated",
}}

// writeError writes an OpenAI error JSON response.
func writeError(w http.ResponseWriter, status int, msg, typ, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(apiError{errorDetail{Message: msg, Type: typ, Code: code}})
}
