package anthropic

// TEMPORARY stubs, removed when the helpers' files merge.

import "github.com/llmrelay/caddy-llm-relay/internal/sse"

type RequestError struct{ Param, Message string }

func (e *RequestError) Error() string                    { return e.Message }
func FromChatRequest(chat []byte) ([]byte, error)         { return chat, nil }
func ToChatRequest(msg []byte) ([]byte, error)            { return msg, nil }
func ToChatResponse(msg []byte, created int64) ([]byte, error) { return msg, nil }
func FromChatResponse(chat []byte) ([]byte, error)        { return chat, nil }
func ToChatError(status int, body []byte) (int, []byte)   { return status, body }
func FromChatError(status int, body []byte) (int, []byte) { return status, body }
func ChatUsage(b []byte) []byte                           { return b }
func MessagesUsage(b []byte) []byte                       { return b }

type Source interface{ Next() (sse.Event, error) }
type ChatStreamOptions struct {
	Model        string
	Created      int64
	IncludeUsage bool
}
type MessagesStreamOptions struct {
	Model       string
	InputTokens int
}

func ChatStream(src Source, opt ChatStreamOptions) Source         { return src }
func MessagesStream(src Source, opt MessagesStreamOptions) Source { return src }
