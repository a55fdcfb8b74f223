package splice

import (
	"encoding/json"
	"sort"
	"strconv"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// The Responses splicer rewrites a continuation (a Responses stream of its
// own: response.created, items from output_index 0, sequence_number from
// 0) into the rest of the client's stream:
//
//   - response.created, .queued and .in_progress are dropped (unless the
//     client got no response.created: then they are its); every event
//     the client gets has the next sequence_number (the last handed + 1,
//     then one more per event); response_id members and the final
//     response's id, created_at and model are the first stream's.
//   - Items are renumbered after the ones the client saw added, and keep
//     their own ids, but for one: when the break fell in a message item
//     (in its output_text part, or between its parts) and the
//     continuation's first item is a message, that message is the open
//     one going on: its output_item.added (and, in an open part, its first
//     content_part.added) are dropped, its events get the open item's id
//     and output_index (content_index after the parts done), and its
//     cumulative events (output_text.done, content_part.done,
//     output_item.done) carry the whole text: the text handed before the
//     break and the continuation's after the overlap. Any other item open
//     at the break (a reasoning item cut mid-way, a message whose next
//     item is a tool call) is closed first with the done events a client
//     needs, holding the text it was handed (a message's status
//     "incomplete"; a reasoning item keeps the encrypted_content its
//     output_item.added carried, the first model's own).
//   - Reasoning: after the answer began (a message item was handed, or
//     the continuation's message came) the continuation's reasoning items
//     are dropped, whole. When the break fell in the reasoning, Hide drops
//     them too; Mark gives the continuation's first reasoning item a first
//     summary part holding Marker (its own summary parts follow at
//     summary_index + 1, its output_item.done lists it first). The marker
//     goes in the continuation's item, not in an item of its own nor the
//     broken one: Codex CLI keeps every reasoning item of an
//     output_item.done and sends it back on the next turn, and an item the
//     relay made up (an id no provider knows, no encrypted_content) is
//     what OpenAI refuses with store false ("Item with id ... not found");
//     the continuation's item has its own id and encrypted_content. The
//     SDKs accumulate the part like any other.
//   - encrypted_content of the continuation's reasoning items is passed as
//     it came: it belongs to the continuation's model, as after a failover
//     before the commit. A client that sends it back to another provider
//     meets what it would meet then (the relay drops reasoning items on
//     the way to a provider of another dialect, see docs/responses.md).
//   - The continuation's leading output_text is held until Decided (or
//     another event, or the end), then Overlap bytes are dropped from its
//     start.
//   - response.completed and .incomplete carry the items handed done in
//     the first stream (as they were) then the continuation's (as
//     rewritten, the continued message with its whole text), and usage
//     plus Options.Earlier. error and response.failed pass, renumbered.
//   - Events whose data is not a JSON object with a type (a trailing
//     [DONE]) are dropped; comments pass.
type rspSplicer struct {
	o    Options
	seam *Seam
	st   *rspState

	respID, createdAt, model []byte // the first's, JSON literals (nil: keep the continuation's)

	seq     int64
	out     []sse.Event
	begun   bool
	nextIdx int
	idx     map[int]int // the continuation's output_index → the client's, -1 dropped
	itemID  map[int]string

	resolved  bool // the open item was merged or closed
	merged    int  // the continuation's output_index continuing the open message, -1
	mergePart bool // its part 0 continues the open output_text part
	partBase  int  // its content_index offset
	prefix    string

	answered bool // a continuation message came
	marked   int  // the continuation's output_index holding the marker part, -1

	// the leading output_text: held while the overlap is decided
	lead       [2]int // its output_index and content_index (continuation's), {-1,-1} none yet
	decided    bool
	pend       []pendEvent
	pendText   []byte
	tracked    map[[2]int]*[]byte // text emitted per (output_index, content_index) of the lead and merged parts
	items      []doneItem         // the continuation's items done, as the client got them
	doneClosed bool
}

type pendEvent struct {
	typ  string
	data []byte
}

func newRspSplicer(seam *Seam, st *rspState, o Options) *rspSplicer {
	s := &rspSplicer{o: o, seam: seam, st: st, seq: st.lastSeq + 1, nextIdx: st.nItems,
		idx: map[int]int{}, itemID: map[int]string{}, merged: -1, marked: -1, lead: [2]int{-1, -1},
		tracked: map[[2]int]*[]byte{}}
	if st.created != nil {
		if resp := getMember(st.created, "response"); len(resp) > 0 && resp[0] == '{' {
			s.respID = nonNull(getMember(resp, "id"))
			s.createdAt = nonNull(getMember(resp, "created_at"))
			s.model = nonNull(getMember(resp, "model"))
		}
	}
	if s.decided = o.MaxOverlap < 0; !s.decided && seam.Answer == "" {
		s.decided = true
	}
	return s
}

func nonNull(b []byte) []byte {
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	return b
}

// Next rewrites one event of the continuation.
func (s *rspSplicer) Next(ev sse.Event) []sse.Event {
	s.out = s.out[:0]
	if ev.IsComment() {
		if ev.Unterminated {
			return s.out // cut off by the end: the client's stream goes on
		}
		s.begin()
		return append(s.out, ev)
	}
	if !ev.HasData || s.doneClosed {
		return s.out
	}
	sc := scanRsp(ev.Data)
	switch sc.typ {
	case rtInvalid:
		return s.out
	case rtCreated, rtInProgress:
		if s.st.created != nil {
			return s.out // a second start
		}
	}
	typ := ev.Type // "" when the stream has no event: lines (kept so)
	if !s.decided {
		if s.isLead(&sc) {
			s.lead = [2]int{sc.outIdx, sc.part}
			s.pend = append(s.pend, pendEvent{typ, append([]byte(nil), ev.Data...)})
			s.pendText = append(s.pendText, unquote(ev.Data[sc.ds:sc.de])...)
			if Decided(s.seam.Answer, string(s.pendText), s.o.MaxOverlap) {
				s.flush()
			}
			return s.out
		}
		if len(s.pend) > 0 {
			s.flush() // the leading text ends here
		}
	}
	s.route(typ, ev.Data, &sc)
	return s.out
}

// isLead reports an output_text delta of the continuation's leading text
// (the first text part shown).
func (s *rspSplicer) isLead(sc *rspScan) bool {
	if sc.typ != rtTextDelta || sc.ds < 0 {
		return false
	}
	if m, known := s.idx[sc.outIdx]; !known || m < 0 {
		return false
	}
	return s.lead[0] < 0 || s.lead == [2]int{sc.outIdx, sc.part}
}

// flush decides the overlap with what is held and sends it.
func (s *rspSplicer) flush() {
	s.decided = true
	cut := Overlap(s.seam.Answer, string(s.pendText), s.o.MaxOverlap)
	if len(s.pend) > 0 {
		s.track(s.lead) // its done events get what is sent of it, if nothing
	}
	for _, p := range s.pend {
		sc := scanRsp(p.data)
		data := p.data
		if cut > 0 {
			text := unquote(data[sc.ds:sc.de])
			if cut >= len(text) {
				cut -= len(text)
				continue
			}
			data = setMembers(nil, data, rspMember{key: "delta", val: rspQuote(text[cut:])})
			cut = 0
			sc = scanRsp(data)
		}
		s.route(p.typ, data, &sc)
	}
	s.pend, s.pendText = nil, nil
}

// begin sends the comment, once, before the first output.
func (s *rspSplicer) begin() {
	if s.begun {
		return
	}
	s.begun = true
	if s.o.Comment != "" {
		s.out = append(s.out, sse.Event{Raw: sse.AppendComment(nil, s.o.Comment), Retry: -1})
	}
}

// emit sends data (a JSON object) as an event of type typ, with the next
// sequence_number and the members of kv set.
func (s *rspSplicer) emit(typ string, data []byte, kv ...rspMember) {
	s.begin()
	kv = append(kv, rspMember{key: "sequence_number", val: itoa(s.seq)})
	if s.respID != nil && getMember(data, "response_id") != nil {
		kv = append(kv, rspMember{key: "response_id", val: s.respID})
	}
	s.seq++
	s.out = append(s.out, sse.NewEvent(typ, setMembers(nil, data, kv...)))
}

// emitNew sends an event the splicer makes: typ with the members of kv.
func (s *rspSplicer) emitNew(typ string, kv ...rspMember) {
	s.emit(typ, []byte(`{"type":`+string(rspQuote(typ))+`}`), kv...)
}

// dropReasoning: the continuation's reasoning items are not shown.
func (s *rspSplicer) dropReasoning() bool {
	return s.st.sawAnswer || s.answered || s.st.sawCall || s.seam.InReasoning && s.o.Reasoning == Hide
}

func (s *rspSplicer) route(typ string, data []byte, sc *rspScan) {
	switch sc.typ {
	case rtCompleted, rtIncomplete, rtFailed:
		if !s.decided {
			s.flush()
		}
		if sc.typ != rtFailed { // a failure passes as it is, but for the response's ids and output
			s.resolve(false, -1)
			s.doneClosed = true
		}
		s.final(typ, data)
		return
	case rtError:
		s.emit(typ, data)
		return
	case rtItemAdded:
		if sc.outIdx < 0 {
			s.emit(typ, data)
			return
		}
		ci := sc.outIdx
		if sc.itemTyp == itemReasoning && s.dropReasoning() {
			s.idx[ci] = -1
			return
		}
		if sc.itemTyp == itemMessage {
			s.answered = true
		}
		if sc.ids >= 0 {
			s.itemID[ci] = unquote(data[sc.ids:sc.ide])
		}
		if !s.resolved && s.resolve(sc.itemTyp == itemMessage, ci) {
			return
		}
		s.idx[ci] = s.nextIdx
		s.nextIdx++
		s.emit(typ, data, rspMember{key: "output_index", val: itoa(int64(s.idx[ci]))})
		if sc.itemTyp == itemReasoning && s.seam.InReasoning && s.o.Reasoning == Mark && s.marked < 0 {
			s.marked = ci
			s.markerPart(s.idx[ci], s.itemID[ci])
		}
		return
	}
	if sc.outIdx < 0 {
		s.emit(typ, data)
		return
	}
	ci := sc.outIdx
	m, known := s.idx[ci]
	if !known { // an item never added: given the next index
		s.resolve(false, -1)
		m = s.nextIdx
		s.idx[ci] = m
		s.nextIdx++
	}
	if m < 0 {
		return // a dropped item's
	}
	kv := []rspMember{{key: "output_index", val: itoa(int64(m))}}
	part := sc.part
	if ci == s.merged {
		kv = append(kv, rspMember{key: "item_id", val: rspQuote(s.st.open.id)})
		if part >= 0 {
			if part == 0 && s.mergePart && sc.typ == rtPartAdded {
				return
			}
			kv = append(kv, rspMember{key: "content_index", val: itoa(int64(part + s.partBase))})
		}
	}
	if ci == s.marked && part >= 0 && (sc.typ == rtSummaryPartAdded || sc.typ == rtSummaryPartDone || sc.typ == rtSummaryDelta || sc.typ == rtSummaryDone) {
		kv = append(kv, rspMember{key: "summary_index", val: itoa(int64(part + 1))})
	}
	key := [2]int{ci, part}
	switch sc.typ {
	case rtTextDelta:
		if (ci == s.merged || key == s.lead) && sc.ds >= 0 {
			t := s.track(key)
			*t = append(*t, unquote(data[sc.ds:sc.de])...)
		}
	case rtTextDone:
		if s.isTracked(key) {
			kv = append(kv, rspMember{key: "text", val: rspQuote(s.fullText(key))})
		}
	case rtPartDone:
		if s.isTracked(key) && sc.ps >= 0 {
			kv = append(kv, rspMember{key: "part", val: setMembers(nil, data[sc.ps:sc.pe], rspMember{key: "text", val: rspQuote(s.fullText(key))})})
		}
	case rtItemDone:
		if sc.is >= 0 {
			item := s.doneItem(ci, data[sc.is:sc.ie])
			kv = append(kv, rspMember{key: "item", val: item})
			s.items = append(s.items, doneItem{m, item})
		}
	}
	s.emit(typ, data, kv...)
}

func (s *rspSplicer) track(key [2]int) *[]byte {
	t := s.tracked[key]
	if t == nil {
		t = new([]byte)
		s.tracked[key] = t
	}
	return t
}

// isTracked: the part's done events get the text the client has.
func (s *rspSplicer) isTracked(key [2]int) bool {
	return s.tracked[key] != nil || key[0] == s.merged && key[1] == 0 && s.mergePart
}

// fullText is the text of a tracked part as the client has it.
func (s *rspSplicer) fullText(key [2]int) string {
	t := string(*s.track(key))
	if key[0] == s.merged && key[1] == 0 && s.mergePart {
		return s.prefix + t
	}
	return t
}

// doneItem rewrites a continuation item of output_item.done: the merged
// message's id and parts, the tracked parts' text, the marker part.
func (s *rspSplicer) doneItem(ci int, item []byte) []byte {
	var kv []rspMember
	if content := getMember(item, "content"); len(content) > 0 && content[0] == '[' {
		var parts []json.RawMessage
		if json.Unmarshal(content, &parts) == nil {
			for j := range parts {
				if s.isTracked([2]int{ci, j}) && len(parts[j]) > 0 && parts[j][0] == '{' {
					parts[j] = setMembers(nil, parts[j], rspMember{key: "text", val: rspQuote(s.fullText([2]int{ci, j}))})
				}
			}
			if ci == s.merged {
				o := &s.st.open
				before := o.parts
				if s.mergePart && len(before) > o.part {
					before = before[:o.part]
				}
				parts = append(rawParts(before), parts...)
			}
			kv = append(kv, rspMember{key: "content", val: marshalRaw(parts)})
		}
	}
	if ci == s.merged {
		kv = append(kv, rspMember{key: "id", val: rspQuote(s.st.open.id)})
	}
	if ci == s.marked {
		var sum []json.RawMessage
		if raw := getMember(item, "summary"); raw != nil {
			_ = json.Unmarshal(raw, &sum)
		}
		sum = append([]json.RawMessage{summaryPart(Marker)}, sum...)
		kv = append(kv, rspMember{key: "summary", val: marshalRaw(sum)})
	}
	if len(kv) == 0 {
		return append([]byte(nil), item...)
	}
	return setMembers(nil, item, kv...)
}

func rawParts(b [][]byte) []json.RawMessage {
	out := make([]json.RawMessage, len(b))
	for i := range b {
		out[i] = b[i]
	}
	return out
}

// marshalRaw is the JSON array of v, written as it is (encoding/json
// would compact and HTML-escape every element again).
func marshalRaw(v []json.RawMessage) []byte {
	b := []byte{'['}
	for i, r := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, r...)
	}
	return append(b, ']')
}

