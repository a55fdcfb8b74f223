// Package responses translates between the OpenAI Responses API and Chat
// Completions, the pivot every dialect is translated through, so that a
// Responses client (the OpenAI SDKs' responses resource, Codex CLI) can
// reach any Chat provider, and through the anthropic package an Anthropic
// one (Responses → Chat → Messages).
//
// The package has the codec surface of every dialect package (see
// chat.Codec), and Codec holds its functions for the relay's table:
//
//	Responses → Chat: ToChatRequest (a client's request), ToChatResponse,
//	                  ToChatError, ToChatStream (an answer read as Chat)
//	Chat → Responses: FromChatResponse, FromChatError, FromChatStream
//	                  (an answer for a client); FromChatRequest is not
//	                  supported (it returns chat.ErrNotSupported)
//
// The relay uses ToChatResponse and ToChatStream to read a Responses
// answer as Chat (a shadow copy's comparison); no route sends a Chat
// request to a Responses-only upstream.
//
// The translation is stateless: anything that needs the provider to keep
// a response (previous_response_id, store, background, conversation) is
// refused rather than faked. The package is pure: no Caddy, no clock
// (times are parameters).
package responses
