package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// ToChatRequest translates a Gemini generateContent request into a Chat
// Completions request, for a Gemini client (Gemini CLI, the @google/genai
// SDKs) whose chain reaches a Chat provider. The model is in the
// client's path, not its body: opt.Model names it ("" leaves Chat's model
// out, for the caller to set). The method is in the path too: the Chat
// request never says stream; ToChatStreamRequest makes the one of a
// :streamGenerateContent call. opt.MaxTokensField names the output
// limit.
//
//	Gemini                                  Chat Completions
//	(the model in the path: opt.Model)      model
//	systemInstruction (text parts)          a system message, first
//	contents[role=user] text, inlineData    user content (a string for one text
//	  (image/*)                             part, else parts; images as data: URLs)
//	contents[role=user] functionResponse    tool messages (tool_call_id: the
//	                                        call with the response's id, else
//	                                        the first unanswered call of that
//	                                        name without an id; content:
//	                                        response.output when that is all the
//	                                        response has, else the response's JSON),
//	                                        before the rest of that turn
//	contents[role=model] text               assistant content
//	contents[role=model] functionCall       tool_calls (id: the call's, else CallID;
//	                                        its thoughtSignature rides in the id;
//	                                        arguments = args, compact)
//	contents[role=model] thought parts      dropped (Chat has no way to send them back)
//	tools[].functionDeclarations            tools[type=function] (parameters =
//	                                        parametersJsonSchema, else parameters
//	                                        with its OpenAPI type names lowercased)
//	toolConfig.functionCallingConfig        tool_choice: AUTO auto, NONE none,
//	  .mode, .allowedFunctionNames          ANY required (one allowed name: that
//	                                        function; several: allowed_tools),
//	                                        VALIDATED auto
//	generationConfig.maxOutputTokens        max_tokens (max_completion_tokens for OpenAI)
//	  .stopSequences                        stop
//	  .temperature, .topP, .seed            temperature, top_p, seed
//	  .presencePenalty, .frequencyPenalty   presence_penalty, frequency_penalty
//	  .responseMimeType application/json    response_format json_schema (schema =
//	  + responseJsonSchema|responseSchema   responseJsonSchema, else responseSchema
//	                                        lowercased), json_object without one
//	  .thinkingConfig.thinkingBudget        reasoning_effort (EffortForBudget: 0 none,
//	                                        -1 none set)
//	  .thinkingConfig.thinkingLevel         reasoning_effort (EffortForLevel)
//
// Refused as Invalid (not a valid Gemini request): a role other than
// user, model and function, a function declaration without a name, a
// functionCall without a name, an unknown functionCallingConfig mode or
// thinkingLevel, a member of the wrong type.
//
// Refused (valid, but Chat cannot express it): candidateCount above 1,
// response logprobs, response modalities other than text, cachedContent
// (Google's cache of a prompt), the tools Google runs itself
// (googleSearch, codeExecution, urlContext, …), fileData (a file stored
// at Google), inlineData that is not an image, executableCode and
// codeExecutionResult parts, a functionResponse with parts.
//
// Dropped: topK (Chat has no top-k), safetySettings (they tune Google's
// own filters), thinkingConfig.includeThoughts (a Chat provider sends its
// reasoning or does not), thought signatures on other parts than calls,
// and any member this table does not name.
func ToChatRequest(body []byte, opt chat.Options) ([]byte, error) {
	return toChatRequest(body, opt, false)
}

