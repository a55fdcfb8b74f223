// Package traces is a deterministic set of upstream OpenAI-compatible
// chat.completion.chunk SSE streams with their timing, for tests of the
// relay's re-pacer and for the smoothness report (cmd/smoothreport).
//
// Each [Trace] is a list of [Step]s: bytes the upstream writes at an
// offset after the response headers. [Handler] serves the traces as a
// loopback upstream, picking the trace named by the request's "model".
// A [Transcript] reassembles what a client makes of a stream, so a test can
// compare what the relay delivered with what the trace sent.
package traces

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// Step is what the upstream writes, in one write and flush, At after the
// response headers: one or more complete SSE blocks, or, as the last step
// of an "eof" trace, a block cut off before its end.
type Step struct {
	At  time.Duration
	Raw []byte
}

// Trace is one upstream stream.
type Trace struct {
	Name  string
	Steps []Step
	// Clustered marks a bursty trace on which the smoothness targets
	// apply.
	Clustered bool
	// Cadence is the spacing of a clustered trace's clusters: a pacer
	// can only smooth them with a max delay at least this long on the
	// lane that carries them.
	Cadence time.Duration
	// LanesClustered marks a clustered trace whose reasoning and answer
	// are each clustered too: the CV target applies to each channel's
	// text alone as well as to all of it.
	LanesClustered bool
	// Tagged marks a trace whose reasoning is inline in content between
	// <think> and </think>, as a model served without a reasoning parser
	// sends it: an upstream with `reasoning_format tags` (default tag
	// syntax) in front of it. Reasoning and Answer are then what the
	// relay delivers, with the reasoning in a reasoning field and no tag
	// in either.
	Tagged bool
	// Reasoning and Answer are the exact text per channel that a correct
	// relay delivers: the concatenation of delta.reasoning_content
	// (resp. delta.content) over all events and all choices, in event
	// order. The text of a block cut off by EOF is not part of it.
	Reasoning, Answer string
	// Ends says how the stream ends: "done" (data: [DONE]), "error" (an
	// in-band error event, then EOF) or "eof" (EOF without [DONE]).
	Ends string
}

// Ends values.
const (
	EndsDone  = "done"
	EndsError = "error"
	EndsEOF   = "eof"
)

var all = sync.OnceValue(generate)

// All returns the whole trace set, in a fixed order. It is built once from
// fixed seeds; callers must not modify the steps' bytes.
func All() []Trace { return slices.Clone(all()) }

// ByName returns the trace with the given name.
func ByName(name string) (Trace, bool) {
	for _, t := range all() {
		if t.Name == name {
			return t, true
		}
	}
	return Trace{}, false
}

// Names returns the trace names in the order of All.
func Names() []string {
	var names []string
	for _, t := range all() {
		names = append(names, t.Name)
	}
	return names
}

// Sent returns the text per channel that the upstream sends: Reasoning
// and Answer, but for a tagged trace, whose content carries the reasoning
// between the tags, then the answer (a newline after each tag, which a
// tag parser drops as formatting).
func (t Trace) Sent() (reasoning, answer string) {
	if t.Tagged {
		return "", "<think>\n" + t.Reasoning + "</think>\n\n" + t.Answer
	}
	return t.Reasoning, t.Answer
}

// Duration returns the offset of the last step.
func (t Trace) Duration() time.Duration {
	if len(t.Steps) == 0 {
		return 0
	}
	return t.Steps[len(t.Steps)-1].At
}

// Event is one complete SSE block of a trace with data, and when it
// arrives: in Steps[Step], at At.
type Event struct {
	At   time.Duration
	Step int
	Data []byte
}

// Events parses the trace's steps into its data events, each stamped with
// the offset of the step that completes it. A block cut off by EOF is not
// an event (SSE drops it).
func (t Trace) Events() ([]Event, error) {
	sr := &stepReader{steps: t.Steps, cur: -1}
	rd := sse.NewReader(sr, 0)
	var evs []Event
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return evs, nil
		}
		if err != nil {
			return nil, err
		}
		if ev.Unterminated || !ev.HasData {
			continue
		}
		evs = append(evs, Event{At: t.Steps[sr.cur].At, Step: sr.cur, Data: bytes.Clone(ev.Data)})
	}
}

