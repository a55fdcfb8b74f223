package chat

import (
	"bytes"
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"time"
)

// Assembler rebuilds a non-stream chat.completion from the
// chat.completion.chunk events of a stream, for a client that asked for
// one answer while the relay streamed the attempt (to count its
// reasoning, or to time it). It is pure: the caller reads the stream,
// says when each chunk arrived, and decides which reasoning to keep.
//
// The answer is what an OpenAI SDK's accumulator would make of the
// chunks: per choice index, the text members concatenated in order
// (content, refusal, and reasoning under the name the upstream gave it,
// reasoning_content or reasoning), tool calls assembled by their index
// (ids, types and names taken when first given, names and arguments
// concatenated), logprobs entries appended, the last finish_reason, and
// the last usage object. A chunk that does not decode is skipped whole.
type Assembler struct {
	// Created is the completion's created time when no chunk carries one.
	Created int64

	id, model, fingerprint, tier string
	created                      json.RawMessage
	choices                      []*choiceParts
	usage                        json.RawMessage
	last                         time.Duration
}

// choiceParts is what one choice index has received so far.
type choiceParts struct {
	index                   int
	role                    string
	content, refusal        strings.Builder
	sawContent, sawRefusal  bool
	reasoningContent        strings.Builder // delta.reasoning_content
	reasoning               strings.Builder // delta.reasoning
	tools                   []*ToolCall
	toolIndex               []int
	finish                  *string
	logprobs, refusalProbs  []json.RawMessage
	sawLogprobs, sawRefProb bool
	trace                   []traceMark
}

// traceMark is one reasoning delta and when it arrived.
type traceMark struct {
	at   time.Duration
	text string
}

// chunkWire is the part of a chunk the assembler reads. The text members
// are raw so that a member of an unexpected type (OpenRouter's reasoning
// object, a null) is ignored rather than failing the whole chunk.
type chunkWire struct {
	ID                json.RawMessage `json:"id"`
	Created           json.RawMessage `json:"created"`
	Model             json.RawMessage `json:"model"`
	SystemFingerprint json.RawMessage `json:"system_fingerprint"`
	ServiceTier       json.RawMessage `json:"service_tier"`
	Choices           []choiceWire    `json:"choices"`
	Usage             json.RawMessage `json:"usage"`
}

