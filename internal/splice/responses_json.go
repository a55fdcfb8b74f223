package splice

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
)

// rspType is the "type" of a Responses event's data, for the types the
// recorder and the splicer tell apart.
type rspType uint8

const (
	rtOther            rspType = iota // any other type (passes, renumbered)
	rtInvalid                         // data that is not a JSON object with a string "type"
	rtCreated                         // response.created
	rtInProgress                      // response.in_progress, response.queued
	rtItemAdded                       // response.output_item.added
	rtItemDone                        // response.output_item.done
	rtPartAdded                       // response.content_part.added
	rtPartDone                        // response.content_part.done
	rtTextDelta                       // response.output_text.delta
	rtTextDone                        // response.output_text.done
	rtSummaryPartAdded                // response.reasoning_summary_part.added
	rtSummaryPartDone                 // response.reasoning_summary_part.done
	rtSummaryDelta                    // response.reasoning_summary_text.delta
	rtSummaryDone                     // response.reasoning_summary_text.done
	rtReasoningDelta                  // response.reasoning_text.delta
	rtReasoningDone                   // response.reasoning_text.done
	rtCompleted                       // response.completed
	rtIncomplete                      // response.incomplete
	rtFailed                          // response.failed
	rtError                           // error
)

func rspTypeOf(lit []byte) rspType {
	switch string(lit) { // no allocation: a switch on a converted slice
	case `"response.created"`:
		return rtCreated
	case `"response.in_progress"`, `"response.queued"`:
		return rtInProgress
	case `"response.output_item.added"`:
		return rtItemAdded
	case `"response.output_item.done"`:
		return rtItemDone
	case `"response.content_part.added"`:
		return rtPartAdded
	case `"response.content_part.done"`:
		return rtPartDone
	case `"response.output_text.delta"`:
		return rtTextDelta
	case `"response.output_text.done"`:
		return rtTextDone
	case `"response.reasoning_summary_part.added"`:
		return rtSummaryPartAdded
	case `"response.reasoning_summary_part.done"`:
		return rtSummaryPartDone
	case `"response.reasoning_summary_text.delta"`:
		return rtSummaryDelta
	case `"response.reasoning_summary_text.done"`:
		return rtSummaryDone
	case `"response.reasoning_text.delta"`:
		return rtReasoningDelta
	case `"response.reasoning_text.done"`:
		return rtReasoningDone
	case `"response.completed"`:
		return rtCompleted
	case `"response.incomplete"`:
		return rtIncomplete
	case `"response.failed"`:
		return rtFailed
	case `"error"`:
		return rtError
	}
	return rtOther
}

// rspScan is what one walk over the top level of an event's data finds
// (and, for output_item events, over its item's). Spans are offsets into
// the data; -1 when absent.
type rspScan struct {
	typ      rspType
	seq      int64 // -1: none, or not a plain integer
	outIdx   int   // output_index, -1: none
	part     int   // content_index or summary_index, -1: none
	ds, de   int   // the "delta" string literal
	ps, pe   int   // the "part" object (content_part and summary_part events)
	is, ie   int   // the "item" object (output_item events)
	itemTyp  string
	ids, ide int // the item's "id" string literal
}

var rspKeys = []string{"type", "sequence_number", "output_index", "content_index", "summary_index", "delta", "part", "item"}

// scanRsp walks data once: a byte scan, no allocation (itemTyp interns
// the few item types the recorder tells apart).
func scanRsp(data []byte) rspScan {
	s := rspScan{typ: rtInvalid, seq: -1, outIdx: -1, part: -1, ds: -1, de: -1, ps: -1, pe: -1, is: -1, ie: -1, ids: -1, ide: -1}
	i := jsonscan.SkipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return s
	}
	typed := false
	it := jsonscan.NewObjIter(data, i, 1)
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			break
		}
		it.Skip()
		if it.Err {
			break
		}
		ve := it.Pos
		switch jsonscan.MatchKey(data[ks:ke], rspKeys) {
		case 0:
			if data[vs] == '"' {
				s.typ, typed = rspTypeOf(data[vs:ve]), true
			}
		case 1:
			s.seq = int64(plainInt(data[vs:ve]))
		case 2:
			s.outIdx = plainInt(data[vs:ve])
		case 3, 4:
			s.part = plainInt(data[vs:ve])
		case 5:
			if data[vs] == '"' {
				s.ds, s.de = vs, ve
			}
		case 6:
			if data[vs] == '{' {
				s.ps, s.pe = vs, ve
			}
		case 7:
			if data[vs] == '{' {
				s.is, s.ie = vs, ve
			}
		}
	}
	if it.Err || !typed || jsonscan.SkipWS(data, it.Pos) != len(data) {
		s.typ = rtInvalid
		return s
	}
	if s.is >= 0 {
		s.scanItem(data)
	}
	return s
}

