package gemini

import "github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"

// Codec is the Gemini dialect's translations to and from Chat: every
// direction exists.
var Codec = chat.Codec{
	ToChatRequest: ToChatRequest, FromChatRequest: FromChatRequest,
	ToChatResponse: ToChatResponse, FromChatResponse: FromChatResponse,
	ToChatError: ToChatError, FromChatError: FromChatError,
	ToChatStream: ToChatStream, FromChatStream: FromChatStream,
}
