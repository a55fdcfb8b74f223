package sim

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// anthropicError is Anthropic's error body, also the data of an
// `event: error` in a stream.
type anthropicError struct {
	Type  string              `json:"type"` // always "error"
	Error anthropicErrorInner `json:"error"`
}

type anthropicErrorInner struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// overloadedError is what Anthropic sends when it is overloaded: the
// body of a 529 and the in-band stream error.
var overloadedError = anthropicError{"error", anthropicErrorInner{"overloaded_error", "Overloaded"}}

// anthropicErrorType maps a status to Anthropic's error type, as its API
// documents them; other statuses fall back by class.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if status < 500 {
		return "invalid_request_error"
	}
	return "api_error"
}

// writeAnthropicError writes an Anthropic error JSON response.
func writeAnthropicError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(anthropicError{"error", anthropicErrorInner{anthropicErrorType(status), msg}})
}

// writeAnthropicFault answers a "status" or "overloaded" fault on the
// Messages endpoints.
func writeAnthropicFault(w http.ResponseWriter, f *Fault) {
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	if f.Kind == FaultOverloaded {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(529)
		_ = json.NewEncoder(w).Encode(overloadedError)
		return
	}
	writeAnthropicError(w, f.Status, "simulated upstream status "+strconv.Itoa(f.Status))
}
