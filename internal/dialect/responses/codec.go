package responses

import "github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"

// Codec is the Responses dialect's translations to and from Chat. Every
// direction but FromChatRequest exists (see there).
var Codec = chat.Codec{
	ToChatRequest: ToChatRequest, FromChatRequest: FromChatRequest,
	ToChatResponse: ToChatResponse, FromChatResponse: FromChatResponse,
	ToChatError: ToChatError, FromChatError: FromChatError,
	ToChatStream: ToChatStream, FromChatStream: FromChatStream,
}
