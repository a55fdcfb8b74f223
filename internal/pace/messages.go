package pace

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// msgState is the Pacer's memory of a Messages stream's content blocks
// and usage.
type msgState struct {
	// dropped holds the upstream indexes of the blocks dropped whole
	// (thinking blocks while reasoning is hidden), in increasing order: a
	// later block's index is lowered by the number of them below it, so
	// the client sees blocks numbered 0, 1, 2 … without holes.
	dropped []int
	// dropIdx is the upstream index of the block being dropped whole
	// (its start was dropped; its deltas and stop follow), -1 if none.
	dropIdx int
	// thinkIdx is the upstream index of the open thinking block that was
	// forwarded, -1 if none: when a truncating budget runs out inside
	// it, its further deltas are dropped but its stop is kept.
	thinkIdx int
	// usage is message_start's usage overlaid by message_delta's
	// non-null members.
	usage map[string]json.RawMessage
}

// pushMessages queues one classified event of a Messages stream.
func (p *Pacer) pushMessages(ev *sse.Event, c *Chunk, now time.Time) Kind {
	m := &c.msg
	if m.typ == msgMessageStart || m.typ == msgMessageDelta {
		p.readMessagesUsage(ev.Data, m.typ == msgMessageStart)
	}
	raw := ev.Raw
	switch m.typ {
	case msgBlockStart, msgBlockDelta, msgBlockStop:
		if p.hideBlock(c) {
			return c.Kind
		}
		if m.index >= 0 {
			if n := p.droppedBelow(m.index); n > 0 {
				raw = p.renumber(ev, c, m.index-n)
			}
		}
	}
	visible := c.AnswerRunes + c.ReasoningRunes
	switch {
	case p.hiding && c.ReasoningRunes > 0:
		// Reasoning hideBlock could not place (a delta with no usable
		// index): dropped alone.
		p.hiddenRunes += c.ReasoningRunes
	case p.cfg.Mode == ModeOff:
		p.pushBarrier(c.Kind, raw, visible, now)
	case c.Kind == KindComment && !bytes.HasPrefix(raw, relayComment):
		p.dropComments++ // the relay's own comments go on as barriers (see Pacer.push)
	case c.Kind == KindPing:
		// A keep-alive: in its turn, but it must not hurry the text
		// queued before it as a barrier would.
		p.items = append(p.items, item{kind: KindPing, arrival: now, raw: p.store(raw)})
	case c.Kind == KindText:
		p.pushText(c, raw, now)
	default:
		p.pushBarrier(c.Kind, raw, visible, now)
	}
	return c.Kind
}

// hideBlock applies reasoning hiding to a content block event and
// reports whether the event is dropped. While hiding, a thinking block
// that starts is dropped whole (start, deltas, stop); a thinking block
// already forwarded when a truncating budget runs out loses its further
// deltas (signature_delta included) but keeps its stop, so the client
// sees the block closed.
func (p *Pacer) hideBlock(c *Chunk) bool {
	m, st := &c.msg, &p.msg
	switch m.typ {
	case msgBlockStart:
		if !m.thinking || m.index < 0 {
			return false
		}
		if p.hiding {
			st.dropIdx = m.index
			if i, found := slices.BinarySearch(st.dropped, m.index); !found {
				st.dropped = slices.Insert(st.dropped, i, m.index)
			}
			return true
		}
		st.thinkIdx = m.index
	case msgBlockDelta:
		if m.index >= 0 && (m.index == st.dropIdx || p.hiding && m.index == st.thinkIdx) {
			p.hiddenRunes += c.ReasoningRunes
			return true
		}
	case msgBlockStop:
		switch {
		case m.index < 0:
		case m.index == st.dropIdx:
			st.dropIdx = -1
			return true
		case m.index == st.thinkIdx:
			st.thinkIdx = -1
		}
	}
	return false
}

// droppedBelow is the number of dropped blocks with an index below idx.
func (p *Pacer) droppedBelow(idx int) int {
	n, _ := slices.BinarySearch(p.msg.dropped, idx)
	return n
}

// renumber returns the event ev with its index number replaced by idx
// (only those bytes of its data change) and, for a text event, moves
// c.Prefix and c.Suffix onto the new data. The result is valid until the
// next renumber.
func (p *Pacer) renumber(ev *sse.Event, c *Chunk, idx int) []byte {
	data, m := ev.Data, &c.msg
	nd := append(p.strip[:0], data[:m.is]...)
	nd = strconv.AppendInt(nd, int64(idx), 10)
	nd = append(nd, data[m.ie:]...)
	p.strip = nd
	if c.Kind == KindText {
		ts, te := len(c.Prefix), len(data)-len(c.Suffix)
		if m.ie <= ts {
			d := len(nd) - len(data)
			ts, te = ts+d, te+d
		}
		c.Prefix = nd[:ts:ts]
		c.Suffix = nd[te:len(nd):len(nd)]
	}
	p.stripEv = appendEventWith(p.stripEv[:0], ev, nd)
	return p.stripEv
}

// appendEventWith appends ev rebuilt around new data: its event, id and
// retry lines, then the data lines and the blank line. Comment lines and
// unknown fields, which mean nothing to a client, are not kept.
func appendEventWith(dst []byte, ev *sse.Event, data []byte) []byte {
	if ev.Type != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, ev.Type...)
		dst = append(dst, '\n')
	}
	if ev.HasID {
		dst = append(dst, "id: "...)
		dst = append(dst, ev.ID...)
		dst = append(dst, '\n')
	}
	if ev.Retry >= 0 {
		dst = append(dst, "retry: "...)
		dst = strconv.AppendInt(dst, int64(ev.Retry), 10)
		dst = append(dst, '\n')
	}
	return sse.AppendData(dst, data)
}

// readMessagesUsage merges the usage of a message_start (.message.usage,
// every member) or a message_delta (.usage, its non-null members: its
// output_tokens is cumulative, and the input and cache counts it may
// repeat are final) into the stream's usage object.
func (p *Pacer) readMessagesUsage(data []byte, start bool) {
	var u json.RawMessage
	if start {
		var v struct {
			Message struct {
				Usage json.RawMessage `json:"usage"`
			} `json:"message"`
		}
		if json.Unmarshal(data, &v) != nil {
			return
		}
		u = v.Message.Usage
	} else {
		var v struct {
			Usage json.RawMessage `json:"usage"`
		}
		if json.Unmarshal(data, &v) != nil {
			return
		}
		u = v.Usage
	}
	var fields map[string]json.RawMessage
	if len(u) == 0 || json.Unmarshal(u, &fields) != nil || fields == nil {
		return
	}
	if p.msg.usage == nil {
		p.msg.usage = make(map[string]json.RawMessage, len(fields))
	}
	for k, v := range fields {
		if start || string(v) != "null" {
			p.msg.usage[k] = v
		}
	}
	b, err := json.Marshal(p.msg.usage)
	if err != nil {
		return
	}
	p.usage = b
}

// finalEvent reports whether ev, cut off by the upstream's EOF, is the
// stream's end event ([DONE], message_stop, response.completed or
// .incomplete), and returns a well-formed
// copy of it to send instead.
func (p *Pacer) finalEvent(ev *sse.Event) (sse.Event, bool) {
	if p.cfg.Format != FormatChat {
		if c, _ := ClassifyFormat(p.cfg.Format, ev, nil); c.Kind != KindDone {
			return sse.Event{}, false
		}
		return sse.NewEvent(ev.Type, ev.Data), true
	}
	if !ev.IsDone() {
		return sse.Event{}, false
	}
	return parsedDone, true
}
