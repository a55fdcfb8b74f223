package sim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// geminiError is Google's error body, google.rpc.Status as JSON:
// {"error":{"code":429,"message":"...","status":"RESOURCE_EXHAUSTED",
// "details":[...]}}.
type geminiError struct {
	Error geminiErrorDetail `json:"error"`
}

type geminiErrorDetail struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Status  string          `json:"status"`
	Details []geminiDetails `json:"details,omitempty"`
}

// geminiDetails is one entry of details; the simulator sends only
// google.rpc.RetryInfo.
type geminiDetails struct {
	Type       string `json:"@type"`
	RetryDelay string `json:"retryDelay,omitempty"`
}

// geminiOverloaded is the message of Gemini's 503 when the model is
// overloaded, word for word.
const geminiOverloaded = "The model is overloaded. Please try again later."

// geminiInBandError is the chunk an "error" fault sends inside a stream:
// Google's error object, code 500, as Gemini sends when a stream fails
// after it started.
var geminiInBandError = geminiError{geminiErrorDetail{
	Code:    http.StatusInternalServerError,
	Message: inBandError.Error.Message,
	Status:  "INTERNAL",
}}

// geminiStatus is the google.rpc.Code name Google's APIs answer with an
// HTTP status.
func geminiStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "ABORTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// writeGeminiError writes a Google error response. retryDelay, if not
// empty, adds a google.rpc.RetryInfo detail ("2s").
func writeGeminiError(w http.ResponseWriter, status int, msg, retryDelay string) {
	body := geminiError{geminiErrorDetail{Code: status, Message: msg, Status: geminiStatus(status)}}
	if retryDelay != "" {
		body.Error.Details = []geminiDetails{{Type: "type.googleapis.com/google.rpc.RetryInfo", RetryDelay: retryDelay}}
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// writeGeminiFault answers a "status" or "overloaded" fault on the
// Gemini endpoints: overloaded is Gemini's own 503 UNAVAILABLE. A
// RetryAfter of whole seconds is also sent the way Google sends it, as
// a RetryInfo retryDelay ("2" becomes "2s"); the Retry-After header is
// sent verbatim as on the other endpoints.
func writeGeminiFault(w http.ResponseWriter, f *Fault) {
	delay := ""
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
		if secs, err := strconv.Atoi(strings.TrimSpace(f.RetryAfter)); err == nil && secs >= 0 {
			delay = strconv.Itoa(secs) + "s"
		}
	}
	if f.Kind == FaultOverloaded {
		writeGeminiError(w, http.StatusServiceUnavailable, geminiOverloaded, delay)
		return
	}
	msg := "simulated upstream status " + strconv.Itoa(f.Status)
	if f.Status == http.StatusTooManyRequests {
		msg = "Resource has been exhausted (e.g. check quota). " + msg
	}
	writeGeminiError(w, f.Status, msg, delay)
}
