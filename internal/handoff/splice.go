package handoff

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
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
	// as it sent it (set when its usage chunk goes by); AnswerCached the
	// part of its prompt read from the provider's cache
	// (prompt_tokens_details.cached_tokens), priced as cached input.
	AnswerPrompt, AnswerCompletion int
	AnswerCached                   int
	// End is what ended the reasoning, once Reason reported the hand-off:
	// EndAnswer, EndToolCall, EndFinish or EndMaxReasoning.
	End string

	w         chat.ChunkWriter
	begun     bool
	roleSent  bool
	reasoning strings.Builder
	runes     int
	// answerReasoning is reasoning the answer leg wrote anyway (a
	// reasoning model on a `to` line): counted, never forwarded.
	answerReasoning int
	d               chat.Delta       // ReadDelta's, reused
	first           chat.FirstChoice // the hot path's memory (ReasonEvent, AnswerEvent)
	scratch         []byte           // pace.Classify's
}

// chunk is the part of a Chat chunk the splicer reads; the choices are
// read by chat.ReadDelta, as the relay's translators read them (reasoning
// fields, Mistral's content parts, tool call fragments).
type chunk struct {
	ID      string          `json:"id"`
	Choices json.RawMessage `json:"choices"`
	Usage   json.RawMessage `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

// What ended the reasoning (Splicer.End).
const (
	EndAnswer       = "answer"        // answer text or a refusal
	EndToolCall     = "tool_call"     // a tool call
	EndFinish       = "finish"        // a finish reason with neither
	EndMaxReasoning = "max_reasoning" // the reasoning reached MaxReasoning
	EndUnreadable   = "unreadable"    // a chunk the translators cannot read
)

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
	var c chunk
	if json.Unmarshal(data, &c) != nil {
		return nil, false
	}
	if chat.ReadDelta(c.Choices, &s.d) != nil {
		// A chunk the translators refuse ends the reasoning: whatever it
		// carried (the legacy function_call, a content part of a type
		// Chat clients cannot take) is the answer leg's to write, not
		// reasoning to skip past.
		s.begin(c.ID)
		s.End = EndUnreadable
		if bytes.Contains(c.Choices, []byte(`"function_call"`)) {
			s.End = EndToolCall // a tool call by its old name
		}
		return nil, true
	}
	s.begin(c.ID)
	for _, p := range s.d.Pieces {
		if p.Channel != chat.ChanReasoning {
			if p.Text != "" {
				handoff, s.End = true, EndAnswer
				break // reasoning after answer text is the answer leg's to write
			}
			continue
		}
		if p.Text == "" {
			continue
		}
		if out = s.reasoned(out, []byte(p.Text)); s.End == EndMaxReasoning {
			return out, true
		}
	}
	switch {
	case handoff:
	case len(s.d.Calls) > 0:
		handoff, s.End = true, EndToolCall
	case s.d.Finish != "":
		handoff, s.End = true, EndFinish
	}
	return out, handoff
}

// reasoned takes a piece of reasoning: it is appended to out for the
// client (after the assistant role, the first time); End is set to
// EndMaxReasoning when the reasoning reaches MaxReasoning.
func (s *Splicer) reasoned(out [][]byte, text []byte) [][]byte {
	s.reasoning.Write(text)
	s.runes += utf8.RuneCount(text)
	if !s.roleSent {
		s.roleSent = true
		out = append(out, bytes.Clone(s.w.Role()))
	}
	out = append(out, bytes.Clone(s.w.Content(chat.FieldReasoningContent, text)))
	if s.MaxReasoning > 0 && s.ReasoningTokens() >= s.MaxReasoning {
		s.End = EndMaxReasoning
	}
	return out
}

// ReasonEvent is Reason for an upstream event, with the translators' hot
// path (pace.Classify, chat.FirstChoice): a text or reasoning delta of
// the first choice, the bulk of a stream, is read without decoding the
// chunk; any other goes to Reason.
func (s *Splicer) ReasonEvent(ev *sse.Event) (out [][]byte, handoff bool) {
	if text, ch, ok := s.fast(ev); ok {
		switch {
		case ch == pace.ChanReasoning && len(text) > 0:
			out = s.reasoned(out, text)
			return out, s.End == EndMaxReasoning
		case ch == pace.ChanAnswer && len(text) > 0:
			s.End = EndAnswer
			return nil, true
		}
		return nil, false
	}
	return s.Reason(ev.Data)
}

// AnswerEvent is Answer for an upstream event, with the same hot path as
// ReasonEvent.
func (s *Splicer) AnswerEvent(ev *sse.Event) ([][]byte, error) {
	if text, ch, ok := s.fast(ev); ok {
		switch {
		case len(text) == 0:
			return nil, nil
		case ch == pace.ChanReasoning:
			s.answerReasoning += utf8.RuneCount(text)
			return nil, nil
		}
		var out [][]byte
		if !s.roleSent {
			s.roleSent = true
			out = append(out, bytes.Clone(s.w.Role()))
		}
		return append(out, bytes.Clone(s.w.Content("content", text))), nil
	}
	return s.Answer(ev.Data)
}

// fast reads a text delta of the first choice as the translators' hot
// path does, once the splice has its id (begun): its text and channel.
func (s *Splicer) fast(ev *sse.Event) (text []byte, ch pace.Channel, ok bool) {
	if !s.begun {
		return nil, 0, false
	}
	c, scratch := pace.Classify(ev, s.scratch[:0])
	s.scratch = scratch
	if c.Kind != pace.KindText || !s.first.IsZero(ev.Data, c.Prefix, c.Suffix) {
		return nil, 0, false
	}
	return c.Text, c.Channel, true
}

// Reasoning is the reasoning read so far.
func (s *Splicer) Reasoning() string { return s.reasoning.String() }

// ReasoningTokens is the reasoning's estimated tokens: a quarter of its
// characters, rounded up, as the relay estimates output everywhere.
func (s *Splicer) ReasoningTokens() int { return (s.runes + 3) / 4 }

// Answer rewrites one chunk of the answer leg into the chunks the client
// gets, written as the relay writes its own (the splice's id, created and
// model; the shape the pacer takes for text): its text, refusal, tool
// call fragments and finish, in that order; no second assistant role;
// reasoning left out (counted: the answer leg was not asked to reason,
// and the client has had its reasoning); its usage summed with the
// reasoning leg's (prompt tokens of both, the reasoning leg's reasoning in
// the completion and its reasoning_tokens). An error object is returned as
// it is. A chunk that is not a readable Chat chunk is an error (a
// *chat.UnreadableError, as a translator's): what it carried cannot reach
// the client, so the stream must end with the in-band error, never
// cleanly without it.
func (s *Splicer) Answer(data []byte) (out [][]byte, err error) {
	var c chunk
	if json.Unmarshal(data, &c) != nil {
		return nil, &chat.UnreadableError{Reason: "the answer leg sent an event whose data is not a JSON object"}
	}
	if !null(c.Error) {
		return [][]byte{data}, nil
	}
	if err := chat.ReadDelta(c.Choices, &s.d); err != nil {
		return nil, err
	}
	s.begin(c.ID)
	emit := func(b []byte) {
		b = bytes.Clone(b) // before Role, which reuses the writer's buffer b points into
		if !s.roleSent {
			s.roleSent = true
			out = append(out, bytes.Clone(s.w.Role()))
		}
		out = append(out, b)
	}
	for _, p := range s.d.Pieces {
		switch {
		case p.Text == "":
		case p.Channel == chat.ChanReasoning:
			s.answerReasoning += utf8.RuneCountInString(p.Text)
		case p.Channel == chat.ChanRefusal:
			emit(s.w.Content("refusal", []byte(p.Text)))
		default:
			emit(s.w.Content("content", []byte(p.Text)))
		}
	}
	for _, call := range s.d.Calls {
		if call.ID != "" || call.Name != "" {
			emit(s.w.ToolCall(call.Index, call.ID, call.Name, nil))
		}
		if call.Args != "" {
			emit(s.w.ToolCall(call.Index, "", "", []byte(call.Args)))
		}
	}
	if s.d.Finish != "" {
		emit(s.w.Finish(s.d.Finish))
	}
	if !null(c.Usage) {
		out = append(out, mustJSON(object{"id": mustJSON(s.ID), "object": mustJSON("chat.completion.chunk"),
			"created": mustJSON(s.Created), "model": mustJSON(s.Model), "choices": json.RawMessage("[]"),
			"usage": s.sumUsage(c.Usage)}))
	}
	return out, nil
}

// null reports an absent or null member.
func null(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

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
	var promptDetails struct {
		Cached int `json:"cached_tokens"`
	}
	_ = json.Unmarshal(u["prompt_tokens_details"], &promptDetails)
	s.AnswerCached = min(max(promptDetails.Cached, 0), s.AnswerPrompt)
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
