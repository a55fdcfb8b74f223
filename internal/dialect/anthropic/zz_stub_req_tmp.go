package anthropic

// TEMPORARY stubs of the request, answer and error translators; removed
// when the real ones (request.go, response.go, errors.go) land.

type RequestError struct{ Param, Message string }

func (e *RequestError) Error() string                          { return e.Message }
func FromChatRequest(chat []byte) ([]byte, error)              { return chat, nil }
func ToChatRequest(msg []byte) ([]byte, error)                 { return msg, nil }
func ToChatResponse(msg []byte, created int64) ([]byte, error) { return msg, nil }
func FromChatResponse(chat []byte) ([]byte, error)             { return chat, nil }
func ToChatError(status int, body []byte) (int, []byte)        { return status, body }
func FromChatError(status int, body []byte) (int, []byte)      { return status, body }
