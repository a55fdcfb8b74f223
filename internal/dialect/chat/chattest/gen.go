// Package chattest generates Chat Completions streams for the fuzz targets
// and property tests of the translators that read them (the anthropic and
// responses packages): from any bytes, a stream in every shape providers
// send (text and reasoning deltas, content as an array of parts, refusals,
// tool call fragments by index in any interleaving, with ids on the first
// fragment, on every fragment, or none, calls without an index told apart
// by id), with garbage some translators can read and some they cannot,
// and every kind of end; and the answer the stream carries, which a
// translated stream must carry too unless it ends in an error.
//
// It is a test helper: only tests import it.
package chattest

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Want is what a generated stream carries.
type Want struct {
	// Text and Refusal are the answer's content and refusal; Answer is
	// both in the order they came (a Messages client gets a refusal as
	// text); Reasoning is the reasoning.
	Text, Refusal, Answer, Reasoning string
	// Calls are the tool calls in the order of their first fragment.
	Calls []Call
	// Finish is the last finish_reason sent ("" for none).
	Finish string
	// Complete says the stream ends with a whole [DONE].
	Complete bool
	// Unreadable says the stream holds, before its end, something no
	// translator can read faithfully (not JSON, a second choice, a member
	// of the wrong type): its translation must end in an error.
	Unreadable bool
}

// Call is one tool call: its id ("" when the stream gave none), name and
// whole arguments ("" when none came).
type Call struct{ ID, Name, Args string }

// bytesIn hands out the fuzz input as small numbers; past its end, zeros,
// so every input makes a stream, and a short one.
type bytesIn struct {
	b []byte
	i int
}

func (r *bytesIn) n(k int) int {
	if r.i >= len(r.b) || k <= 1 {
		return 0
	}
	v := int(r.b[r.i])
	r.i++
	return v % k
}

// Input hands out fuzz input as bytesIn does, for the generators of other
// dialects' streams.
type Input struct{ r bytesIn }

// NewInput hands out b.
func NewInput(b []byte) *Input { return &Input{r: bytesIn{b: b}} }

// N is the next number in [0, k); 0 past the input's end.
func (in *Input) N(k int) int { return in.r.n(k) }

// The ways providers name tool call fragments.
const (
	modeIndexed      = iota // index on every fragment, id and name on the first (OpenAI)
	modeNoIndex             // no index, each call's id on its first fragment: calls come one after another
	modeNoIndexIDs          // no index, the id on every fragment (Mistral-like, repeated)
	modeIndexedIDs          // index and id on every fragment
	modeIndexedNoIDs        // index, no id at all
	nModes
)

type genCall struct {
	index  int
	id     string
	name   string
	frags  []string
	next   int  // next fragment to send
	seen   bool // its first fragment is out
	noArgs bool
}

// texts is the alphabet of generated text: escapes, line ends, non-ASCII,
// JSON's own punctuation.
var texts = []string{"a", "Z", " ", "é", "😀", "\"", "\\", "\n", "\t", "{", "}", "[", ":", ",", "\u2028", "<&>", "0", "ok "}

