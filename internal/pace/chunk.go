package pace

import (
	"bytes"
	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// Kind is how the pacer treats one upstream SSE block.
type Kind uint8

const (
	// KindComment is a block with no fields (keep-alive comment, blank
	// lines): ev.IsComment().
	KindComment Kind = iota
	// KindText is a splittable text delta (see Classify).
	KindText
	// KindOther is any other data event, or a block with fields but no
	// data: it passes unsplit.
	KindOther
	// KindDone is a data event whose data is exactly [DONE].
	KindDone
	// KindError is an in-band error: an "event: error" block, or JSON data
	// with a non-null top-level "error" member or a top-level
	// "object":"error" (Messages: a data "type" of "error").
	KindError
	// KindPing is a keep-alive data event (Anthropic's ping, Messages
	// only): it is forwarded in its turn, but unlike other events it is
	// not a barrier, so it does not hurry the text queued before it.
	KindPing
)

// Channel says which text a chunk carries.
type Channel uint8

const (
	ChanNone      Channel = iota
	ChanAnswer            // delta.content (Messages: a text_delta's text)
	ChanReasoning         // delta.reasoning_content or delta.reasoning (Messages: a thinking_delta's thinking)
)

// Names of the delta members that carry text.
const (
	FieldContent          = "content"
	FieldReasoningContent = "reasoning_content"
	FieldReasoning        = "reasoning"
	// Messages: the members of a text_delta and a thinking_delta.
	FieldText     = "text"
	FieldThinking = "thinking"
)

// Chunk is the classification of one event.
type Chunk struct {
	Kind    Kind
	Channel Channel // KindText only
	// Field is the delta member holding the text (KindText only):
	// FieldContent, FieldReasoningContent or FieldReasoning (Messages:
	// FieldText or FieldThinking).
	Field string
	// Prefix and Suffix (KindText only) surround the JSON string literal of
	// the text: ev.Data == Prefix + literal + Suffix. Both alias ev.Data
	// (with their capacity capped, so appending to them copies).
	Prefix, Suffix []byte
	// Text (KindText only) is the decoded text, appended to the scratch
	// slice given to Classify.
	Text []byte
	// HasRole (KindText only) reports that the delta also carries a string
	// "role".
	HasRole bool
	// AnswerRunes and ReasoningRunes count the visible characters (code
	// points of the decoded text) carried by the event, for every Kind
	// whose data is a JSON object: summed over all choices' delta.content
	// (AnswerRunes) and delta.reasoning_content plus delta.reasoning
	// (ReasoningRunes) string values. Invalid UTF-8 bytes and lone
	// surrogates count as one character each (they decode to U+FFFD).
	// Both are 0 when the data is not valid JSON. Messages: the text of a
	// content_block_delta's text_delta (AnswerRunes) or thinking_delta
	// (ReasoningRunes).
	AnswerRunes, ReasoningRunes int

	// msg is what the Pacer needs of a Messages event (ClassifyMessages
	// only).
	msg msgInfo
	// rsp is what the Pacer needs of a Responses event
	// (ClassifyResponses only).
	rsp rspInfo
}

// Key name lists for jsonscan.MatchKey; the constants below index them.
var (
	topKeys    = []string{"choices", "usage", "error", "object"}
	choiceKeys = []string{"index", "delta", "logprobs", "finish_reason"}
	deltaKeys  = []string{FieldContent, FieldReasoningContent, FieldReasoning, "role"}
)

const (
	topChoices = iota
	topUsage
	topError
	topObject
)

const (
	choiceIndex = iota
	choiceDelta
	choiceLogprobs
	choiceFinish
)

const (
	deltaContent = iota
	deltaReasoningContent
	deltaReasoning
	deltaRole
)

var fieldNames = [...]string{FieldContent, FieldReasoningContent, FieldReasoning}

// Classify classifies ev. The decoded text of a KindText event is appended
// to scratch; the returned slice is scratch extended (so the caller can
// reuse it), and is scratch unchanged for every other Kind. Classify never
// panics and does not allocate when scratch has room for the text.
//
// The rules, checked in this order:
//   - no fields at all: KindComment;
//   - "event: error": KindError;
//   - no data field: KindOther;
//   - data exactly [DONE]: KindDone (also when ev.Unterminated);
//   - data not a valid JSON object: KindOther;
//   - a non-null top-level "error", or top-level "object":"error": KindError;
//   - a text delta as described below: KindText;
//   - anything else: KindOther.
//
// A text delta is a block made of exactly one data line (and its blank line;
// an id, retry, comment or other field line disqualifies it, as does an event
// type other than "" or "message" and a missing final blank line), whose
// JSON object has a "choices" array of exactly one object, no non-null
// "usage" or "error" member, and whose choice has an object "delta", a null
// or absent "logprobs" and "finish_reason", a number or null "index", and no
// other non-null member. In that delta, exactly one of "content",
// "reasoning_content" and "reasoning" is a non-empty string, the others are
// null, absent or "", "role" is a string or null, and every other member is
// null. The string must decode to valid UTF-8 without lone surrogate
// escapes. A duplicate of any of the keys named here, or a key that equals
// one of them only under case folding, disqualifies the event. Other
// top-level members may be anything; they end up byte for byte in Prefix
// and Suffix.
func Classify(ev *sse.Event, scratch []byte) (Chunk, []byte) {
	var c Chunk
	if ev.IsComment() {
		c.Kind = KindComment
		return c, scratch
	}
	errEvent := ev.Type == "error"
	if !ev.HasData {
		c.Kind = KindOther
		if errEvent {
			c.Kind = KindError
		}
		return c, scratch
	}
	if !errEvent && ev.IsDone() {
		c.Kind = KindDone
		return c, scratch
	}

	var s chunkScan
	s.run(ev.Data)
	if s.valid {
		c.AnswerRunes, c.ReasoningRunes = s.answer, s.reasoning
	}
	switch {
	case errEvent || s.valid && s.isError:
		c.Kind = KindError
		return c, scratch
	case !s.valid || !s.text || !textEventShape(ev):
		c.Kind = KindOther
		return c, scratch
	}

	ch := ChanReasoning
	if s.field == deltaContent {
		ch = ChanAnswer
	}
	out, ok := c.splice(ev.Data, s.ts, s.te, ch, fieldNames[s.field], scratch)
	if !ok {
		c.Kind = KindOther
		return c, scratch
	}
	c.HasRole = s.hasRole
	return c, out
}

// splice makes c a text chunk on channel ch (its text in member field):
// the JSON string literal data[ts:te] is decoded onto scratch, and Prefix
// and Suffix are the data around it. ok is false, and c unchanged, when
// the literal does not decode strictly.
func (c *Chunk) splice(data []byte, ts, te int, ch Channel, field string, scratch []byte) (out []byte, ok bool) {
	n0 := len(scratch)
	out, _, ok = jsonscan.AppendUnquote(scratch, data[ts:te], true)
	if !ok {
		return scratch, false
	}
	c.Kind, c.Channel, c.Field = KindText, ch, field
	c.Prefix = data[:ts:ts]
	c.Suffix = data[te:len(data):len(data)]
	c.Text = out[n0:len(out):len(out)]
	return out, true
}

// textEventShape checks the SSE side of the KindText rules: the block is
// one data line plus its blank line (leading blank lines and a BOM, which
// carry no meaning, are allowed), with no event type other than "message",
// no id, no retry, and a final blank line.
func textEventShape(ev *sse.Event) bool {
	if ev.Type != "" && ev.Type != "message" || ev.HasID || ev.Retry != -1 || ev.Unterminated {
		return false
	}
	data := ev.Data
	// With no '\n' in Data there was exactly one data line.
	if bytes.IndexByte(data, '\n') >= 0 {
		return false
	}
	return onlyDataLine(skipBlankLines(ev.Raw), data)
}

// skipBlankLines drops a BOM and the blank lines before a block's first
// field: they carry no meaning.
func skipBlankLines(raw []byte) []byte {
	raw = bytes.TrimPrefix(raw, bom)
	i := 0
	for i < len(raw) && (raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return raw[i:]
}

// onlyDataLine reports whether raw is one data line holding data, then
// nothing but line endings.
func onlyDataLine(raw, data []byte) bool {
	if !bytes.HasPrefix(raw, dataField) {
		return false
	}
	raw = raw[len(dataField):]
	if len(raw) > 0 && raw[0] == ' ' {
		raw = raw[1:]
	}
	if !bytes.HasPrefix(raw, data) {
		return false
	}
	// Only line endings may follow: no other line in the block.
	for _, b := range raw[len(data):] {
		if b != '\n' && b != '\r' {
			return false
		}
	}
	return true
}

var (
	bom       = []byte{0xEF, 0xBB, 0xBF}
	dataField = []byte("data:")
)

// chunkScan walks the JSON data of one event once, collecting everything
// Classify needs.
type chunkScan struct {
	valid     bool // the data is a valid JSON object
	isError   bool // non-null top-level "error" or "object":"error"
	text      bool // still a text delta candidate
	field     int  // deltaContent, deltaReasoningContent or deltaReasoning
	ts, te    int  // span of the text string literal
	hasRole   bool
	answer    int
	reasoning int
}

func (s *chunkScan) run(b []byte) {
	i := jsonscan.SkipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return
	}
	s.text = true
	var seen [4]uint8
	it := jsonscan.NewObjIter(b, i, 1)
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			break
		}
		k := jsonscan.MatchKey(b[ks:ke], topKeys)
		if k >= 0 {
			seen[k]++
		}
		switch k {
		case topChoices:
			if b[vs] != '[' {
				s.text = false
				it.Skip()
				continue
			}
			it.SetEnd(s.choices(b, vs))
		case topUsage:
			if !jsonscan.IsNull(b, vs) {
				s.text = false
			}
			it.Skip()
		case topError:
			if !jsonscan.IsNull(b, vs) {
				s.isError = true
			}
			it.Skip()
		case topObject:
			if b[vs] == '"' {
				end, _ := jsonscan.ScanString(b, vs)
				if end >= 0 && jsonscan.KeyIs(b[vs:end], "error") {
					s.isError = true
				}
				it.SetEnd(end)
			} else {
				it.Skip()
			}
		case jsonscan.KeyAmbiguous:
			s.text = false
			it.Skip()
		default:
			it.Skip()
		}
	}
	if it.Err || jsonscan.SkipWS(b, it.Pos) != len(b) {
		return
	}
	s.valid = true
	if seen[topChoices] != 1 || seen[topUsage] > 1 || seen[topError] > 1 || seen[topObject] > 1 {
		s.text = false
	}
}

