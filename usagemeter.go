package llmrelay

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/jsonobj"
	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// Usage that is never silently zero (issue 34).
//
// A Chat upstream may send no standard usage: some ignore
// stream_options.include_usage, some report it in their own member
// (usage.ProviderUsage: Groq's x_groq.usage, Moonshot's usage in the
// choice). Translated for a Messages client, that was a message_delta
// with output_tokens 0, accounted as 0 and not marked estimated; for a
// Responses client a response without usage. So a Chat answer on its way
// to a translator always gets a standard usage before it is translated:
// the provider's own when it has one, else the relay's estimate, marked
// as such in the log line and the ledger. The client then reads the same
// figure the relay accounted, in its own dialect.
//
// A Chat client's answer is passed as it came (byte for byte in `off`):
// the pacer and spend.go read the provider's member, or estimate, for
// the accounting only.

// usageMeter watches a Chat upstream's stream on its way to the
// translator: it counts the output, notes the usage the upstream sent,
// and puts a usage-only chunk before [DONE] when no standard one came.
// It forwards the events otherwise as they are.
type usageMeter struct {
	src    pace.Source
	prompt func() int // the upstream request's estimated prompt tokens, estimated when asked

	runes     int    // answer, reasoning and tool call argument runes so far
	standard  bool   // a standard usage object came
	provider  []byte // a provider's own usage object, while no standard one came
	estimated bool   // the usage chunk the meter put in is its estimate
	reasoning int    // the reasoning tokens of the standard usage, which a translation may drop

	// counted, when the pacer reads the meter's events directly (a Gemini
	// client's answer, translated after the relay), is the pacer's count
	// of their output (pace.RuneCounted): the meter does not count them
	// again. nil: the meter counts.
	counted func() int

	held    sse.Event // [DONE], held back while the usage chunk goes first
	holding bool
	scratch []byte
}

func newUsageMeter(src pace.Source, prompt func() int) *usageMeter {
	return &usageMeter{src: src, prompt: prompt}
}

// Next returns the upstream's next event, or the usage chunk the meter
// puts before [DONE]. The held [DONE] is still valid when it is returned:
// the upstream's reader is not read in between.
func (m *usageMeter) Next() (sse.Event, error) {
	if m.holding {
		m.holding = false
		return m.held, nil
	}
	ev, err := m.src.Next()
	if err != nil || !ev.HasData || ev.Type == "error" {
		return ev, err
	}
	if ev.IsDone() {
		if m.standard {
			return ev, nil
		}
		m.held, m.holding = ev, true
		return m.usageChunk(), nil
	}
	m.read(&ev)
	return ev, nil
}

// CountedBy takes the pacer's count of the output (pace.RuneCounted).
func (m *usageMeter) CountedBy(f func() int) { m.counted = f }

// BeforeRead forwards the pacer's per-read hook (see pace.Run).
func (m *usageMeter) BeforeRead(f func()) { sse.ForwardBeforeRead(m.src, f) }

// read counts a chunk's output and notes its usage.
func (m *usageMeter) read(ev *sse.Event) {
	if m.counted == nil { // else the pacer counts
		var c pace.Chunk
		c, m.scratch = pace.ClassifyCount(ev, m.scratch[:0])
		m.runes += c.AnswerRunes + c.ReasoningRunes
		if c.Kind != pace.KindText {
			m.runes += usage.ToolArgumentRunes(ev.Data)
		}
	}
	// A usage object, standard or a provider's own (named usage too);
	// "usage":null, on every chunk of a stream asked to include usage
	// but its last, is none.
	if jsonscan.MayHaveMember(ev.Data, `"usage"`, '{') {
		m.noteUsage(ev.Data)
	}
}

// noteUsage notes a chunk's usage: a standard one, else a provider's own
// while no standard one came.
func (m *usageMeter) noteUsage(data []byte) {
	if u, ok := usage.ParseUsage(topUsage(data)); ok {
		m.standard, m.provider, m.reasoning = true, nil, u.Reasoning
		return
	}
	if m.standard {
		return
	}
	if pu, ok := usage.ProviderUsage(data); ok {
		m.provider = bytes.Clone(pu)
	}
}

// upstreamUsage reports whether the upstream sent a usage, its own or
// standard.
func (m *usageMeter) upstreamUsage() bool { return m.standard || m.provider != nil }

