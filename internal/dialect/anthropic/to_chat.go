package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// ToChatRequest translates a Messages request into a Chat Completions
// request, for an Anthropic client (Claude Code, the Anthropic SDKs) whose
// chain reaches a Chat provider. opt.MaxTokensField names the output
// limit ("max_tokens" unless it says "max_completion_tokens").
//
//	Messages                              Chat Completions
//	model                                 model
//	system (string or text blocks)        a system message, first (texts joined
//	                                      by a blank line)
//	messages[role=system]                 a system message, in place (Claude Code
//	                                      sends its environment so)
//	user: text blocks                     user content (a string when all text,
//	                                      joined by a blank line)
//	user: image (base64 or url source)    image_url part (data: URL or the URL)
//	user: tool_result blocks              tool messages (tool_call_id, text
//	                                      content; is_error: prefixed "Error: "),
//	                                      before the rest of that user turn
//	assistant: text blocks                assistant content
//	assistant: tool_use blocks            tool_calls (arguments = the input, compact)
//	assistant: thinking, redacted_thinking dropped (Chat has no way to send them back)
//	tools (custom: name, description,     tools[type=function] (parameters =
//	  input_schema)                       input_schema)
//	tool_choice auto|any|none|tool        tool_choice auto|required|none|function
//	tool_choice.disable_parallel_tool_use parallel_tool_calls: false
//	max_tokens                            max_tokens (max_completion_tokens for OpenAI)
//	stop_sequences                        stop
//	temperature, top_p                    temperature, top_p
//	metadata.user_id                      user
//	stream                                stream, stream_options.include_usage
//	thinking {enabled, budget_tokens}     reasoning_effort (EffortForBudget)
//	thinking {adaptive} + output_config   reasoning_effort = output_config.effort
//	  .effort                             (max: high); adaptive alone: none set
//	thinking {disabled}                   no reasoning_effort
//
// Refused as Invalid (a *chat.RequestError with Invalid set: not a valid
// Messages request, whatever the target): a message whose content is
// null or absent, a user or assistant turn with no content (but the final
// assistant turn), roles other than user, assistant and system, a tool
// without a name or an object input_schema, a tool_choice that is not an
// object of a known type or of type tool without a name, thinking of
// another type than enabled, adaptive or disabled, budget_tokens that is
// not an integer of at least 1024, an unknown output_config.effort, an
// image without a source, a member of the wrong type.
//
// Refused (a *chat.RequestError: valid, but Chat cannot express it): document,
// search_result and other block types Chat cannot carry, images inside
// tool results, server tools (a tool with a type such as
// web_search_20250305 or bash_20250124: the provider would have to run
// them), image sources other than base64 and url.
//
// Dropped: cache_control everywhere, top_k, context_management,
// output_config other than effort, container, mcp_servers, service_tier,
// a tool's defer_loading and strict, and any member this table does not
// name.
func ToChatRequest(msg []byte, opt chat.Options) ([]byte, error) {
	var in messagesRequestIn
	if err := json.Unmarshal(msg, &in); err != nil {
		return nil, notValid("Anthropic Messages", err)
	}
	var out []json.RawMessage
	sys, err := contentParts(in.System, "system")
	if err != nil {
		return nil, err
	}
	if text, ok, err := onlyText(sys, "system"); err != nil {
		return nil, err
	} else if ok && text != "" {
		out = append(out, marshal(chatText{Role: "system", Content: text}))
	}
	for i, m := range in.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "user", "assistant", "system":
		default:
			return nil, invalid(param+".role", "role %q is not known (user, assistant, system)", m.Role)
		}
		if isNullOrAbsent(m.Content) {
			return nil, invalid(param+".content", "a message needs content: a string or an array of content blocks")
		}
		parts, err := contentParts(m.Content, param+".content")
		if err != nil {
			return nil, err
		}
		if m.Role != "system" && emptyContent(parts) && (m.Role != "assistant" || i < len(in.Messages)-1) {
			// Only the final assistant turn may be empty; any other would
			// vanish in translation, and Messages refuses it anyway.
			return nil, invalid(param+".content", "a %s turn with no content: only the final assistant turn may be empty", m.Role)
		}
		var msgs []json.RawMessage
		switch m.Role {
		case "user":
			msgs, err = userToChat(parts, param+".content")
		case "assistant":
			msgs, err = assistantToChat(parts, param+".content")
		case "system":
			var text string
			text, _, err = onlyText(parts, param+".content")
			if text != "" {
				msgs = []json.RawMessage{marshal(chatText{Role: "system", Content: text})}
			}
		}
		if err != nil {
			return nil, err
		}
		out = append(out, msgs...)
	}

	req := chatRequestOut{Model: in.Model, Messages: out, Temperature: in.Temperature, TopP: in.TopP, Stop: in.StopSequences}
	if req.Messages == nil {
		req.Messages = []json.RawMessage{}
	}
	if in.MaxTokens != nil {
		if opt.MaxTokensField == "max_completion_tokens" {
			req.MaxCompletionTokens = in.MaxTokens
		} else {
			req.MaxTokens = in.MaxTokens
		}
	}
	if in.Metadata != nil && in.Metadata.UserID != "" {
		req.User = in.Metadata.UserID
	}
	if in.Stream {
		req.Stream = true
		req.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if in.OutputConfig != nil && in.OutputConfig.Effort != "" && !knownEffort(in.OutputConfig.Effort) {
		return nil, invalid("output_config.effort", "effort %q is not known (low, medium, high, max)", in.OutputConfig.Effort)
	}
	if in.Thinking != nil {
		switch in.Thinking.Type {
		case "enabled":
			budget, err := thinkingBudget(in.Thinking.BudgetTokens)
			if err != nil {
				return nil, err
			}
			req.ReasoningEffort = EffortForBudget(budget)
		case "adaptive":
			if in.OutputConfig != nil && in.OutputConfig.Effort != "" {
				req.ReasoningEffort = in.OutputConfig.Effort
				if req.ReasoningEffort == "max" {
					req.ReasoningEffort = "high"
				}
			}
		case "disabled":
		default:
			return nil, invalid("thinking.type", "thinking type %q is not known (enabled, adaptive, disabled)", in.Thinking.Type)
		}
	}
	if err := in.toolsToChat(&req); err != nil {
		return nil, err
	}
	return marshal(req), nil
}

