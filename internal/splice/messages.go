package splice

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// The Anthropic Messages recorder.
//
// Holding. Each event is forwarded at once, except:
//
//   - from the content_block_start of a tool_use block, or from the first
//     message_delta, every event is held until message_stop and then
//     released with it, in order. A break never leaves the client half a
//     tool call (its input_json_delta pieces are not valid JSON until the
//     block's stop) nor a message_delta (stop_reason, final usage)
//     followed by more content. The latency cost: a tool call (and
//     anything after it) reaches the client at the end of the message,
//     not as its arguments stream; a client runs a call only once it is
//     complete, so it waits at most for the message's last events.
//   - a server tool call (server_tool_use, mcp_tool_use) is held with the
//     block after it (its result: web_search_tool_result,
//     mcp_tool_result, ...) and released at that block's stop. The client
//     does not run these, but a cut one would stay in its message (and in
//     the history it sends back next turn) as a call with partial input
//     and no result, which the continuation cannot complete (it does not
//     redo the search). Holding them to the end of the message, as
//     tool_use, would hold a web search's whole answer (the text after
//     the results) to the end: the pair is enough.
//   - ping events and comments are never held (forwarded at once, even
//     while a group is held), nor is an error event: the stream ends with
//     it, and the held events would never be released.
//
// Cost on the hot path: the event type (parsed by the sse reader), a byte
// scan of a content_block_start for its type and index, and of a text or
// thinking delta for its string, whose escaped bytes are appended to the
// answer's or the reasoning's journal; JSON is parsed only by Seam and the
// Splicer. The journals and the held events are bounded by maxBytes (no
// bound when maxBytes <= 0): past it Overflow is true, the held events
// are released and nothing more is held or journaled (a stream that can
// no longer be continued has no use for holding).
type messagesRecorder struct {
	max      int // bound of journal + held bytes; <= 0: none
	overflow bool

	// Upstream view (what comes in): the holding state.
	hold      uint8 // holdNone, holdGroup, holdEnd
	heldCall  bool  // the held events start a tool call (Seam.InToolCall)
	resultIn  bool  // holdGroup: the block after the server tool call started
	held      []sse.Event
	heldBytes int

	// Client view (what was handed).
	start       []byte // the message_start's data
	nextIndex   int    // 1 + the largest index handed: the blocks the client saw opened
	open        bool   // a block is open
	openIndex   int
	openType    string
	answerBegan bool // a block other than (redacted_)thinking was handed
	thinking    bool // a (redacted_)thinking block was handed
	toolCalls   int  // complete tool_use blocks handed
	answer      []byte
	reasoning   []byte // the text and thinking deltas' strings, JSON-escaped

	out []sse.Event
}

const (
	holdNone  = iota
	holdGroup // a server tool call and its result
	holdEnd   // to message_stop
)

func newMessagesRecorder(maxBytes int) Recorder { return &messagesRecorder{max: maxBytes} }

func (r *messagesRecorder) Overflow() bool { return r.overflow }

// Release: the Messages journal is small (the text only), left to the
// collector.
func (r *messagesRecorder) Release() {}

func (r *messagesRecorder) Pass(ev sse.Event) []sse.Event {
	r.out = r.out[:0]
	if r.hold == holdNone && len(r.held) > 0 {
		r.held = r.held[:0] // released by the previous call
		r.heldBytes, r.heldCall = 0, false
	}
	if r.overflow && r.hold != holdNone {
		r.hold = holdNone
		return r.release(ev)
	}
	// Pings and comments go out at once unless events are held: then
	// they wait behind them, so the client gets the upstream's order
	// (mode off is byte for byte). An error releases what is held
	// first: the relay hands one only when the client is to get it.
	if r.overflow || (ev.IsComment() || ev.Type == "ping") && r.hold == holdNone {
		r.hand(ev)
		r.out = append(r.out, ev)
		return r.out
	}
	if ev.Type == "error" {
		if r.hold != holdNone {
			r.hold = holdNone
			return r.release(ev)
		}
		r.hand(ev)
		r.out = append(r.out, ev)
		return r.out
	}
	switch ev.Type {
	case "content_block_start":
		typ := blockType(ev.Data)
		switch {
		case typ == "tool_use":
			r.hold, r.heldCall = holdEnd, true
		case typ == "server_tool_use" || typ == "mcp_tool_use":
			r.heldCall = true
			if r.hold == holdNone {
				r.hold, r.resultIn = holdGroup, false
			}
		case r.hold == holdGroup:
			r.resultIn = true
		}
	case "message_delta":
		r.hold = holdEnd
	case "message_stop":
		if r.hold != holdNone {
			r.hold = holdNone
			return r.release(ev)
		}
	case "content_block_stop":
		if r.hold == holdGroup && r.resultIn {
			r.hold = holdNone
			return r.release(ev)
		}
	}
	if r.hold == holdNone {
		r.hand(ev)
		r.out = append(r.out, ev)
		return r.out
	}
	r.held = append(r.held, ev.Clone())
	r.heldBytes += len(ev.Raw) + len(ev.Data)
	if r.bound() {
		r.hold = holdNone
		r.held = r.held[:len(r.held)-1]
		return r.release(ev)
	}
	return r.out
}

