package chat

import (
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrorBody is OpenAI's error answer, {"error":{"message","type","param",
// "code"}}: the body of an error answer, and the data of an in-band error
// event. Any OpenAI SDK turns it into its typed error (by status) and
// shows the message.
type ErrorBody struct {
	Error ErrorObject `json:"error"`
}

// ErrorObject is the error inside an ErrorBody. Param and Code are null
// when nil.
type ErrorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// ErrorType is OpenAI's error type for an HTTP status, as the OpenAI API
// itself uses them: a 4xx it has no word for is the client's
// invalid_request_error, anything else a server_error.
func ErrorType(status int) string {
	if t, ok := errorTypes[status]; ok {
		return t
	}
	if status >= 400 && status < 500 {
		return "invalid_request_error"
	}
	return "server_error"
}

// errorTypes are the statuses OpenAI has a word of its own for.
var errorTypes = map[int]string{
	http.StatusUnauthorized: "authentication_error", http.StatusForbidden: "permission_error",
	http.StatusNotFound: "not_found_error", http.StatusTooManyRequests: "rate_limit_error",
}

// Excerpt is a short, printable piece of a body of unknown shape (an HTML
// page from a proxy, a truncated answer), for an error message: valid
// UTF-8, whitespace runs folded, at most 200 characters.
func Excerpt(body []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(body), "\uFFFD"))
	if s == "" {
		return ""
	}
	s = strings.Join(strings.Fields(s), " ")
	const max = 200
	if utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max]) + "…"
	}
	return s
}

// StatusText names an HTTP status in a message whose body said nothing.
func StatusText(status int) string { return "HTTP " + strconv.Itoa(status) }
