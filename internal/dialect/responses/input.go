package responses

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// inputToChat translates input: a string is one user message; an array
// is items, in order.
func inputToChat(input json.RawMessage) ([]json.RawMessage, error) {
	if len(input) == 0 || isNull(input) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(input, &s) == nil {
		return []json.RawMessage{marshal(chatMsg{Role: "user", Content: s})}, nil
	}
	var items []itemIn
	if err := json.Unmarshal(input, &items); err != nil {
		return nil, invalid("input", "input is neither a string nor an array of items")
	}
	var msgs []chatMsg
	// calls is the index in msgs of the assistant message that collects
	// the current run of function_call items, -1 outside a run.
	calls := -1
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "", "message":
			m, err := messageToChat(&it, param)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, m)
			calls = -1
			if m.Role == "assistant" {
				// an assistant's text and the calls after it are one Chat turn
				calls = len(msgs) - 1
			}
		case "function_call":
			if it.CallID == "" {
				return nil, invalid(param+".call_id", "a function_call item needs its call_id")
			}
			if it.Name == "" {
				return nil, invalid(param+".name", "a function_call item needs the name of the function")
			}
			var tc chat.ToolCall
			tc.ID, tc.Type = it.CallID, "function"
			tc.Function.Name, tc.Function.Arguments = it.Name, it.Arguments
			if calls < 0 {
				msgs = append(msgs, chatMsg{Role: "assistant"})
				calls = len(msgs) - 1
			}
			msgs[calls].ToolCalls = append(msgs[calls].ToolCalls, tc)
		case "function_call_output":
			if it.CallID == "" {
				return nil, invalid(param+".call_id", "a function_call_output item needs the call_id of its call")
			}
			out, err := toolOutputText(it.Output, param+".output")
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, chatMsg{Role: "tool", ToolCallID: it.CallID, Content: out})
			calls = -1
		case "reasoning":
			// Dropped: its encrypted_content is for the provider that made
			// it, and Chat has no way to send reasoning back.
		default:
			return nil, reqErr(param+".type", "item type %q cannot be translated to Chat Completions (message, function_call, function_call_output, reasoning can)", it.Type)
		}
	}
	out := make([]json.RawMessage, len(msgs))
	for i := range msgs {
		if msgs[i].Role == "assistant" && msgs[i].Content == "" && len(msgs[i].ToolCalls) > 0 {
			msgs[i].Content = nil // Chat's "no text" beside tool calls
		}
		out[i] = marshal(msgs[i])
	}
	return out, nil
}

// messageToChat translates one message item.
func messageToChat(it *itemIn, param string) (chatMsg, error) {
	switch it.Role {
	case "user", "assistant", "system", "developer":
	default:
		return chatMsg{}, invalid(param+".role", "role %q is not known (user, assistant, system, developer)", it.Role)
	}
	if len(it.Content) == 0 || isNull(it.Content) {
		// Once read as "": the turn went to the provider empty.
		return chatMsg{}, invalid(param+".content", "a message item needs content: a string or an array of parts")
	}
	if it.Role == "developer" {
		// Chat providers other than OpenAI know "system" only (DeepSeek
		// refuses "developer"); OpenAI reads a system message to its
		// reasoning models as the developer's.
		it.Role = "system"
	}
	var s string
	if json.Unmarshal(it.Content, &s) == nil {
		return chatMsg{Role: it.Role, Content: s}, nil
	}
	var parts []partIn
	if err := json.Unmarshal(it.Content, &parts); err != nil {
		return chatMsg{}, invalid(param+".content", "content is neither a string nor an array of parts")
	}
	var out []chatPart
	text := true
	for j, p := range parts {
		pp := fmt.Sprintf("%s.content[%d]", param, j)
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, chatPart{Type: "text", Text: p.Text})
		case "refusal":
			out = append(out, chatPart{Type: "text", Text: p.Refusal})
		case "input_image":
			if it.Role != "user" {
				return chatMsg{}, reqErr(pp+".type", "images are translated in user messages only")
			}
			if p.ImageURL == "" {
				return chatMsg{}, reqErr(pp, "an input_image needs image_url (a file_id needs the provider's file store)")
			}
			cp := chatPart{Type: "image_url", ImageURL: &imageURL{URL: p.ImageURL, Detail: p.Detail}}
			out = append(out, cp)
			text = false
		default:
			return chatMsg{}, reqErr(pp+".type", "part type %q cannot be translated to Chat Completions", p.Type)
		}
	}
	if !text {
		return chatMsg{Role: it.Role, Content: out}, nil
	}
	// All text: one string, the parts concatenated as the SDKs' output_text
	// does (a separator would change what the model sees).
	var b strings.Builder
	for _, p := range out {
		b.WriteString(p.Text)
	}
	return chatMsg{Role: it.Role, Content: b.String()}, nil
}

// toolOutputText is a function_call_output's output: a string, or text parts
// (joined). Images in a tool result have no place in a Chat tool message.
func toolOutputText(raw json.RawMessage, param string) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []partIn
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", invalid(param, "output is neither a string nor an array of parts")
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "input_text" && p.Type != "output_text" && p.Type != "text" {
			return "", reqErr(fmt.Sprintf("%s[%d].type", param, j), "only text can be in a Chat tool message, not %q", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}
