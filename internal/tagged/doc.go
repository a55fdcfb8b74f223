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
// event per run of segments of one kind the parser returns, in order:
// reasoning in the reasoning field, answer in content, each in the
// chunk's own envelope (its id, model, created and every other member,
// byte for byte, only the text's key changed; a member of the field's
// name beside the content, as SGLang writes "reasoning_content":null, is
// renamed content, so that no key is there twice). An event whose text is
// all answer, as it came (the answer after </think>, an answer with no
// tags), passes untouched, byte for byte; once the parser knows no tag
// will come (AtStart found text first), every event passes without being
// looked at. Text the parser holds back (a suffix that may begin a tag, at
// most the longest tag less one byte) leaves with the next event's text,
// in the same event, or with the finish chunk, [DONE] or the stream's end
// (before a last block cut short), in the envelope of the last text delta.
// A delta whose text was all held back, with nothing to send, is dropped,
// unless it carries the role (the first chunk), which goes on with an
// empty content.
//
// A delta in the envelope of the last one (the same bytes around one
// string, on one data line) is not classified again: the steady path costs
// a comparison, the string's decoding, the parser and, inside a block, the
// event's copy, and allocates nothing.
//
// Chunks that carry content with something else (the last token with its
// finish_reason, as vLLM sends it; content next to tool_calls; logprobs)
// are read whole and rewritten as the text events, in an envelope of the
// chunk's members in their order but usage, with choice 0 reduced to its
// index and the text, then the chunk without its content member, every
// other byte kept. A delta that Classify refused only for its text (bytes
// not valid UTF-8: an upstream that cuts inside a character) is read as a
// text delta, its bytes kept as they came, so that the text and the tags
// across the cut come out whole.
//
// Reasoning deltas the upstream sends in a field pass as they are: an
// upstream with a reasoning parser needs none of this. When choice 0 sends
// one before any content text, the rest of the stream passes as it came,
// so that its answer is not taken for reasoning by a Syntax that starts
// in reasoning.
//
// The rewritten events are built in a buffer reused from one upstream
// event to the next: like an sse.Reader's, an event is valid until the
// next call to Next.
//
// # A whole answer
//
// [Answer] splits choice 0's message.content the same way and writes the
// reasoning into the field (after what the message had there, or as a new
// member before content), keeping every other byte of the body.
//
// The package has no Caddy imports and no clock.
package tagged
