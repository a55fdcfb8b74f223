package handoff

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// Splicer makes one Chat Completions stream of two legs' streams, read
// as Chat chunks (the data of each event): the reasoning leg's reasoning,
// then the answer leg's answer. Every chunk it returns carries the same
// id, created and model; the usage chunk sums both legs.
type Splicer struct {
	// ID, Model and Created name every chunk. ID "" takes the reasoning
	// leg's first id (the caller mints one when there is none).
	ID      string
	Model   string
	Created int64
	// MaxReasoning hands off when the reasoning reaches this many tokens
	// (estimated: a quarter of its characters); 0: no bound.
	MaxReasoning int
	// ReasonPrompt is the reasoning leg's prompt tokens (the relay's
	// estimate: the leg is cancelled before its usage comes), added to the
	// answer leg's usage.
	ReasonPrompt int
	// AnswerPrompt and AnswerCompletion are the answer leg's own usage,
	// as it sent it (set when its usage chunk goes by).
	AnswerPrompt, AnswerCompletion int

	w         chat.ChunkWriter
	begun     bool
	roleSent  bool
	reasoning strings.Builder
	runes     int
	// answerReasoning is reasoning the answer leg wrote anyway (a
	// reasoning model on a `to` line): counted, never forwarded.
	answerReasoning int
	scratch         []byte // the fast readers' decoded text (splice_fast.go)
}

// chunk is the part of a Chat chunk the splicer reads.
type chunk struct {
	ID      string            `json:"id"`
	Choices []json.RawMessage `json:"choices"`
	Usage   json.RawMessage   `json:"usage"`
}

type choice struct {
	Index        int             `json:"index"`
	Delta        object          `json:"delta"`
	FinishReason json.RawMessage `json:"finish_reason"`
}

// reasoningOf is a delta's reasoning text, in any member providers use.
func reasoningOf(delta object) string {
	for _, k := range []string{chat.FieldReasoningContent, chat.FieldReasoning} {
		if s := str(delta[k]); s != "" {
			return s
		}
	}
	return ""
}

// answers reports a delta or choice that carries answer: text, a refusal,
// a tool call, or a finish.
func answers(c *choice) bool {
	if s := str(c.Delta["content"]); s != "" {
		return true
	}
	if s := str(c.Delta["refusal"]); s != "" {
		return true
	}
	if tc := c.Delta["tool_calls"]; len(tc) > 0 && string(tc) != "null" && string(tc) != "[]" {
		return true
	}
	if fc := c.Delta["function_call"]; len(fc) > 0 && string(fc) != "null" {
		return true
	}
	return len(c.FinishReason) > 0 && string(c.FinishReason) != "null"
}

func (s *Splicer) begin(id string) {
	if s.begun {
		return
	}
	if s.ID == "" {
		s.ID = id
	}
	s.w.Begin(s.ID, s.Model, s.Created)
	s.begun = true
}

// Begin fixes the chunks' id when the reasoning leg gave none (a caller
// with no reasoning at all calls it with a minted id).
func (s *Splicer) Begin(id string) { s.begin(id) }

// Reason reads one chunk of the reasoning leg. out is what the client
// gets of it: its reasoning, as a chunk of reasoning_content (the first
// one preceded by a chunk of the assistant role), none when it has none; handoff reports that the leg's
// reasoning is over: the chunk carries answer text, a tool call or a
// finish, or the reasoning reached MaxReasoning. A chunk that does not
// parse as a Chat chunk is skipped (out nil, handoff false).
func (s *Splicer) Reason(data []byte) (out [][]byte, handoff bool) {
	if fastChunks {
		if id, text, ok := reasoningChunk(data, s.scratch[:0]); ok {
			if !s.begun {
				s.begin(string(id))
			}
			if cap(text) > cap(s.scratch) {
				s.scratch = text[:0]
			}
			if len(text) == 0 {
				return nil, false
			}
			return s.reasoned(text, false)
		}
	}
	var c chunk
	if json.Unmarshal(data, &c) != nil {
		return nil, false
	}
	s.begin(c.ID)
	for _, raw := range c.Choices {
		var ch choice
		if json.Unmarshal(raw, &ch) != nil || ch.Index != 0 {
			continue
		}
		text := reasoningOf(ch.Delta)
		handoff = answers(&ch)
		if text == "" {
			break
		}
		return s.reasoned([]byte(text), handoff)
	}
	return out, handoff
}

// reasoned takes a chunk's reasoning text: out is what the client gets of
// it, handoff as the chunk said, or the reasoning reached MaxReasoning.
func (s *Splicer) reasoned(text []byte, handoff bool) (out [][]byte, _ bool) {
	s.reasoning.Write(text)
	s.runes += utf8.RuneCount(text)
	if !s.roleSent {
		s.roleSent = true
		out = append(out, append([]byte(nil), s.w.Role()...))
	}
	out = append(out, append([]byte(nil), s.w.Content(chat.FieldReasoningContent, text)...))
	if s.MaxReasoning > 0 && s.ReasoningTokens() >= s.MaxReasoning {
		handoff = true
	}
	return out, handoff
}