// messagesRequestIn is the part of a Messages request ToChatRequest reads.
type messagesRequestIn struct {
	Model         json.RawMessage `json:"model"`
	MaxTokens     *int            `json:"max_tokens"`
	System        json.RawMessage `json:"system"`
	Messages      []messageIn     `json:"messages"`
	Metadata      *metadata       `json:"metadata"`
	StopSequences []string        `json:"stop_sequences"`
	Stream        bool            `json:"stream"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	Thinking      *struct {
		Type         string          `json:"type"`
		BudgetTokens json.RawMessage `json:"budget_tokens"`
	} `json:"thinking"`
	OutputConfig *struct {
		Effort string `json:"effort"`
	} `json:"output_config"`
	Tools      []toolIn        `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
}

type messageIn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type toolIn struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// chatRequestOut is the Chat Completions request ToChatRequest writes.
type chatRequestOut struct {
	Model               json.RawMessage   `json:"model,omitempty"`
	Messages            []json.RawMessage `json:"messages"`
	MaxTokens           *int              `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int              `json:"max_completion_tokens,omitempty"`
	Stop                []string          `json:"stop,omitempty"`
	Temperature         *float64          `json:"temperature,omitempty"`
	TopP                *float64          `json:"top_p,omitempty"`
	User                string            `json:"user,omitempty"`
	ReasoningEffort     string            `json:"reasoning_effort,omitempty"`
	Tools               []chat.Tool       `json:"tools,omitempty"`
	ToolChoice          json.RawMessage   `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool             `json:"parallel_tool_calls,omitempty"`
	Stream              bool              `json:"stream,omitempty"`
	StreamOptions       *streamOptions    `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatText struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatParts struct {
	Role    string     `json:"role"`
	Content []chatPart `json:"content"`
}

type chatPart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url,omitempty"`
}