func summaryPart(text string) []byte {
	return []byte(`{"type":"summary_text","text":` + string(rspQuote(text)) + `}`)
}

func textPart(text string) []byte {
	return []byte(`{"type":"output_text","annotations":[],"logprobs":[],"text":` + string(rspQuote(text)) + `}`)
}

// markerPart sends the marker as the first summary part of the reasoning
// item at the client's output_index idx.
func (s *rspSplicer) markerPart(idx int, id string) {
	head := []rspMember{{key: "item_id", val: rspQuote(id)}, {key: "output_index", val: itoa(int64(idx))}, {key: "summary_index", val: []byte("0")}}
	with := func(kv ...rspMember) []rspMember { return append(append([]rspMember(nil), head...), kv...) }
	s.emitNew("response.reasoning_summary_part.added", with(rspMember{key: "part", val: summaryPart("")})...)
	s.emitNew("response.reasoning_summary_text.delta", with(rspMember{key: "delta", val: rspQuote(Marker)})...)
	s.emitNew("response.reasoning_summary_text.done", with(rspMember{key: "text", val: rspQuote(Marker)})...)
	s.emitNew("response.reasoning_summary_part.done", with(rspMember{key: "part", val: summaryPart(Marker)})...)
}

// resolve settles the item open at the break, at the continuation's first
// item shown (ci, a message when message) or its end: the message goes on
// in it (true: its output_item.added is dropped), or the open item is
// closed.
func (s *rspSplicer) resolve(message bool, ci int) bool {
	if s.resolved {
		return false
	}
	s.resolved = true
	o := &s.st.open
	if !o.ok {
		return false
	}
	if message && o.typ == itemMessage && (o.partKind == partText && o.part >= 0 || o.partKind == partNone) {
		s.merged = ci
		s.idx[ci] = o.idx
		s.partBase = len(o.parts)
		if o.partKind == partText {
			s.mergePart = true
			s.partBase = o.part
			s.prefix = string(s.st.answer[o.partStart:])
		}
		return true
	}
	s.close()
	return false
}

