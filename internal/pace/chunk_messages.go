package pace

import (
	"bytes"
	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// msgType is the "type" of a Messages event's data.
type msgType uint8

const (
	msgUnknown msgType = iota // absent, duplicated, not a string, or a type the pacer has no use for
	msgMessageStart
	msgMessageDelta
	msgMessageStop
	msgBlockStart
	msgBlockDelta
	msgBlockStop
	msgPing
	msgError
)

// msgInfo is what the Pacer needs of a Messages event beyond its Kind.
type msgInfo struct {
	typ msgType
	// index is the block index of a content_block_start, _delta or _stop,
	// when it is a plain non-negative integer given once; else -1.
	// Data[is:ie] is its number.
	index  int
	is, ie int
	// thinking: a content_block_start opening a thinking or
	// redacted_thinking block.
	thinking bool
}

// Key name lists of a Messages event; the constants below index them.
var (
	msgTopKeys   = []string{"type", "index", "delta", "content_block"}
	msgDeltaKeys = []string{"type", FieldText, FieldThinking}
	msgBlockKeys = []string{"type"}
)

const (
	mtType = iota
	mtIndex
	mtDelta
	mtBlock
)

const (
	mdType = iota
	mdText
	mdThinking
)

// Delta types of a content_block_delta that carry text.
const (
	deltaOther = iota
	deltaText
	deltaThinking
)

// ClassifyFormat classifies ev as an event of a stream in format f: with
// Classify for FormatChat, ClassifyMessages for FormatMessages,
// ClassifyResponses for FormatResponses.
func ClassifyFormat(f Format, ev *sse.Event, scratch []byte) (Chunk, []byte) {
	switch f {
	case FormatMessages:
		return ClassifyMessages(ev, scratch)
	case FormatResponses:
		return ClassifyResponses(ev, scratch)
	}
	return Classify(ev, scratch)
}

// ClassifyMessages classifies an event of an Anthropic Messages stream. Like
// Classify, it appends the decoded text of a KindText event to scratch and
// returns scratch extended (unchanged for every other Kind), never panics,
// and does not allocate when scratch has room for the text.
//
// The rules, checked in this order:
//   - no fields at all: KindComment;
//   - "event: error": KindError;
//   - no data field, or data that is not a valid JSON object: KindOther;
//   - a data "type" of "error": KindError;
//   - "message_stop": KindDone (the stream's normal end, like [DONE]; also
//     when ev.Unterminated);
//   - "ping": KindPing;
//   - a text delta as described below: KindText;
//   - anything else (message_start, message_delta, content_block_start and
//     _stop, signature_delta, input_json_delta, unknown types): KindOther.
//
// A data "type" counts only when the top-level key appears once, exactly
// (a key equal to "type" only under case folding makes it unknown).
//
// A text delta is a block made of exactly an "event: content_block_delta"
// line and one data line (leading blank lines and a BOM allowed; an id,
// retry, comment or other line, or a missing final blank line, disqualify
// it), whose JSON object has "type":"content_block_delta", an "index" that
// is a non-negative integer, and a "delta" object, each exactly once. The
// delta has "type":"text_delta" and a non-empty string "text"
// (ChanAnswer, FieldText), or "type":"thinking_delta" and a non-empty
// string "thinking" (ChanReasoning, FieldThinking); every other delta
// member is null or absent. The string must decode to valid UTF-8 without
// lone surrogate escapes. Duplicates of the keys named here, or keys equal
// to one of them only under case folding, disqualify the event. Other
// top-level members may be anything; they end up byte for byte in Prefix
// and Suffix.
func ClassifyMessages(ev *sse.Event, scratch []byte) (Chunk, []byte) {
	var c Chunk
	c.msg.index = -1
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
	var s msgScan
	s.run(ev.Data)
	if !s.valid {
		return c, scratch
	}
	if s.seen[mtType] == 1 && !s.topAmbiguous {
		c.msg.typ = s.typ
	}
	if s.seen[mtIndex] == 1 && s.index >= 0 {
		c.msg.index, c.msg.is, c.msg.ie = s.index, s.is, s.ie
	}
	c.msg.thinking = c.msg.typ == msgBlockStart && s.thinking
	textOK := c.msg.typ == msgBlockDelta && s.seen[mtDelta] == 1 &&
		s.dseen[mdType] == 1 && s.dseen[mdText] <= 1 && s.dseen[mdThinking] <= 1
	if textOK {
		// Counted whatever else the delta holds, as for Chat.
		switch s.dtype {
		case deltaText:
			c.AnswerRunes = s.textRunes
		case deltaThinking:
			c.ReasoningRunes = s.thinkRunes
		}
	}
	switch {
	case errEvent || c.msg.typ == msgError:
		c.Kind = KindError
		return c, scratch
	case c.msg.typ == msgMessageStop:
		c.Kind = KindDone
		return c, scratch
	case c.msg.typ == msgPing:
		c.Kind = KindPing
		return c, scratch
	}
	textOK = textOK && s.deltaOK
	ts, te := -1, -1
	switch s.dtype {
	case deltaText:
		ts, te = s.textS, s.textE
		if s.thinkS >= 0 {
			textOK = false // a non-null member besides the text
		}
	case deltaThinking:
		ts, te = s.thinkS, s.thinkE
		if s.textS >= 0 {
			textOK = false
		}
	default:
		textOK = false
	}
	if !textOK || ts < 0 || te-ts <= 2 || c.msg.index < 0 || !messagesTextShape(ev) {
		return c, scratch
	}
	ch, field := ChanAnswer, FieldText
	if s.dtype == deltaThinking {
		ch, field = ChanReasoning, FieldThinking
	}
	out, ok := c.splice(ev.Data, ts, te, ch, field, scratch)
	if !ok {
		return c, scratch
	}
	return c, out
}

// BlockIndex is the block index of a Messages content_block_start,
// _delta or _stop event classified by ClassifyMessages: -1 when it has
// none, or one that is not a plain non-negative integer given once. A
// translator checks a text delta's block without parsing it again.
func (c *Chunk) BlockIndex() int { return c.msg.index }

// msgScan walks the JSON data of one Messages event once.
type msgScan struct {
	valid        bool // a valid JSON object
	topAmbiguous bool // a top-level key equals a known one only under case folding
	seen         [4]uint8
	typ          msgType
	index        int // -1: not a plain non-negative integer
	is, ie       int
	thinking     bool // content_block.type is thinking or redacted_thinking

	deltaOK               bool // no ambiguous key, no other non-null member in the delta
	dseen                 [3]uint8
	dtype                 int
	textS, textE          int // span of a string "text" (-1: none, or null)
	thinkS, thinkE        int // span of a string "thinking"
	textRunes, thinkRunes int
}

func (s *msgScan) run(b []byte) {
	s.index, s.textS, s.textE, s.thinkS, s.thinkE = -1, -1, -1, -1, -1
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
		k := jsonscan.MatchKey(b[ks:ke], msgTopKeys)
		if k >= 0 {
			s.seen[k]++
		}
		switch k {
		case mtType:
			if b[vs] != '"' {
				s.typ = msgUnknown
				it.Skip()
				continue
			}
			end, _ := jsonscan.ScanString(b, vs)
			it.SetEnd(end)
			if end >= 0 {
				s.typ = msgTypeOf(b[vs:end])
			}
		case mtIndex:
			it.Skip()
			if !it.Err {
				s.index, s.is, s.ie = plainIndex(b, vs, it.Pos), vs, it.Pos
			}
		case mtDelta:
			if b[vs] != '{' {
				it.Skip()
				continue
			}
			it.SetEnd(s.delta(b, vs))
		case mtBlock:
			if b[vs] != '{' {
				it.Skip()
				continue
			}
			it.SetEnd(s.block(b, vs))
		case jsonscan.KeyAmbiguous:
			s.topAmbiguous = true
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

// plainIndex returns the value of the JSON number b[i:j] if it is a
// non-negative integer of at most 9 digits, else -1.
func plainIndex(b []byte, i, j int) int {
	if j-i < 1 || j-i > 9 {
		return -1
	}
	n := 0
	for _, c := range b[i:j] {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// msgTypeOf maps a "type" string literal to its msgType.
func msgTypeOf(lit []byte) msgType {
	var buf [32]byte
	dec, ok := smallString(buf[:0], lit)
	if !ok {
		return msgUnknown
	}
	switch string(dec) {
	case "message_start":
		return msgMessageStart
	case "message_delta":
		return msgMessageDelta
	case "message_stop":
		return msgMessageStop
	case "content_block_start":
		return msgBlockStart
	case "content_block_delta":
		return msgBlockDelta
	case "content_block_stop":
		return msgBlockStop
	case "ping":
		return msgPing
	case "error":
		return msgError
	}
	return msgUnknown
}

// smallString decodes a short string literal (at most 32 bytes decoded)
// into dst, for comparing type names; longer ones are none of them.
func smallString(dst, lit []byte) ([]byte, bool) {
	if len(lit) > 2+6*32 {
		return dst, false
	}
	raw := lit[1 : len(lit)-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw, len(raw) <= 32
	}
	dec, _, ok := jsonscan.AppendUnquote(dst, lit, false)
	return dec, ok && len(dec) <= 32
}

// delta scans the delta object at b[i] and returns its end (or -1).
func (s *msgScan) delta(b []byte, i int) int {
	s.deltaOK = true
	it := jsonscan.NewObjIter(b, i, 2)
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			break
		}
		k := jsonscan.MatchKey(b[ks:ke], msgDeltaKeys)
		if k >= 0 {
			s.dseen[k]++
		}
		switch k {
		case mdType:
			s.dtype = deltaOther
			if b[vs] != '"' {
				it.Skip()
				continue
			}
			end, _ := jsonscan.ScanString(b, vs)
			it.SetEnd(end)
			if end < 0 {
				continue
			}
			var buf [32]byte
			if dec, ok := smallString(buf[:0], b[vs:end]); ok {
				switch string(dec) {
				case "text_delta":
					s.dtype = deltaText
				case "thinking_delta":
					s.dtype = deltaThinking
				}
			}
		case mdText, mdThinking:
			if b[vs] != '"' {
				if !jsonscan.IsNull(b, vs) {
					s.deltaOK = false
				}
				it.Skip()
				continue
			}
			end, _ := jsonscan.ScanString(b, vs)
			it.SetEnd(end)
			if end < 0 {
				continue
			}
			n := jsonscan.CountRunes(b[vs:end])
			if k == mdText {
				s.textS, s.textE, s.textRunes = vs, end, n
			} else {
				s.thinkS, s.thinkE, s.thinkRunes = vs, end, n
			}
		case jsonscan.KeyAmbiguous:
			s.deltaOK = false
			it.Skip()
		default:
			if !jsonscan.IsNull(b, vs) {
				s.deltaOK = false
			}
			it.Skip()
		}
	}
	if it.Err {
		return -1
	}
	return it.Pos
}

// block scans a content_block object at b[i] for its type.
func (s *msgScan) block(b []byte, i int) int {
	it := jsonscan.NewObjIter(b, i, 2)
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			break
		}
		if jsonscan.MatchKey(b[ks:ke], msgBlockKeys) != mtType || b[vs] != '"' {
			it.Skip()
			continue
		}
		end, _ := jsonscan.ScanString(b, vs)
		it.SetEnd(end)
		if end < 0 {
			continue
		}
		var buf [32]byte
		if dec, ok := smallString(buf[:0], b[vs:end]); ok {
			switch string(dec) {
			case "thinking", "redacted_thinking":
				s.thinking = true
			}
		}
	}
	if it.Err {
		return -1
	}
	return it.Pos
}

// messagesTextShape checks the SSE side of a Messages text delta: exactly
// an "event: content_block_delta" line and one data line, then the blank
// line (leading blank lines and a BOM allowed), no id, no retry.
func messagesTextShape(ev *sse.Event) bool {
	return typedTextShape(ev, "content_block_delta")
}

// typedTextShape checks the SSE side of a typed text delta: exactly an
// "event: <name>" line and one data line, then the blank line (leading
// blank lines and a BOM allowed), no id, no retry.
func typedTextShape(ev *sse.Event, name string) bool {
	if ev.Type != name || ev.HasID || ev.Retry != -1 || ev.Unterminated {
		return false
	}
	if bytes.IndexByte(ev.Data, '\n') >= 0 {
		return false
	}
	raw := skipBlankLines(ev.Raw)
	if !bytes.HasPrefix(raw, eventField) {
		return false
	}
	raw = raw[len(eventField):]
	if len(raw) > 0 && raw[0] == ' ' {
		raw = raw[1:]
	}
	if len(raw) < len(name) || string(raw[:len(name)]) != name {
		return false
	}
	raw = raw[len(name):]
	switch {
	case bytes.HasPrefix(raw, []byte("\r\n")):
		raw = raw[2:]
	case len(raw) > 0 && (raw[0] == '\n' || raw[0] == '\r'):
		raw = raw[1:]
	default:
		return false
	}
	return onlyDataLine(raw, ev.Data)
}

var (
	eventField = []byte("event:")
	// blockDeltaLine starts every text event the pacer writes for a
	// Messages stream: Anthropic's SDKs dispatch on the event name.
	blockDeltaLine = []byte("event: content_block_delta\n")
)
