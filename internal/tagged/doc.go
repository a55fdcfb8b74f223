// Package tagged turns a Chat Completions answer whose reasoning is inline
// in its content, between tags (<think>…</think>, see internal/thinktag),
// into the same answer with the reasoning in a reasoning field
// (reasoning_content, or reasoning), as the stream arrives. Everything
// after it in the relay (the re-pacer's lanes, `reasoning hide`, reasoning
// budgets, the reasoning trace, the cluster rate, the translators into
// Messages thinking blocks and Responses reasoning items) reads the field,
// so it works on tagged reasoning exactly as on a provider's field.
//
// [NewSource] wraps an upstream's stream (an sse.Source); [Answer]
// rewrites a whole chat.completion. Both read choice 0 only, the one
// choice the relay's translators ask for; other choices pass as they
// came.
//
// # The stream
//
// Each text delta of choice 0 (pace.Classify's KindText on the content
// channel) has its text fed to a thinktag.Parser, and is replaced by one
// event per segment the parser returns, in order: reasoning in the
// reasoning field, answer in content, each in the chunk's own envelope
// (its id, model, created and every other member, byte for byte, only
// the text's key changed). An event whose text is all answer, as it came
// (the answer after </think>, an answer with no tags), passes untouched,
// byte for byte; once the parser knows no tag will come (AtStart found
// text first), every event passes without being looked at. Text the parser
// holds back (a suffix that may begin a tag, at most the longest tag less
// one byte) leaves with the next event, or with the finish chunk, [DONE]
// or the stream's end, in the envelope of the last text delta. A delta
// whose text was all held back, with nothing to send, is dropped, unless it
// carries the role (the first chunk), which goes on with an empty
// content.
//
// Chunks that carry content with something else (the last token with its
// finish_reason, as vLLM sends it; content next to tool_calls) are
// decoded whole and rewritten as the text events, then the chunk without
// its content. Reasoning deltas the upstream sends in a field pass as
// they are: an upstream with a reasoning parser needs none of this.
//
// The rewritten events are built in a buffer reused from one upstream
// event to the next: like an sse.Reader's, an event is valid until the
// next call to Next.
//
// The package has no Caddy imports and no clock.
package tagged
