package responses

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// chunkIn is the part of a chat.completion.chunk (or an in-band error)
// FromChatStream reads off its hot path. A struct, not a map:
// encoding/json fills only the members named here. The choices are read
// by chat.ReadDelta, which checks them.
type chunkIn struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Created int64           `json:"created"`
	Choices json.RawMessage `json:"choices"`
	Usage   *chatUsageIn    `json:"usage"`
	Error   *errorIn        `json:"error"`
}

// isJSONObject reports whether data is a JSON object (what a chunk must
// be; encoding/json would decode an array into a struct as a type error).
func isJSONObject(data []byte) bool {
	data = bytes.TrimLeft(data, " \t\r\n")
	return len(data) > 0 && data[0] == '{'
}

// isBlank reports data with nothing but whitespace.
func isBlank(data []byte) bool { return len(bytes.TrimLeft(data, " \t\r\n")) == 0 }

type errorIn struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// code is the error's code when it is a string, else its type.
func (e *errorIn) code() string {
	var c string
	if json.Unmarshal(e.Code, &c) == nil && c != "" {
		return c
	}
	return e.Type
}

// emit pushes an event whose data is body with type and sequence_number
// first (body is a JSON object).
func (s *respStream) emit(typ string, body []byte) {
	b := s.head(typ)
	if len(body) > 2 {
		b = append(b, ',')
		b = append(b, body[1:]...)
	} else {
		b = append(b, '}')
	}
	s.push(typ, b)
}

// head starts an event's data in s.buf: `{"type":typ,"sequence_number":n`.
func (s *respStream) head(typ string) []byte {
	b := append(s.buf[:0], `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","sequence_number":`...)
	b = strconv.AppendInt(b, s.seq, 10)
	s.seq++
	return b
}

// push makes the event of data b (copied: streamEvents.Event writes its own
// Raw) and keeps b's array for the next event.
func (s *respStream) push(typ string, b []byte) {
	s.Q.Push(streamEvents.Event(typ, b))
	s.buf = b[:0]
}

// emitDelta pushes a delta event of the open item: the hot path, written
// byte by byte. idxKey (`,"content_index":` or `,"summary_index":`, or ""
// for none) comes with idx.
func (s *respStream) emitDelta(typ, idxKey string, idx int, lit []byte, tail string) {
	b := s.head(typ)
	b = append(b, `,"item_id":`...)
	b = append(b, s.itemID...)
	b = append(b, `,"output_index":`...)
	b = strconv.AppendInt(b, int64(s.outIdx), 10)
	if idxKey != "" {
		b = append(b, idxKey...)
		b = strconv.AppendInt(b, int64(idx), 10)
	}
	b = append(b, `,"delta":`...)
	b = append(b, lit...)
	b = append(b, tail...)
	s.push(typ, b)
}

func (s *respStream) emitResponse(typ string, resp []byte) {
	// By hand: json.Marshal would compact resp (a few KiB) once more.
	b := s.head(typ)
	b = append(b, `,"response":`...)
	b = append(b, resp...)
	b = append(b, '}')
	s.push(typ, b)
}

// itemEvent is output_item.added and .done.
type itemEvent struct {
	OutputIndex int             `json:"output_index"`
	Item        json.RawMessage `json:"item"`
}

// partEvent is the events of a part of the open item.
type partEvent struct {
	ItemID       string          `json:"item_id"`
	OutputIndex  int             `json:"output_index"`
	ContentIndex *int            `json:"content_index,omitempty"`
	SummaryIndex *int            `json:"summary_index,omitempty"`
	Name         string          `json:"name,omitempty"`
	Arguments    *string         `json:"arguments,omitempty"`
	Text         *string         `json:"text,omitempty"`
	Refusal      *string         `json:"refusal,omitempty"`
	Logprobs     json.RawMessage `json:"logprobs,omitempty"`
	Part         json.RawMessage `json:"part,omitempty"`
}

var zero = 0