// close sends the done events of the item open at the break, with the
// text the client was handed.
func (s *rspSplicer) close() {
	o := &s.st.open
	id := rspQuote(o.id)
	idx := itoa(int64(o.idx))
	head := func(kv ...rspMember) []rspMember {
		return append([]rspMember{{key: "item_id", val: id}, {key: "output_index", val: idx}}, kv...)
	}
	item := o.added
	if len(item) == 0 || item[0] != '{' {
		item = []byte(`{}`)
	}
	var kv []rspMember
	switch o.typ {
	case itemMessage:
		parts := rawParts(o.parts)
		if o.partKind == partText {
			text := string(s.st.answer[o.partStart:])
			n := itoa(int64(o.part))
			s.emitNew("response.output_text.done", head(rspMember{key: "content_index", val: n}, rspMember{key: "text", val: rspQuote(text)}, rspMember{key: "logprobs", val: []byte("[]")})...)
			p := textPart(text)
			s.emitNew("response.content_part.done", head(rspMember{key: "content_index", val: n}, rspMember{key: "part", val: p})...)
			parts = append(parts, p)
		}
		kv = append(kv, rspMember{key: "content", val: marshalRaw(parts)}, rspMember{key: "status", val: []byte(`"incomplete"`)})
	case itemReasoning:
		summary, content := rawParts(o.summary), rawParts(o.parts)
		text := string(s.st.reasoning[min(o.partStart, len(s.st.reasoning)):])
		n := itoa(int64(o.part))
		switch o.partKind {
		case partSummary:
			s.emitNew("response.reasoning_summary_text.done", head(rspMember{key: "summary_index", val: n}, rspMember{key: "text", val: rspQuote(text)})...)
			p := summaryPart(text)
			s.emitNew("response.reasoning_summary_part.done", head(rspMember{key: "summary_index", val: n}, rspMember{key: "part", val: p})...)
			summary = append(summary, p)
		case partRText:
			s.emitNew("response.reasoning_text.done", head(rspMember{key: "content_index", val: n}, rspMember{key: "text", val: rspQuote(text)})...)
			content = append(content, []byte(`{"type":"reasoning_text","text":`+string(rspQuote(text))+`}`))
		}
		kv = append(kv, rspMember{key: "summary", val: marshalRaw(summary)})
		if len(content) > 0 {
			kv = append(kv, rspMember{key: "content", val: marshalRaw(content)})
		}
	default:
		if getMember(item, "status") != nil {
			kv = append(kv, rspMember{key: "status", val: []byte(`"incomplete"`)})
		}
	}
	done := setMembers(nil, item, kv...)
	s.emitNew("response.output_item.done", rspMember{key: "output_index", val: idx}, rspMember{key: "item", val: done})
	s.items = append(s.items, doneItem{o.idx, done})
}