// release hands the held events, then last. The held events stay valid
// until the next call (which clears them).
func (r *messagesRecorder) release(last sse.Event) []sse.Event {
	for _, h := range r.held {
		r.hand(h)
		r.out = append(r.out, h)
	}
	r.hand(last)
	r.out = append(r.out, last)
	return r.out
}

// bound reports (and records) that the journals and the held events
// outgrew max.
func (r *messagesRecorder) bound() bool {
	if !r.overflow && r.max > 0 && len(r.answer)+len(r.reasoning)+len(r.start)+r.heldBytes > r.max {
		r.overflow = true
	}
	return r.overflow
}

// hand records an event the client is handed.
func (r *messagesRecorder) hand(ev sse.Event) {
	if r.overflow {
		return
	}
	switch ev.Type {
	case "message_start":
		if r.start == nil {
			r.start = append([]byte{}, ev.Data...)
		}
	case "content_block_start":
		typ := blockType(ev.Data)
		i, ok := topIndex(ev.Data)
		if !ok {
			i = r.nextIndex
		}
		r.nextIndex = max(r.nextIndex, i+1)
		r.open, r.openIndex, r.openType = true, i, typ
		if isThinking(typ) {
			r.thinking = true
		} else {
			r.answerBegan = true
		}
	case "content_block_delta":
		if !r.open {
			return
		}
		switch r.openType {
		case "text":
			if s, ok := deltaString(ev.Data, `"text_delta"`, `"text"`); ok {
				r.answer = append(r.answer, s...)
			}
		case "thinking":
			if s, ok := deltaString(ev.Data, `"thinking_delta"`, `"thinking"`); ok {
				r.reasoning = append(r.reasoning, s...)
			}
		}
		r.bound()
	case "content_block_stop":
		if r.open && r.openType == "tool_use" {
			r.toolCalls++
		}
		r.open = false
	}
}

func isThinking(typ string) bool { return typ == "thinking" || typ == "redacted_thinking" }

func (r *messagesRecorder) Seam() *Seam {
	st := &messagesSeam{
		answer:      jsonString(r.answer),
		reasoning:   jsonString(r.reasoning),
		sawStart:    r.start != nil,
		answerBegan: r.answerBegan,
		nextIndex:   r.nextIndex,
		open:        r.open,
		openIndex:   r.openIndex,
		openType:    r.openType,
	}
	st.inReasoning = r.thinking && !r.answerBegan
	st.first = startUsage(r.start)
	discarded := 0
	if r.hold != holdNone {
		discarded = len(r.held) // else they were released (handed) by the last Pass
	}
	s := &Seam{
		Answer:       st.answer,
		Reasoning:    st.reasoning,
		InReasoning:  st.inReasoning,
		Discarded:    discarded,
		InToolCall:   r.heldCall && discarded > 0,
		ToolCalls:    r.toolCalls,
		OutputTokens: usage.EstimateTokens([]byte(st.answer)) + usage.EstimateTokens([]byte(st.reasoning)),
	}
	s.splicer = func(o Options) Splicer { return newMessagesSplicer(st, o) }
	// The held events are never sent; the continuation comes next.
	r.held, r.heldBytes, r.hold, r.heldCall = r.held[:0], 0, holdNone, false
	return s
}

// messagesSeam is what a messages Splicer needs of the client's stream.
type messagesSeam struct {
	answer, reasoning string
	inReasoning       bool
	answerBegan       bool
	sawStart          bool
	nextIndex         int
	open              bool
	openIndex         int
	openType          string
	first             messagesUsage // the message_start's
}