// toChatRequest is ToChatRequest, and ToChatStreamRequest with stream.
func toChatRequest(body []byte, opt chat.Options, stream bool) ([]byte, error) {
	var in generateRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, notValid("Gemini", err)
	}
	out := chatRequestOut{Messages: []json.RawMessage{}}
	if opt.Model != "" {
		out.Model = marshal(opt.Model)
	}
	if in.CachedContent != "" {
		return nil, reqErr("cachedContent", "cached content is stored at Google; a Chat Completions provider cannot read it")
	}
	if in.SystemInstruction != nil {
		texts, err := systemTexts(in.SystemInstruction.Parts, "systemInstruction.parts")
		if err != nil {
			return nil, err
		}
		if texts != nil {
			out.Messages = append(out.Messages, marshal(chatMessageOut{Role: "system", Content: texts}))
		}
	}
	var pend pending
	for i, c := range in.Contents {
		param := "contents[" + strconv.Itoa(i) + "]"
		var msgs []json.RawMessage
		var err error
		switch c.Role {
		case "user", "function", "":
			msgs, err = userToChat(c.Parts, i, param+".parts", &pend)
		case "model":
			msgs, err = modelToChat(c.Parts, i, param+".parts", &pend)
		default:
			return nil, invalid(param+".role", "role %q is not known (user, model)", c.Role)
		}
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, msgs...)
	}
	if err := in.configToChat(&out, opt); err != nil {
		return nil, err
	}
	if err := in.toolsToChat(&out); err != nil {
		return nil, err
	}
	if stream {
		out.Stream, out.StreamOptions = true, streamWithUsage
	}
	return marshal(out), nil
}

// ToChatStreamRequest is ToChatRequest for a :streamGenerateContent call:
// the Chat request asks for a stream with its usage ("stream":true,
// "stream_options":{"include_usage":true}), made in the same pass.
func ToChatStreamRequest(body []byte, opt chat.Options) ([]byte, error) {
	return toChatRequest(body, opt, true)
}

// streamWithUsage is the stream_options of ToChatStreamRequest's request.
var streamWithUsage = json.RawMessage(`{"include_usage":true}`)

