package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// FromChatRequest translates a Chat Completions request into a Gemini
// generateContent request body, for a client whose chain reaches a Gemini
// upstream. The body has no model and no stream flag: the caller puts
// both in the path (Path(model, StreamMethod) when the Chat request says
// stream), reading them from the Chat request (ChatModel).
//
//	Chat Completions                      Gemini
//	messages[role=system|developer]       systemInstruction (text parts, in order)
//	messages[role=user] text, image_url   contents[role=user]: text, inlineData
//	  (data: URLs)                        (mimeType, base64 data)
//	messages[role=assistant] content      contents[role=model]: text
//	  tool_calls[]                        functionCall parts (name, args = the parsed
//	                                      arguments; the thoughtSignature the id
//	                                      carries goes back on its part)
//	messages[role=tool]                   contents[role=user]: functionResponse
//	                                      (name: the call's; response: the content
//	                                      when a JSON object, else {"output": text});
//	                                      consecutive same-role turns are merged
//	tools[type=function]                  tools[0].functionDeclarations (name,
//	                                      description, parametersJsonSchema)
//	tool_choice auto|none|required        toolConfig.functionCallingConfig.mode
//	                                      AUTO|NONE|ANY
//	tool_choice {function: {name}}        mode ANY, allowedFunctionNames [name]
//	tool_choice allowed_tools (required)  mode ANY, allowedFunctionNames
//	max_completion_tokens, max_tokens     generationConfig.maxOutputTokens
//	stop                                  generationConfig.stopSequences
//	temperature, top_p, seed              temperature, topP, seed
//	presence_penalty, frequency_penalty   presencePenalty, frequencyPenalty
//	response_format json_object           responseMimeType application/json
//	response_format json_schema           responseMimeType application/json,
//	                                      responseJsonSchema = the schema
//	reasoning_effort, reasoning.effort    thinkingConfig {thinkingBudget
//	                                      (BudgetForEffort; none: 0),
//	                                      includeThoughts: true but for none}
//
// Refused as Invalid (not a valid Chat request): an unknown role,
// tool_calls on a message other than an assistant one, a message with no
// content (an assistant one may have tool_calls instead), a tool message
// whose tool_call_id names no earlier call, a function tool without a
// name or whose parameters are not an object, an unknown tool_choice or
// reasoning_effort, a member of the wrong type.
//
// Refused (the answer would not be what was asked): n > 1, logprobs,
// audio output, prediction, image URLs other than data: URLs (Gemini
// fetches no URL), input_audio and file parts, tool types other than
// function, tool_choice allowed_tools in mode auto and custom, arguments
// that are not a JSON object.
//
// Dropped: parallel_tool_calls (Gemini has no switch), stream_options,
// user, logit_bias, service_tier, store, metadata, verbosity and any
// member this table does not name. Tool call ids are not sent: Gemini
// pairs a functionResponse with its call by name and order, and an id
// another provider minted means nothing to it.
func FromChatRequest(body []byte, _ chat.Options) ([]byte, error) {
	var in chatRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, notValid("Chat Completions", err)
	}
	if err := in.refuse(); err != nil {
		return nil, err
	}
	out := generateRequest{Contents: []content{}}
	var system []part
	names := map[string]string{} // tool call id → function name
	for i, m := range in.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		if err := m.check(param); err != nil {
			return nil, err
		}
		switch m.Role {
		case "system", "developer":
			parts, err := chatParts(m.Content, param+".content", false)
			if err != nil {
				return nil, err
			}
			system = append(system, parts...)
		case "user":
			parts, err := chatParts(m.Content, param+".content", true)
			if err != nil {
				return nil, err
			}
			out.add("user", parts)
		case "assistant":
			parts, err := assistantParts(m, param, names)
			if err != nil {
				return nil, err
			}
			out.add("model", parts)
		case "tool":
			p, err := functionResponsePart(m, param, names)
			if err != nil {
				return nil, err
			}
			out.add("user", []part{p})
		case "function":
			return nil, reqErr(param+".role", "role %q has no Gemini equivalent; use tool messages for tool results", m.Role)
		}
	}
	if len(system) > 0 {
		out.SystemInstruction = &content{Parts: system}
	}
	g, err := in.generationConfig()
	if err != nil {
		return nil, err
	}
	out.GenerationConfig = g
	if err := in.tools(&out); err != nil {
		return nil, err
	}
	return marshal(out), nil
}

