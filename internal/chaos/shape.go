package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Dialect is a client's API, for the stream shape checks.
type Dialect string

const (
	DialectChat      Dialect = "chat"      // /v1/chat/completions
	DialectMessages  Dialect = "messages"  // Anthropic's /v1/messages
	DialectResponses Dialect = "responses" // OpenAI's /v1/responses
)

// CheckStream reads a 2xx stream's events as a client of dialect d
// would, up to the first error event: it returns the answer's text and
// the first way the stream is not well formed, or "". The rules are the
// ones an SDK's stream accumulator relies on: Chat, one chunk id, one
// role delta, one finish_reason, nothing after [DONE]; Messages, one
// message_start first, content blocks opened, filled and closed in index
// order from 0, one message_delta, nothing after message_stop;
// Responses, one response.created first, sequence_number rising by 1,
// output items added in output_index order from 0 and deltas naming an
// added item, nothing after response.completed. complete says the
// stream ended well (the dialect's end seen): its end must then be
// whole.
func CheckStream(d Dialect, evs []Event, complete bool) (text, problem string) {
	switch d {
	case DialectChat:
		return checkChat(evs, complete)
	case DialectMessages:
		return checkMessages(evs, complete)
	case DialectResponses:
		return checkResponses(evs, complete)
	}
	return "", ""
}

func checkChat(evs []Event, complete bool) (string, string) {
	var text bytes.Buffer
	id, roles, finishes, done := "", 0, 0, false
	for i, ev := range evs {
		if !ev.HasData {
			continue
		}
		if done {
			return text.String(), fmt.Sprintf("event %d after [DONE]", i)
		}
		if bytes.Equal(bytes.TrimSpace(ev.Data), []byte("[DONE]")) {
			done = true
			continue
		}
		if ev.Type == "error" || hasErrorObject(ev.Data) {
			return text.String(), ""
		}
		var c struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Role    string  `json:"role"`
					Content *string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			return text.String(), fmt.Sprintf("chunk %d: %v", i, err)
		}
		switch {
		case c.Object != "chat.completion.chunk":
			return text.String(), fmt.Sprintf("chunk %d: object %q", i, c.Object)
		case id == "":
			id = c.ID
		case c.ID != id:
			return text.String(), fmt.Sprintf("chunk %d: id %q after %q", i, c.ID, id)
		}
		for _, ch := range c.Choices {
			if ch.Index != 0 {
				return text.String(), fmt.Sprintf("chunk %d: choice index %d", i, ch.Index)
			}
			if ch.Delta.Role != "" {
				if roles++; roles > 1 {
					return text.String(), fmt.Sprintf("chunk %d: a second role delta", i)
				}
			}
			if ch.Delta.Content != nil && *ch.Delta.Content != "" {
				if finishes > 0 {
					return text.String(), fmt.Sprintf("chunk %d: content after finish_reason", i)
				}
				text.WriteString(*ch.Delta.Content)
			}
			if ch.FinishReason != nil {
				if finishes++; finishes > 1 {
					return text.String(), fmt.Sprintf("chunk %d: a second finish_reason", i)
				}
			}
		}
	}
	if complete && finishes != 1 {
		return text.String(), fmt.Sprintf("%d finish_reason chunks in a complete stream", finishes)
	}
	return text.String(), ""
}

// typeOf is an event's type: its `event:` field, else its data's "type".
func typeOf(ev Event) string {
	if ev.Type != "" {
		return ev.Type
	}
	return responseEventType(ev)
}