// chatRequestOut is the Chat Completions request ToChatRequest writes.
type chatRequestOut struct {
	Model               json.RawMessage   `json:"model,omitempty"`
	Messages            []json.RawMessage `json:"messages"`
	MaxTokens           *int              `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int              `json:"max_completion_tokens,omitempty"`
	Stop                []string          `json:"stop,omitempty"`
	Temperature         *float64          `json:"temperature,omitempty"`
	TopP                *float64          `json:"top_p,omitempty"`
	Seed                *int64            `json:"seed,omitempty"`
	PresencePenalty     *float64          `json:"presence_penalty,omitempty"`
	FrequencyPenalty    *float64          `json:"frequency_penalty,omitempty"`
	ResponseFormat      json.RawMessage   `json:"response_format,omitempty"`
	ReasoningEffort     string            `json:"reasoning_effort,omitempty"`
	Tools               []chat.Tool       `json:"tools,omitempty"`
	ToolChoice          json.RawMessage   `json:"tool_choice,omitempty"`
	Stream              bool              `json:"stream,omitempty"`
	StreamOptions       json.RawMessage   `json:"stream_options,omitempty"`
}

// chatMessageOut is any Chat message ToChatRequest writes.
type chatMessageOut struct {
	Role       string          `json:"role"`
	Content    any             `json:"content"` // string, []chatPart or nil (null)
	ToolCalls  []chat.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type chatPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

// pending pairs function responses with their calls: the calls of the
// model turns so far that no response answered yet, in order.
type pending struct {
	calls []pendingCall
}

type pendingCall struct {
	id, base, name string // the Chat id, the Gemini id it has ("" for none), the name
}

// answer finds the Chat id of the call a functionResponse answers: the
// unanswered call with its id, else the first unanswered call of its
// name that had no id of its own. The second is how Gemini CLI answers a
// call Gemini sent without an id: with an id it made up itself
// ("read_file-1712…"), which the history's call does not have. ok is
// false when no call matches.
func (p *pending) answer(id, name string) (string, bool) {
	at := -1
	for i, c := range p.calls {
		if id != "" && (c.base == id || c.id == id) {
			at = i
			break
		}
	}
	for i, c := range p.calls {
		if at < 0 && c.base == "" && c.name == name {
			at = i
		}
	}
	if at < 0 {
		return "", false
	}
	c := p.calls[at]
	p.calls = append(p.calls[:at], p.calls[at+1:]...)
	return c.id, true
}

// systemTexts is systemInstruction's content: a string for one text
// part, text parts for several, nil for none.
func systemTexts(parts []part, param string) (any, error) {
	var texts []chatPart
	for i, p := range parts {
		if p.Text == nil || p.InlineData != nil || p.FileData != nil || p.FunctionCall != nil || p.FunctionResponse != nil {
			return nil, reqErr(fmt.Sprintf("%s[%d]", param, i), "a system instruction carries text only to Chat Completions")
		}
		if *p.Text != "" {
			texts = append(texts, chatPart{Type: "text", Text: *p.Text})
		}
	}
	switch len(texts) {
	case 0:
		return nil, nil
	case 1:
		return texts[0].Text, nil
	}
	return texts, nil
}

// userToChat translates a user turn: its function responses become tool
// messages (first: they answer the previous model turn), the rest one
// user message.
func userToChat(parts []part, ci int, param string, pend *pending) ([]json.RawMessage, error) {
	var msgs []json.RawMessage
	var rest []chatPart
	allText := true
	for i, p := range parts {
		// The part's path, for an error only: made when one is.
		pp := func() string { return param + "[" + strconv.Itoa(i) + "]" }
		if err := refusePart(p, pp); err != nil {
			return nil, err
		}
		switch {
		case p.FunctionResponse != nil:
			fr := p.FunctionResponse
			if !isNullOrAbsent(fr.Parts) && string(bytes.TrimSpace(fr.Parts)) != "[]" {
				return nil, reqErr(pp()+".functionResponse.parts", "a function response with parts (images, files) is not translated to Chat Completions")
			}
			id, ok := pend.answer(fr.ID, fr.Name)
			if !ok {
				// A response to no call the history shows: its own id,
				// else one minted here; the provider judges it.
				id = fr.ID
				if id == "" {
					id = CallID(ci, i)
				}
			}
			msgs = append(msgs, marshal(chatMessageOut{Role: "tool", ToolCallID: id, Content: responseText(fr.Response)}))
		case p.InlineData != nil:
			if !strings.HasPrefix(p.InlineData.MimeType, "image/") {
				return nil, reqErr(pp()+".inlineData.mimeType", "inline data of type %q is not translated to Chat Completions (images are)", p.InlineData.MimeType)
			}
			rest = append(rest, chatPart{Type: "image_url", ImageURL: &imageURL{URL: "data:" + p.InlineData.MimeType + ";base64," + p.InlineData.Data}})
			allText = false
		case p.FunctionCall != nil:
			return nil, invalid(pp()+".functionCall", "a user turn cannot call functions; function calls belong to model turns")
		case p.Thought:
		case p.Text != nil:
			if *p.Text != "" {
				rest = append(rest, chatPart{Type: "text", Text: *p.Text})
			}
		}
	}
	switch {
	case len(rest) == 0:
	case allText && len(rest) == 1:
		msgs = append(msgs, marshal(chatMessageOut{Role: "user", Content: rest[0].Text}))
	default:
		msgs = append(msgs, marshal(chatMessageOut{Role: "user", Content: rest}))
	}
	return msgs, nil
}

// refusePart refuses the parts no Chat message can carry.
func refusePart(p part, param func() string) error {
	switch {
	case p.FileData != nil:
		return reqErr(param()+".fileData", "a file stored at Google (fileData) is not translated to Chat Completions; send it inline")
	case !isNullOrAbsent(p.ExecutableCode), !isNullOrAbsent(p.CodeExecutionResult):
		return reqErr(param(), "code execution runs at Google; a Chat Completions provider cannot carry it")
	}
	return nil
}

// responseText is a function response as a tool message's content: the
// output when the response is {"output": "text"} alone (what Gemini CLI
// sends), else the response's JSON.
func responseText(resp json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(resp, &m) == nil && len(m) == 1 {
		var s string
		if json.Unmarshal(m["output"], &s) == nil {
			return s
		}
	}
	if isNullOrAbsent(resp) {
		return "{}"
	}
	return compactJSON(resp)
}

// modelToChat translates a model turn into one assistant message.
func modelToChat(parts []part, ci int, param string, pend *pending) ([]json.RawMessage, error) {
	var texts []string
	var calls []chat.ToolCall
	for i, p := range parts {
		// The part's path, for an error only: made when one is.
		pp := func() string { return param + "[" + strconv.Itoa(i) + "]" }
		if err := refusePart(p, pp); err != nil {
			return nil, err
		}
		switch {
		case p.FunctionCall != nil:
			fc := p.FunctionCall
			if fc.Name == "" {
				return nil, invalid(pp()+".functionCall.name", "a function call needs a name")
			}
			if !isNullOrAbsent(fc.Args) && !isObject(fc.Args) {
				return nil, invalid(pp()+".functionCall.args", "a function call's args must be an object")
			}
			base := fc.ID
			if base == "" {
				base = CallID(ci, i)
			}
			id := withSignature(base, p.ThoughtSignature)
			pend.calls = append(pend.calls, pendingCall{id: id, base: fc.ID, name: fc.Name})
			calls = append(calls, chat.ToolCall{ID: id, Type: "function", Function: chat.FunctionCall{Name: fc.Name, Arguments: compactJSON(fc.Args)}})
		case p.FunctionResponse != nil:
			return nil, invalid(pp()+".functionResponse", "a model turn cannot answer a function call; function responses belong to user turns")
		case p.InlineData != nil:
			return nil, reqErr(pp()+".inlineData", "a model turn's inline data is not translated to Chat Completions")
		case p.Thought:
			// Reasoning: a Chat provider takes none back.
		case p.Text != nil:
			if *p.Text != "" {
				texts = append(texts, *p.Text)
			}
		}
	}
	if len(texts) == 0 && len(calls) == 0 {
		return nil, nil
	}
	m := chatMessageOut{Role: "assistant", ToolCalls: calls}
	if len(texts) > 0 {
		m.Content = strings.Join(texts, "")
	}
	return []json.RawMessage{marshal(m)}, nil
}

// configToChat translates generationConfig.
func (in *generateRequest) configToChat(out *chatRequestOut, opt chat.Options) error {
	g := in.GenerationConfig
	if g == nil {
		return nil
	}
	const p = "generationConfig."
	switch {
	case g.CandidateCount != nil && *g.CandidateCount > 1:
		return reqErr(p+"candidateCount", "the relay asks for one candidate; candidateCount must be 1")
	case g.ResponseLogprobs != nil && *g.ResponseLogprobs, g.Logprobs != nil:
		return reqErr(p+"responseLogprobs", "log probabilities are not translated to Chat Completions")
	}
	for _, m := range g.ResponseModalities {
		if !strings.EqualFold(m, "TEXT") {
			return reqErr(p+"responseModalities", "response modality %q is not translated to Chat Completions (TEXT is)", m)
		}
	}
	if g.MaxOutputTokens != nil {
		if opt.MaxTokensField == "max_completion_tokens" {
			out.MaxCompletionTokens = g.MaxOutputTokens
		} else {
			out.MaxTokens = g.MaxOutputTokens
		}
	}
	out.Stop, out.Temperature, out.TopP, out.Seed = g.StopSequences, g.Temperature, g.TopP, g.Seed
	out.PresencePenalty, out.FrequencyPenalty = g.PresencePenalty, g.FrequencyPenalty
	switch g.ResponseMimeType {
	case "", "text/plain":
	case "application/json":
		schema := g.ResponseJSONSchema
		if isNullOrAbsent(schema) && !isNullOrAbsent(g.ResponseSchema) {
			schema = lowerTypes(g.ResponseSchema)
		}
		if isNullOrAbsent(schema) {
			out.ResponseFormat = json.RawMessage(`{"type":"json_object"}`)
		} else {
			out.ResponseFormat = marshal(map[string]any{"type": "json_schema",
				"json_schema": map[string]any{"name": "response", "schema": json.RawMessage(compactJSON(schema))}})
		}
	default:
		return reqErr(p+"responseMimeType", "response type %q is not translated to Chat Completions (text/plain and application/json are)", g.ResponseMimeType)
	}
	if t := g.ThinkingConfig; t != nil {
		switch {
		case t.ThinkingLevel != "":
			effort, ok := EffortForLevel(t.ThinkingLevel)
			if !ok {
				return invalid(p+"thinkingConfig.thinkingLevel", "thinkingLevel %q is not known (MINIMAL, LOW, MEDIUM, HIGH)", t.ThinkingLevel)
			}
			out.ReasoningEffort = effort
		case t.ThinkingBudget != nil:
			out.ReasoningEffort = EffortForBudget(*t.ThinkingBudget)
		}
	}
	return nil
}

// lowerTypes rewrites an OpenAPI schema's type names (Gemini's Schema
// writes OBJECT, STRING, …) in JSON Schema's lowercase.
func lowerTypes(raw json.RawMessage) json.RawMessage {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if s, ok := e.(string); ok && k == "type" {
					x[k] = strings.ToLower(s)
				} else if k != "enum" && k != "example" && k != "default" {
					walk(e)
				}
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return marshal(v)
}

// toolsToChat translates tools and toolConfig.
func (in *generateRequest) toolsToChat(out *chatRequestOut) error {
	for i, t := range in.Tools {
		if len(t.Other) > 0 {
			name := slices.Sorted(maps.Keys(t.Other))[0] // the same one every time
			return reqErr(fmt.Sprintf("tools[%d].%s", i, name), "the tool %q runs at Google; a Chat Completions provider cannot run it", name)
		}
		for j, fd := range t.FunctionDeclarations {
			param := fmt.Sprintf("tools[%d].functionDeclarations[%d]", i, j)
			if fd.Name == "" {
				return invalid(param+".name", "a function declaration needs a name")
			}
			schema := fd.ParametersJSONSchema
			if isNullOrAbsent(schema) && !isNullOrAbsent(fd.Parameters) {
				schema = lowerTypes(fd.Parameters)
			}
			if isNullOrAbsent(schema) {
				schema = json.RawMessage(`{"type":"object","properties":{}}`)
			} else if !isObject(schema) {
				return invalid(param+".parameters", "a function's parameters must be a schema object")
			}
			var ct chat.Tool
			ct.Type = "function"
			ct.Function.Name, ct.Function.Description = fd.Name, fd.Description
			ct.Function.Parameters = json.RawMessage(compactJSON(schema))
			out.Tools = append(out.Tools, ct)
		}
	}
	if in.ToolConfig == nil || in.ToolConfig.FunctionCallingConfig == nil {
		return nil
	}
	fc := in.ToolConfig.FunctionCallingConfig
	var choice json.RawMessage
	switch fc.Mode {
	case "", "MODE_UNSPECIFIED", "AUTO", "VALIDATED":
		choice = json.RawMessage(`"auto"`)
	case "NONE":
		choice = json.RawMessage(`"none"`)
	case "ANY":
		switch len(fc.AllowedFunctionNames) {
		case 0:
			choice = json.RawMessage(`"required"`)
		case 1:
			choice = marshal(map[string]any{"type": "function", "function": map[string]string{"name": fc.AllowedFunctionNames[0]}})
		default:
			tools := make([]any, len(fc.AllowedFunctionNames))
			for i, n := range fc.AllowedFunctionNames {
				tools[i] = map[string]any{"type": "function", "function": map[string]string{"name": n}}
			}
			choice = marshal(map[string]any{"type": "allowed_tools", "allowed_tools": map[string]any{"mode": "required", "tools": tools}})
		}
	default:
		return invalid("toolConfig.functionCallingConfig.mode", "mode %q is not known (AUTO, ANY, NONE, VALIDATED)", fc.Mode)
	}
	if len(out.Tools) == 0 {
		return nil // nothing to choose from: Chat providers refuse a tool_choice without tools
	}
	out.ToolChoice = choice
	return nil
}
