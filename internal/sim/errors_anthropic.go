package sim

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/anthropic"
)

// overloadedError is what Anthropic sends when it is overloaded: the body
// of a 529 and the data of the in-band `event: error`.
var overloadedError = json.RawMessage(anthropic.MessagesError("overloaded_error", "Overloaded"))

// writeAnthropicError writes an Anthropic error response, typed by status
// with the relay's own table (anthropic.ErrorType).
func writeAnthropicError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(anthropic.MessagesError(anthropic.ErrorType(status), msg))
}

// writeAnthropicFault answers a "status" or "overloaded" fault on the
// Messages endpoints.
func writeAnthropicFault(w http.ResponseWriter, f *Fault) {
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	if f.Kind == FaultOverloaded {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(anthropic.StatusOverloaded)
		_, _ = w.Write(overloadedError)
		return
	}
	writeAnthropicError(w, f.Status, "simulated upstream status "+strconv.Itoa(f.Status))
}