// scanItem finds the item's type and id.
func (s *rspScan) scanItem(data []byte) {
	it := jsonscan.NewObjIter(data, s.is, 2)
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			return
		}
		it.Skip()
		if it.Err {
			return
		}
		if data[vs] != '"' {
			continue
		}
		switch {
		case jsonscan.KeyIs(data[ks:ke], "type"):
			s.itemTyp = internItemType(data[vs:it.Pos])
		case jsonscan.KeyIs(data[ks:ke], "id"):
			s.ids, s.ide = vs, it.Pos
		}
	}
}

// Item types: the ones the recorder tells apart; any other is "other".
const (
	itemMessage   = "message"
	itemReasoning = "reasoning"
	itemOther     = "other"
)

// serverItems are the items the provider runs itself: the client only
// shows them, so they are not held (a break after one is harmless: the
// continuation does not repeat it, and the client already has it).
var serverItems = map[string]bool{
	"web_search_call": true, "file_search_call": true, "code_interpreter_call": true,
	"image_generation_call": true, "mcp_call": true, "mcp_list_tools": true,
}

func internItemType(lit []byte) string {
	switch string(lit) {
	case `"message"`:
		return itemMessage
	case `"reasoning"`:
		return itemReasoning
	}
	if serverItems[string(lit[1:len(lit)-1])] {
		return "server"
	}
	return itemOther
}

// holdsItem reports an item the client executes (function_call,
// custom_tool_call, local_shell_call, computer_call, ... and any type not
// known to be the provider's own): from its output_item.added on, the
// stream is held to its end.
func holdsItem(typ string) bool { return typ == itemOther }

// plainInt is the value of a plain non-negative integer literal, else -1.
func plainInt(b []byte) int {
	if len(b) == 0 || len(b) > 15 {
		return -1
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// member is a JSON object member to set: val is its raw JSON value, nil
// to delete it.
type rspMember struct {
	key string
	val []byte
}

// setMembers appends to dst the JSON object obj with the members of kv
// replaced (in place, so the order of the others is kept), deleted (val
// nil) or, when absent, appended. obj must be a valid object (scanned
// before); a member key is matched exactly.
func setMembers(dst, obj []byte, kv ...rspMember) []byte {
	done := make([]bool, len(kv))
	i := jsonscan.SkipWS(obj, 0)
	it := jsonscan.NewObjIter(obj, i, 1)
	dst = append(dst, '{')
	n := 0
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			break
		}
		it.Skip()
		if it.Err {
			break
		}
		val := obj[vs:it.Pos]
		for j := range kv {
			if !done[j] && jsonscan.KeyIs(obj[ks:ke], kv[j].key) {
				done[j] = true
				val = kv[j].val
				break
			}
		}
		if val == nil {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = append(dst, obj[ks:ke]...)
		dst = append(dst, ':')
		dst = append(dst, val...)
	}
	for j := range kv {
		if done[j] || kv[j].val == nil {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = strconv.AppendQuote(dst, kv[j].key)
		dst = append(dst, ':')
		dst = append(dst, kv[j].val...)
	}
	return append(dst, '}')
}

// getMember returns the raw value of obj's member key (nil when absent or
// obj is no object).
func getMember(obj []byte, key string) []byte {
	i := jsonscan.SkipWS(obj, 0)
	it := jsonscan.NewObjIter(obj, i, 1)
	for {
		ks, ke, vs, ok := it.Next()
		if !ok {
			return nil
		}
		it.Skip()
		if it.Err {
			return nil
		}
		if jsonscan.KeyIs(obj[ks:ke], key) {
			return obj[vs:it.Pos]
		}
	}
}

// unquote decodes a JSON string literal ("" when it is none).
func unquote(lit []byte) string {
	out, _, ok := jsonscan.AppendUnquote(nil, lit, false)
	if !ok {
		return ""
	}
	return string(out)
}

// quote is s as a JSON string literal, <, > and & as they are (as
// providers write them; encoding/json would escape them for HTML).
func rspQuote(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func itoa(n int64) []byte { return strconv.AppendInt(nil, n, 10) }
