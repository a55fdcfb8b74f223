package genai

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// An answer's gen_ai.output.messages: one assistant message with its
// reasoning, its text and its tool calls, each in the conventions' part
// form. A whole answer is read through the Chat pivot (OutputFromChat);
// a stream as the client was sent it, event by event (Collector).

// OutputFromChat renders a whole Chat Completions answer (the relay's
// pivot: every client dialect's answer translates to it) as the
// conventions' output messages, one per choice, at most max bytes; ""
// when it has no content.
func OutputFromChat(chatAnswer []byte, max int) string {
	var a struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Content          json.RawMessage `json:"content"`
				ReasoningContent string          `json:"reasoning_content"`
				Reasoning        string          `json:"reasoning"`
				ToolCalls        []chat.ToolCall `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if json.Unmarshal(chatAnswer, &a) != nil {
		return ""
	}
	var msgs []Message
	for _, ch := range a.Choices {
		m := Message{Role: "assistant", FinishReason: OutputFinishReason(DialectChat, ch.FinishReason, len(ch.Message.ToolCalls) > 0), Parts: []Part{}}
		if r := ch.Message.ReasoningContent + ch.Message.Reasoning; r != "" {
			m.Parts = append(m.Parts, Part{Type: "reasoning", Content: r})
		}
		if t := contentText(ch.Message.Content); t != "" {
			m.Parts = append(m.Parts, Part{Type: "text", Content: t})
		}
		for _, c := range ch.Message.ToolCalls {
			m.Parts = append(m.Parts, toolCallPart(c.ID, c.Function.Name, c.Function.Arguments))
		}
		if len(m.Parts) > 0 {
			msgs = append(msgs, m)
		}
	}
	if len(msgs) == 0 {
		return ""
	}
	return Render(msgs, max)
}

// chatToolCall is a Chat tool call, whole or a stream's delta of one
// (which has its index in the message's calls).
type chatToolCall struct {
	Index int `json:"index"`
	chat.ToolCall
}

// toolCallPart is a tool call's part: its arguments as the JSON they are,
// or as a string when they are not JSON (a stream cut short).
func toolCallPart(id, name, args string) Part {
	raw := json.RawMessage(args)
	if args == "" {
		raw = nil
	} else if !json.Valid(raw) {
		raw, _ = json.Marshal(args)
	}
	return Part{Type: "tool_call", ID: id, Name: name, Arguments: raw}
}

// Collector gathers a streamed answer for its output message: the text
// and reasoning the caller hands it (it classifies the events already)
// and the tool calls it reads from the events, in the client's dialect.
// Each text, and the arguments of all calls together, are kept up to
// max bytes; Render bounds the whole.
type Collector struct {
	max             int
	text, reasoning strings.Builder
	calls           []streamedCall
	argBytes        int
}

// streamedCall is a tool call as its events build it: key is its place in
// the stream (Chat's tool call index, Messages' content block index,
// Responses' output index).
type streamedCall struct {
	key      int
	id, name string
	args     []byte // a slice, not a strings.Builder: calls are copied as the slice grows
}

// maxCalls bounds the tool calls a Collector keeps (and its search for a
// call's key).
const maxCalls = 128

// NewCollector is a Collector that keeps up to max bytes of each.
func NewCollector(max int) *Collector { return &Collector{max: max} }

// AddText appends text the client was sent, reasoning or answer.
func (c *Collector) AddText(reasoning bool, text []byte) {
	b := &c.text
	if reasoning {
		b = &c.reasoning
	}
	if room := c.max - b.Len(); room > 0 {
		b.Write(text[:min(len(text), room)])
	}
}

// ScanEvent reads a stream event's data, in dialect, for tool calls.
// Events that cannot hold one are passed over without decoding.
func (c *Collector) ScanEvent(dialect string, data []byte) {
	switch dialect {
	case DialectMessages:
		if bytes.Contains(data, []byte(`"tool_use"`)) || bytes.Contains(data, []byte(`"input_json_delta"`)) {
			c.scanMessages(data)
		}
	case DialectResponses:
		if bytes.Contains(data, []byte(`"response.output_item.done"`)) && bytes.Contains(data, []byte(`"function_call"`)) {
			c.scanResponses(data)
		}
	default:
		if bytes.Contains(data, []byte(`"tool_calls"`)) {
			c.scanChat(data)
		}
	}
}

func (c *Collector) scanChat(data []byte) {
	var ev struct {
		Choices []struct {
			Index int `json:"index"`
			Delta struct {
				ToolCalls []chatToolCall `json:"tool_calls"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	for _, ch := range ev.Choices {
		if ch.Index != 0 {
			continue // the output message is the first choice's
		}
		for _, tc := range ch.Delta.ToolCalls {
			c.add(tc.Index, tc.ID, tc.Function.Name, tc.Function.Arguments)
		}
	}
}