// messagesUsage is Anthropic's usage: input_tokens counts neither cache
// reads nor cache writes.
type messagesUsage struct {
	Input       int `json:"input_tokens"`
	CacheWrite  int `json:"cache_creation_input_tokens"`
	CacheRead   int `json:"cache_read_input_tokens"`
	Output      int `json:"output_tokens"`
	hasInput    bool
	hasCacheW   bool
	hasCacheR   bool
	hasOutput   bool
	parsedExtra map[string]json.RawMessage // the other fields, kept
}

func parseUsage(raw json.RawMessage) messagesUsage {
	var u messagesUsage
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return u
	}
	num := func(k string, dst *int, has *bool) {
		if v, ok := m[k]; ok {
			var n float64
			if json.Unmarshal(v, &n) == nil {
				*dst, *has = int(n), true
			}
			delete(m, k)
		}
	}
	num("input_tokens", &u.Input, &u.hasInput)
	num("cache_creation_input_tokens", &u.CacheWrite, &u.hasCacheW)
	num("cache_read_input_tokens", &u.CacheRead, &u.hasCacheR)
	num("output_tokens", &u.Output, &u.hasOutput)
	u.parsedExtra = m
	return u
}

// startUsage is the usage of a message_start's message.
func startUsage(data []byte) messagesUsage {
	var m struct {
		Message struct {
			Usage json.RawMessage `json:"usage"`
		} `json:"message"`
	}
	if json.Unmarshal(data, &m) != nil {
		return messagesUsage{}
	}
	return parseUsage(m.Message.Usage)
}

// messagesSplicer rewrites an Anthropic Messages continuation into the
// rest of the client's message.
//
//   - The continuation's message_start is dropped (its usage is added to
//     the final one), as are pings before its first content.
//   - Its content blocks are numbered after the client's. When a text
//     block was open at the break and the continuation's first block
//     (after any dropped thinking) is text, that block's start is dropped
//     and its deltas and stop go to the open block: the text goes on in
//     the same block. Otherwise the open block is closed (a
//     content_block_stop) before the continuation's first block, or
//     before its message_delta if it has none.
//   - Thinking. After the answer began (any block but thinking handed),
//     or with Hide, the continuation's thinking and redacted_thinking
//     blocks are dropped (counted in its usage, never shown). With Mark,
//     a break in the reasoning gives the client's reasoning lane Marker
//     before the continuation's first thinking block. Signatures: a
//     thinking block's signature_delta comes at its end and covers its
//     own text, so the block the break cut has none whatever we do;
//     Marker is appended to it (when it is still open) before it is
//     closed as is, and otherwise sent in a thinking block of its own,
//     unsigned. The continuation's thinking blocks pass untouched, with
//     their signatures, so a client that returns them to Anthropic in
//     its next turn (Claude Code in a tool loop) returns valid ones; only
//     the cut block, and the marker's own block, are unsigned, as the
//     relay makes every thinking block it cannot sign (its Chat
//     translation sends an empty signature). No marker is sent when the
//     continuation does not think.
//   - Overlap: its leading text is held until Decided, or a non-text
//     event, and the repeat of the answer's tail (Overlap) is dropped.
//   - message_delta's usage: see usage.
type messagesSplicer struct {
	s *messagesSeam
	o Options

	commented   bool
	began       bool // the continuation's first content came
	emitted     bool // a continuation block was emitted (or merged)
	openHandled bool // the client's open block was merged or closed
	marked      bool
	blocks      map[int]int // continuation index -> client index; -1: dropped
	next        int
	cont        messagesUsage // the continuation's message_start usage

	pending     bool // the leading text is held
	pendingText []byte
	pendingEvs  []pendingDelta

	out []sse.Event
}

type pendingDelta struct {
	ev    sse.Event // cloned, index rewritten
	index int
	text  string
}

func newMessagesSplicer(s *messagesSeam, o Options) *messagesSplicer {
	return &messagesSplicer{s: s, o: o, blocks: map[int]int{}, next: s.nextIndex, pending: true, openHandled: !s.open}
}

func (p *messagesSplicer) emit(ev sse.Event) {
	if !p.commented && p.o.Comment != "" {
		p.commented = true
		p.out = append(p.out, commentEvent(p.o.Comment))
	}
	p.out = append(p.out, ev)
}

// put emits an event that ends the overlap hold (anything but the
// leading text and its block's start).
func (p *messagesSplicer) put(ev sse.Event) {
	p.flush()
	p.emit(ev)
}

func commentEvent(text string) sse.Event {
	ev, _ := sse.NewReader(bytes.NewReader(sse.AppendComment(nil, text)), 0).Next()
	return ev
}

