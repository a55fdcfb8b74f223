package splice

import (
	"bytes"
	"strings"
	"sync"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// chatRecorder is the Recorder of a Chat Completions stream: data
// chunks, then data: [DONE], with comments (keep-alives) anywhere.
//
// It forwards each event at once until the first chunk that carries a
// tool call (tool_calls, or the legacy function_call), a refusal or a
// finish_reason; from that chunk on, every event but a comment is held
// until [DONE], then released together, in order. A break then never
// leaves the client half a tool call, part of a refusal (which cannot be
// prefilled as the answer) or text after a finish. The latency cost is
// that tool calls reach the client at the end of the message. An error
// event (event: error, or a top-level error member) releases what is
// held with it: the stream ends there, and the relay hands the recorder
// an error only when the client is to get it.
//
// On the hot path an event costs one scan of its data (scanChunk: no
// decoding) and an append of the data to the journal; the journal is
// parsed only when the stream breaks (Seam). A stream whose journal and
// held events outgrow maxBytes overflows: the recorder drops its
// journal, releases what it holds and forwards everything from then on
// (it can no longer describe a seam, so holding would protect nothing).
// So does a stream with several choices (n > 1, a choice index above 0):
// a continuation continues one answer, so n > 1 is not continued.
type chatRecorder struct {
	max      int
	overflow bool
	holding  bool
	journal  []byte  // the data of every event handed, one after the other
	ends     []int32 // where each event's data ends in journal
	size     int     // the bytes in journal
	held     []sse.Event
	heldSize int
	out      []sse.Event
	heldCall bool // a held event carries a tool call (Seam.InToolCall)
}

func newChatRecorder(maxBytes int) Recorder { return &chatRecorder{max: maxBytes} }

func (r *chatRecorder) Overflow() bool { return r.overflow }

// journals pools the journals of finished streams: a stream that never
// breaks then costs no allocation for its journal once the pool is warm.
var journals = sync.Pool{New: func() any { return &chatJournal{data: make([]byte, 0, journalStart), ends: make([]int32, 0, 64)} }}

// chatJournal is a pooled journal's memory.
type chatJournal struct {
	data []byte
	ends []int32
}

// maxPooledJournal bounds the journals kept for reuse: a rare long
// stream's is left to the collector.
const maxPooledJournal = 256 << 10

func (r *chatRecorder) Release() {
	if r.journal != nil && cap(r.journal) <= maxPooledJournal {
		journals.Put(&chatJournal{data: r.journal[:0], ends: r.ends[:0]})
	}
	r.journal, r.ends = nil, nil
	r.overflow = true // not used after
}

func (r *chatRecorder) one(ev sse.Event) []sse.Event {
	r.out = append(r.out[:0], ev)
	return r.out
}

func (r *chatRecorder) Pass(ev sse.Event) []sse.Event {
	if r.overflow || ev.IsComment() && !r.holding {
		return r.one(ev) // comments are held only behind held events: the order is the upstream's
	}
	if ev.HasData && ev.IsDone() {
		if !r.holding {
			return r.one(ev)
		}
		return r.release(ev)
	}
	hold, call, multi, failed := false, false, false, ev.Type == "error"
	if ev.HasData {
		var f bool
		hold, call, multi, f = scanChunk(ev.Data)
		failed = failed || f
	}
	if multi {
		return r.spill(ev)
	}
	if failed && r.holding {
		// The relay hands the recorder an error event only when the
		// client is to get it: the stream ends there, without [DONE],
		// and what was held goes out before the error.
		return r.release(ev)
	}
	if r.holding || hold {
		r.holding = true
		r.heldCall = r.heldCall || call
		c := ev.Clone()
		r.held = append(r.held, c)
		r.heldSize += len(c.Raw) + len(c.Data)
		if r.size+r.heldSize > r.max {
			r.held = r.held[:len(r.held)-1]
			return r.spill(ev)
		}
		return nil
	}
	r.record(ev)
	return r.one(ev)
}

// release hands out what is held, then ev (the stream's end): they join
// the journal, as everything handed does.
func (r *chatRecorder) release(ev sse.Event) []sse.Event {
	r.out = append(append(r.out[:0], r.held...), ev)
	r.heldSize = 0
	for _, h := range r.held {
		r.record(h)
	}
	if !ev.IsDone() {
		r.record(ev)
	}
	r.dropHeld()
	return r.out
}

// record appends the data of an event handed to the client to the
// journal, or overflows.
func (r *chatRecorder) record(ev sse.Event) {
	if !ev.HasData || r.overflow {
		return
	}
	if r.size+len(ev.Data)+r.heldSize > r.max {
		r.overflow = true
		r.journal, r.ends = nil, nil
		return
	}
	if r.journal == nil {
		// Sized for a short answer's chunks; append grows it as a
		// longer one needs (a stream that never breaks pays one copy
		// per doubling, not a large first page).
		j := journals.Get().(*chatJournal)
		r.journal, r.ends = j.data, j.ends
	}
	r.journal = append(r.journal, ev.Data...)
	r.ends = append(r.ends, int32(len(r.journal)))
	r.size += len(ev.Data)
}

// journalStart is the journal's first capacity, in bytes.
const journalStart = 1 << 10

// chunks is the journal as the data of each event handed.
func (r *chatRecorder) chunks() [][]byte {
	out := make([][]byte, len(r.ends))
	start := int32(0)
	for i, end := range r.ends {
		out[i] = r.journal[start:end:end]
		start = end
	}
	return out
}

// spill makes the recorder overflow: what it holds goes out now, then ev.
func (r *chatRecorder) spill(ev sse.Event) []sse.Event {
	r.overflow = true
	r.journal, r.ends = nil, nil
	r.out = append(append(r.out[:0], r.held...), ev)
	r.dropHeld()
	return r.out
}

func (r *chatRecorder) dropHeld() {
	clear(r.held)
	r.held, r.heldSize, r.holding, r.heldCall = r.held[:0], 0, false, false
}

func (r *chatRecorder) Seam() *Seam {
	cs := readChatJournal(r.chunks())
	s := &Seam{
		Answer:       cs.answer,
		Reasoning:    cs.reasoning,
		InReasoning:  cs.inReasoning(),
		Discarded:    len(r.held),
		InToolCall:   r.heldCall,
		ToolCalls:    cs.toolCalls,
		OutputTokens: usage.EstimateTokens([]byte(cs.answer)) + usage.EstimateTokens([]byte(cs.reasoning)),
	}
	r.dropHeld()
	s.splicer = func(o Options) Splicer { return newChatSplicer(cs, s.InReasoning, o) }
	return s
}

// scanChunk is the hot path's look at a chunk's data: one pass over its
// tokens (string literals skipped eight bytes at a time, nothing
// decoded). hold: the chunk carries a tool call (a tool_calls that is
// neither null nor [], a function_call that is not null: call), a
// non-empty refusal or a non-empty finish_reason. multi: a choice (an object in
// an array of the top-level object) has an index of 1 or more; a tool
// call's index is deeper. failed: the top-level object has an error
// that is not null (an in-band error). A member of another object by one
// of these names holds early, which is safe. Data that is not JSON gives
// what was seen before the fault.
func scanChunk(b []byte) (hold, call, multi, failed bool) {
	depth := 0
	for i := 0; i < len(b); {
		switch b[i] {
		case '"':
			end, _ := jsonscan.ScanString(b, i)
			if end < 0 {
				return hold, call, multi, failed
			}
			j := jsonscan.SkipWS(b, end)
			if j >= len(b) || b[j] != ':' {
				i = end
				continue
			}
			v := jsonscan.SkipWS(b, j+1)
			if v >= len(b) {
				return hold, call, multi, failed
			}
			switch string(b[i+1 : end-1]) {
			case "tool_calls":
				call = call || b[v] != 'n' && !emptyArray(b, v)
				hold = hold || call
			case "function_call":
				call = call || b[v] != 'n'
				hold = hold || call
			case "finish_reason", "refusal":
				hold = hold || b[v] == '"' && v+1 < len(b) && b[v+1] != '"'
			case "index":
				multi = multi || depth == 3 && '1' <= b[v] && b[v] <= '9'
			case "error":
				failed = failed || depth == 1 && b[v] != 'n'
			}
			i = v
		case '{', '[':
			depth++
			i++
		case '}', ']':
			depth--
			i++
		default:
			i++
		}
	}
	return hold, call, multi, failed
}

func emptyArray(b []byte, i int) bool {
	if b[i] != '[' {
		return false
	}
	j := jsonscan.SkipWS(b, i+1)
	return j < len(b) && b[j] == ']'
}

// reasoningStyle is where a stream puts its reasoning in a delta.
type reasoningStyle uint8

const (
	styleReasoningContent reasoningStyle = iota // "reasoning_content" (DeepSeek, Qwen, xAI, vLLM); the default
	styleReasoning                              // "reasoning" (Groq, OpenRouter, Ollama)
	styleThinking                               // a content part of type thinking (Mistral's Magistral)
)

// chatHead is what names every chunk of the first stream: the raw JSON
// values of its id, created, model and system_fingerprint (nil: none).
type chatHead struct {
	id, created, model, fingerprint []byte
}

// chatSeam is what the journal says of the stream handed so far.
type chatSeam struct {
	head      chatHead
	answer    string
	reasoning string
	refusal   bool
	role      bool // the client had a chunk with a role
	style     reasoningStyle
	toolCalls int
}

func (cs *chatSeam) inReasoning() bool {
	return cs.reasoning != "" && cs.answer == "" && cs.toolCalls == 0 && !cs.refusal
}

// Top-level and delta members the seam and the splicer read.
var (
	topKeys   = []string{"id", "created", "model", "system_fingerprint", "choices", "usage", "error"}
	deltaKeys = []string{"role", "content", "reasoning_content", "reasoning", "refusal"}
)

const (
	topID = iota
	topCreated
	topModel
	topFingerprint
	topChoices
	topUsage
	topError
)

const (
	deltaRole = iota
	deltaContent
	deltaReasoningContent
	deltaReasoning
	deltaRefusal
)

// readChatJournal parses the chunks handed to the client. A chunk the
// relay's translators cannot read (chat.ReadDelta's error) says nothing.
func readChatJournal(journal [][]byte) *chatSeam {
	cs := &chatSeam{}
	var answer, reasoning strings.Builder
	var d chat.Delta
	var c chatChunk
	styled := false
	lastCall := map[int]string{}
	for _, data := range journal {
		if !c.parse(data, &d) {
			continue
		}
		if cs.head.id == nil && c.at[topID] >= 0 && c.str(c.at[topID]) {
			if id := c.value(c.at[topID]); len(id) > 2 {
				cs.head = chatHead{id: bytes.Clone(id)}
				if i := c.at[topCreated]; i >= 0 {
					cs.head.created = bytes.Clone(c.value(i))
				}
				if i := c.at[topModel]; i >= 0 && c.str(i) {
					cs.head.model = bytes.Clone(c.value(i))
				}
				if i := c.at[topFingerprint]; i >= 0 && c.str(i) {
					cs.head.fingerprint = bytes.Clone(c.value(i))
				}
			}
		}
		if !c.one {
			continue
		}
		answer.WriteString(c.content)
		reasoning.WriteString(c.reasoning)
		cs.refusal = cs.refusal || c.refusal != ""
		cs.role = cs.role || c.roleAt >= 0
		if c.reasoning != "" && !styled {
			cs.style, styled = c.style, true
		}
		for _, call := range d.Calls {
			if last, ok := lastCall[call.Index]; !ok || call.ID != "" && call.ID != last {
				cs.toolCalls++
				lastCall[call.Index] = call.ID
			}
		}
	}
	cs.answer, cs.reasoning = answer.String(), reasoning.String()
	return cs
}

// member is one member of a JSON object: its key literal b[ks:ke] and
// its value b[vs:ve].
type member struct{ ks, ke, vs, ve int }

// chatChunk is one chunk, parsed for the splicer (and the seam): its
// top-level members and, when it has exactly one choice that
// chat.ReadDelta reads, that choice's members, its delta's, and its text.
type chatChunk struct {
	data []byte
	top  []member
	at   [topError + 1]int // index in top of each of topKeys, -1 when absent

	one     bool // the one choice below was read
	choice  []member
	deltaAt int // index in choice of "delta", -1
	delta   []member
	roleAt  int // index in delta of a string "role", -1

	content, reasoning, refusal string
	style                       reasoningStyle // of the reasoning
	calls, finish, usage        bool
}

func (c *chatChunk) value(i int) []byte { m := c.top[i]; return c.data[m.vs:m.ve] }
func (c *chatChunk) str(i int) bool     { return c.data[c.top[i].vs] == '"' }

// parse reads data into c (whose slices it reuses); false when data is
// not a JSON object.
func (c *chatChunk) parse(data []byte, d *chat.Delta) bool {
	*c = chatChunk{data: data, top: c.top[:0], choice: c.choice[:0], delta: c.delta[:0], deltaAt: -1, roleAt: -1}
	for i := range c.at {
		c.at[i] = -1
	}
	var end int
	if c.top, end = members(data, jsonscan.SkipWS(data, 0), 1, c.top); end < 0 || jsonscan.SkipWS(data, end) != len(data) {
		return false
	}
	for n, m := range c.top {
		if k := jsonscan.MatchKey(data[m.ks:m.ke], topKeys); k >= 0 && c.at[k] < 0 {
			c.at[k] = n
		}
	}
	if u := c.at[topUsage]; u >= 0 && data[c.top[u].vs] == '{' {
		c.usage = true
	}
	ch := c.at[topChoices]
	if ch < 0 || c.at[topError] >= 0 && !jsonscan.IsNull(data, c.top[c.at[topError]].vs) {
		return true
	}
	raw := c.value(ch)
	if chat.ReadDelta(raw, d) != nil {
		return true
	}
	// ReadDelta read every choice as index 0: one is the one answer.
	it := jsonscan.NewArrIter(data, c.top[ch].vs, 2)
	vs, ok := it.Next()
	if !ok {
		return true
	}
	it.Skip()
	if _, more := it.Next(); more || it.Err {
		return true
	}
	if c.choice, end = members(data, vs, 3, c.choice); end < 0 {
		return true
	}
	for n, m := range c.choice {
		if string(data[m.ks:m.ke]) == `"delta"` && data[m.vs] == '{' {
			c.deltaAt = n
		}
	}
	if c.deltaAt >= 0 {
		m := c.choice[c.deltaAt]
		if c.delta, end = members(data, m.vs, 4, c.delta); end < 0 {
			return true
		}
		var rc, r, thinking bool
		for n, m := range c.delta {
			text := data[m.vs] == '"' && m.ve-m.vs > 2
			switch jsonscan.MatchKey(data[m.ks:m.ke], deltaKeys) {
			case deltaRole:
				if text {
					c.roleAt = n
				}
			case deltaReasoningContent:
				rc = rc || text
			case deltaReasoning:
				r = r || text
			case deltaContent:
				thinking = data[m.vs] == '[' && bytes.Contains(data[m.vs:m.ve], []byte(`"thinking"`))
			}
		}
		switch { // ReadDelta takes reasoning_content over reasoning
		case rc:
			c.style = styleReasoningContent
		case r:
			c.style = styleReasoning
		case thinking:
			c.style = styleThinking
		}
	}
	var content, reasoning, refusal strings.Builder
	for _, p := range d.Pieces {
		switch p.Channel {
		case chat.ChanText:
			content.WriteString(p.Text)
		case chat.ChanReasoning:
			reasoning.WriteString(p.Text)
		case chat.ChanRefusal:
			refusal.WriteString(p.Text)
		}
	}
	c.content, c.reasoning, c.refusal = content.String(), reasoning.String(), refusal.String()
	c.calls, c.finish = len(d.Calls) > 0, d.Finish != ""
	c.one = true
	return true
}

// members appends the members of the object at b[i] (depth: its
// nesting) to ms, and returns the object's end (-1: not an object).
func members(b []byte, i, depth int, ms []member) ([]member, int) {
	if i >= len(b) || b[i] != '{' {
		return ms, -1
	}
	it := jsonscan.NewObjIter(b, i, depth)
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			break
		}
		it.Skip()
		if it.Err {
			break
		}
		ms = append(ms, member{ks, ke, vs, it.Pos})
	}
	if it.Err {
		return ms, -1
	}
	return ms, it.Pos
}
