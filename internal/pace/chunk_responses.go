package pace

import (
	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// rspType is the "type" of a Responses event's data, for the types the
// pacer treats specially.
type rspType uint8

const (
	rspUnknown        rspType = iota // absent, duplicated, not a string, or of no special use
	rspAnswerDelta                   // response.output_text.delta
	rspReasoningDelta                // response.reasoning_text.delta
	rspSummaryDelta                  // response.reasoning_summary_text.delta
	rspReasoningDone                 // a reasoning .done / summary part event repeating reasoning text
	rspCompleted                     // response.completed
	rspIncomplete                    // response.incomplete
	rspFailed                        // response.failed
	rspError                         // error
	rspItem                          // response.output_item.added or .done
	rspLifecycle                     // response.created, .queued or .in_progress
)

// rspInfo is what the Pacer needs of a Responses event beyond its Kind.
type rspInfo struct {
	typ rspType
	// seq is the top-level "sequence_number" when it is a plain
	// non-negative integer given once, else -1; Data[ss:se] is its number.
	seq    int
	ss, se int
}

// rspTypeNames are the event names the pacer writes for text pieces,
// indexed by rspType (deltas only).
var rspTypeNames = [...]string{
	rspAnswerDelta:    "response.output_text.delta",
	rspReasoningDelta: "response.reasoning_text.delta",
	rspSummaryDelta:   "response.reasoning_summary_text.delta",
}

// FieldDelta is the member of a Responses text delta event holding its text.
const FieldDelta = "delta"

var rspTopKeys = []string{"type", "sequence_number", FieldDelta}

const (
	rtType = iota
	rtSeq
	rtDelta
)

// ClassifyResponses classifies an event of an OpenAI Responses stream. Like
// Classify, it appends the decoded text of a KindText event to scratch and
// returns scratch extended (unchanged for every other Kind), never panics,
// and does not allocate when scratch has room for the text.
//
// The rules, checked in this order:
//   - no fields at all: KindComment;
//   - "event: error": KindError;
//   - no data field, or data that is not a valid JSON object: KindOther;
//   - a data "type" of "error" or "response.failed": KindError;
//   - "response.completed" or "response.incomplete": KindDone (the
//     stream's normal end; also when ev.Unterminated);
//   - a text delta as described below: KindText;
//   - anything else (function_call_arguments deltas, output items, the
//     .done events, unknown types): KindOther.
//
// A data "type" counts only when the top-level key appears once, exactly.
//
// A text delta is a block made of exactly an "event:" line naming the
// data's type and one data line (leading blank lines and a BOM allowed),
// whose JSON object has a "type" of response.output_text.delta
// (ChanAnswer) or response.reasoning_text.delta or
// response.reasoning_summary_text.delta (ChanReasoning), a non-empty string
// "delta" (Field FieldDelta), and a "sequence_number", if any, that is a
// plain non-negative integer; each of these at most once, and no key equal
// to one of them only under case folding. The string must decode to valid
// UTF-8 without lone surrogate escapes. Other members end up byte for byte
// in Prefix and Suffix.
func ClassifyResponses(ev *sse.Event, scratch []byte) (Chunk, []byte) {
	var c Chunk
	c.rsp.seq = -1
	if ev.IsComment() {
		c.Kind = KindComment
		return c, scratch
	}
	errEvent := ev.Type == "error"
	c.Kind = KindOther
	if errEvent {
		c.Kind = KindError
	}
	if !ev.HasData {
		return c, scratch
	}
	var s rspScan
	s.run(ev.Data)
	if !s.valid {
		return c, scratch
	}
	if s.seen[rtType] == 1 && !s.ambiguous {
		c.rsp.typ = s.typ
	}
	if s.seen[rtSeq] == 1 && s.seq >= 0 {
		c.rsp.seq, c.rsp.ss, c.rsp.se = s.seq, s.ss, s.se
	}
	isDelta := c.rsp.typ == rspAnswerDelta || c.rsp.typ == rspReasoningDelta || c.rsp.typ == rspSummaryDelta
	if isDelta && s.seen[rtDelta] == 1 && s.ds >= 0 {
		// Counted whatever the shape, as for Chat and Messages.
		if c.rsp.typ == rspAnswerDelta {
			c.AnswerRunes = s.runes
		} else {
			c.ReasoningRunes = s.runes
		}
	}
	switch {
	case errEvent || c.rsp.typ == rspError || c.rsp.typ == rspFailed:
		c.Kind = KindError
		return c, scratch
	case c.rsp.typ == rspCompleted || c.rsp.typ == rspIncomplete:
		c.Kind = KindDone
		return c, scratch
	}
	if !isDelta || s.ambiguous || s.seen[rtDelta] != 1 || s.ds < 0 || s.de-s.ds <= 2 ||
		s.seen[rtSeq] > 1 || s.seen[rtSeq] == 1 && s.seq < 0 ||
		!typedTextShape(ev, rspTypeNames[c.rsp.typ]) {
		return c, scratch
	}
	ch := ChanReasoning
	if c.rsp.typ == rspAnswerDelta {
		ch = ChanAnswer
	}
	out, ok := c.splice(ev.Data, s.ds, s.de, ch, FieldDelta, scratch)
	if !ok {
		return c, scratch
	}
	return c, out
}

// rspScan walks the top level of a Responses event's JSON data once.
type rspScan struct {
	valid     bool
	ambiguous bool // a top-level key equals a known one only under case folding
	seen      [3]uint8
	typ       rspType
	seq       int // -1: not a plain non-negative integer
	ss, se    int
	ds, de    int // span of a string "delta" (-1: none, or not a string)
	runes     int
}

func (s *rspScan) run(b []byte) {
	s.seq, s.ds, s.de = -1, -1, -1
	i := jsonscan.SkipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return
	}
	it := jsonscan.NewObjIter(b, i, 1)
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			break
		}
		k := jsonscan.MatchKey(b[ks:ke], rspTopKeys)
		if k >= 0 {
			s.seen[k]++
		}
		switch k {
		case rtType:
			s.typ = rspUnknown
			if b[vs] != '"' {
				it.Skip()
				continue
			}
			end, _ := jsonscan.ScanString(b, vs)
			it.SetEnd(end)
			if end >= 0 {
				s.typ = rspTypeOf(b[vs:end])
			}
		case rtSeq:
			it.Skip()
			if !it.Err {
				s.seq, s.ss, s.se = plainIndex(b, vs, it.Pos), vs, it.Pos
			}
		case rtDelta:
			s.ds, s.de = -1, -1
			if b[vs] != '"' {
				it.Skip()
				continue
			}
			end, _ := jsonscan.ScanString(b, vs)
			it.SetEnd(end)
			if end >= 0 {
				s.ds, s.de, s.runes = vs, end, jsonscan.CountRunes(b[vs:end])
			}
		case jsonscan.KeyAmbiguous:
			s.ambiguous = true
			it.Skip()
		default:
			it.Skip()
		}
	}
	if it.Err || jsonscan.SkipWS(b, it.Pos) != len(b) {
		return
	}
	s.valid = true
}

// rspTypeOf maps a "type" string literal to its rspType.
func rspTypeOf(lit []byte) rspType {
	// A literal decodes to at most its own length, so buf always has
	// room: no allocation. The names are at most 40 bytes; longer or
	// heavily escaped literals are none of them.
	var buf [96]byte
	if len(lit)-2 > len(buf) {
		return rspUnknown
	}
	dec, _, ok := jsonscan.AppendUnquote(buf[:0], lit, false)
	if !ok {
		return rspUnknown
	}
	switch string(dec) {
	case "response.output_text.delta":
		return rspAnswerDelta
	case "response.reasoning_text.delta":
		return rspReasoningDelta
	case "response.reasoning_summary_text.delta":
		return rspSummaryDelta
	case "response.reasoning_text.done", "response.reasoning_summary_text.done",
		"response.reasoning_summary_part.added", "response.reasoning_summary_part.done":
		return rspReasoningDone
	case "response.completed":
		return rspCompleted
	case "response.incomplete":
		return rspIncomplete
	case "response.failed":
		return rspFailed
	case "error":
		return rspError
	case "response.output_item.added", "response.output_item.done":
		return rspItem
	case "response.created", "response.queued", "response.in_progress":
		return rspLifecycle
	}
	return rspUnknown
}