// messagesWire is what the Splicer reads of an event.
type messagesWire struct {
	Type         string `json:"type"`
	Index        *int   `json:"index"`
	ContentBlock struct {
		Type string `json:"type"`
	} `json:"content_block"`
	Delta struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	} `json:"delta"`
}

func (p *messagesSplicer) Next(ev sse.Event) []sse.Event {
	p.out = p.out[:0]
	if ev.IsComment() {
		p.emit(ev) // does not end the overlap hold
		return p.out
	}
	var w messagesWire
	valid := json.Unmarshal(ev.Data, &w) == nil
	typ := ev.Type
	if typ == "" {
		typ = w.Type
	}
	switch typ {
	case "ping":
		if p.began {
			p.emit(ev)
		}
	case "message_start":
		if p.s.sawStart {
			p.cont = startUsage(ev.Data)
		} else {
			p.s.sawStart = true
			p.emit(ev)
		}
	case "content_block_start":
		p.began = true
		if valid && w.Index != nil {
			p.blockStart(ev, *w.Index, w.ContentBlock.Type)
		}
	case "content_block_delta":
		p.began = true
		to, ok := p.mapped(valid, w.Index)
		if !ok {
			return p.out // a dropped block's, or without its start
		}
		ev, ok = withIndex(ev, *w.Index, to)
		if !ok {
			return p.out
		}
		if p.pending {
			if w.Delta.Type == "text_delta" && w.Delta.Text != nil {
				s := *w.Delta.Text
				p.pendingText = append(p.pendingText, s...)
				p.pendingEvs = append(p.pendingEvs, pendingDelta{ev.Clone(), to, s})
				if Decided(p.s.answer, string(p.pendingText), p.o.MaxOverlap) {
					p.flush()
				}
				return p.out
			}
		}
		p.put(ev)
	case "content_block_stop":
		p.began = true
		to, ok := p.mapped(valid, w.Index)
		if !ok {
			return p.out
		}
		if ev, ok = withIndex(ev, *w.Index, to); ok {
			p.put(ev)
		}
	case "message_delta":
		p.began = true
		p.closeOpen()
		p.put(p.messageDelta(ev))
	case "message_stop":
		p.closeOpen()
		p.put(ev)
	default: // error, unknown
		p.put(ev)
	}
	return p.out
}

// mapped returns the client index of a continuation block's event.
func (p *messagesSplicer) mapped(valid bool, idx *int) (int, bool) {
	if !valid || idx == nil {
		return 0, false
	}
	to, ok := p.blocks[*idx]
	return to, ok && to >= 0
}

func (p *messagesSplicer) blockStart(ev sse.Event, idx int, typ string) {
	if isThinking(typ) {
		if p.s.answerBegan || (p.s.inReasoning && p.o.Reasoning == Hide) {
			p.blocks[idx] = -1
			return
		}
		if p.s.inReasoning && !p.marked {
			p.marked = true
			if !p.openHandled && p.s.openType == "thinking" {
				p.put(messagesEvent("content_block_delta", p.s.openIndex,
					`"delta":{"type":"thinking_delta","thinking":`+quote(Marker)+`}`))
			} else {
				p.closeOpen()
				i := p.take()
				p.put(messagesEvent("content_block_start", i, `"content_block":{"type":"thinking","thinking":"","signature":""}`))
				p.emit(messagesEvent("content_block_delta", i, `"delta":{"type":"thinking_delta","thinking":`+quote(Marker)+`}`))
				p.emit(messagesEvent("content_block_stop", i, ""))
			}
		}
	}
	if typ == "text" && !p.emitted && !p.openHandled && p.s.openType == "text" {
		p.emitted, p.openHandled = true, true
		p.blocks[idx] = p.s.openIndex
		return
	}
	p.emitted = true
	p.closeOpen()
	to := p.take()
	if ev, ok := withIndex(ev, idx, to); ok {
		p.blocks[idx] = to
		if typ == "text" {
			p.emit(ev) // its text may still be a repeat
		} else {
			p.put(ev)
		}
	} else {
		p.next--
		p.blocks[idx] = -1
	}
}

func (p *messagesSplicer) take() int { p.next++; return p.next - 1 }

// closeOpen ends the client's block that the break left open.
func (p *messagesSplicer) closeOpen() {
	if !p.openHandled {
		p.openHandled = true
		p.put(messagesEvent("content_block_stop", p.s.openIndex, ""))
	}
}