// open starts an output item of kind with id.
func (s *respStream) open(kind int, id string, item []byte) {
	s.begin()
	s.kind, s.outIdx = kind, len(s.output)
	s.itemIDStr, s.itemID = id, marshal(id)
	s.emit(evItemAdded, marshal(itemEvent{s.outIdx, item}))
}

// uniqueID is base, or base_<output index> when an item of the same
// kind came before (reasoning after text after reasoning).
func (s *respStream) uniqueID(base string, n *int) string {
	return uniqueID(base, n, len(s.output))
}

func (s *respStream) openReasoning() {
	id := s.uniqueID(s.r.reasoningID(), &s.nReasoning)
	s.open(kindReasoning, id, reasoningItem(id, "", false))
	s.emit(evSummaryPartAdded, marshal(partEvent{ItemID: id, OutputIndex: s.outIdx, SummaryIndex: &zero,
		Part: json.RawMessage(`{"type":"summary_text","text":""}`)}))
}

func (s *respStream) openMessage() {
	id := s.uniqueID(s.r.messageID(), &s.nMessage)
	s.parts = s.parts[:0]
	s.open(kindMessage, id, messageItem(id, nil, "in_progress"))
}

// openPart starts a text (ItemText) or refusal part of the open message.
func (s *respStream) openPart(kind chat.ItemKind) {
	s.part = kind
	n := len(s.parts)
	part := json.RawMessage(`{"type":"output_text","text":"","annotations":[],"logprobs":[]}`)
	if kind == chat.ItemRefusal {
		part = json.RawMessage(`{"type":"refusal","refusal":""}`)
	}
	s.emit(evContentPartAdded, marshal(partEvent{ItemID: s.itemIDStr, OutputIndex: s.outIdx, ContentIndex: &n, Part: part}))
}

func (s *respStream) openCall(it *chat.Item) {
	s.callID, s.callName = s.r.chatCallID(it.Call, it.ID), it.Name
	id := s.r.callID(it.Call)
	s.open(kindCall, id, callItem(id, s.callID, s.callName, "", "in_progress"))
}

// closePart emits the done events of the message's open part.
func (s *respStream) closePart() {
	n, text := len(s.parts), string(s.text)
	var part json.RawMessage
	if s.part == chat.ItemRefusal {
		part = refusalPart(text)
		s.emit(evRefusalDone, marshal(partEvent{ItemID: s.itemIDStr, OutputIndex: s.outIdx, ContentIndex: &n, Refusal: &text}))
	} else {
		part = textPart(text)
		s.emit(evTextDone, marshal(partEvent{ItemID: s.itemIDStr, OutputIndex: s.outIdx, ContentIndex: &n, Text: &text, Logprobs: json.RawMessage("[]")}))
	}
	s.emit(evContentPartDone, marshal(partEvent{ItemID: s.itemIDStr, OutputIndex: s.outIdx, ContentIndex: &n, Part: part}))
	s.parts = append(s.parts, part)
	s.part = 0
}

// closeItem emits the done events of the open item, if any.
func (s *respStream) closeItem() {
	id, text := s.itemIDStr, string(s.text)
	var item json.RawMessage
	switch s.kind {
	case kindNone:
		return
	case kindReasoning:
		s.emit(evSummaryDone, marshal(partEvent{ItemID: id, OutputIndex: s.outIdx, SummaryIndex: &zero, Text: &text}))
		s.emit(evSummaryPartDone, marshal(partEvent{ItemID: id, OutputIndex: s.outIdx, SummaryIndex: &zero,
			Part: marshal(summaryPart{Type: "summary_text", Text: text})}))
		item = reasoningItem(id, text, true)
	case kindMessage:
		item = messageItem(id, s.parts, "completed")
	case kindCall:
		args := callArgs(text)
		s.emit(evArgsDone, marshal(partEvent{ItemID: id, OutputIndex: s.outIdx, Name: s.callName, Arguments: &args}))
		item = callItem(id, s.callID, s.callName, args, "completed")
	}
	s.emit(evItemDone, marshal(itemEvent{s.outIdx, item}))
	s.output = append(s.output, item)
	s.kind = kindNone
}