// choices scans the choices array at b[i] and returns its end (or -1).
func (s *chunkScan) choices(b []byte, i int) int {
	it := jsonscan.NewArrIter(b, i, 2)
	for {
		vs, ok := it.Next()
		if !ok {
			break
		}
		if b[vs] != '{' {
			s.text = false
			it.Skip()
			continue
		}
		it.SetEnd(s.choice(b, vs))
	}
	if it.Err {
		return -1
	}
	if it.N != 1 {
		s.text = false
	}
	return it.Pos
}

// choice scans one choice object at b[i] and returns its end (or -1).
func (s *chunkScan) choice(b []byte, i int) int {
	var seen [4]uint8
	it := jsonscan.NewObjIter(b, i, 3)
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			break
		}
		k := jsonscan.MatchKey(b[ks:ke], choiceKeys)
		if k >= 0 {
			seen[k]++
		}
		switch k {
		case choiceIndex:
			if c := b[vs]; c != '-' && (c < '0' || c > '9') && !jsonscan.IsNull(b, vs) {
				s.text = false
			}
			it.Skip()
		case choiceDelta:
			if b[vs] != '{' {
				s.text = false
				it.Skip()
				continue
			}
			it.SetEnd(s.delta(b, vs))
		case jsonscan.KeyAmbiguous:
			s.text = false
			it.Skip()
		default: // logprobs, finish_reason, unknown members
			if !jsonscan.IsNull(b, vs) {
				s.text = false
			}
			it.Skip()
		}
	}
	if it.Err {
		return -1
	}
	for _, n := range seen {
		if n > 1 {
			s.text = false
		}
	}
	if seen[choiceDelta] == 0 {
		s.text = false
	}
	return it.Pos
}

