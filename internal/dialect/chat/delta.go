package chat

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
)

// Channel is the text of a Chat answer a piece belongs to.
type Channel uint8

const (
	// ChanText is the answer: content, or a content part of type text.
	ChanText Channel = iota + 1
	// ChanReasoning is reasoning_content, reasoning, or a content part of
	// type thinking (Mistral's) or reasoning.
	ChanReasoning
	// ChanRefusal is refusal, or a content part of type refusal.
	ChanRefusal
)

// Piece is one run of text of a delta or message, on its channel.
type Piece struct {
	Channel Channel
	Text    string
}

// CallDelta is one fragment of a tool call in a stream delta.
type CallDelta struct {
	// Index is the call's index; 0 when the provider omits it (Mistral
	// does: its calls are told apart by id).
	Index int
	ID    string
	Name  string
	// Args is this fragment of the arguments: a string's text, or the
	// JSON text of an object some providers send whole.
	Args string
}

// Delta is what the one choice of a stream chunk says, as ReadDelta reads
// it: its text pieces in order (reasoning, then content, whose parts keep
// their own order, then refusal), its tool call fragments, and its
// finish_reason ("" when none).
type Delta struct {
	Pieces []Piece
	Calls  []CallDelta
	Finish string

	buf   []byte  // the reader's scratch, kept for the next chunk
	parts []Piece // likewise
}

// ReadDelta reads the choices member of a chat.completion.chunk (raw; nil
// or null for none) into d, reusing d's slices. A stream translator can
// read a chunk faithfully only if its choices are what the relay asked
// for and of the types the Chat format gives them, so anything else is an
// *UnreadableError: a choice other than index 0 (the relay's translators
// never ask for n > 1), a member of another type (content: 5), a content
// part of a type it cannot carry to the client, the legacy function_call,
// a member named twice or in another case (which one a client would take
// is not for the relay to guess). An empty choices array is fine: Azure's
// prompt_filter_results chunk and usage chunks have one. Members it does
// not know are passed over.
func ReadDelta(raw json.RawMessage, d *Delta) error {
	d.Pieces, d.Calls, d.Finish = d.Pieces[:0], d.Calls[:0], ""
	raw = trimSpace(raw)
	if isNull(raw) {
		return nil
	}
	r := reader{b: raw, buf: d.buf[:0], parts: d.parts[:0]}
	r.choices(d, "delta")
	d.buf, d.parts = r.buf, r.parts[:0]
	if r.err != nil {
		return r.err
	}
	return nil
}

// Answer is the one choice of a non-stream chat.completion, as ReadAnswer
// reads it: its text pieces in order (as for Delta), its tool calls, its
// finish_reason.
type Answer struct {
	Pieces []Piece
	Calls  []ToolCall
	Finish string
}

// ReadAnswer reads the choices member of a chat.completion. There must be
// exactly the one choice the relay asked for, index 0, read as ReadDelta
// reads a delta; anything else is an *UnreadableError, which the relay
// answers with a 502 in the client's dialect rather than an answer with
// something missing. A tool call's arguments are kept as they came ("" when
// it had none).
func ReadAnswer(raw json.RawMessage) (Answer, error) {
	var a Answer
	raw = trimSpace(raw)
	if isNull(raw) {
		return a, &UnreadableError{Reason: "the answer has no choices"}
	}
	var d Delta
	r := reader{b: raw}
	n := r.choices(&d, "message")
	switch {
	case r.err != nil:
		return a, r.err
	case n == 0:
		return a, &UnreadableError{Reason: "the answer has no choices"}
	case n > 1:
		return a, &UnreadableError{Reason: "the answer has more than the one choice the relay asks for"}
	}
	a.Pieces, a.Finish = d.Pieces, d.Finish
	for _, c := range d.Calls {
		a.Calls = append(a.Calls, ToolCall{ID: c.ID, Type: "function", Function: FunctionCall{Name: c.Name, Arguments: c.Args}})
	}
	return a, nil
}