func genText(r *bytesIn) string {
	var b strings.Builder
	for k := 1 + r.n(6); k > 0; k-- {
		b.WriteString(texts[r.n(len(texts))])
	}
	return b.String()
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// genArgs makes arguments: usually a JSON object (with strings that hold
// brackets and quotes, nested values), sometimes cut short.
func genArgs(r *bytesIn) string {
	obj := map[string]any{}
	for k := r.n(4); k > 0; k-- {
		key := fmt.Sprintf("k%d", r.n(10))
		switch r.n(5) {
		case 0:
			obj[key] = genText(r)
		case 1:
			obj[key] = r.n(1000) - 500
		case 2:
			obj[key] = map[string]any{"in": []any{genText(r), r.n(2) == 0, nil}}
		case 3:
			obj[key] = []any{"}", "]\"{", 1.5}
		default:
			obj[key] = r.n(2) == 1
		}
	}
	var b []byte
	if r.n(3) == 0 {
		b, _ = json.MarshalIndent(obj, "", " ")
	} else {
		b, _ = json.Marshal(obj)
	}
	s := string(b)
	if r.n(8) == 0 && len(s) > 1 {
		s = s[:Cut(s, 1+r.n(len(s)-1))] // invalid: never complete, passed on as it is
	}
	return s
}

// split cuts s into fragments (some empty) anywhere but inside a UTF-8
// sequence (each fragment is a JSON string of its own): inside escapes
// and strings too, as providers do.
func split(r *bytesIn, s string) []string {
	var out []string
	for len(s) > 0 {
		n := Cut(s, 1+r.n(12))
		out = append(out, s[:n])
		s = s[n:]
		if r.n(6) == 0 {
			out = append(out, "")
		}
	}
	return out
}

const chunkHead = `{"id":"chatcmpl-fz","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[`

// chunk is a data event of choice 0 with delta d (the members inside its
// braces) and finish reason f ("" for null).
func chunk(d, f string) string {
	fin := "null"
	if f != "" {
		fin = quote(f)
	}
	return "data: " + chunkHead + `{"index":0,"delta":{` + d + `},"logprobs":null,"finish_reason":` + fin + "}]}\n\n"
}

// Stream builds a Chat stream from fuzz input, and what it carries.
func Stream(data []byte) (string, Want) {
	r := &bytesIn{b: data}
	var out strings.Builder
	var w Want
	mode := r.n(nModes)
	calls := make([]*genCall, r.n(5))
	for k := range calls {
		c := &genCall{index: k, name: fmt.Sprintf("fn_%d", k)}
		if mode == modeNoIndex || mode == modeNoIndexIDs {
			c.index = 0
		}
		if mode != modeIndexedNoIDs {
			c.id = fmt.Sprintf("call_%d_%d", k, r.n(100))
		}
		if r.n(5) == 0 {
			c.noArgs = true
			c.frags = []string{""}
		} else {
			c.frags = split(r, genArgs(r))
		}
		calls[k] = c
	}
	out.WriteString(chunk(`"role":"assistant","content":""`, ""))
	nTexts := r.n(7)
	var order []int // calls by first fragment, for Want.Calls
	for step := 0; step < 5000; step++ {
		// The choices left: a text piece (while any are left), or the
		// next fragment of a call that may go now.
		var ready []*genCall
		for k, c := range calls {
			if c.next == len(c.frags) {
				continue
			}
			if mode == modeNoIndex && k > 0 && calls[k-1].next < len(calls[k-1].frags) {
				continue // without index or repeated id, calls cannot interleave
			}
			ready = append(ready, c)
		}
		if len(ready) == 0 && nTexts == 0 {
			break
		}
		garbage(r, &out, &w)
		if nTexts > 0 && (len(ready) == 0 || r.n(3) == 0) {
			nTexts--
			textPiece(r, &out, &w)
			continue
		}
		c := ready[r.n(len(ready))]
		if !c.seen {
			c.seen = true
			order = append(order, indexOf(calls, c))
		}
		frag := c.frags[c.next]
		first := c.next == 0
		c.next++
		var tc strings.Builder
		tc.WriteString("{")
		if mode != modeNoIndex && mode != modeNoIndexIDs {
			fmt.Fprintf(&tc, `"index":%d,`, c.index)
		}
		if c.id != "" && (first || mode == modeNoIndexIDs || mode == modeIndexedIDs) {
			fmt.Fprintf(&tc, `"id":%s,"type":"function",`, quote(c.id))
		}
		if first {
			fmt.Fprintf(&tc, `"function":{"name":%s,"arguments":%s}}`, quote(c.name), quote(frag))
		} else {
			fmt.Fprintf(&tc, `"function":{"arguments":%s}}`, quote(frag))
		}
		out.WriteString(chunk(`"tool_calls":[`+tc.String()+`]`, ""))
	}
	for _, k := range order {
		c := calls[k]
		args := strings.Join(c.frags[:c.next], "")
		w.Calls = append(w.Calls, Call{ID: c.id, Name: c.name, Args: args})
	}
	garbage(r, &out, &w)
	switch r.n(6) {
	case 0: // [DONE] without a finish_reason
	case 1:
		w.Finish = "length"
	case 2:
		w.Finish = "content_filter"
	default:
		w.Finish = "stop"
		if len(calls) > 0 {
			w.Finish = "tool_calls"
		}
	}
	if w.Finish != "" {
		out.WriteString(chunk("", w.Finish))
	}
	if r.n(2) == 0 {
		out.WriteString(`data: {"id":"chatcmpl-fz","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}` + "\n\n")
	}
	switch r.n(5) {
	case 0: // cut at a block boundary
	case 1:
		out.WriteString(`data: {"id":"chatcmpl-fz","choices":[{"index":0,"delta":{"content":"cut`) // cut in an event
	default:
		out.WriteString("data: [DONE]\n\n")
		w.Complete = true
	}
	return out.String(), w
}

func indexOf(calls []*genCall, c *genCall) int {
	for k, x := range calls {
		if x == c {
			return k
		}
	}
	return -1
}

// textPiece writes one chunk of text, reasoning or refusal, in one of the
// shapes providers use.
func textPiece(r *bytesIn, out *strings.Builder, w *Want) {
	t := genText(r)
	switch r.n(7) {
	case 0, 1:
		w.Text += t
		w.Answer += t
		out.WriteString(chunk(`"content":`+quote(t), ""))
	case 2:
		w.Reasoning += t
		out.WriteString(chunk(`"reasoning_content":`+quote(t), ""))
	case 3:
		w.Reasoning += t
		out.WriteString(chunk(`"reasoning":`+quote(t), ""))
	case 4:
		w.Refusal += t
		w.Answer += t
		out.WriteString(chunk(`"refusal":`+quote(t), ""))
	case 5:
		// Mistral's reasoning models: content as parts, thinking first.
		u := genText(r)
		w.Reasoning += t
		w.Text += u
		w.Answer += u
		out.WriteString(chunk(`"content":[{"type":"thinking","thinking":[{"type":"text","text":`+quote(t)+`}]},{"type":"text","text":`+quote(u)+`}]`, ""))
	default:
		// Reasoning and content in one delta (the reasoning is first).
		u := genText(r)
		w.Reasoning += t
		w.Text += u
		w.Answer += u
		out.WriteString(chunk(`"reasoning_content":`+quote(t)+`,"content":`+quote(u), ""))
	}
}

// garbage sometimes writes an event that is not content: readable ones
// (keep-alives, Azure's prompt_filter_results, usage, empty deltas) a
// translator must pass over, and unreadable ones it must fail on.
func garbage(r *bytesIn, out *strings.Builder, w *Want) {
	if r.n(4) != 0 {
		return
	}
	switch r.n(12) {
	case 0:
		out.WriteString(": keep-alive\n\n")
	case 1:
		out.WriteString(`data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}]}` + "\n\n")
	case 2:
		out.WriteString(chunk(`"content":null`, ""))
	case 3:
		out.WriteString(chunk(``, ""))
	case 4:
		out.WriteString("data: \n\n")
	case 5:
		out.WriteString(`data: {"id":"chatcmpl-fz","choices":[],"usage":null}` + "\n\n")
	case 6:
		w.Unreadable = true
		out.WriteString("data: {not json\n\n")
	case 7:
		w.Unreadable = true
		// A second choice, in the shape of a plain text delta.
		out.WriteString(`data: ` + chunkHead + `{"index":1,"delta":{"content":"other"},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	case 8:
		w.Unreadable = true
		out.WriteString(chunk(`"content":5`, ""))
	case 9:
		w.Unreadable = true
		out.WriteString(chunk(`"content":[{"type":"image_url","image_url":{"url":"x"}}]`, ""))
	case 10:
		w.Unreadable = true
		out.WriteString(chunk(`"tool_calls":[null]`, ""))
	default:
		w.Unreadable = true
		out.WriteString("data: [1,2]\n\n")
	}
}

// Cut is the length of the longest prefix of s of at most n bytes (at
// least one rune) that does not end inside a UTF-8 sequence.
func Cut(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	if n == 0 {
		_, n = utf8.DecodeRuneInString(s)
	}
	return n
}