// final rewrites the end event's response: the first's id, created_at and
// model, the output the client was handed, usage plus Earlier.
func (s *rspSplicer) final(typ string, data []byte) {
	resp := getMember(data, "response")
	if len(resp) == 0 || resp[0] != '{' {
		s.emit(typ, data)
		return
	}
	all := append(append([]doneItem(nil), s.st.done...), s.items...)
	sort.SliceStable(all, func(i, j int) bool { return all[i].idx < all[j].idx })
	out := make([]json.RawMessage, len(all))
	for i := range all {
		out[i] = all[i].item
	}
	kv := []rspMember{{key: "output", val: marshalRaw(out)}}
	for _, m := range []struct {
		key string
		val []byte
	}{{"id", s.respID}, {"created_at", s.createdAt}, {"model", s.model}} {
		if m.val != nil {
			kv = append(kv, rspMember{key: m.key, val: m.val})
		}
	}
	if u := s.usage(getMember(resp, "usage")); u != nil {
		kv = append(kv, rspMember{key: "usage", val: u})
	}
	s.emit(typ, data, rspMember{key: "response", val: setMembers(nil, resp, kv...)})
}

// usage adds Options.Earlier to the continuation's usage object raw (nil:
// unchanged).
func (s *rspSplicer) usage(raw []byte) []byte {
	e := s.o.Earlier
	if e.Prompt == 0 && e.Completion == 0 && e.Reasoning == 0 && e.Cached == 0 {
		return nil
	}
	if len(raw) == 0 || raw[0] != '{' {
		raw = []byte(`{}`)
	}
	var u struct {
		In    int64 `json:"input_tokens"`
		Out   int64 `json:"output_tokens"`
		Total int64 `json:"total_tokens"`
		InDet struct {
			Cached int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutDet struct {
			Reasoning int64 `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
	}
	_ = json.Unmarshal(raw, &u) // a member of another type counts 0
	num := func(n int64) []byte { return strconv.AppendInt(nil, n, 10) }
	sub := func(key, field string, n int64) []byte {
		obj := getMember(raw, key)
		if len(obj) == 0 || obj[0] != '{' {
			obj = []byte(`{}`)
		}
		return setMembers(nil, obj, rspMember{key: field, val: num(n)})
	}
	in, out := u.In+int64(e.Prompt), u.Out+int64(e.Completion)
	return setMembers(nil, raw,
		rspMember{key: "input_tokens", val: num(in)},
		rspMember{key: "input_tokens_details", val: sub("input_tokens_details", "cached_tokens", u.InDet.Cached+int64(e.Cached))},
		rspMember{key: "output_tokens", val: num(out)},
		rspMember{key: "output_tokens_details", val: sub("output_tokens_details", "reasoning_tokens", u.OutDet.Reasoning+int64(e.Reasoning))},
		rspMember{key: "total_tokens", val: num(in + out)})
}