// stepReader reads the steps one per Read and remembers the last one read.
type stepReader struct {
	steps []Step
	cur   int // index of the step last returned (-1 before any)
	rest  []byte
}

func (s *stepReader) Read(p []byte) (int, error) {
	for len(s.rest) == 0 {
		if s.cur+1 >= len(s.steps) {
			return 0, io.EOF
		}
		s.cur++
		s.rest = s.steps[s.cur].Raw
	}
	n := copy(p, s.rest)
	s.rest = s.rest[n:]
	return n, nil
}

// Transcript parses all the trace's events into a Transcript.
func (t Trace) Transcript() (*Transcript, error) {
	evs, err := t.Events()
	if err != nil {
		return nil, err
	}
	tr := new(Transcript)
	for _, ev := range evs {
		if _, err := tr.Add(ev.Data); err != nil {
			return nil, fmt.Errorf("trace %s: %w", t.Name, err)
		}
	}
	return tr, nil
}

// Transcript is what a client reassembles from the data events of a
// chat completion stream.
type Transcript struct {
	Events int // data events, [DONE] included
	// Reasoning and Answer concatenate delta.reasoning_content (or
	// delta.reasoning, in a chunk without it) and delta.content over all
	// choices, in event order.
	Reasoning, Answer []byte
	Choices           map[int]*ChoiceText
	Done              bool     // data: [DONE] seen
	Errors            []string // compact JSON of in-band error objects
	Usage             string   // compact JSON of the last non-null usage
	AfterEnd          int      // data events after [DONE] or an error event
}

// ChoiceText is what one choice of a stream reassembles to.
type ChoiceText struct {
	Reasoning, Answer []byte
	Role              string
	Finish            string
	ToolCalls         map[int]*ToolCall
	// Logprobs joins the compact JSON of every non-null logprobs, one per
	// line.
	Logprobs []byte
}

// ToolCall is one tool call reassembled from its deltas.
type ToolCall struct {
	ID, Type, Name string
	Arguments      []byte
}

// Piece is the visible text one event carries for one choice and channel.
type Piece struct {
	Choice    int
	Reasoning bool // reasoning_content; otherwise content
	Text      string
}

// Runes returns the number of code points of the piece's text.
func (p Piece) Runes() int { return utf8.RuneCountInString(p.Text) }