// ChatModel reads the model and the stream flag of a Chat request, which
// a Gemini upstream takes in its path.
func ChatModel(chatBody []byte) (model string, stream bool) {
	var r struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.Unmarshal(chatBody, &r)
	return r.Model, r.Stream
}

// add appends parts as a content of role, merged into the last content
// when it has the same role: Gemini wants a turn's function responses in
// one content, and turns that alternate.
func (r *generateRequest) add(role string, parts []part) {
	if len(parts) == 0 {
		return
	}
	if n := len(r.Contents); n > 0 && r.Contents[n-1].Role == role {
		r.Contents[n-1].Parts = append(r.Contents[n-1].Parts, parts...)
		return
	}
	r.Contents = append(r.Contents, content{Role: role, Parts: parts})
}

// chatRequest is the part of a Chat Completions request the translation
// reads.
type chatRequest struct {
	Messages            []chatMessage   `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	Seed                *int64          `json:"seed"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	Tools               []chatTool      `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ReasoningEffort     string          `json:"reasoning_effort"`
	Reasoning           *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`

	// Refused when they ask for something Gemini is not asked for here.
	N           *int            `json:"n"`
	Logprobs    *bool           `json:"logprobs"`
	TopLogprobs *int            `json:"top_logprobs"`
	Audio       json.RawMessage `json:"audio"`
	Modalities  []string        `json:"modalities"`
	Prediction  json.RawMessage `json:"prediction"`
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

// chatPartIn is a Chat content part as read.
type chatPartIn struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// check refuses a message that is not valid Chat (each would vanish in
// translation).
func (m *chatMessage) check(param string) error {
	switch m.Role {
	case "system", "developer", "user", "assistant", "tool", "function":
	default:
		return invalid(param+".role", "role %q is not known (system, developer, user, assistant, tool)", m.Role)
	}
	if len(m.ToolCalls) > 0 && m.Role != "assistant" {
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

// refuse returns the chat.RequestError of the first member Gemini is not
// asked to honour.
func (in *chatRequest) refuse() error {
	switch {
	case in.N != nil && *in.N > 1:
		return reqErr("n", "the relay asks Gemini for one candidate; n must be 1")
	case in.Logprobs != nil && *in.Logprobs, in.TopLogprobs != nil:
		return reqErr("logprobs", "log probabilities are not translated to Gemini")
	case !isNullOrAbsent(in.Audio), contains(in.Modalities, "audio"):
		return reqErr("audio", "audio output is not translated to Gemini")
	case !isNullOrAbsent(in.Prediction):
		return reqErr("prediction", "predicted outputs are not translated to Gemini")
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

// readParts decodes a string-or-array content member; a string is one
// text part.
func readParts(raw json.RawMessage, param string) ([]chatPartIn, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, invalid(param, "not a valid string: %v", err)
		}
		return []chatPartIn{{Type: "text", Text: s}}, nil
	}
	var parts []chatPartIn
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, invalid(param, "want a string or an array of content parts: %v", err)
	}
	return parts, nil
}

// chatParts translates system or user content: text, and images when
// images is set.
func chatParts(raw json.RawMessage, param string, images bool) ([]part, error) {
	in, err := readParts(raw, param)
	if err != nil {
		return nil, err
	}
	var parts []part
	for i, p := range in {
		pp := fmt.Sprintf("%s[%d]", param, i)
		switch {
		case p.Type == "text":
			if p.Text != "" {
				parts = append(parts, textPart(p.Text))
			}
		case p.Type == "image_url" && images:
			if p.ImageURL == nil {
				return nil, invalid(pp+".image_url", "an image_url part needs an image_url object")
			}
			b, err := blobFromURL(p.ImageURL.URL, pp+".image_url.url")
			if err != nil {
				return nil, err
			}
			parts = append(parts, part{InlineData: b})
		default:
			return nil, reqErr(pp+".type", "content parts of type %q are not translated to Gemini here", p.Type)
		}
	}
	return parts, nil
}

func textPart(s string) part { return part{Text: &s} }

// blobFromURL turns a data: URL into inline data. Gemini fetches no URL
// of the client's.
func blobFromURL(u, param string) (*blob, error) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return nil, reqErr(param, "Gemini takes images inline: send a data: URL (data:image/png;base64,...)")
	}
	meta, data, ok := strings.Cut(rest, ",")
	media, isBase64 := strings.CutSuffix(meta, ";base64")
	if !ok || !isBase64 || media == "" {
		return nil, reqErr(param, "a data: URL image must be base64 with a media type (data:image/png;base64,...)")
	}
	return &blob{MimeType: media, Data: data}, nil
}