type chatToolMessage struct {
	Role       string `json:"role"`
	ToolCallID string `json:"tool_call_id"`
	Content    string `json:"content"`
}

type chatAssistant struct {
	Role      string          `json:"role"`
	Content   *string         `json:"content"`
	ToolCalls []chat.ToolCall `json:"tool_calls,omitempty"`
}

// thinkingBudget reads budget_tokens: an integer, at least Anthropic's
// least (BudgetMinimal). Anything else was once read as "minimal".
func thinkingBudget(raw json.RawMessage) (int, error) {
	const param = "thinking.budget_tokens"
	if isNullOrAbsent(raw) {
		return 0, invalid(param, "thinking of type enabled needs budget_tokens, an integer of at least %d", BudgetMinimal)
	}
	var n int
	if err := json.Unmarshal(raw, &n); err != nil || n < BudgetMinimal {
		return 0, invalid(param, "budget_tokens must be an integer of at least %d, not %s", BudgetMinimal, chat.Excerpt(raw))
	}
	return n, nil
}

// onlyText joins text parts with a blank line; ok is false (with an error)
// when a part is not text.
func onlyText(parts []part, param string) (string, bool, error) {
	texts := make([]string, 0, len(parts))
	for i, p := range parts {
		if p.Type != "text" {
			return "", false, reqErr(fmt.Sprintf("%s[%d].type", param, i), "only text is translated here, not %q", p.Type)
		}
		if p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n\n"), true, nil
}

// userToChat translates a user turn: its tool results become tool
// messages (first: they answer the previous assistant turn), the rest one
// user message.
func userToChat(parts []part, param string) ([]json.RawMessage, error) {
	var msgs []json.RawMessage
	var rest []chatPart
	allText := true
	for i, p := range parts {
		pp := fmt.Sprintf("%s[%d]", param, i)
		switch p.Type {
		case "text":
			if p.Text != "" {
				rest = append(rest, chatPart{Type: "text", Text: p.Text})
			}
		case "image":
			u, err := imageURL(p.Source, pp+".source")
			if err != nil {
				return nil, err
			}
			cp := chatPart{Type: "image_url"}
			cp.ImageURL = &struct {
				URL string `json:"url"`
			}{u}
			rest = append(rest, cp)
			allText = false
		case "tool_result":
			content, err := toolResultText(p, pp+".content")
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, marshal(chatToolMessage{Role: "tool", ToolCallID: p.ToolUseID, Content: content}))
		default:
			return nil, reqErr(pp+".type", "content blocks of type %q are not translated to Chat Completions (text, image and tool_result are)", p.Type)
		}
	}
	switch {
	case len(rest) == 0:
	case allText:
		texts := make([]string, len(rest))
		for i, p := range rest {
			texts[i] = p.Text
		}
		msgs = append(msgs, marshal(chatText{Role: "user", Content: strings.Join(texts, "\n\n")}))
	default:
		msgs = append(msgs, marshal(chatParts{Role: "user", Content: rest}))
	}
	return msgs, nil
}

// imageURL is the image_url of a Messages image source.
func imageURL(src *imageSource, param string) (string, error) {
	switch {
	case src == nil:
		return "", invalid(param, "an image block needs a source")
	case src.Type == "base64" && src.MediaType == "":
		return "", invalid(param+".media_type", "a base64 image source needs its media_type")
	case src.Type == "base64":
		return "data:" + src.MediaType + ";base64," + src.Data, nil
	case src.Type == "url" && src.URL == "":
		return "", invalid(param+".url", "a url image source needs its url")
	case src.Type == "url":
		return src.URL, nil
	}
	return "", reqErr(param+".type", "image sources of type %q are not translated to Chat Completions (base64 and url are)", src.Type)
}