// reader reads the choices of a chunk or an answer with jsonscan: no
// allocation but the strings it returns, and no member it does not
// check.
type reader struct {
	b     []byte
	buf   []byte  // unquoting scratch
	parts []Piece // a content's pieces, before they take their place
	err   *UnreadableError
}

// fail records why the choices cannot be read (the first reason) and
// returns -1, the end of a value that did not scan.
func (r *reader) fail(reason string) int {
	if r.err == nil {
		r.err = &UnreadableError{Reason: reason}
	}
	return -1
}

// Key lists for jsonscan.MatchKey; the constants below index them.
var (
	choiceKeys = []string{"index", "delta", "message", "finish_reason"}
	msgKeys    = []string{"content", "refusal", "reasoning_content", "reasoning", "tool_calls", "function_call"}
	callKeys   = []string{"index", "id", "function"}
	funcKeys   = []string{"name", "arguments"}
	partKeys   = []string{"type", "text", "thinking", "reasoning", "refusal"}
)

// object walks the object at b[i] (depth: its nesting), calling f for each
// member named in keys, with the name's index and the value's start; f
// returns the value's end (-1 after fail). Other members are passed over.
// A name that matches one of keys only in another case, or one of keys
// twice, is unreadable: encoding/json, and so many clients, would take it
// for that member. It returns the object's end, or -1.
func (r *reader) object(i, depth int, path string, keys []string, f func(k, vs int) int) int {
	it := jsonscan.NewObjIter(r.b, i, depth)
	var seen uint32
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			break
		}
		k := jsonscan.MatchKey(r.b[ks:ke], keys)
		switch {
		case k == jsonscan.KeyAmbiguous:
			return r.fail(path + " has a member named like one the relay reads, in another case")
		case k < 0:
			it.Skip()
			continue
		case seen&(1<<k) != 0:
			return r.fail(path + "." + keys[k] + " comes twice")
		}
		seen |= 1 << k
		end := f(k, vs)
		if end < 0 {
			return -1
		}
		it.SetEnd(end)
	}
	if it.Err {
		return r.fail(path + " is not valid JSON")
	}
	return it.Pos
}

// choices reads the choices array into d (member "delta" or "message" of
// each choice) and returns how many there were (-1 on error).
func (r *reader) choices(d *Delta, member string) int {
	b := r.b
	if b[0] != '[' {
		r.fail("choices is " + jsonKind(b) + ", not an array")
		return -1
	}
	it := jsonscan.NewArrIter(b, 0, 1)
	n := 0
	for {
		vs, ok := it.Next()
		if !ok {
			break
		}
		n++
		if b[vs] != '{' {
			r.fail("a choice is " + jsonKind(b[vs:]))
			return -1
		}
		end := r.object(vs, 2, "choices[0]", choiceKeys, func(k, vs int) int {
			switch k {
			case 0: // index
				idx, end := r.integer(vs, "choices[0].index")
				if end >= 0 && idx != 0 {
					return r.fail(fmt.Sprintf("a choice with index %d, which the relay never asks for", idx))
				}
				return end
			case 3: // finish_reason
				f, end := r.str(vs, "choices[0].finish_reason")
				if f != "" {
					d.Finish = f
				}
				return end
			}
			if choiceKeys[k] != member {
				return jsonscan.SkipValue(b, vs, 3) // a delta in an answer, a message in a chunk
			}
			path := "choices[0]." + member
			if jsonscan.IsNull(b, vs) {
				return vs + 4
			}
			if b[vs] != '{' {
				return r.fail(path + " is " + jsonKind(b[vs:]))
			}
			return r.message(vs, 3, path, d)
		})
		if end < 0 {
			return -1
		}
		it.SetEnd(end)
	}
	if it.Err || jsonscan.SkipWS(b, it.Pos) != len(b) {
		r.fail("choices is not valid JSON")
		return -1
	}
	return n
}