// assistantParts translates an assistant turn: its text, then its calls.
func assistantParts(m chatMessage, param string, names map[string]string) ([]part, error) {
	in, err := readParts(m.Content, param+".content")
	if err != nil {
		return nil, err
	}
	var parts []part
	for i, p := range in {
		switch p.Type {
		case "text":
			if p.Text != "" {
				parts = append(parts, textPart(p.Text))
			}
		case "refusal":
			if p.Refusal != "" {
				parts = append(parts, textPart(p.Refusal))
			}
		default:
			return nil, reqErr(fmt.Sprintf("%s.content[%d].type", param, i), "assistant content of type %q is not translated to Gemini", p.Type)
		}
	}
	for i, tc := range m.ToolCalls {
		pp := fmt.Sprintf("%s.tool_calls[%d]", param, i)
		if tc.Type != "" && tc.Type != "function" {
			return nil, reqErr(pp+".type", "tool calls of type %q are not translated to Gemini", tc.Type)
		}
		if tc.Function.Name == "" {
			return nil, invalid(pp+".function.name", "a tool call needs a function name")
		}
		args := []byte(tc.Function.Arguments)
		if len(bytes.TrimSpace(args)) == 0 {
			args = []byte("{}")
		}
		if !isObject(args) {
			return nil, reqErr(pp+".function.arguments", "the arguments must be a JSON object to become Gemini function call args")
		}
		_, sig := splitSignature(tc.ID)
		names[tc.ID] = tc.Function.Name
		parts = append(parts, part{ThoughtSignature: sig, FunctionCall: &functionCall{Name: tc.Function.Name, Args: json.RawMessage(compactJSON(args))}})
	}
	return parts, nil
}

// functionResponsePart translates a tool message.
func functionResponsePart(m chatMessage, param string, names map[string]string) (part, error) {
	name, ok := names[m.ToolCallID]
	if !ok {
		return part{}, invalid(param+".tool_call_id", "no earlier assistant message has a tool call with id %q", m.ToolCallID)
	}
	in, err := readParts(m.Content, param+".content")
	if err != nil {
		return part{}, err
	}
	var b strings.Builder
	for i, p := range in {
		if p.Type != "text" {
			return part{}, reqErr(fmt.Sprintf("%s.content[%d].type", param, i), "a tool result carries text only to Gemini, not %q", p.Type)
		}
		b.WriteString(p.Text)
	}
	text := b.String()
	resp := json.RawMessage(compactJSON([]byte(text)))
	if !isObject([]byte(text)) {
		resp = marshal(map[string]string{"output": text})
	}
	return part{FunctionResponse: &functionResponse{Name: name, Response: resp}}, nil
}

