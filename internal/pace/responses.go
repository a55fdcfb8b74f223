package pace

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// rspState is the Pacer's memory of a Responses stream's sequence numbers.
//
// Splitting a delta into pieces or merging deltas changes the number of
// events, so a paced stream renumbers: every event it writes that carries
// a top-level "sequence_number" gets the next number of one counter,
// which starts at the first upstream event's number (0 if it has none).
// Only the digits change. Events without a number are written as they
// came and take none. ModeOff passes every event byte for byte, unless
// reasoning may be dropped (HideReasoning, a reasoning budget): then it
// renumbers too, so the client sees no holes. On a contiguous upstream
// stream that renumbering rewrites every number to itself.
type rspState struct {
	renumber bool
	started  bool
	next     int
	buf      []byte    // an event rebuilt on the Push side
	data     []byte    // its data
	num      []byte    // the number being written
	hidden   sse.Event // an event with its reasoning items stripped
}

// seqRef locates a sequence number inside a stored span: bytes [s, e)
// relative to the span's start; e == 0 means none.
type seqRef struct{ s, e int32 }

func (r seqRef) ok() bool { return r.e > r.s }

// Where a text item's sequence number sits.
const (
	seqNone = iota
	seqInPre
	seqInSuf
)

// pushResponses queues one classified event of a Responses stream.
func (p *Pacer) pushResponses(ev *sse.Event, c *Chunk, now time.Time) Kind {
	r := &c.rsp
	if !p.rsp.started && c.Kind != KindComment {
		p.rsp.started, p.rsp.next = true, max(r.seq, 0)
	}
	if r.typ == rspCompleted || r.typ == rspIncomplete || r.typ == rspFailed {
		p.readResponsesUsage(ev.Data)
	}
	if p.hiding {
		ev, _ = p.hideReasoningItems(ev, c)
	}
	visible := c.AnswerRunes + c.ReasoningRunes
	switch {
	case p.hiding && (c.ReasoningRunes > 0 || r.typ == rspReasoningDone):
		// A reasoning delta, or a .done event repeating reasoning text:
		// dropped whole; the renumbering closes the gap.
		p.hiddenRunes += c.ReasoningRunes
	case p.cfg.Mode == ModeOff && !p.rsp.renumber:
		p.pushBarrier(c.Kind, ev.Raw, visible, now)
	case c.Kind == KindComment:
		if p.cfg.Mode == ModeOff || bytes.HasPrefix(ev.Raw, relayComment) {
			p.pushBarrier(c.Kind, ev.Raw, 0, now)
		} else {
			p.dropComments++
		}
	case c.Kind == KindText && p.cfg.Mode != ModeOff:
		p.pushText(c, ev.Raw, now)
		it := &p.items[len(p.items)-1]
		it.rtyp = r.typ
		if r.seq < 0 {
			break
		}
		// The shape rules make Raw an event line and this one data line,
		// so off is found; if not, the event is always rebuilt.
		if off := dataOffset(ev); off >= 0 {
			it.rawSeq = seqRef{int32(off + r.ss), int32(off + r.se)}
		} else {
			it.whole = false
		}
		if ts := len(c.Prefix); r.se <= ts {
			it.seqIn, it.seq = seqInPre, seqRef{int32(r.ss), int32(r.se)}
		} else {
			te := len(ev.Data) - len(c.Suffix)
			it.seqIn, it.seq = seqInSuf, seqRef{int32(r.ss - te), int32(r.se - te)}
		}
	default:
		raw, ref := p.locateSeq(ev, c)
		p.pushBarrier(c.Kind, raw, visible, now)
		p.items[len(p.items)-1].rawSeq = ref
	}
	return c.Kind
}

// locateSeq returns the event's bytes to queue and where its sequence
// number sits in them. An event whose data is not one data line (or whose
// block holds other lines than its event and data lines in an unusual
// way) is rebuilt around its data with line breaks turned to spaces: they
// can only be JSON whitespace in a valid object, so the JSON means the
// same and the number's offsets stay.
func (p *Pacer) locateSeq(ev *sse.Event, c *Chunk) ([]byte, seqRef) {
	r := &c.rsp
	if r.seq < 0 || !p.rsp.renumber {
		return ev.Raw, seqRef{}
	}
	if off := dataOffset(ev); off >= 0 {
		return ev.Raw, seqRef{int32(off + r.ss), int32(off + r.se)}
	}
	data := append(p.rsp.data[:0], ev.Data...)
	for i, b := range data {
		if b == '\n' || b == '\r' {
			data[i] = ' '
		}
	}
	p.rsp.data = data
	p.rsp.buf = appendEventWith(p.rsp.buf[:0], ev, data)
	off := len(p.rsp.buf) - 2 - len(data)
	return p.rsp.buf, seqRef{int32(off + r.ss), int32(off + r.se)}
}

