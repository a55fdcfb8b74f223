package chat

import "net/http"

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
