// Package thinktag splits an answer's text into reasoning and answer as
// it arrives: the inline form of reasoning that self-hosted models write
// into `content`, between <think> and </think>, when their server runs no
// reasoning parser (vLLM or SGLang without --reasoning-parser, llama.cpp
// with --reasoning-format none, older Ollama).
//
// [New] checks a [Config] once per upstream and returns a [Syntax];
// [Syntax.Parser] starts a [Parser] per answer; [Parser.Feed] takes each
// chunk's content and appends [Segment]s of [Reasoning] or [Answer] text;
// [Parser.Flush] ends the text; [Parser.State] says whether the text is
// in a block, how many blocks began, and whether the last one was never
// closed. [Split] does all of it for a whole (non-stream) answer.
//
// # Rules
//
// Whatever the cuts between pieces (anywhere: inside a tag, inside a
// UTF-8 sequence), the reasoning and the answer are byte for byte those of
// the text fed whole (the property test, the fuzz target and a plain
// reference implementation check it):
//
//   - Only the next expected string counts. Outside a block, the opening
//     tags of the configured families; inside one, the closing tag of the
//     block's family (the one whose opening tag began it) and the end
//     markers. A <think> inside reasoning (a code sample, a quoted
//     template) is reasoning text, and a </think> outside a block is
//     answer text.
//   - At the earliest position where an expected string matches, the
//     shortest one that matches wins. Strings are compared as bytes.
//   - Nothing is held back but the longest suffix of the text so far that
//     is a proper prefix of an expected string, so at most the longest
//     one's length less one byte (MaxTagLen-1 at worst, 7 for </think>).
//     Held bytes are released as soon as a byte rules the string out,
//     and by Flush, as text of the current kind. Everything else is
//     emitted by the call that brought it.
//   - An empty block (<think></think>, Qwen3's <think>\n\n</think> when it
//     does not think) yields no reasoning. No segment is ever empty.
//   - A text may hold several blocks (reasoning between tool calls, or
//     interleaved thinking); after the first, an opening tag counts
//     anywhere in the answer. State.Blocks counts them, empty ones too.
//   - A text that ends inside a block (max_tokens, a broken stream) leaves
//     everything after the opening tag as reasoning, never answer;
//     State.Unclosed tells the caller, so that it can say so. The
//     implicit block of StartsInReasoning is unclosed only if it got any
//     text.
//
// # Missing opening tag
//
// Chat templates that end the prompt with "<think>\n" (DeepSeek-R1 and
// its distills, QwQ, Qwen3 Thinking-2507, Qwen3.5, MiniMax-M2) leave only
// </think> in the output: [Config.StartsInReasoning] begins the text
// inside a block. The same model may still write the opening tag itself
// (R1-0528, QwQ behind Ollama, whose template does not add it): an opening
// tag as the first thing of the text, after newlines, is taken as the
// block's own (it decides its family) and dropped, as vLLM's qwen3 and
// SGLang's parsers do. Later in the block it is reasoning text. Until a
// family is known, the closing tag of every family ends the block.
// StartsInReasoning is for models that always think: a hybrid model
// (Qwen3 with enable_thinking false) answering without a block would have
// its whole answer taken for reasoning.
//
// # Newlines next to the tags
//
// The families write "<think>\n", "\n</think>\n\n": formatting, not text.
// Qwen's model cards split the output at </think> and strip "\n" from both
// sides, and Qwen3's template writes history back as the reasoning
// stripped of "\n" and the answer with leading "\n" removed; llama.cpp's
// parser strips whitespace around the reasoning and after the closing tag.
// vLLM's and SGLang's parsers pass them through ("\n…" reasoning, "\n\n…"
// content). This package drops the CR and LF bytes that directly follow an
// opening tag and a closing tag, so that the reasoning and the answer begin
// with their text (and an Anthropic or Responses client's text block does
// not begin with a blank line); [Config.KeepNewlines] keeps them, as vLLM
// does. Spaces are kept. The newline before </think> stays in the
// reasoning: dropping it would mean holding back every newline of the
// reasoning until the next byte. Newlines after an end marker are kept:
// the marker is the answer's text.
//
// # Implicit end of reasoning
//
// Qwen3.5 may open a tool call inside its thinking without </think> first.
// vLLM's qwen3 parser ends the reasoning at a <tool_call> only when
// "<function" follows (after whitespace), so that a reasoning that
// mentions <tool_call> stays reasoning; SGLang's Qwen3Detector ends it at
// any <tool_call>. [Config.EndMarkers] are literal strings that end a
// block without a closing tag; the marker is answer text (it is the tool
// call), not swallowed. [Qwen35ToolCall], "<tool_call>\n<function=", is
// the exact form Qwen3.5's template writes, which keeps vLLM's guard with
// a bounded hold (a literal, 22 bytes).
//
// # Tags only at the start (reasoning_format auto)
//
// With [Config.AtStart], before any block: ASCII whitespace is answer text,
// emitted at once; the first other byte must begin an opening tag, or no
// tag is ever recognised in the text (the rest is answer, looked at no
// more: the cheapest path). So an answer that merely mentions <think> is
// not split, while a model that writes its reasoning first is. Once a
// block began, later blocks count anywhere, as without AtStart.
//
// # Segments and memory
//
// A Parser allocates nothing: Feed appends to the caller's slice, and a
// segment's Text is a slice of the piece being fed, or of the Syntax when
// it is held bytes released (a held suffix is always the start of an
// expected string, so the parser keeps a slice of that string instead of a
// copy). A piece with no byte that could begin an expected string, when
// nothing is held, is returned as one segment, the piece itself.
//
// # Models and servers
//
// What each family writes into content when its server runs no reasoning
// parser, and the Config that reads it:
//
//	Family                        Inline form                                   Config
//	DeepSeek-R1 and its distills  reasoning…</think>answer (template adds       StartsInReasoning
//	                              <think>\n to the prompt)
//	DeepSeek-R1-0528              <think>\nreasoning…</think>answer             StartsInReasoning
//	QwQ-32B                       only </think> with its template; both tags    StartsInReasoning
//	                              behind Ollama (template without <think>)
//	Qwen3 (hybrid, April 2025)    <think>\n…\n</think>\n\nanswer; an empty      default, or AtStart
//	                              block when not thinking
//	Qwen3 Thinking-2507           only </think> (template adds <think>)         StartsInReasoning
//	Qwen3.5                       only </think>; may open a tool call inside    StartsInReasoning,
//	                              thinking without closing it                   EndMarkers Qwen35ToolCall
//	MiniMax-M2, M2.5              M2 only </think>, M2.5 both tags              StartsInReasoning
//	Kimi k1.5, Kimi-VL-Thinking   ◁think▷…◁/think▷                              Tags [Kimi]
//	Seed-OSS                      <seed:think>…</seed:think>                    Tags [Seed]
//	Fine-tunes, prompted models   <thinking>…</thinking>                        default
//	GPT-OSS (harmony)             channels (<|channel|>analysis<|message|>…     not covered: not a tag
//	                              <|end|>…<|channel|>final<|message|>…)         pair; servers parse it
//
// And the servers: vLLM with --reasoning-parser sends the reasoning in a
// field (`reasoning`; `reasoning_content` until late 2025), without one
// inline; SGLang with --reasoning-parser sends `reasoning_content`,
// without one inline; llama.cpp's server sends `reasoning_content` unless
// --reasoning-format none (inline) or deepseek-legacy (both); Ollama sends
// `thinking` (native API) or `reasoning` (OpenAI API) when thinking is on,
// and inline tags in versions before its thinking support (May 2025).
//
// The package has no Caddy imports, no clock and no goroutines.
package thinktag
