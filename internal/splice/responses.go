package splice

import (
	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// The Responses recorder.
//
// Holding: from the output_item.added of the first item the client
// executes (function_call, custom_tool_call such as Codex CLI's
// apply_patch, local_shell_call, computer_call, and any item type not
// known to be the provider's own), every event is held until
// response.completed or response.incomplete, and then released together,
// in order. A break therefore never leaves the client half a tool call
// (Codex CLI runs a call at its output_item.done, the SDKs hand the
// arguments on as they come); the cost is latency: a tool call, and
// whatever follows it, reaches the client at the end of the stream, all
// at once. Items the provider runs itself (web_search_call,
// file_search_call, code_interpreter_call, image_generation_call,
// mcp_call, mcp_list_tools) are only shown, so they pass at once: the
// continuation does not repeat them and the client keeps them. Comments
// are never held; neither are error and response.failed (what is held
// then stays held: the relay breaks there, and a Seam discards it).
//
// The seam: Answer is the output_text deltas handed (every message item,
// in order), Reasoning the reasoning summary and reasoning_text deltas.
// InReasoning: a reasoning item was handed and neither a message item nor
// a call the client runs; a message item counts as the answer begun from
// its output_item.added on, before its first text (the continuation's
// reasoning would otherwise follow an empty message). ToolCalls is 0: the
// calls are held to the end.
//
// Cost: per event, one walk over its data (scanRsp: the top-level
// members, nested values skipped byte by byte), a
// string decode for a text delta, and copies of the few events whose
// content the splice needs (response.created, the output_item.done items,
// the open item's added item and done parts). maxBytes bounds those
// copies, the text handed and the held events together: beyond it
// Overflow is true, what is held is released, and the recorder only
// forwards (a break then ends with the error: no seam to continue from,
// and nothing gained by holding any more).
type rspRecorder struct {
	max      int
	used     int
	overflow bool
	holding  bool
	held     []sse.Event
	out      []sse.Event
	st       rspState
}

// rspState is what the client was handed: the Seam's and the Splicer's
// view of the first stream.
type rspState struct {
	created   []byte // data of the response.created handed (nil: none)
	lastSeq   int64  // the last sequence_number handed, -1 none
	nItems    int    // output items the client saw added (highest output_index + 1)
	answer    []byte // output_text deltas handed, all message items in order
	reasoning []byte // reasoning summary and reasoning_text deltas handed
	sawReason bool   // a reasoning item was handed
	sawAnswer bool   // a message item was handed
	sawCall   bool   // an item the client executes was handed
	done      []doneItem
	open      openItem
}

// doneItem is an item of an output_item.done handed: its raw JSON.
type doneItem struct {
	idx  int
	item []byte
}

// part kinds of the open item's open part
const (
	partNone    = iota
	partText    // an output_text part of a message
	partSummary // a summary_text part of a reasoning item
	partRText   // a reasoning_text part of a reasoning item
	partOther   // a refusal or another part: its text is not kept
)

// openItem is the item added and not done at the break.
type openItem struct {
	ok        bool
	idx       int
	id        string
	typ       string
	added     []byte // the item of its output_item.added
	part      int    // the open part's index (content_index or summary_index)
	partKind  int
	partStart int      // where the open part's text starts in answer or reasoning
	parts     [][]byte // a message's done content parts, or a reasoning item's done content parts (raw)
	summary   [][]byte // a reasoning item's done summary parts (raw)
}

func newResponsesRecorder(maxBytes int) Recorder {
	return &rspRecorder{max: maxBytes, st: rspState{lastSeq: -1}}
}

func (r *rspRecorder) Overflow() bool { return r.overflow }

// Release: left to the collector.
func (r *rspRecorder) Release() {}

// Pass forwards ev, or holds it (see rspRecorder).
func (r *rspRecorder) Pass(ev sse.Event) []sse.Event {
	r.out = r.out[:0]
	if r.overflow || ev.IsComment() && !r.holding {
		return append(r.out, ev) // behind held events, comments wait: the order is the upstream's
	}
	var sc rspScan
	if ev.HasData {
		sc = scanRsp(ev.Data)
	} else {
		sc = rspScan{typ: rtInvalid}
	}
	if !r.holding && sc.typ == rtItemAdded && holdsItem(sc.itemTyp) {
		r.holding = true
	}
	if r.holding {
		c := ev.Clone()
		r.held = append(r.held, c)
		r.keep(len(c.Raw) + len(c.Data))
		if r.overflow {
			return r.out // keep released what was held
		}
		if sc.typ != rtCompleted && sc.typ != rtIncomplete && sc.typ != rtError && sc.typ != rtFailed {
			return r.out
		}
		// The end, or an error the client is to get (the relay hands
		// one only then): what was held goes out before it.
		r.holding = false
		held := r.held
		r.used -= r.heldBytes()
		r.held = nil // so that an overflow while handing them releases nothing twice
		for i := range held {
			r.hand(&held[i], nil)
			r.out = append(r.out, held[i])
		}
		r.held = held[:0]
		return r.out
	}
	r.hand(&ev, &sc)
	return append(r.out, ev)
}

func (r *rspRecorder) heldBytes() int {
	n := 0
	for _, h := range r.held {
		n += len(h.Raw) + len(h.Data)
	}
	return n
}

// keep counts n more bytes kept; past the bound the recorder gives up
// (see rspRecorder), releasing what it held.
func (r *rspRecorder) keep(n int) {
	r.used += n
	if r.used <= r.max || r.overflow {
		return
	}
	r.overflow = true
	r.out = append(r.out, r.held...)
	r.held = nil
	r.st = rspState{}
}

// hand records an event the client is handed. sc is its scan, nil to scan
// it here.
func (r *rspRecorder) hand(ev *sse.Event, sc *rspScan) {
	if !ev.HasData || r.overflow {
		return
	}
	if sc == nil {
		s := scanRsp(ev.Data)
		sc = &s
	}
	st, d := &r.st, ev.Data
	if sc.typ == rtInvalid {
		return
	}
	if sc.seq >= 0 {
		st.lastSeq = sc.seq
	}
	o := &st.open
	switch sc.typ {
	case rtCreated:
		if st.created == nil {
			st.created = r.copy(d)
		}
	case rtItemAdded:
		if sc.outIdx < 0 {
			return
		}
		st.nItems = max(st.nItems, sc.outIdx+1)
		*o = openItem{ok: true, idx: sc.outIdx, typ: sc.itemTyp, part: -1}
		if sc.ids >= 0 {
			o.id = unquote(d[sc.ids:sc.ide])
		}
		if sc.is >= 0 {
			o.added = r.copy(d[sc.is:sc.ie])
		}
		switch sc.itemTyp {
		case itemMessage:
			st.sawAnswer = true
		case itemReasoning:
			st.sawReason = true
		case itemOther:
			st.sawCall = true
		}
	case rtItemDone:
		if sc.is >= 0 {
			st.done = append(st.done, doneItem{sc.outIdx, r.copy(d[sc.is:sc.ie])})
		}
		if o.ok && o.idx == sc.outIdx {
			*o = openItem{}
		}
	case rtPartAdded, rtSummaryPartAdded:
		if o.ok && o.idx == sc.outIdx {
			r.openPart(sc, d)
		}
	case rtTextDelta, rtSummaryDelta, rtReasoningDelta:
		if sc.ds < 0 {
			return
		}
		if o.ok && o.idx == sc.outIdx && (o.part != sc.part || o.partKind == partNone) {
			r.openPart(sc, d)
		}
		n := len(st.answer) + len(st.reasoning)
		if sc.typ == rtTextDelta {
			st.answer, _, _ = jsonscan.AppendUnquote(st.answer, d[sc.ds:sc.de], false)
		} else {
			st.reasoning, _, _ = jsonscan.AppendUnquote(st.reasoning, d[sc.ds:sc.de], false)
		}
		r.keep(len(st.answer) + len(st.reasoning) - n)
	case rtPartDone, rtSummaryPartDone:
		if !o.ok || o.idx != sc.outIdx || sc.ps < 0 {
			return
		}
		p := r.copy(d[sc.ps:sc.pe])
		if sc.typ == rtSummaryPartDone {
			o.summary = append(o.summary, p)
		} else {
			o.parts = append(o.parts, p)
		}
		if o.part == sc.part {
			o.part, o.partKind = -1, partNone
		}
	}
}

// openPart records the part of an event of the open item as the one open.
func (r *rspRecorder) openPart(sc *rspScan, d []byte) {
	st := &r.st
	o := &st.open
	o.part, o.partStart = sc.part, len(st.answer)
	switch {
	case sc.typ == rtSummaryPartAdded || sc.typ == rtSummaryDelta:
		o.partKind, o.partStart = partSummary, len(st.reasoning)
	case sc.typ == rtReasoningDelta || o.typ == itemReasoning:
		o.partKind, o.partStart = partRText, len(st.reasoning)
	case sc.typ == rtTextDelta:
		o.partKind = partText
	default: // content_part.added of a message
		o.partKind = partOther
		if sc.ps >= 0 && string(getMember(d[sc.ps:sc.pe], "type")) == `"output_text"` {
			o.partKind = partText
		}
	}
}

// copy keeps a copy of b, counted against the bound.
func (r *rspRecorder) copy(b []byte) []byte {
	r.keep(len(b))
	return append([]byte(nil), b...)
}

// Seam describes what the client was handed; what is held is discarded.
func (r *rspRecorder) Seam() *Seam {
	st := r.st
	st.answer = append([]byte(nil), st.answer...)
	st.reasoning = append([]byte(nil), st.reasoning...)
	st.done = append([]doneItem(nil), st.done...)
	s := &Seam{
		Answer:       string(st.answer),
		Reasoning:    string(st.reasoning),
		InReasoning:  st.sawReason && !st.sawAnswer && !st.sawCall,
		Discarded:    len(r.held),
		InToolCall:   len(r.held) > 0, // only tool-call items are held
		OutputTokens: usage.EstimateTokens(st.answer) + usage.EstimateTokens(st.reasoning),
	}
	s.splicer = func(o Options) Splicer { return newRspSplicer(s, &st, o) }
	// The held events are dropped: the client never gets them, and the
	// spliced stream that comes next through Pass starts a new group.
	r.used -= r.heldBytes()
	r.held = r.held[:0]
	r.holding = false
	return s
}
