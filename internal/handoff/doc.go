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
//
// It also builds the body of a continuation (issue 30: a committed stream
// broke, and the next target is asked to continue the answer), in the
// client's dialect too: Continue adds the answer so far as a trailing
// assistant turn (How: a prefill, with DeepSeek's or Mistral's prefix
// flag or vLLM's continue_final_message set on the translated Chat
// payload by MarkPrefix and MarkContinueFinal), or as an assistant turn
// and a user turn holding ContinueInstruction for targets that never
// continue an assistant turn.
package handoff