func (c *Collector) scanMessages(data []byte) {
	var ev struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content_block"`
		Delta struct {
			Type        string `json:"type"`
			PartialJSON string `json:"partial_json"`
		} `json:"delta"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	switch {
	case ev.Type == "content_block_start" && ev.ContentBlock.Type == "tool_use":
		args := ""
		if in := string(ev.ContentBlock.Input); in != "" && in != "{}" && in != "null" {
			args = in // a whole input at the start; streams send {} and deltas
		}
		c.add(ev.Index, ev.ContentBlock.ID, ev.ContentBlock.Name, args)
	case ev.Type == "content_block_delta" && ev.Delta.Type == "input_json_delta":
		c.add(ev.Index, "", "", ev.Delta.PartialJSON)
	}
}

func (c *Collector) scanResponses(data []byte) {
	var ev struct {
		OutputIndex int `json:"output_index"`
		Item        struct {
			Type      string `json:"type"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"item"`
	}
	if json.Unmarshal(data, &ev) != nil || ev.Item.Type != "function_call" {
		return
	}
	c.add(ev.OutputIndex, ev.Item.CallID, ev.Item.Name, ev.Item.Arguments)
}

// add starts the call at key or adds to it.
func (c *Collector) add(key int, id, name, args string) {
	var call *streamedCall
	for i := range c.calls {
		if c.calls[i].key == key {
			call = &c.calls[i]
			break
		}
	}
	if call == nil {
		if len(c.calls) == maxCalls {
			return
		}
		c.calls = append(c.calls, streamedCall{key: key})
		call = &c.calls[len(c.calls)-1]
	}
	if id != "" {
		call.id = id
	}
	if name != "" {
		call.name = name
	}
	if room := c.max - c.argBytes; room > 0 {
		n := min(len(args), room)
		call.args = append(call.args, args[:n]...)
		c.argBytes += n
	}
}

// Output renders what was gathered as the output message, at most max
// bytes, with why the answer stopped (the dialect's own reason, see
// OutputFinishReason); "" when nothing was gathered.
func (c *Collector) Output(dialect, finishReason string) string {
	m := Message{Role: "assistant", FinishReason: OutputFinishReason(dialect, finishReason, len(c.calls) > 0), Parts: []Part{}}
	if c.reasoning.Len() > 0 {
		m.Parts = append(m.Parts, Part{Type: "reasoning", Content: c.reasoning.String()})
	}
	if c.text.Len() > 0 {
		m.Parts = append(m.Parts, Part{Type: "text", Content: c.text.String()})
	}
	for i := range c.calls {
		call := &c.calls[i]
		m.Parts = append(m.Parts, toolCallPart(call.id, call.name, string(call.args)))
	}
	if len(m.Parts) == 0 {
		return ""
	}
	return Render([]Message{m}, c.max)
}

// OutputFinishReason is an output message's finish_reason in the
// conventions' values (stop, length, content_filter, tool_call, error)
// for a dialect's own reason; one it does not know passes as it is
// (gen_ai.response.finish_reasons keeps the dialect's own). A Responses
// answer says "completed" whether it ended on text or on a call: calls
// says which.
func OutputFinishReason(dialect, reason string, calls bool) string {
	switch reason {
	case "":
		return ""
	case "stop", "end_turn", "stop_sequence", "pause_turn":
		return "stop"
	case "length", "max_tokens", "max_output_tokens", "model_context_window_exceeded":
		return "length"
	case "content_filter", "refusal":
		return "content_filter"
	case "tool_calls", "function_call", "tool_use":
		return "tool_call"
	case "failed", "error":
		return "error"
	case "completed":
		if dialect == DialectResponses {
			if calls {
				return "tool_call"
			}
			return "stop"
		}
	}
	return reason
}
