// Package anthropic is the Anthropic Messages wire format
// (POST /v1/messages) and its translation to and from OpenAI Chat
// Completions, which is the relay's other dialect.
//
// Every function here is pure: bytes in, bytes out, no Caddy imports, no
// clock, no network. The relay's root package picks the function by the
// pair (client dialect, upstream dialect):
//
//	client Chat  → upstream Messages: FromChatRequest, then ChatStream or
//	                                  ToChatResponse / ToChatError on the way back
//	client Messages → upstream Chat:  ToChatRequest, then MessagesStream or
//	                                  FromChatResponse / FromChatError on the way back
//
// Streams are translated as sources of SSE events (the shape of
// pace.Source): a translator reads the upstream's events and yields the
// client dialect's, so the re-pacer, the commit point, budgets and usage
// see the client's dialect only.
//
// mapping.go holds the tables both directions share (stop reasons, error
// types and statuses, usage, reasoning effort and thinking budgets);
// docs/anthropic.md repeats them for operators.
package anthropic