// wire types for parsing; pointers tell absent from null.
type wireChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role             string  `json:"role"`
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason *string         `json:"finish_reason"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// Add adds one event's data and returns the visible text it carries, in
// order. "[DONE]" sets Done. An object with a non-null "error" is an
// error event.
func (tr *Transcript) Add(data []byte) ([]Piece, error) {
	tr.Events++
	if tr.Done || len(tr.Errors) > 0 {
		tr.AfterEnd++
	}
	if string(data) == "[DONE]" {
		tr.Done = true
		return nil, nil
	}
	var c wireChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("event %d: %w: %.80q", tr.Events, err, data)
	}
	if isSet(c.Error) {
		tr.Errors = append(tr.Errors, compact(c.Error))
	}
	if isSet(c.Usage) {
		tr.Usage = compact(c.Usage)
	}
	var pieces []Piece
	for _, ch := range c.Choices {
		if tr.Choices == nil {
			tr.Choices = make(map[int]*ChoiceText)
		}
		ct := tr.Choices[ch.Index]
		if ct == nil {
			ct = &ChoiceText{}
			tr.Choices[ch.Index] = ct
		}
		d := &ch.Delta
		if d.Role != "" {
			ct.Role = d.Role
		}
		rsn := d.ReasoningContent
		if rsn == nil {
			// The other name for it (vLLM, OpenRouter, Ollama); a
			// chunk with both carries the same text twice.
			rsn = d.Reasoning
		}
		if rsn != nil && *rsn != "" {
			s := *rsn
			ct.Reasoning = append(ct.Reasoning, s...)
			tr.Reasoning = append(tr.Reasoning, s...)
			pieces = append(pieces, Piece{Choice: ch.Index, Reasoning: true, Text: s})
		}
		if d.Content != nil && *d.Content != "" {
			s := *d.Content
			ct.Answer = append(ct.Answer, s...)
			tr.Answer = append(tr.Answer, s...)
			pieces = append(pieces, Piece{Choice: ch.Index, Text: s})
		}
		for _, tc := range d.ToolCalls {
			if ct.ToolCalls == nil {
				ct.ToolCalls = make(map[int]*ToolCall)
			}
			call := ct.ToolCalls[tc.Index]
			if call == nil {
				call = &ToolCall{}
				ct.ToolCalls[tc.Index] = call
			}
			call.ID += tc.ID
			call.Type += tc.Type
			call.Name += tc.Function.Name
			call.Arguments = append(call.Arguments, tc.Function.Arguments...)
		}
		if isSet(ch.Logprobs) {
			ct.Logprobs = append(ct.Logprobs, compact(ch.Logprobs)...)
			ct.Logprobs = append(ct.Logprobs, '\n')
		}
		if ch.FinishReason != nil {
			ct.Finish = *ch.FinishReason
		}
	}
	return pieces, nil
}

func isSet(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// Diff compares the content of two transcripts: per-channel text overall
// and per choice, roles, finish reasons, tool calls, logprobs and usage.
// Event counts and the ending ([DONE], errors) are not compared. It
// returns "" when they agree, else what differs first.
func (tr *Transcript) Diff(other *Transcript) string {
	if d := diffBytes("reasoning", tr.Reasoning, other.Reasoning); d != "" {
		return d
	}
	if d := diffBytes("answer", tr.Answer, other.Answer); d != "" {
		return d
	}
	if tr.Usage != other.Usage {
		return fmt.Sprintf("usage %s, want %s", other.Usage, tr.Usage)
	}
	if len(tr.Choices) != len(other.Choices) {
		return fmt.Sprintf("%d choices, want %d", len(other.Choices), len(tr.Choices))
	}
	for i, a := range tr.Choices {
		b := other.Choices[i]
		if b == nil {
			return fmt.Sprintf("choice %d missing", i)
		}
		if d := diffBytes(fmt.Sprintf("choice %d reasoning", i), a.Reasoning, b.Reasoning); d != "" {
			return d
		}
		if d := diffBytes(fmt.Sprintf("choice %d answer", i), a.Answer, b.Answer); d != "" {
			return d
		}
		if d := diffBytes(fmt.Sprintf("choice %d logprobs", i), a.Logprobs, b.Logprobs); d != "" {
			return d
		}
		if a.Role != b.Role || a.Finish != b.Finish {
			return fmt.Sprintf("choice %d role/finish %q/%q, want %q/%q", i, b.Role, b.Finish, a.Role, a.Finish)
		}
		if len(a.ToolCalls) != len(b.ToolCalls) {
			return fmt.Sprintf("choice %d: %d tool calls, want %d", i, len(b.ToolCalls), len(a.ToolCalls))
		}
		for k, ca := range a.ToolCalls {
			cb := b.ToolCalls[k]
			if cb == nil || ca.ID != cb.ID || ca.Type != cb.Type || ca.Name != cb.Name || !bytes.Equal(ca.Arguments, cb.Arguments) {
				return fmt.Sprintf("choice %d tool call %d differs", i, k)
			}
		}
	}
	return ""
}

// diffBytes describes where got differs from want, or returns "".
func diffBytes(what string, want, got []byte) string {
	if bytes.Equal(want, got) {
		return ""
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	return fmt.Sprintf("%s differs at byte %d (len %d, want %d): got %.40q, want %.40q",
		what, i, len(got), len(want), got[i:], want[i:])
}
