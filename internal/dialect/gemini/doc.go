// Package gemini is the Gemini API wire format (generateContent,
// streamGenerateContent with alt=sse, countTokens, under /v1beta or /v1)
// and its translation to and from OpenAI Chat Completions, the pivot
// every dialect is translated through.
//
// Every function here is pure: bytes in, bytes out, no Caddy imports, no
// clock, no network. The package has the codec surface of every dialect
// package (see chat.Codec), and Codec holds its functions for the
// relay's table:
//
//	Gemini → Chat: ToChatRequest (a client's request), ToChatResponse,
//	               ToChatError, ToChatStream (an upstream's answer)
//	Chat → Gemini: FromChatRequest (a request for an upstream),
//	               FromChatResponse, FromChatError, FromChatStream
//	               (an answer for a client)
//
// The model and the method are in a Gemini request's path
// (models/{model}:streamGenerateContent), not its body. So ToChatRequest
// takes the model from chat.Options.Model (the caller read it from the
// path) and leaves stream out, which ToChatStreamRequest adds for a
// stream call;
// FromChatRequest writes neither, and the caller builds the upstream's
// path with Path from the Chat request's model and stream (ChatModel).
//
// Tool call ids: a Gemini functionCall may have none, so one is minted
// (CallID, the same each time a history is sent again), and a
// functionResponse without one answers the first unanswered call of its
// name. A functionCall's thoughtSignature, which Gemini 3 wants back in
// later turns, rides in the Chat tool call id (SplitCallID), which every
// dialect hands back verbatim; StripSignatures takes it out of a Chat
// request bound for another target (OpenAI refuses ids that long).
//
// Streams are translated as sources of SSE events (sse.Source). A Gemini
// stream has no [DONE]: it ends on the chunk with the finishReason (plus
// possibly one of usage only), and its usageMetadata is cumulative.
// ToChatStream ends the Chat stream (usage chunk, [DONE]) at the end of
// such a stream; FromChatStream writes the finishReason chunk at [DONE].
// In-band errors after the commit point are written as the @google/genai
// SDK raises them (StreamError).
//
// mapping.go holds the tables both directions share (finish reasons,
// Google status names and HTTP statuses, thinking budgets and efforts,
// usage); docs/gemini.md repeats them for operators, with what is not
// translated. RetryDelay reads a 429's RetryInfo for Retry-After.
package gemini
