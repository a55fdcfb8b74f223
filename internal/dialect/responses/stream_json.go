package responses

import (
	"encoding/json"
	"strconv"
)

// chunkIn is the part of a chat.completion.chunk (or an in-band error)
// ResponsesStream reads off its hot path. A struct, not a map:
// encoding/json fills only the members named here.
type chunkIn struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Created int64  `json:"created"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          string       `json:"content"`
			Refusal          string       `json:"refusal"`
			ReasoningContent string       `json:"reasoning_content"`
			Reasoning        string       `json:"reasoning"`
			ToolCalls        []toolCallIn `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatUsageIn `json:"usage"`
	Error *errorIn     `json:"error"`
}

type toolCallIn struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

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

// push makes the event of data b (copied: newStreamEvent writes its own
// Raw) and keeps b's array for the next event.
func (s *respStream) push(typ string, b []byte) {
	s.q.Push(newStreamEvent(typ, b))
	s.buf = b[:0]
}

// emitDelta pushes a delta event of the open item: the hot path, written
// byte by byte.
func (s *respStream) emitDelta(typ, mid string, lit []byte, tail string) {
	b := s.head(typ)
	b = append(b, `,"item_id":`...)
	b = append(b, s.itemID...)
	b = append(b, `,"output_index":`...)
	b = strconv.AppendInt(b, int64(s.outIdx), 10)
	b = append(b, mid...)
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
	Logprobs     json.RawMessage `json:"logprobs,omitempty"`
	Part         json.RawMessage `json:"part,omitempty"`
}

var zero = 0

// open starts an output item of kind with id.
func (s *respStream) open(kind int, id string, item []byte) {
	s.begin()
	s.kind, s.outIdx, s.text = kind, len(s.output), s.text[:0]
	s.itemIDStr, s.itemID = id, marshal(id)
	s.emit(evItemAdded, marshal(itemEvent{s.outIdx, item}))
}

// uniqueID is base, or base_<output index> when an item of the same
// kind came before (reasoning after text after reasoning).
func (s *respStream) uniqueID(base string, n *int) string {
	*n++
	if *n == 1 {
		return base
	}
	return base + "_" + strconv.Itoa(len(s.output))
}

func (s *respStream) openText(kind int) {
	if kind == kindReasoning {
		id := s.uniqueID(s.r.reasoningID(), &s.nReasoning)
		s.open(kind, id, reasoningItem(id, "", false))
		s.emit(evSummaryPartAdded, marshal(partEvent{ItemID: id, OutputIndex: s.outIdx, SummaryIndex: &zero,
			Part: json.RawMessage(`{"type":"summary_text","text":""}`)}))
		return
	}
	id := s.uniqueID(s.r.messageID(), &s.nMessage)
	s.open(kind, id, messageItem(id, "", "in_progress"))
	s.emit(evContentPartAdded, marshal(partEvent{ItemID: id, OutputIndex: s.outIdx, ContentIndex: &zero,
		Part: json.RawMessage(`{"type":"output_text","text":"","annotations":[],"logprobs":[]}`)}))
}

func (s *respStream) openCall(i int) {
	c := &s.r.calls[i]
	id := s.r.callID(i)
	s.call = i
	s.open(kindCall, id, callItem(id, c.id, c.name, "", "in_progress"))
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
		s.emit(evTextDone, marshal(partEvent{ItemID: id, OutputIndex: s.outIdx, ContentIndex: &zero, Text: &text, Logprobs: json.RawMessage("[]")}))
		s.emit(evContentPartDone, marshal(partEvent{ItemID: id, OutputIndex: s.outIdx, ContentIndex: &zero,
			Part: marshal(outputText{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: []any{}})}))
		item = messageItem(id, text, "completed")
	case kindCall:
		c := &s.r.calls[s.call]
		args := c.args.String()
		s.emit(evArgsDone, marshal(partEvent{ItemID: id, OutputIndex: s.outIdx, Name: c.name, Arguments: &args}))
		item = callItem(id, c.id, c.name, args, "completed")
	}
	s.emit(evItemDone, marshal(itemEvent{s.outIdx, item}))
	s.output = append(s.output, item)
	s.kind = kindNone
}