// flush ends the overlap hold: the held leading text goes out without the
// repeat of the answer's tail.
func (p *messagesSplicer) flush() {
	if !p.pending {
		return
	}
	p.pending = false
	if len(p.pendingEvs) == 0 {
		return
	}
	drop := Overlap(p.s.answer, string(p.pendingText), p.o.MaxOverlap)
	for _, d := range p.pendingEvs {
		switch {
		case drop >= len(d.text):
			drop -= len(d.text)
		case drop > 0:
			p.emit(messagesEvent("content_block_delta", d.index,
				`"delta":{"type":"text_delta","text":`+quote(d.text[drop:])+`}`))
			drop = 0
		default:
			p.emit(d.ev)
		}
	}
	p.pendingEvs, p.pendingText = nil, nil
}

// messageDelta adds the earlier attempts' usage to the continuation's
// message_delta, so that the client, whose SDK takes output_tokens (and
// input_tokens and the cache counts when present) from message_delta,
// is told the total:
//
//	output_tokens               = continuation's + E.Completion
//	input_tokens                = continuation's + E.Prompt - E.Cached - E.CacheWrite
//	cache_read_input_tokens     = continuation's + E.Cached
//	cache_creation_input_tokens = continuation's + E.CacheWrite
//
// where E is Options.Earlier (usage.Usage counts cache reads and writes
// inside Prompt; Anthropic's input_tokens counts neither) and the
// continuation's counts are its message_delta's, or, for the input and
// cache counts it leaves out, its message_start's. E covers the broken
// attempt whole, so the first message's own message_start usage (which
// the client saw) is not added again; only when E is zero (the relay
// knows nothing of the earlier attempts) does it stand in for E's input
// and cache counts, and Seam.OutputTokens (or the message_start's
// output_tokens if larger) for E's output. All four fields are always
// written.
func (p *messagesSplicer) messageDelta(ev sse.Event) sse.Event {
	var m struct {
		Usage json.RawMessage `json:"usage"`
	}
	if json.Unmarshal(ev.Data, &m) != nil {
		return ev
	}
	u := parseUsage(m.Usage)
	if !u.hasInput {
		u.Input = p.cont.Input
	}
	if !u.hasCacheR {
		u.CacheRead = p.cont.CacheRead
	}
	if !u.hasCacheW {
		u.CacheWrite = p.cont.CacheWrite
	}
	if !u.hasOutput {
		u.Output = p.cont.Output
	}
	e := p.o.Earlier
	if e == (usage.Usage{}) {
		f := p.s.first
		out := usage.EstimateTokens([]byte(p.s.answer)) + usage.EstimateTokens([]byte(p.s.reasoning))
		e = usage.Usage{Prompt: f.Input + f.CacheRead + f.CacheWrite, Cached: f.CacheRead, CacheWrite: f.CacheWrite,
			Completion: max(out, f.Output)}
	}
	u.Input += max(e.Prompt-e.Cached-e.CacheWrite, 0)
	u.CacheRead += e.Cached
	u.CacheWrite += e.CacheWrite
	u.Output += e.Completion
	b := []byte(`{"input_tokens":` + strconv.Itoa(u.Input) +
		`,"cache_creation_input_tokens":` + strconv.Itoa(u.CacheWrite) +
		`,"cache_read_input_tokens":` + strconv.Itoa(u.CacheRead) +
		`,"output_tokens":` + strconv.Itoa(u.Output))
	for _, k := range sortedKeys(u.parsedExtra) {
		b = append(b, ',')
		b = append(b, quote(k)...)
		b = append(b, ':')
		b = append(b, u.parsedExtra[k]...)
	}
	b = append(b, '}')
	data, ok := setTopLevel(ev.Data, "usage", b)
	if !ok {
		return ev
	}
	return sse.NewEvent(ev.Type, data)
}

// messagesEvent makes an event {"type":typ,"index":index[,rest]}.
func messagesEvent(typ string, index int, rest string) sse.Event {
	data := `{"type":"` + typ + `","index":` + strconv.Itoa(index)
	if rest != "" {
		data += "," + rest
	}
	return sse.NewEvent(typ, []byte(data+"}"))
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// withIndex returns ev with its top-level index set to to (ev itself when
// from == to); false when ev's data is not a JSON object.
func withIndex(ev sse.Event, from, to int) (sse.Event, bool) {
	if from == to {
		return ev, true
	}
	data, ok := setTopLevel(ev.Data, "index", []byte(strconv.Itoa(to)))
	if !ok {
		return ev, false
	}
	return sse.NewEvent(ev.Type, data), true
}