// Reasoning is the reasoning read so far.
func (s *Splicer) Reasoning() string { return s.reasoning.String() }

// ReasoningTokens is the reasoning's estimated tokens: a quarter of its
// characters, rounded up, as the relay estimates output everywhere.
func (s *Splicer) ReasoningTokens() int { return (s.runes + 3) / 4 }

// Answer rewrites one chunk of the answer leg: the splice's id, created
// and model; no second assistant role; reasoning deltas left out
// (counted); the usage chunk summed with the reasoning leg's (prompt
// tokens of both, the reasoning leg's reasoning in the completion and
// its reasoning_tokens). A chunk left with nothing to say is dropped (out
// nil). Data that is not a Chat chunk (an error object) is returned as it
// is.
func (s *Splicer) Answer(data []byte) (out []byte) {
	if fastChunks {
		if id, text, ok := answerChunk(data, s.scratch[:0]); ok {
			if !s.begun {
				s.begin(string(id))
			}
			if cap(text) > cap(s.scratch) {
				s.scratch = text[:0]
			}
			return s.w.Content("content", text)
		}
	}
	var top object
	if json.Unmarshal(data, &top) != nil || top["error"] != nil {
		return data
	}
	var c chunk
	_ = json.Unmarshal(data, &c)
	s.begin(c.ID)
	top["id"] = mustJSON(s.ID)
	top["model"] = mustJSON(s.Model)
	top["created"] = mustJSON(s.Created)
	keep := false
	if len(c.Choices) > 0 {
		choices := make([]json.RawMessage, 0, len(c.Choices))
		for _, raw := range c.Choices {
			var ch object
			if json.Unmarshal(raw, &ch) != nil {
				continue
			}
			var delta object
			_ = json.Unmarshal(ch["delta"], &delta)
			if t := reasoningOf(delta); t != "" {
				s.answerReasoning += utf8.RuneCountInString(t)
			}
			delete(delta, chat.FieldReasoningContent)
			delete(delta, chat.FieldReasoning)
			if s.roleSent {
				delete(delta, "role")
			} else if _, ok := delta["role"]; ok {
				s.roleSent = true
			}
			if c, ok := delta["content"]; ok && string(c) == `""` && len(delta) == 1 {
				delete(delta, "content") // the role chunk's empty text
			}
			finish := ch["finish_reason"]
			if len(delta) == 0 && null(finish) && null(ch["logprobs"]) {
				continue
			}
			if text, ok := onlyContent(delta); ok && null(finish) && null(ch["logprobs"]) && len(c.Choices) == 1 && null(c.Usage) {
				// The common chunk, written as the relay writes its own
				// (the shape the pacer takes for text).
				return s.w.Content("content", []byte(text))
			}
			if delta == nil {
				delta = object{}
			}
			ch["delta"] = mustJSON(delta)
			choices = append(choices, mustJSON(ch))
		}
		if len(choices) > 0 {
			top["choices"] = mustJSON(choices)
			keep = true
		}
	}
	if len(c.Usage) > 0 && string(c.Usage) != "null" {
		top["usage"] = s.sumUsage(c.Usage)
		if top["choices"] == nil || len(c.Choices) == 0 {
			top["choices"] = json.RawMessage("[]")
		}
		keep = true
	}
	if !keep {
		return nil
	}
	return mustJSON(top)
}

// null reports an absent or null member.
func null(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// onlyContent is a delta's text when text is all it has.
func onlyContent(delta object) (string, bool) {
	if len(delta) != 1 {
		return "", false
	}
	raw, ok := delta["content"]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// sumUsage adds the reasoning leg to the answer leg's usage object.
func (s *Splicer) sumUsage(raw json.RawMessage) json.RawMessage {
	var u object
	if json.Unmarshal(raw, &u) != nil {
		return raw
	}
	num := func(k string) int {
		var n int
		_ = json.Unmarshal(u[k], &n)
		return n
	}
	reasoning := s.ReasoningTokens()
	s.AnswerPrompt, s.AnswerCompletion = num("prompt_tokens"), num("completion_tokens")
	prompt := num("prompt_tokens") + s.ReasonPrompt
	completion := num("completion_tokens") + reasoning
	u["prompt_tokens"] = mustJSON(prompt)
	u["completion_tokens"] = mustJSON(completion)
	u["total_tokens"] = mustJSON(prompt + completion)
	var details object
	_ = json.Unmarshal(u["completion_tokens_details"], &details)
	if details == nil {
		details = object{}
	}
	var answerR int
	_ = json.Unmarshal(details["reasoning_tokens"], &answerR)
	if answerR == 0 {
		answerR = (s.answerReasoning + 3) / 4
	}
	details["reasoning_tokens"] = mustJSON(reasoning + answerR)
	u["completion_tokens_details"] = mustJSON(details)
	return mustJSON(u)
}
