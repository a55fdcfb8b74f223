package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// FromChatRequest translates a Chat Completions request into a Messages
// request, for a Chat client whose chain reaches an Anthropic upstream.
//
//	Chat Completions                      Messages
//	model                                 model
//	messages[role=system|developer]       system (hoisted, in order; a string
//	                                      when there is one text, else text blocks)
//	messages[role=user] text, image_url   user: text, image (data: URLs as
//	                                      base64 sources, http(s) URLs as url sources)
//	messages[role=assistant] content      assistant: text blocks
//	  tool_calls[]                        tool_use blocks (input = the parsed arguments)
//	messages[role=tool]                   user: tool_result blocks (tool_use_id,
//	                                      content); consecutive same-role messages
//	                                      are merged into one
//	tools[type=function]                  tools (name, description,
//	                                      input_schema = parameters)
//	tool_choice auto|required|none        tool_choice auto|any|none
//	tool_choice {function: {name}}        tool_choice {type: tool, name}
//	parallel_tool_calls: false            tool_choice.disable_parallel_tool_use
//	max_completion_tokens, max_tokens     max_tokens (DefaultMaxTokens when absent:
//	                                      Messages requires it)
//	stop                                  stop_sequences
//	temperature (0..2)                    temperature (clamped to 1)
//	top_p                                 top_p
//	user                                  metadata.user_id
//	stream                                stream
//	reasoning_effort, reasoning.effort    thinking {type: enabled, budget_tokens}
//	                                      (BudgetForEffort; none: no thinking);
//	                                      max_tokens raised above the budget, and
//	                                      temperature and top_p dropped (Messages
//	                                      rejects them with thinking); no thinking
//	                                      when tool_choice forces a tool or the last
//	                                      assistant turn called tools (Messages
//	                                      refuses both without signed thinking)
//
// Refused as Invalid (a *chat.RequestError with Invalid set: not a valid Chat
// request, whatever the target): an unknown role, tool_calls on another
// message than an assistant one, a message whose content is null or absent (an assistant message may have tool_calls instead), a
// function tool without a name or with parameters that are not an object,
// a tool_choice of an unknown value or a function one without a name, an
// unknown reasoning_effort or reasoning.effort, stop of another type than
// a string or strings, a member of the wrong type.
//
// Refused (a *chat.RequestError: the answer would not be what was asked): n > 1,
// logprobs, top_logprobs, response_format json_object or json_schema,
// audio output, prediction, input_audio and file parts, role function,
// tool types other than function, tool_choice allowed_tools or custom,
// arguments that are not a JSON object.
//
// Dropped (they tune sampling, billing or storage, not the answer's
// shape): stream_options (the stream translator honours include_usage),
// seed, frequency_penalty, presence_penalty, logit_bias, service_tier,
// store, metadata, safety_identifier, prompt_cache_key, verbosity,
// web_search_options, and any member this table does not name.
func FromChatRequest(body []byte, _ chat.Options) ([]byte, error) {
	var in chatRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, notValid("Chat Completions", err)
	}
	if err := in.refuse(); err != nil {
		return nil, err
	}
	out := messagesRequest{Model: in.Model, Stream: in.Stream, Temperature: in.Temperature, TopP: in.TopP}
	if out.Temperature != nil && *out.Temperature > 1 {
		one := 1.0
		out.Temperature = &one
	}

	var system []part
	for i, m := range in.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		if err := m.check(param); err != nil {
			return nil, err
		}
		switch m.Role {
		case "system", "developer":
			parts, err := textParts(m.Content, param+".content")
			if err != nil {
				return nil, err
			}
			system = append(system, parts...)
		case "user":
			blocks, err := userBlocks(m.Content, param+".content")
			if err != nil {
				return nil, err
			}
			out.add("user", blocks)
		case "assistant":
			blocks, err := assistantBlocks(m, param)
			if err != nil {
				return nil, err
			}
			out.add("assistant", blocks)
		case "tool":
			result, err := toolResult(m, param)
			if err != nil {
				return nil, err
			}
			out.add("user", []block{result})
		case "function":
			return nil, reqErr(param+".role", "role %q has no Messages equivalent; use tool messages for tool results", m.Role)
		}
	}
	switch {
	case len(system) == 1:
		out.System = marshal(system[0].Text)
	case len(system) > 1:
		blocks := make([]block, len(system))
		for i, p := range system {
			blocks[i] = block{Type: "text", Text: p.Text}
		}
		out.System = marshal(blocks)
	}
	if out.Messages == nil {
		out.Messages = []message{}
	}

	out.MaxTokens = DefaultMaxTokens
	switch {
	case in.MaxCompletionTokens != nil:
		out.MaxTokens = *in.MaxCompletionTokens
	case in.MaxTokens != nil:
		out.MaxTokens = *in.MaxTokens
	}
	stops, err := stopSequences(in.Stop)
	if err != nil {
		return nil, err
	}
	out.StopSequences = stops
	if in.User != "" {
		out.Metadata = &metadata{UserID: in.User}
	}
	if err := in.tools(&out); err != nil {
		return nil, err
	}
	effort := in.ReasoningEffort
	if effort != "" && !knownEffort(effort) {
		return nil, invalid("reasoning_effort", "reasoning_effort %q is not known (none, minimal, low, medium, high, xhigh)", effort)
	}
	if effort == "" && in.Reasoning != nil {
		effort = in.Reasoning.Effort
		if effort != "" && !knownEffort(effort) {
			return nil, invalid("reasoning.effort", "reasoning.effort %q is not known (none, minimal, low, medium, high, xhigh)", effort)
		}
	}
	if budget, ok := BudgetForEffort(effort); ok && !out.forcesTool() && !out.midToolLoop() {
		out.Thinking = &thinking{Type: "enabled", BudgetTokens: budget}
		if out.MaxTokens <= budget {
			out.MaxTokens = budget + DefaultMaxTokens
		}
		out.Temperature, out.TopP = nil, nil
	}
	return marshal(out), nil
}