// message reads a delta or message object: its pieces in order
// (reasoning, content, refusal), its tool calls. The same reasoning is
// sent by some providers under both names: reasoning_content is taken
// when it has text, else reasoning.
func (r *reader) message(i, depth int, path string, d *Delta) int {
	var reasoningContent, reasoning, refusal string
	r.parts = r.parts[:0]
	end := r.object(i, depth, path, msgKeys, func(k, vs int) int {
		p := path + "." + msgKeys[k]
		var end int
		switch k {
		case 0:
			return r.content(vs, depth+1, p)
		case 1:
			refusal, end = r.str(vs, p)
		case 2:
			reasoningContent, end = r.str(vs, p)
		case 3:
			reasoning, end = r.str(vs, p)
		case 4:
			return r.toolCalls(vs, depth+1, p, d)
		default:
			if !jsonscan.IsNull(r.b, vs) {
				return r.fail(p + ", the legacy member the relay never asks for")
			}
			end = vs + 4
		}
		return end
	})
	if end < 0 {
		return -1
	}
	if reasoningContent != "" {
		d.Pieces = append(d.Pieces, Piece{ChanReasoning, reasoningContent})
	} else if reasoning != "" {
		d.Pieces = append(d.Pieces, Piece{ChanReasoning, reasoning})
	}
	d.Pieces = append(d.Pieces, r.parts...)
	if refusal != "" {
		d.Pieces = append(d.Pieces, Piece{ChanRefusal, refusal})
	}
	return end
}

// content reads a content member into r.parts: a string, null, or an
// array of parts (Mistral's reasoning models send
// [{"type":"thinking","thinking":[{"type":"text","text":…}]},{"type":"text","text":…}]).
func (r *reader) content(vs, depth int, path string) int {
	b := r.b
	switch {
	case b[vs] == '"' || jsonscan.IsNull(b, vs):
		s, end := r.str(vs, path)
		if s != "" {
			r.parts = append(r.parts, Piece{ChanText, s})
		}
		return end
	case b[vs] != '[':
		return r.fail(path + " is " + jsonKind(b[vs:]) + ", not a string or an array of parts")
	}
	it := jsonscan.NewArrIter(b, vs, depth)
	for {
		ps, ok := it.Next()
		if !ok {
			break
		}
		if b[ps] != '{' {
			return r.fail(path + " has a part that is " + jsonKind(b[ps:]))
		}
		var typ string
		var text, thinking, reasoning, refusal = -1, -1, -1, -1
		end := r.object(ps, depth+1, path+"[]", partKeys, func(k, vs int) int {
			switch k {
			case 0:
				var end int
				typ, end = r.str(vs, path+"[].type")
				return end
			case 1:
				text = vs
			case 2:
				thinking = vs
			case 3:
				reasoning = vs
			default:
				refusal = vs
			}
			return jsonscan.SkipValue(b, vs, depth+2)
		})
		if end < 0 {
			return -1
		}
		it.SetEnd(end)
		ch, at := Channel(0), -1
		switch typ {
		case "text":
			ch, at = ChanText, text
		case "refusal":
			ch, at = ChanRefusal, refusal
		case "reasoning":
			ch, at = ChanReasoning, reasoning
			if at < 0 {
				at = text
			}
		case "thinking":
			if thinking >= 0 && r.thinking(thinking, depth+2, path) < 0 {
				return -1
			}
			continue
		default:
			return r.fail(path + " has a part of type " + safeName(typ) + ", which the relay cannot translate")
		}
		if at < 0 {
			continue
		}
		s, end := r.str(at, path+"[]."+typ)
		if end < 0 {
			return -1
		}
		if s != "" {
			r.parts = append(r.parts, Piece{ch, s})
		}
	}
	if it.Err {
		return r.fail(path + " is not valid JSON")
	}
	return it.Pos
}