// dataOffset returns the offset in ev.Raw of the value of its only data
// line when that value is exactly ev.Data, else -1.
func dataOffset(ev *sse.Event) int {
	raw := ev.Raw
	off := -1
	for i := 0; i < len(raw); {
		j := i
		for j < len(raw) && raw[j] != '\n' && raw[j] != '\r' {
			j++
		}
		if line := raw[i:j]; bytes.HasPrefix(line, dataField) {
			v := len(dataField)
			if v < len(line) && line[v] == ' ' {
				v++
			}
			if off >= 0 || !bytes.Equal(line[v:], ev.Data) {
				return -1
			}
			off = i + v
		}
		if j+1 < len(raw) && raw[j] == '\r' && raw[j+1] == '\n' {
			j++
		}
		i = j + 1
	}
	return off
}

// takeSeq returns the next sequence number, formatted.
func (p *Pacer) takeSeq() []byte {
	p.rsp.num = strconv.AppendInt(p.rsp.num[:0], int64(p.rsp.next), 10)
	p.rsp.next++
	return p.rsp.num
}

// appendRenumbered appends b with b[ref.s:ref.e] replaced by the next
// sequence number (b unchanged when there is no number or no renumbering).
func (p *Pacer) appendRenumbered(dst, b []byte, ref seqRef) []byte {
	if !ref.ok() || !p.rsp.renumber {
		return append(dst, b...)
	}
	dst = append(dst, b[:ref.s]...)
	dst = append(dst, p.takeSeq()...)
	return append(dst, b[ref.e:]...)
}

// rspSameEnvelope reports whether a text item can be merged into the
// pending event: the same JSON around the text, but for the sequence
// number, which the merged event gets afresh.
func (p *Pacer) rspSameEnvelope(ev *pendingEvent, it *item) bool {
	if ev.seqIn != it.seqIn || ev.rtyp != it.rtyp {
		return false
	}
	a := p.arena
	ep, es := a[ev.pre.off:ev.pre.end], a[ev.suf.off:ev.suf.end]
	ip, is := a[it.pre.off:it.pre.end], a[it.suf.off:it.suf.end]
	switch ev.seqIn {
	case seqInPre:
		return bytes.Equal(ep[:ev.seq.s], ip[:it.seq.s]) && bytes.Equal(ep[ev.seq.e:], ip[it.seq.e:]) && bytes.Equal(es, is)
	case seqInSuf:
		return bytes.Equal(es[:ev.seq.s], is[:it.seq.s]) && bytes.Equal(es[ev.seq.e:], is[it.seq.e:]) && bytes.Equal(ep, ip)
	}
	return bytes.Equal(ep, ip) && bytes.Equal(es, is)
}

// appendResponsesText appends the pending event rebuilt: its event line,
// then the data around the merged text with a fresh sequence number.
func (p *Pacer) appendResponsesText(dst []byte, ev *pendingEvent) []byte {
	a := p.arena
	pre, suf := a[ev.pre.off:ev.pre.end], a[ev.suf.off:ev.suf.end]
	dst = append(dst, "event: "...)
	dst = append(dst, rspTypeNames[ev.rtyp]...)
	dst = append(dst, '\n')
	if !p.rsp.renumber {
		return AppendTextEventParts(dst, pre, p.text, suf)
	}
	switch ev.seqIn {
	case seqInPre:
		dst = append(dst, "data: "...)
		dst = p.appendRenumbered(dst, pre, ev.seq)
		dst = AppendString(dst, p.text)
		dst = append(dst, suf...)
		return append(dst, '\n', '\n')
	case seqInSuf:
		dst = append(dst, "data: "...)
		dst = append(dst, pre...)
		dst = AppendString(dst, p.text)
		dst = p.appendRenumbered(dst, suf, ev.seq)
		return append(dst, '\n', '\n')
	}
	return AppendTextEventParts(dst, pre, p.text, suf)
}

// readResponsesUsage keeps the usage object of the response inside a
// response.completed, .incomplete or .failed event.
func (p *Pacer) readResponsesUsage(data []byte) {
	var v struct {
		Response struct {
			Usage json.RawMessage `json:"usage"`
		} `json:"response"`
	}
	if json.Unmarshal(data, &v) != nil || len(v.Response.Usage) == 0 || string(v.Response.Usage) == "null" {
		return
	}
	p.usage = append(p.usage[:0], v.Response.Usage...)
}