// delta scans one delta object at b[i] and returns its end (or -1).
func (s *chunkScan) delta(b []byte, i int) int {
	var seen [4]uint8
	texts := 0
	it := jsonscan.NewObjIter(b, i, 4)
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			break
		}
		k := jsonscan.MatchKey(b[ks:ke], deltaKeys)
		if k >= 0 {
			seen[k]++
		}
		switch k {
		case deltaContent, deltaReasoningContent, deltaReasoning:
			if b[vs] != '"' {
				if !jsonscan.IsNull(b, vs) {
					s.text = false
				}
				it.Skip()
				continue
			}
			end, _ := jsonscan.ScanString(b, vs)
			if end < 0 {
				it.Err = true
				continue
			}
			it.Pos = end
			n := jsonscan.CountRunes(b[vs:end])
			if k == deltaContent {
				s.answer += n
			} else {
				s.reasoning += n
			}
			if end-vs == 2 {
				// "": like null. OpenRouter and vLLM send "content":""
				// beside the reasoning; each piece repeats it.
				continue
			}
			texts++
			s.field, s.ts, s.te = k, vs, end
		case deltaRole:
			if b[vs] == '"' {
				s.hasRole = true
			} else if !jsonscan.IsNull(b, vs) {
				s.text = false
			}
			it.Skip()
		case jsonscan.KeyAmbiguous:
			s.text = false
			it.Skip()
		default:
			if !jsonscan.IsNull(b, vs) {
				s.text = false
			}
			it.Skip()
		}
	}
	if it.Err {
		return -1
	}
	if texts != 1 {
		s.text = false
	}
	for _, n := range seen {
		if n > 1 {
			s.text = false
		}
	}
	return it.Pos
}