// thinking reads a thinking part's "thinking" into r.parts: an array of
// text parts (Mistral's), a string, or null.
func (r *reader) thinking(vs, depth int, path string) int {
	b := r.b
	path += "[].thinking"
	if b[vs] != '[' {
		s, end := r.str(vs, path)
		if s != "" {
			r.parts = append(r.parts, Piece{ChanReasoning, s})
		}
		return end
	}
	it := jsonscan.NewArrIter(b, vs, depth)
	for {
		ps, ok := it.Next()
		if !ok {
			break
		}
		if b[ps] != '{' {
			return r.fail(path + " has a part that is " + jsonKind(b[ps:]))
		}
		var typ, text string
		end := r.object(ps, depth+1, path+"[]", partKeys[:2], func(k, vs int) int {
			var end int
			if k == 0 {
				typ, end = r.str(vs, path+"[].type")
			} else {
				text, end = r.str(vs, path+"[].text")
			}
			return end
		})
		if end < 0 {
			return -1
		}
		if typ != "text" {
			return r.fail(path + " has a part that is not text")
		}
		if text != "" {
			r.parts = append(r.parts, Piece{ChanReasoning, text})
		}
		it.SetEnd(end)
	}
	if it.Err {
		return r.fail(path + " is not valid JSON")
	}
	return it.Pos
}

// toolCalls reads a tool_calls member (null, or an array of calls) into
// d.Calls.
func (r *reader) toolCalls(vs, depth int, path string, d *Delta) int {
	b := r.b
	if jsonscan.IsNull(b, vs) {
		return vs + 4
	}
	if b[vs] != '[' {
		return r.fail(path + " is " + jsonKind(b[vs:]) + ", not an array")
	}
	it := jsonscan.NewArrIter(b, vs, depth)
	for {
		cs, ok := it.Next()
		if !ok {
			break
		}
		if b[cs] != '{' {
			return r.fail(path + " has an entry that is " + jsonKind(b[cs:]))
		}
		var cd CallDelta
		end := r.object(cs, depth+1, path+"[]", callKeys, func(k, vs int) int {
			var end int
			switch k {
			case 0:
				cd.Index, end = r.integer(vs, path+"[].index")
				if end >= 0 && cd.Index < 0 {
					return r.fail(path + "[].index is negative")
				}
			case 1:
				cd.ID, end = r.str(vs, path+"[].id")
			default:
				if jsonscan.IsNull(b, vs) {
					return vs + 4
				}
				if b[vs] != '{' {
					return r.fail(path + "[].function is " + jsonKind(b[vs:]))
				}
				end = r.object(vs, depth+2, path+"[].function", funcKeys, func(k, vs int) int {
					if k == 0 {
						var end int
						cd.Name, end = r.str(vs, path+"[].function.name")
						return end
					}
					return r.arguments(vs, depth+3, path+"[].function.arguments", &cd)
				})
			}
			return end
		})
		if end < 0 {
			return -1
		}
		d.Calls = append(d.Calls, cd)
		it.SetEnd(end)
	}
	if it.Err {
		return r.fail(path + " is not valid JSON")
	}
	return it.Pos
}

// arguments reads a call's arguments: a string, null, or (some
// providers) the whole arguments as a JSON object or array, whose text is
// the arguments string the Chat format means.
func (r *reader) arguments(vs, depth int, path string, cd *CallDelta) int {
	b := r.b
	if b[vs] == '{' || b[vs] == '[' {
		end := jsonscan.SkipValue(b, vs, depth)
		if end < 0 {
			return r.fail(path + " is not valid JSON")
		}
		cd.Args = string(b[vs:end])
		return end
	}
	var end int
	cd.Args, end = r.str(vs, path)
	return end
}

// str reads a string or null ("") at b[vs].
func (r *reader) str(vs int, path string) (string, int) {
	b := r.b
	if jsonscan.IsNull(b, vs) {
		return "", vs + 4
	}
	if b[vs] != '"' {
		return "", r.fail(path + " is " + jsonKind(b[vs:]) + ", not a string")
	}
	end, _ := jsonscan.ScanString(b, vs)
	if end < 0 {
		return "", r.fail(path + " is not valid JSON")
	}
	var ok bool
	r.buf, _, ok = jsonscan.AppendUnquote(r.buf[:0], b[vs:end], false)
	if !ok {
		return "", r.fail(path + " is not valid JSON")
	}
	return string(r.buf), end
}