// toolResultText is a tool_result's content as one string.
func toolResultText(p part, param string) (string, error) {
	parts, err := contentParts(p.Content, param)
	if err != nil {
		return "", err
	}
	text, _, err := onlyText(parts, param)
	if err != nil {
		return "", reqErr(err.(*chat.RequestError).Param, "a tool result carries only text to Chat Completions")
	}
	if p.IsError {
		text = "Error: " + text
	}
	return text, nil
}

// assistantToChat translates an assistant turn into one assistant
// message.
func assistantToChat(parts []part, param string) ([]json.RawMessage, error) {
	var texts []string
	var calls []chat.ToolCall
	for i, p := range parts {
		switch p.Type {
		case "text":
			if p.Text != "" {
				texts = append(texts, p.Text)
			}
		case "tool_use":
			var c chat.ToolCall
			c.ID, c.Type = p.ID, "function"
			c.Function.Name = p.Name
			c.Function.Arguments = compactJSON(p.Input)
			calls = append(calls, c)
		case "thinking", "redacted_thinking":
		default:
			return nil, reqErr(fmt.Sprintf("%s[%d].type", param, i), "assistant blocks of type %q are not translated to Chat Completions", p.Type)
		}
	}
	if len(texts) == 0 && len(calls) == 0 {
		return nil, nil
	}
	m := chatAssistant{Role: "assistant", ToolCalls: calls}
	if len(texts) > 0 {
		s := strings.Join(texts, "\n\n")
		m.Content = &s
	}
	return []json.RawMessage{marshal(m)}, nil
}

// toolsToChat translates tools and tool_choice.
func (in *messagesRequestIn) toolsToChat(out *chatRequestOut) error {
	for i, t := range in.Tools {
		param := fmt.Sprintf("tools[%d]", i)
		if t.Type != "" && t.Type != "custom" {
			return reqErr(param+".type", "the server tool %q runs at Anthropic; a Chat Completions provider cannot run it", t.Type)
		}
		if t.Name == "" {
			return invalid(param+".name", "a tool needs a name")
		}
		if !isObject(t.InputSchema) {
			return invalid(param+".input_schema", "a tool's input_schema must be a JSON Schema object")
		}
		var ct chat.Tool
		ct.Type = "function"
		ct.Function.Name, ct.Function.Description = t.Name, t.Description
		ct.Function.Parameters = t.InputSchema
		out.Tools = append(out.Tools, ct)
	}
	// tool_choice is checked even without tools: a client's mistake is
	// not dropped unseen.
	raw := trimJSON(in.ToolChoice)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var c struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
	}
	if raw[0] != '{' || json.Unmarshal(raw, &c) != nil {
		return invalid("tool_choice", "want an object with a type (auto, any, tool, none)")
	}
	var choice json.RawMessage
	switch c.Type {
	case "auto":
		choice = json.RawMessage(`"auto"`)
	case "any":
		choice = json.RawMessage(`"required"`)
	case "none":
		choice = json.RawMessage(`"none"`)
	case "tool":
		if c.Name == "" {
			return invalid("tool_choice.name", "a tool_choice of type tool names the tool to use")
		}
		choice = marshal(map[string]any{"type": "function", "function": map[string]string{"name": c.Name}})
	default:
		return invalid("tool_choice.type", "tool_choice %q is not known (auto, any, tool, none)", c.Type)
	}
	if len(in.Tools) == 0 {
		return nil // nothing to choose from: Chat providers refuse a tool_choice without tools
	}
	out.ToolChoice = choice
	if c.DisableParallelToolUse {
		f := false
		out.ParallelToolCalls = &f
	}
	return nil
}