// AppendString appends s as a JSON string literal: quotes; escapes for '"',
// '\\' and control characters below 0x20 (\n \r \t \b \f, else \u00XX);
// every other byte raw (no HTML escaping of < > &, no escaping of non-ASCII).
// s should be valid UTF-8; invalid bytes are copied as they are.
func AppendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if jsonscan.StrPlain[c] {
			continue
		}
		dst = append(dst, s[start:i]...)
		start = i + 1
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// AppendTextEvent appends the SSE event "data: " + c.Prefix + the JSON
// string literal of text + c.Suffix + "\n\n".
func AppendTextEvent(dst []byte, c *Chunk, text []byte) []byte {
	return AppendTextEventParts(dst, c.Prefix, text, c.Suffix)
}

// AppendTextEventParts appends "data: " + prefix + the JSON string literal
// of text + suffix + "\n\n".
func AppendTextEventParts(dst, prefix, text, suffix []byte) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, prefix...)
	dst = AppendString(dst, text)
	dst = append(dst, suffix...)
	return append(dst, '\n', '\n')
}

// StripReasoning appends to dst a copy of the JSON object data with the
// members "reasoning_content" and "reasoning" removed from choices[i].delta
// for every i, when their value is a string or null (objects, arrays and
// other values are left alone). Separating commas are removed along with
// them so that the result stays valid JSON; every other byte is kept.
// Keys are compared after decoding escapes, exactly (no case folding).
//
// It returns ok == false, and dst unchanged, if data is not a valid JSON
// object with a "choices" array. removed is the number of runes of the
// removed string values.
func StripReasoning(dst, data []byte) (out []byte, removed int, ok bool) {
	n0 := len(dst)
	i := jsonscan.SkipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return dst, 0, false
	}
	st := stripper{b: data, dst: dst}
	hasChoices := false
	it := jsonscan.NewObjIter(data, i, 1)
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			break
		}
		if data[vs] == '[' && jsonscan.KeyIs(data[ks:ke], "choices") {
			hasChoices = true
			it.SetEnd(st.choices(vs))
		} else {
			it.Skip()
		}
	}
	if it.Err || !hasChoices || jsonscan.SkipWS(data, it.Pos) != len(data) {
		return st.dst[:n0], 0, false
	}
	st.dst = append(st.dst, data[st.copied:]...)
	return st.dst, st.removed, true
}

// stripper copies b to dst minus deleted ranges, which must be given in
// increasing order.
type stripper struct {
	b       []byte
	dst     []byte
	copied  int // b[:copied] has been handled
	removed int
}

func (st *stripper) del(from, to int) {
	st.dst = append(st.dst, st.b[st.copied:from]...)
	st.copied = to
}

func (st *stripper) choices(i int) int {
	b := st.b
	it := jsonscan.NewArrIter(b, i, 2)
	for {
		vs, ok := it.Next()
		if !ok {
			break
		}
		if b[vs] != '{' {
			it.Skip()
			continue
		}
		ct := jsonscan.NewObjIter(b, vs, 3)
		for {
			ks, ke, cvs, ok := ct.Next()
			if !ok {
				break
			}
			if b[cvs] == '{' && jsonscan.KeyIs(b[ks:ke], "delta") {
				ct.SetEnd(st.delta(cvs))
			} else {
				ct.Skip()
			}
		}
		if ct.Err {
			return -1
		}
		it.Pos = ct.Pos
	}
	if it.Err {
		return -1
	}
	return it.Pos
}

// delta copies the delta object at b[i] without its reasoning members.
//
// A removed member takes the separator before it along when a kept member
// precedes it ("a":1, "reasoning":"x" → "a":1). Removed members at the
// start of the object take the separator after them instead, up to the
// next kept member's key, or, if none is kept, the whole content from the
// first key to the last value.
func (st *stripper) delta(i int) int {
	b := st.b
	it := jsonscan.NewObjIter(b, i, 4)
	pending := -1 // start of a run of leading removed members
	keptBefore := false
	prevEnd := 0
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			break
		}
		remove := false
		key := b[ks:ke]
		if (b[vs] == '"' || b[vs] == 'n') && (jsonscan.KeyIs(key, FieldReasoningContent) || jsonscan.KeyIs(key, FieldReasoning)) {
			if b[vs] == '"' {
				end, _ := jsonscan.ScanString(b, vs)
				if end >= 0 {
					st.removed += jsonscan.CountRunes(b[vs:end])
				}
				it.SetEnd(end)
				remove = true
			} else {
				it.Skip()
				remove = true
			}
		} else {
			it.Skip()
		}
		if it.Err {
			return -1
		}
		ve := it.Pos
		if remove {
			if keptBefore {
				st.del(prevEnd, ve)
			} else if pending < 0 {
				pending = ks
			}
		} else {
			if pending >= 0 {
				st.del(pending, ks)
				pending = -1
			}
			keptBefore = true
		}
		prevEnd = ve
	}
	if it.Err {
		return -1
	}
	if pending >= 0 {
		st.del(pending, prevEnd)
	}
	return it.Pos
}