// forcesTool reports a tool_choice that forces a tool, which Messages
// refuses together with thinking.
func (r *messagesRequest) forcesTool() bool {
	return r.ToolChoice != nil && (r.ToolChoice.Type == "any" || r.ToolChoice.Type == "tool")
}

// midToolLoop reports that the last assistant turn called tools: with
// thinking on, Messages wants that turn to start with its signed thinking
// block, which a Chat client never had to send back.
func (r *messagesRequest) midToolLoop() bool {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role != "assistant" {
			continue
		}
		for _, b := range r.Messages[i].Content {
			if b.Type == "tool_use" {
				return true
			}
		}
		return false
	}
	return false
}

// chatRequest is the part of a Chat Completions request the translation
// reads.
type chatRequest struct {
	Model               json.RawMessage `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	User                string          `json:"user"`
	Stream              bool            `json:"stream"`
	Tools               []chatTool      `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	ReasoningEffort     string          `json:"reasoning_effort"`
	Reasoning           *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`

	// Refused when they ask for something Messages cannot give.
	N              *int  `json:"n"`
	Logprobs       *bool `json:"logprobs"`
	TopLogprobs    *int  `json:"top_logprobs"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	Audio      json.RawMessage `json:"audio"`
	Modalities []string        `json:"modalities"`
	Prediction json.RawMessage `json:"prediction"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []chatToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// check refuses a message that is not valid Chat: a role Chat does not
// know, tool_calls on another role than assistant, content null or absent
// (an assistant message may have tool calls instead). Each would vanish
// in translation.
func (m *chatMessage) check(param string) error {
	switch m.Role {
	case "system", "developer", "user", "assistant", "tool", "function":
	default:
		return invalid(param+".role", "role %q is not known (system, developer, user, assistant, tool)", m.Role)
	}
	if len(m.ToolCalls) > 0 && m.Role != "assistant" {
		// Found by FuzzFromChatRequestKeeps: they were dropped unseen.
		return invalid(param+".tool_calls", "only assistant messages carry tool_calls, not %s messages", m.Role)
	}
	if isNullOrAbsent(m.Content) && (m.Role != "assistant" || len(m.ToolCalls) == 0) {
		if m.Role == "assistant" {
			return invalid(param+".content", "an assistant message needs content or tool_calls")
		}
		return invalid(param+".content", "a %s message needs content", m.Role)
	}
	return nil
}

// refuse returns the chat.RequestError of the first member Messages cannot
// honour.
func (in *chatRequest) refuse() error {
	switch {
	case in.N != nil && *in.N > 1:
		return reqErr("n", "Anthropic Messages returns one choice; n must be 1")
	case in.Logprobs != nil && *in.Logprobs, in.TopLogprobs != nil:
		return reqErr("logprobs", "Anthropic Messages has no log probabilities; remove logprobs and top_logprobs")
	case in.ResponseFormat != nil && in.ResponseFormat.Type != "" && in.ResponseFormat.Type != "text":
		return reqErr("response_format", "response_format %s is not translated to Anthropic Messages; use a tool with an input schema, or a target that speaks Chat Completions", in.ResponseFormat.Type)
	case len(in.Audio) > 0 && string(in.Audio) != "null", contains(in.Modalities, "audio"):
		return reqErr("audio", "Anthropic Messages has no audio output")
	case len(in.Prediction) > 0 && string(in.Prediction) != "null":
		return reqErr("prediction", "predicted outputs are not translated to Anthropic Messages")
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// textParts reads system or developer content: text only.
func textParts(raw json.RawMessage, param string) ([]part, error) {
	parts, err := contentParts(raw, param)
	if err != nil {
		return nil, err
	}
	out := parts[:0]
	for i, p := range parts {
		if p.Type != "text" {
			return nil, reqErr(fmt.Sprintf("%s[%d].type", param, i), "a system message carries text only, not %q", p.Type)
		}
		if p.Text != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

// userBlocks translates user content: text and images.
func userBlocks(raw json.RawMessage, param string) ([]block, error) {
	parts, err := contentParts(raw, param)
	if err != nil {
		return nil, err
	}
	var blocks []block
	for i, p := range parts {
		pp := fmt.Sprintf("%s[%d]", param, i)
		switch p.Type {
		case "text":
			if p.Text != "" {
				blocks = append(blocks, block{Type: "text", Text: p.Text})
			}
		case "image_url":
			if p.ImageURL == nil {
				return nil, reqErr(pp+".image_url", "an image_url part needs an image_url object")
			}
			src, err := imageFromURL(p.ImageURL.URL, pp+".image_url.url")
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, block{Type: "image", Source: src})
		default:
			return nil, reqErr(pp+".type", "content parts of type %q are not translated to Anthropic Messages (text and image_url are)", p.Type)
		}
	}
	return blocks, nil
}

// imageFromURL turns an image_url into a Messages image source: a data:
// URL into base64 data, an http(s) URL into a url source.
func imageFromURL(u, param string) (*imageSource, error) {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		media, isBase64 := strings.CutSuffix(meta, ";base64")
		if !ok || !isBase64 || media == "" {
			return nil, reqErr(param, "a data: URL image must be base64 with a media type (data:image/png;base64,...)")
		}
		switch media {
		case "image/jpeg", "image/png", "image/gif", "image/webp":
		default:
			return nil, reqErr(param, "Anthropic Messages takes JPEG, PNG, GIF and WebP images, not %s", media)
		}
		return &imageSource{Type: "base64", MediaType: media, Data: data}, nil
	}
	if strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
		return &imageSource{Type: "url", URL: u}, nil
	}
	return nil, reqErr(param, "an image URL must be a data: URL or an http(s) URL")
}

// assistantBlocks translates an assistant turn: its text, then its tool
// calls.
func assistantBlocks(m chatMessage, param string) ([]block, error) {
	parts, err := contentParts(m.Content, param+".content")
	if err != nil {
		return nil, err
	}
	var blocks []block
	for i, p := range parts {
		switch p.Type {
		case "text":
			if p.Text != "" {
				blocks = append(blocks, block{Type: "text", Text: p.Text})
			}
		case "refusal":
		default:
			return nil, reqErr(fmt.Sprintf("%s.content[%d].type", param, i), "assistant content of type %q is not translated to Anthropic Messages", p.Type)
		}
	}
	for i, tc := range m.ToolCalls {
		pp := fmt.Sprintf("%s.tool_calls[%d]", param, i)
		if tc.Type != "" && tc.Type != "function" {
			return nil, reqErr(pp+".type", "tool calls of type %q are not translated to Anthropic Messages", tc.Type)
		}
		args := json.RawMessage(tc.Function.Arguments)
		if strings.TrimSpace(tc.Function.Arguments) == "" {
			args = json.RawMessage("{}")
		}
		if !isObject(args) {
			return nil, reqErr(pp+".function.arguments", "the arguments must be a JSON object to become an Anthropic tool_use input")
		}
		blocks = append(blocks, block{Type: "tool_use", ID: ToolUseID(tc.ID), Name: tc.Function.Name, Input: json.RawMessage(compactJSON(args))})
	}
	return blocks, nil
}

// toolResult translates a tool message into a tool_result block.
func toolResult(m chatMessage, param string) (block, error) {
	parts, err := textParts(m.Content, param+".content")
	if err != nil {
		return block{}, err
	}
	b := block{Type: "tool_result", ToolUseID: ToolUseID(m.ToolCallID)}
	switch {
	case len(parts) == 1:
		b.Content = marshal(parts[0].Text)
	case len(parts) > 1:
		texts := make([]block, len(parts))
		for i, p := range parts {
			texts[i] = block{Type: "text", Text: p.Text}
		}
		b.Content = marshal(texts)
	}
	return b, nil
}

// stopSequences reads stop: a string, an array of strings, or null.
func stopSequences(raw json.RawMessage) ([]string, error) {
	raw = trimJSON(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, invalid("stop", "%v", err)
		}
		return []string{s}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalid("stop", "want a string or an array of strings")
	}
	return list, nil
}

// tools translates tools, tool_choice and parallel_tool_calls.
func (in *chatRequest) tools(out *messagesRequest) error {
	for i, t := range in.Tools {
		param := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return reqErr(param+".type", "tools of type %q are not translated to Anthropic Messages (function tools are)", t.Type)
		}
		if t.Function.Name == "" {
			return invalid(param+".function.name", "a function tool needs a name")
		}
		// No parameters is a function without any (Chat's own rule); a
		// schema of another kind than an object is the client's mistake.
		schema := t.Function.Parameters
		if isNullOrAbsent(schema) {
			schema = json.RawMessage(`{"type":"object"}`)
		} else if !isObject(schema) {
			return invalid(param+".function.parameters", "a function's parameters must be a JSON Schema object")
		}
		out.Tools = append(out.Tools, tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema})
	}
	// tool_choice is checked even without tools: a client's mistake is
	// not dropped unseen.
	var choice *toolChoice
	raw := trimJSON(in.ToolChoice)
	switch {
	case len(raw) == 0 || string(raw) == "null":
	case raw[0] == '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		switch s {
		case "auto":
			choice = &toolChoice{Type: "auto"}
		case "required":
			choice = &toolChoice{Type: "any"}
		case "none":
			choice = &toolChoice{Type: "none"}
		default:
			return invalid("tool_choice", "tool_choice %q is not known (auto, required, none)", s)
		}
	default:
		var c struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if raw[0] != '{' || json.Unmarshal(raw, &c) != nil {
			return invalid("tool_choice", "want auto, required, none or {\"type\":\"function\",\"function\":{\"name\":...}}")
		}
		switch c.Type {
		case "function":
			if c.Function.Name == "" {
				return invalid("tool_choice.function.name", "a tool_choice of type function names the function to call")
			}
			choice = &toolChoice{Type: "tool", Name: c.Function.Name}
		case "allowed_tools", "custom":
			return reqErr("tool_choice.type", "tool_choice %q is not translated to Anthropic Messages (auto, required, none and a named function are)", c.Type)
		default:
			return invalid("tool_choice.type", "tool_choice %q is not known (function, allowed_tools, custom)", c.Type)
		}
	}
	if len(in.Tools) == 0 {
		return nil // a tool_choice without tools means nothing
	}
	if in.ParallelToolCalls != nil && !*in.ParallelToolCalls {
		if choice == nil {
			choice = &toolChoice{Type: "auto"}
		}
		if choice.Type != "none" {
			t := true
			choice.DisableParallelToolUse = &t
		}
	}
	out.ToolChoice = choice
	return nil
}

// messagesRequest is the Messages request the translation writes, in the
// order Anthropic documents its members.
type messagesRequest struct {
	Model         json.RawMessage `json:"model,omitempty"`
	MaxTokens     int             `json:"max_tokens"`
	System        json.RawMessage `json:"system,omitempty"`
	Messages      []message       `json:"messages"`
	Metadata      *metadata       `json:"metadata,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	Thinking      *thinking       `json:"thinking,omitempty"`
	Tools         []tool          `json:"tools,omitempty"`
	ToolChoice    *toolChoice     `json:"tool_choice,omitempty"`
}

// add appends blocks as a message of role, merged into the last message
// when it has the same role: Messages wants the results of one turn's
// tool calls in one user message.
func (r *messagesRequest) add(role string, blocks []block) {
	if len(blocks) == 0 {
		return
	}
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role {
		r.Messages[n-1].Content = append(r.Messages[n-1].Content, blocks...)
		return
	}
	r.Messages = append(r.Messages, message{Role: role, Content: blocks})
}

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is any Messages content block; the members of other types are
// empty and omitted.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Source    *imageSource    `json:"source,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
}

type metadata struct {
	UserID string `json:"user_id"`
}

type thinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens,omitempty"`
}

type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type toolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse *bool  `json:"disable_parallel_tool_use,omitempty"`
}