// integer reads an integer or null (0) at b[vs].
func (r *reader) integer(vs int, path string) (int, int) {
	b := r.b
	if jsonscan.IsNull(b, vs) {
		return 0, vs + 4
	}
	i, neg := vs, false
	if i < len(b) && b[i] == '-' {
		i, neg = i+1, true
	}
	n, j := 0, i
	for ; j < len(b) && b[j] >= '0' && b[j] <= '9'; j++ {
		if j-i >= 9 {
			return 0, r.fail(path + " is out of range")
		}
		n = n*10 + int(b[j]-'0')
	}
	if j == i || j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') || j-i > 1 && b[i] == '0' {
		return 0, r.fail(path + " is " + jsonKind(b[vs:]) + ", not an integer")
	}
	if neg {
		n = -n
	}
	return n, j
}

// jsonKind names the kind of the JSON value raw starts.
func jsonKind(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// safeName is s when it looks like a name (a type a client may read in an
// error), else a placeholder: an error message never carries arbitrary
// upstream bytes.
func safeName(s string) string {
	if len(s) == 0 || len(s) > 40 {
		return "(unnamed)"
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return "(unnamed)"
		}
	}
	return `"` + s + `"`
}

func trimSpace(b []byte) []byte {
	i := jsonscan.SkipWS(b, 0)
	return bytes.TrimRight(b[i:], " \t\r\n")
}

// isNull reports an absent member or a JSON null.
func isNull(raw []byte) bool {
	raw = trimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// FirstChoiceIsZero reports whether the first choice of a chunk has index
// 0 (or none, or null): the cheap check a translator's fast path makes on
// a text delta (pace.Classify's KindText, which has exactly one choice
// and no key that only case-folds to "choices" or "index") before taking
// its text as the answer's. false sends the chunk to ReadDelta, which
// says what is wrong with it.
func FirstChoiceIsZero(data []byte) bool {
	it := jsonscan.NewObjIter(data, jsonscan.SkipWS(data, 0), 1)
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			return false
		}
		if data[vs] != '[' || !jsonscan.KeyIs(data[ks:ke], "choices") {
			it.Skip()
			continue
		}
		arr := jsonscan.NewArrIter(data, vs, 2)
		cs, ok := arr.Next()
		if !ok || data[cs] != '{' {
			return false
		}
		ch := jsonscan.NewObjIter(data, cs, 3)
		for {
			ks, ke, vs, ok := ch.Next()
			if !ok {
				return !ch.Err // no index: the first choice
			}
			if !jsonscan.KeyIs(data[ks:ke], "index") {
				ch.Skip()
				continue
			}
			end := jsonscan.SkipValue(data, vs, 3)
			v := data[vs:max(end, vs)]
			return string(v) == "0" || string(v) == "null"
		}
	}
}

// FirstChoice is FirstChoiceIsZero for the chunks of one stream, with a
// memory: a provider writes every text delta of a stream in the same shape
// (the same members around the text, in the same order), so a chunk whose
// bytes around its text literal are those of one already found to be of
// choice 0 is of choice 0 too, and is not scanned again. The zero value
// is ready; it is not safe for concurrent use.
type FirstChoice struct {
	seen [2]struct{ prefix, suffix []byte } // content and reasoning deltas have their own
	next int
}

// IsZero reports FirstChoiceIsZero(data) for a chunk that is prefix, a
// JSON string literal, then suffix (pace.Classify's KindText).
func (f *FirstChoice) IsZero(data, prefix, suffix []byte) bool {
	for i := range f.seen {
		if s := &f.seen[i]; s.prefix != nil && bytes.Equal(prefix, s.prefix) && bytes.Equal(suffix, s.suffix) {
			return true
		}
	}
	if !FirstChoiceIsZero(data) {
		return false
	}
	s := &f.seen[f.next]
	f.next = (f.next + 1) % len(f.seen)
	s.prefix = append(s.prefix[:0], prefix...)
	s.suffix = append(s.suffix[:0], suffix...)
	return true
}
