// Package anthropic is the Anthropic Messages wire format
// (POST /v1/messages) and its translation to and from OpenAI Chat
// Completions, the pivot every dialect is translated through.
//
// Every function here is pure: bytes in, bytes out, no Caddy imports, no
// clock, no network. The package has the codec surface of every dialect
// package (see chat.Codec), and Codec holds its functions for the
// relay's table:
//
//	Messages → Chat: ToChatRequest (a client's request), ToChatResponse,
//	                 ToChatError, ToChatStream (an upstream's answer)
//	Chat → Messages: FromChatRequest (a request for an upstream),
//	                 FromChatResponse, FromChatError, FromChatStream
//	                 (an answer for a client)
//
// so a Messages client of a Chat provider goes ToChatRequest, then
// FromChatStream or FromChatResponse / FromChatError on the way back; a
// Chat client of an Anthropic upstream FromChatRequest, then ToChatStream
// or ToChatResponse / ToChatError; any other dialect meets Messages
// through Chat the same way.
//
// Streams are translated as sources of SSE events (sse.Source): a
// translator reads the upstream's events and yields the client dialect's,
// so the re-pacer, the commit point, budgets and usage see the client's
// dialect only.
//
// mapping.go holds the tables both directions share (stop reasons, error
// types and statuses, usage, reasoning effort and thinking budgets);
// docs/anthropic.md repeats them for operators.
package anthropic
