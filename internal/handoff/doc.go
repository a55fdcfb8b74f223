// Package handoff is the wire work of the baton pass: one request reasoned
// on one endpoint and answered on another, inside one client stream.
//
// It has two halves, both pure (no clock, no I/O):
//
//   - the legs' request bodies, in the client's own dialect (Chat
//     Completions, Anthropic Messages or the Responses API): Reason makes
//     the reasoning leg's (a stream, history reasoning removed, its
//     thinking's text asked for), Answer the answer leg's (a stream,
//     history reasoning removed, its reasoning knobs removed, and the
//     reasoning leg's reasoning injected as a prefill, into the last user
//     turn or into the system prompt). Working in the client's dialect
//     keeps its prompt-cache markers where the client put them: the
//     reasoning always goes after them, never inside the prefix they cover.
//   - the Splicer, which reads both legs' answers as Chat Completions
//     chunks (the relay's pivot) and makes one stream of them: the
//     reasoning leg's reasoning up to the hand-off point, then the answer
//     leg's answer, one id, one model, one usage that sums both legs.
package handoff