func checkMessages(evs []Event, complete bool) (string, string) {
	var text bytes.Buffer
	started, stopped := false, false
	open, next, deltas := -1, 0, 0
	for i, ev := range evs {
		if !ev.HasData {
			continue
		}
		typ := typeOf(ev)
		if typ == "error" {
			return text.String(), ""
		}
		if stopped {
			return text.String(), fmt.Sprintf("event %d (%s) after message_stop", i, typ)
		}
		if typ == "ping" {
			continue
		}
		if !started && typ != "message_start" {
			return text.String(), fmt.Sprintf("event %d (%s) before message_start", i, typ)
		}
		var e struct {
			Index int `json:"index"`
			Delta struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"delta"`
		}
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return text.String(), fmt.Sprintf("event %d (%s): %v", i, typ, err)
		}
		switch typ {
		case "message_start":
			if started {
				return text.String(), fmt.Sprintf("event %d: a second message_start", i)
			}
			started = true
		case "content_block_start":
			if open >= 0 || e.Index != next {
				return text.String(), fmt.Sprintf("event %d: content_block_start index %d (open %d, next %d)", i, e.Index, open, next)
			}
			open, next = e.Index, next+1
		case "content_block_delta":
			if e.Index != open {
				return text.String(), fmt.Sprintf("event %d: content_block_delta index %d (open %d)", i, e.Index, open)
			}
			if e.Delta.Type == "text_delta" {
				text.WriteString(e.Delta.Text)
			}
		case "content_block_stop":
			if e.Index != open {
				return text.String(), fmt.Sprintf("event %d: content_block_stop index %d (open %d)", i, e.Index, open)
			}
			open = -1
		case "message_delta":
			if open >= 0 {
				return text.String(), fmt.Sprintf("event %d: message_delta with block %d open", i, open)
			}
			if deltas++; deltas > 1 {
				return text.String(), fmt.Sprintf("event %d: a second message_delta", i)
			}
		case "message_stop":
			if open >= 0 {
				return text.String(), fmt.Sprintf("event %d: message_stop with block %d open", i, open)
			}
			stopped = true
		default:
			return text.String(), fmt.Sprintf("event %d: unknown type %q", i, typ)
		}
	}
	if complete && (!stopped || deltas != 1) {
		return text.String(), fmt.Sprintf("a complete stream with message_stop %v and %d message_delta", stopped, deltas)
	}
	return text.String(), ""
}

func checkResponses(evs []Event, complete bool) (string, string) {
	var text bytes.Buffer
	created, completed := false, false
	seq, items := -1, map[string]int{}
	next := 0
	for i, ev := range evs {
		if !ev.HasData {
			continue
		}
		typ := typeOf(ev)
		if typ == "error" || typ == "response.failed" || typ == "response.incomplete" {
			return text.String(), ""
		}
		if completed {
			return text.String(), fmt.Sprintf("event %d (%s) after response.completed", i, typ)
		}
		var e struct {
			Seq         *int   `json:"sequence_number"`
			OutputIndex int    `json:"output_index"`
			ItemID      string `json:"item_id"`
			Delta       string `json:"delta"`
			Item        struct {
				ID string `json:"id"`
			} `json:"item"`
		}
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return text.String(), fmt.Sprintf("event %d (%s): %v", i, typ, err)
		}
		if e.Seq != nil {
			if seq >= 0 && *e.Seq != seq+1 {
				return text.String(), fmt.Sprintf("event %d (%s): sequence_number %d after %d", i, typ, *e.Seq, seq)
			}
			seq = *e.Seq
		}
		if !created && typ != "response.created" {
			return text.String(), fmt.Sprintf("event %d (%s) before response.created", i, typ)
		}
		switch typ {
		case "response.created":
			if created {
				return text.String(), fmt.Sprintf("event %d: a second response.created", i)
			}
			created = true
		case "response.output_item.added":
			if e.OutputIndex != next {
				return text.String(), fmt.Sprintf("event %d: output_item.added output_index %d, want %d", i, e.OutputIndex, next)
			}
			if _, dup := items[e.Item.ID]; dup {
				return text.String(), fmt.Sprintf("event %d: output item id %q added twice", i, e.Item.ID)
			}
			items[e.Item.ID] = e.OutputIndex
			next++
		case "response.output_text.delta":
			if at, ok := items[e.ItemID]; !ok || at != e.OutputIndex {
				return text.String(), fmt.Sprintf("event %d: output_text.delta for item %q at output_index %d, not an added item", i, e.ItemID, e.OutputIndex)
			}
			text.WriteString(e.Delta)
		case "response.completed":
			completed = true
		}
	}
	if complete && !completed {
		return text.String(), "a complete stream without response.completed"
	}
	return text.String(), ""
}