// completion is the estimate of the output tokens so far: a quarter of
// the runes, rounded up, as for a Chat client's answer (spend.go).
func (m *usageMeter) completion() int {
	if m.counted != nil {
		return (m.counted() + 3) / 4
	}
	return (m.runes + 3) / 4
}

// usageChunk is the Chat chunk that carries the provider's usage, or the
// estimate.
func (m *usageMeter) usageChunk() sse.Event {
	u := m.provider
	if u == nil {
		u = estimatedUsage(m.prompt(), m.completion())
		m.estimated = true
	}
	b := append([]byte(`{"object":"chat.completion.chunk","choices":[],"usage":`), u...)
	return sse.NewEvent("", append(b, '}'))
}

// estimatedUsage is a Chat usage object of the relay's estimate.
func estimatedUsage(prompt, completion int) []byte {
	b := append([]byte(`{"prompt_tokens":`), strconv.Itoa(prompt)...)
	b = append(append(b, `,"completion_tokens":`...), strconv.Itoa(completion)...)
	b = append(append(b, `,"total_tokens":`...), strconv.Itoa(prompt+completion)...)
	return append(b, '}')
}

// topUsage is the top-level usage member of a JSON object (nil: none).
func topUsage(b []byte) []byte {
	if raw, ok := usage.Member(b); ok {
		return raw
	}
	var v struct {
		Usage json.RawMessage `json:"usage"`
	}
	_ = json.Unmarshal(b, &v)
	return v.Usage
}

// withUsage gives a whole Chat answer (a chat.completion) the usage it is
// translated with: its own, a provider's own member lifted to the top
// level, or the relay's estimate (estimated true). An answer that is not
// a JSON object is returned as it is.
func withUsage(answer []byte, prompt func() int) (out []byte, estimated bool) {
	if _, ok := usage.ParseUsage(topUsage(answer)); ok {
		return answer, false
	}
	u, ok := usage.ProviderUsage(answer)
	if !ok {
		u, estimated = estimatedUsage(prompt(), (answerRunes(answer)+3)/4), true
	}
	members, err := jsonobj.Split(answer)
	if err != nil || !jsonobj.Unique(members) {
		return answer, false
	}
	parts := jsonobj.Pieces(nil, answer, members, []jsonobj.Edit{{Key: "usage", Value: u}})
	return bytes.Join(parts, nil), estimated
}

// answerMessage is what the counts below read of a chat.completion's
// first choice.
type answerMessage struct {
	Content          json.RawMessage `json:"content"`
	ReasoningContent string          `json:"reasoning_content"`
	Reasoning        string          `json:"reasoning"`
	Refusal          string          `json:"refusal"`
}

// firstMessage is a chat.completion's first choice's message; ok is false
// when answer is not one.
func firstMessage(answer []byte) (m answerMessage, ok bool) {
	var v struct {
		Choices []struct {
			Message answerMessage `json:"message"`
		} `json:"choices"`
	}
	if json.Unmarshal(answer, &v) != nil || len(v.Choices) == 0 {
		return m, false
	}
	return v.Choices[0].Message, true
}

// answerReasoningRunes counts the runes of the reasoning field(s) of a
// chat.completion's first choice (an answer whose reasoning was inline has
// been read through its tags before: exchange.untagAnswer).
func answerReasoningRunes(answer []byte) int {
	m, ok := firstMessage(answer)
	if !ok {
		return 0
	}
	return utf8.RuneCountInString(m.ReasoningContent) + utf8.RuneCountInString(m.Reasoning)
}

// answerRunes counts the runes of a chat.completion's first choice: its
// content (a string, or the text of its parts), reasoning, refusal and
// tool call arguments.
func answerRunes(answer []byte) int {
	m, ok := firstMessage(answer)
	if !ok {
		return 0
	}
	n := utf8.RuneCountInString(m.ReasoningContent+m.Reasoning+m.Refusal) + usage.ToolArgumentRunes(answer)
	var s string
	var parts []struct {
		Text     string `json:"text"`
		Thinking string `json:"thinking"`
	}
	switch {
	case json.Unmarshal(m.Content, &s) == nil:
		n += utf8.RuneCountInString(s)
	case json.Unmarshal(m.Content, &parts) == nil:
		for _, p := range parts {
			n += utf8.RuneCountInString(p.Text + p.Thinking)
		}
	}
	return n
}
