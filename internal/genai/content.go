package genai

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// The message forms of gen_ai.input.messages and gen_ai.output.messages
// (v1.41.0): a JSON array of messages, each a role and its parts. They
// are recorded only when the operator opts in (trace_content), and
// bounded: a span attribute of a megabyte prompt would sink a tracing
// backend.

// Message is one message of the conventions' forms.
type Message struct {
	Role         string `json:"role"`
	Parts        []Part `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

// Part is one part of a Message: text, reasoning, a tool call or a tool
// call's response.
type Part struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Response  string          `json:"response,omitempty"`
}

// Truncated marks a text cut to fit the bound.
const Truncated = "…[truncated]"

// InputFromChat renders a Chat Completions request body's messages (the
// relay's pivot: every client dialect translates to it) in the
// conventions' form, at most max bytes; "" when the body has none.
func InputFromChat(chatBody []byte, max int) string {
	var req struct {
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []chat.ToolCall `json:"tool_calls"`
		} `json:"messages"`
	}
	if json.Unmarshal(chatBody, &req) != nil || len(req.Messages) == 0 {
		return ""
	}
	msgs := make([]Message, 0, len(req.Messages))
	for _, m := range req.Messages {
		out := Message{Role: m.Role}
		text := contentText(m.Content)
		switch {
		case m.Role == "tool":
			out.Parts = append(out.Parts, Part{Type: "tool_call_response", ID: m.ToolCallID, Response: text})
		case text != "":
			out.Parts = append(out.Parts, Part{Type: "text", Content: text})
		}
		for _, c := range m.ToolCalls {
			out.Parts = append(out.Parts, toolCallPart(c.ID, c.Function.Name, c.Function.Arguments))
		}
		if out.Parts == nil {
			out.Parts = []Part{}
		}
		msgs = append(msgs, out)
	}
	return Render(msgs, max)
}

// contentText is a Chat message's content as text: the string, or the
// text parts joined (other parts are not recorded).
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	for _, p := range parts {
		if p.Type == "text" {
			s += p.Text
		}
	}
	return s
}

// Render marshals msgs within max bytes: texts are cut (at a character
// boundary, marked Truncated) to an equal share of the bound, and if that
// is not enough the oldest messages go, the last one always kept (cut
// further if need be). "" when nothing fits.
func Render(msgs []Message, max int) string {
	if max <= 0 {
		return ""
	}
	b, err := json.Marshal(msgs)
	if err == nil && len(b) <= max {
		return string(b)
	}
	texts := 0
	for _, m := range msgs {
		texts += len(m.Parts)
	}
	share := max / (2 * max1(texts))
	for {
		cut := make([]Message, len(msgs))
		for i, m := range msgs {
			cut[i] = m
			cut[i].Parts = make([]Part, len(m.Parts))
			for j, p := range m.Parts {
				p.Content, p.Response = shorten(p.Content, share), shorten(p.Response, share)
				if len(p.Arguments) > share {
					p.Arguments, _ = json.Marshal(shorten(string(p.Arguments), share))
				}
				cut[i].Parts[j] = p
			}
		}
		if b, err = json.Marshal(cut); err == nil && len(b) <= max {
			return string(b)
		}
		switch {
		case len(msgs) > 1:
			msgs = msgs[1:]
		case share > 16:
			share /= 2
		default:
			return ""
		}
	}
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

// shorten cuts s to at most n bytes at a character boundary, marked.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	keep := n - len(Truncated)
	if keep < 0 {
		keep = 0
	}
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + Truncated
}