// stopSequences reads stop: a string, an array of strings, or null.
func stopSequences(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
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

// generationConfig translates the sampling, output and reasoning
// members; nil when there is none.
func (in *chatRequest) generationConfig() (*generationConfig, error) {
	g := &generationConfig{Temperature: in.Temperature, TopP: in.TopP, Seed: in.Seed,
		PresencePenalty: in.PresencePenalty, FrequencyPenalty: in.FrequencyPenalty}
	switch {
	case in.MaxCompletionTokens != nil:
		g.MaxOutputTokens = in.MaxCompletionTokens
	case in.MaxTokens != nil:
		g.MaxOutputTokens = in.MaxTokens
	}
	stops, err := stopSequences(in.Stop)
	if err != nil {
		return nil, err
	}
	g.StopSequences = stops
	if rf := in.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", "text":
		case "json_object":
			g.ResponseMimeType = "application/json"
		case "json_schema":
			if rf.JSONSchema == nil || !isObject(rf.JSONSchema.Schema) {
				return nil, invalid("response_format.json_schema.schema", "a json_schema response format needs a schema object")
			}
			g.ResponseMimeType = "application/json"
			g.ResponseJSONSchema = json.RawMessage(compactJSON(rf.JSONSchema.Schema))
		default:
			return nil, invalid("response_format.type", "response_format %q is not known (text, json_object, json_schema)", rf.Type)
		}
	}
	effort, param := in.ReasoningEffort, "reasoning_effort"
	if effort == "" && in.Reasoning != nil {
		effort, param = in.Reasoning.Effort, "reasoning.effort"
	}
	if effort != "" {
		budget, ok := BudgetForEffort(effort)
		if !ok {
			return nil, invalid(param, "%s %q is not known (none, minimal, low, medium, high, xhigh)", param, effort)
		}
		include := budget > 0
		g.ThinkingConfig = &thinkingConfig{ThinkingBudget: &budget}
		if include {
			g.ThinkingConfig.IncludeThoughts = &include
		}
	}
	if string(marshal(g)) == "{}" {
		return nil, nil
	}
	return g, nil
}

// tools translates tools and tool_choice.
func (in *chatRequest) tools(out *generateRequest) error {
	var decls []functionDeclaration
	for i, t := range in.Tools {
		param := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return reqErr(param+".type", "tools of type %q are not translated to Gemini (function tools are)", t.Type)
		}
		if t.Function.Name == "" {
			return invalid(param+".function.name", "a function tool needs a name")
		}
		schema := t.Function.Parameters
		if isNullOrAbsent(schema) {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		} else if !isObject(schema) {
			return invalid(param+".function.parameters", "a function's parameters must be a JSON Schema object")
		}
		decls = append(decls, functionDeclaration{Name: t.Function.Name, Description: t.Function.Description,
			ParametersJSONSchema: json.RawMessage(compactJSON(schema))})
	}
	var fc *functionCallingConfig
	raw := bytes.TrimSpace(in.ToolChoice)
	switch {
	case len(raw) == 0 || string(raw) == "null":
	case raw[0] == '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		switch s {
		case "auto":
			fc = &functionCallingConfig{Mode: "AUTO"}
		case "required":
			fc = &functionCallingConfig{Mode: "ANY"}
		case "none":
			fc = &functionCallingConfig{Mode: "NONE"}
		default:
			return invalid("tool_choice", "tool_choice %q is not known (auto, required, none)", s)
		}
	default:
		var c struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
			AllowedTools struct {
				Mode  string     `json:"mode"`
				Tools []chatTool `json:"tools"`
			} `json:"allowed_tools"`
		}
		if raw[0] != '{' || json.Unmarshal(raw, &c) != nil {
			return invalid("tool_choice", "want auto, required, none or {\"type\":\"function\",\"function\":{\"name\":...}}")
		}
		switch c.Type {
		case "function":
			if c.Function.Name == "" {
				return invalid("tool_choice.function.name", "a tool_choice of type function names the function to call")
			}
			fc = &functionCallingConfig{Mode: "ANY", AllowedFunctionNames: []string{c.Function.Name}}
		case "allowed_tools":
			if c.AllowedTools.Mode != "required" {
				return reqErr("tool_choice.allowed_tools.mode", "Gemini restricts the functions only when one must be called: allowed_tools mode %q is not translated", c.AllowedTools.Mode)
			}
			fc = &functionCallingConfig{Mode: "ANY"}
			for _, t := range c.AllowedTools.Tools {
				fc.AllowedFunctionNames = append(fc.AllowedFunctionNames, t.Function.Name)
			}
		case "custom":
			return reqErr("tool_choice.type", "tool_choice %q is not translated to Gemini", c.Type)
		default:
			return invalid("tool_choice.type", "tool_choice %q is not known (function, allowed_tools, custom)", c.Type)
		}
	}
	if len(decls) == 0 {
		return nil // a tool_choice without tools means nothing
	}
	out.Tools = []toolIn{{FunctionDeclarations: decls}}
	if fc != nil {
		out.ToolConfig = &toolConfig{FunctionCallingConfig: fc}
	}
	return nil
}