// choiceWire is one choice of a chunk.
type choiceWire struct {
	Index        int             `json:"index"`
	Delta        deltaWire       `json:"delta"`
	FinishReason json.RawMessage `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

// deltaWire is a chunk's delta, or a whole answer's message.
type deltaWire struct {
	Role      json.RawMessage `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls []struct {
		Index    int             `json:"index"`
		ID       json.RawMessage `json:"id"`
		Type     json.RawMessage `json:"type"`
		Function struct {
			Name      json.RawMessage `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	Refusal          json.RawMessage `json:"refusal"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	Reasoning        json.RawMessage `json:"reasoning"`
}

// completionWire is a whole chat.completion: a chunk whose choices hold a
// message instead of a delta.
type completionWire struct {
	chunkWire
	Choices []struct {
		choiceWire
		Message deltaWire `json:"message"`
	} `json:"choices"`
}

// str is the value of a JSON string member, ok false for anything else
// (absent, null, a number, an object).
func str(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// Add reads one chunk (an SSE event's data) that arrived at `at`, the time
// since the attempt started. With dropReasoning its reasoning text is left
// out (hidden, or past a truncating budget) and not traced. Times are
// taken as non-decreasing: one earlier than the last is the last's. It
// reports false for data that is not a chunk, which is skipped.
func (a *Assembler) Add(data []byte, at time.Duration, dropReasoning bool) bool {
	var c chunkWire
	if json.Unmarshal(data, &c) != nil {
		return false
	}
	a.add(&c, at, dropReasoning)
	return true
}

// AddCompletion reads a whole chat.completion (a non-stream answer) as
// one chunk whose deltas are its messages, so that an answer read whole
// and one read from a stream are assembled alike; its message tool calls
// without an index take their position. It reports false for a body that
// is not JSON, which is skipped.
func (a *Assembler) AddCompletion(body []byte) bool {
	var c completionWire
	if json.Unmarshal(body, &c) != nil {
		return false
	}
	for _, ch := range c.Choices {
		for i := range ch.Message.ToolCalls {
			ch.Message.ToolCalls[i].Index = i
		}
		ch.Delta = ch.Message
		c.chunkWire.Choices = append(c.chunkWire.Choices, ch.choiceWire)
	}
	a.add(&c.chunkWire, a.last, false)
	return true
}

// add reads one decoded chunk (see Add).
func (a *Assembler) add(c *chunkWire, at time.Duration, dropReasoning bool) {
	at = max(at, a.last)
	a.last = at
	setOnce(&a.id, c.ID)
	setOnce(&a.model, c.Model)
	setOnce(&a.fingerprint, c.SystemFingerprint)
	setOnce(&a.tier, c.ServiceTier)
	if a.created == nil && len(c.Created) > 0 && c.Created[0] >= '0' && c.Created[0] <= '9' {
		a.created = c.Created
	}
	if len(c.Usage) > 0 && c.Usage[0] == '{' {
		a.usage = c.Usage
	}
	for i := range c.Choices {
		wc := &c.Choices[i]
		if wc.Index < 0 {
			continue
		}
		ch := a.choice(wc.Index)
		d := &wc.Delta
		setOnce(&ch.role, d.Role)
		if s, ok := str(d.Content); ok {
			ch.content.WriteString(s)
			ch.sawContent = true
		}
		if s, ok := str(d.Refusal); ok {
			ch.refusal.WriteString(s)
			ch.sawRefusal = true
		}
		if !dropReasoning {
			ch.addReasoning(&ch.reasoningContent, d.ReasoningContent, at)
			ch.addReasoning(&ch.reasoning, d.Reasoning, at)
		}
		for _, tc := range d.ToolCalls {
			if tc.Index < 0 {
				continue
			}
			t := ch.tool(tc.Index)
			setOnce(&t.ID, tc.ID)
			setOnce(&t.Type, tc.Type)
			if s, ok := str(tc.Function.Name); ok {
				t.Function.Name += s
			}
			if s, ok := str(tc.Function.Arguments); ok {
				t.Function.Arguments += s
			}
		}
		if s, ok := str(wc.FinishReason); ok {
			ch.finish = &s
		}
		ch.addLogprobs(wc.Logprobs)
	}
}

// setOnce sets *dst to the JSON string raw, unless *dst is already set or
// raw is not a non-empty string.
func setOnce(dst *string, raw json.RawMessage) {
	if *dst != "" {
		return
	}
	if s, ok := str(raw); ok {
		*dst = s
	}
}

// addLogprobs appends a chunk's logprobs entries (an object of content
// and refusal arrays; anything else is ignored).
func (ch *choiceParts) addLogprobs(raw json.RawMessage) {
	var lp struct {
		Content []json.RawMessage `json:"content"`
		Refusal []json.RawMessage `json:"refusal"`
	}
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &lp) != nil {
		return
	}
	ch.sawLogprobs = true
	ch.logprobs = append(ch.logprobs, lp.Content...)
	if lp.Refusal != nil {
		ch.sawRefProb = true
		ch.refusalProbs = append(ch.refusalProbs, lp.Refusal...)
	}
}

func (ch *choiceParts) addReasoning(b *strings.Builder, raw json.RawMessage, at time.Duration) {
	s, ok := str(raw)
	if !ok || s == "" {
		return
	}
	b.WriteString(s)
	ch.trace = append(ch.trace, traceMark{at: at, text: s})
}

func (a *Assembler) choice(index int) *choiceParts {
	for _, ch := range a.choices {
		if ch.index == index {
			return ch
		}
	}
	ch := &choiceParts{index: index}
	a.choices = append(a.choices, ch)
	return ch
}

func (ch *choiceParts) tool(index int) *ToolCall {
	for i, at := range ch.toolIndex {
		if at == index {
			return ch.tools[i]
		}
	}
	t := &ToolCall{}
	ch.tools = append(ch.tools, t)
	ch.toolIndex = append(ch.toolIndex, index)
	return t
}

// Completion is a non-stream chat.completion, in OpenAI's member order.
type Completion struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           json.RawMessage `json:"created"`
	Model             string          `json:"model"`
	Choices           []Choice        `json:"choices"`
	Usage             json.RawMessage `json:"usage,omitempty"`
	SystemFingerprint string          `json:"system_fingerprint,omitempty"`
	ServiceTier       string          `json:"service_tier,omitempty"`
}

// Choice is one choice of a Completion. ReasoningTruncated is the relay's
// own marker: a reasoning budget cut the reasoning text short.
type Choice struct {
	Index              int             `json:"index"`
	Message            Message         `json:"message"`
	Logprobs           json.RawMessage `json:"logprobs"`
	FinishReason       *string         `json:"finish_reason"`
	ReasoningTruncated bool            `json:"relay_reasoning_truncated,omitempty"`
}

// Message is an assembled assistant message. Content is null only when
// the choice had no content and made tool calls or a refusal, as OpenAI
// answers. The reasoning member is the name the upstream used; both
// appear only if the upstream sent both. ReasoningTrace is present (an
// array, possibly empty) when asked for.
type Message struct {
	Role             string        `json:"role"`
	Content          *string       `json:"content"`
	Refusal          *string       `json:"refusal"`
	ReasoningContent *string       `json:"reasoning_content,omitempty"`
	Reasoning        *string       `json:"reasoning,omitempty"`
	ToolCalls        []ToolCall    `json:"tool_calls,omitempty"`
	ReasoningTrace   *[]TraceEntry `json:"reasoning_trace,omitempty"`
}

// TraceEntry is one reasoning delta of a reasoning trace: its text, and
// when it arrived as a fraction of the answer's duration (see Assemble).
type TraceEntry struct {
	Position float64 `json:"position"`
	Text     string  `json:"text"`
}

// Completion builds the answer; end is when the last event arrived (the
// answer's duration: its last event is position 1). With trace, each
// message carries its reasoning_trace: one entry per reasoning delta
// kept, in arrival order, at position at/end rounded to 4 decimals and
// kept within [0, 1] (all 0 when end is not positive). Choices are in
// index order.
func (a *Assembler) Completion(end time.Duration, trace bool) Completion {
	c := Completion{
		ID:                a.id,
		Object:            "chat.completion",
		Created:           a.created,
		Model:             a.model,
		Usage:             a.usage,
		SystemFingerprint: a.fingerprint,
		ServiceTier:       a.tier,
		Choices:           make([]Choice, 0, len(a.choices)),
	}
	if c.Created == nil {
		c.Created, _ = json.Marshal(a.Created)
	}
	choices := slices.Clone(a.choices)
	slices.SortStableFunc(choices, func(x, y *choiceParts) int { return x.index - y.index })
	for _, ch := range choices {
		m := Message{Role: cmp.Or(ch.role, "assistant")}
		if content := ch.content.String(); ch.sawContent && content != "" || len(ch.tools) == 0 && !ch.sawRefusal {
			m.Content = &content
		}
		if ch.sawRefusal {
			r := ch.refusal.String()
			m.Refusal = &r
		}
		if s := ch.reasoningContent.String(); s != "" {
			m.ReasoningContent = &s
		}
		if s := ch.reasoning.String(); s != "" {
			m.Reasoning = &s
		}
		for _, t := range ch.tools {
			tc := *t
			if tc.Type == "" {
				tc.Type = "function"
			}
			m.ToolCalls = append(m.ToolCalls, tc)
		}
		if trace {
			entries := make([]TraceEntry, len(ch.trace))
			for i, mk := range ch.trace {
				entries[i] = TraceEntry{Position: Position(mk.at, end), Text: mk.text}
			}
			m.ReasoningTrace = &entries
		}
		c.Choices = append(c.Choices, Choice{
			Index:        ch.index,
			Message:      m,
			Logprobs:     ch.logprobsJSON(),
			FinishReason: ch.finish,
		})
	}
	return c
}

// Position is at as a fraction of end, rounded to 4 decimals, within
// [0, 1]; 0 when end is not positive.
func Position(at, end time.Duration) float64 {
	if end <= 0 || at <= 0 {
		return 0
	}
	if at >= end {
		return 1
	}
	return math.Round(float64(at)/float64(end)*1e4) / 1e4
}

func (ch *choiceParts) logprobsJSON() json.RawMessage {
	if !ch.sawLogprobs {
		return json.RawMessage("null")
	}
	lp := struct {
		Content []json.RawMessage `json:"content"`
		Refusal []json.RawMessage `json:"refusal"`
	}{Content: ch.logprobs}
	if ch.sawRefProb {
		lp.Refusal = ch.refusalProbs
	}
	b, _ := json.Marshal(lp)
	return b
}

// JSON renders a Completion as OpenAI does: no HTML escaping of <, > and &.
func (c *Completion) JSON() []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(c) // every member is plain data or valid raw JSON
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
