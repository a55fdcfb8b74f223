package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// ToChatRequest translates a Responses request into a Chat Completions
// request. opt.MaxTokensField names the output limit ("max_tokens" unless
// it says "max_completion_tokens").
//
//	Responses                              Chat Completions
//	instructions                           a system message, first
//	input (string)                         one user message
//	input message items (user, assistant,  messages of that role (developer
//	  system, developer; string or parts)  kept: Chat knows it)
//	  input_text, output_text parts        text parts (a string when all text)
//	  input_image (image_url)              image_url part
//	function_call items                    one assistant message's tool_calls
//	                                       (consecutive calls together)
//	function_call_output items             tool messages
//	reasoning items                        dropped (never sent to another provider)
//	tools[type=function]                   tools[type=function] (strict kept)
//	tool_choice auto|required|none|        tool_choice, same values;
//	  {type:function,name}                 {type:function,function:{name}}
//	parallel_tool_calls                    parallel_tool_calls (both dropped
//	                                       when there are no tools)
//	max_output_tokens                      max_tokens or max_completion_tokens
//	reasoning.effort                       reasoning_effort
//	text.format json_schema                response_format json_schema
//	text.format json_object                response_format json_object
//	temperature, top_p                     temperature, top_p
//	safety_identifier, user                user
//	stream                                 stream, stream_options.include_usage
//
// Refused as Invalid (a *chat.RequestError with Invalid set: not a valid
// Responses request, whatever the target): a message item whose content
// is null or absent, an unknown role, a function_call without call_id or
// name, a function_call_output without call_id or with an output that is
// neither a string nor parts, a function tool without a name or with
// parameters that are not an object, a tool_choice of an unknown value or
// a function one without a name, an unknown reasoning.effort or
// text.format type, a member of the wrong type.
//
// Refused (a *chat.RequestError: valid, but Chat cannot express it):
// previous_response_id, store: true, background: true and conversation
// (they need a provider that keeps responses), a tool_choice that forces
// a tool other than a function, tool_choice required when hosted tools
// are offered (the provider can run none of them), item and part types
// not listed.
//
// Dropped: tools other than function tools (web_search, file_search,
// computer_use, code_interpreter, mcp, local_shell, namespace, custom...:
// the Chat provider can neither run nor call them, and Codex CLI offers
// some with every request) unless tool_choice is required,
// reasoning.summary, metadata, include,
// truncation, service_tier, prompt_cache_key, and any member not named
// here.
func ToChatRequest(resp []byte, opt chat.Options) ([]byte, error) {
	var in requestIn
	if err := json.Unmarshal(resp, &in); err != nil {
		return nil, notValid(err)
	}
	if err := in.refuseState(); err != nil {
		return nil, err
	}
	out := chatRequestOut{Model: in.Model, Temperature: in.Temperature, TopP: in.TopP,
		ParallelToolCalls: in.ParallelToolCalls, Messages: []json.RawMessage{}}
	if in.Instructions != "" {
		out.Messages = append(out.Messages, marshal(chatText{Role: "system", Content: in.Instructions}))
	}
	msgs, err := inputToChat(in.Input)
	if err != nil {
		return nil, err
	}
	out.Messages = append(out.Messages, msgs...)
	if in.MaxOutputTokens != nil {
		if opt.MaxTokensField == "max_completion_tokens" {
			out.MaxCompletionTokens = in.MaxOutputTokens
		} else {
			out.MaxTokens = in.MaxOutputTokens
		}
	}
	if in.Reasoning != nil && in.Reasoning.Effort != nil {
		if !knownEffort(*in.Reasoning.Effort) {
			return nil, invalid("reasoning.effort", "reasoning.effort %q is not known (none, minimal, low, medium, high, xhigh)", *in.Reasoning.Effort)
		}
		out.ReasoningEffort = *in.Reasoning.Effort
	}
	out.User = in.User
	if in.SafetyIdentifier != "" {
		out.User = in.SafetyIdentifier
	}
	if in.Stream {
		out.Stream = true
		out.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if in.Text != nil && in.Text.Format != nil {
		if out.ResponseFormat, err = formatToChat(in.Text.Format); err != nil {
			return nil, err
		}
	}
	var dropped int
	if out.Tools, dropped, err = toolsToChat(in.Tools); err != nil {
		return nil, err
	}
	if out.ToolChoice, err = toolChoiceToChat(in.ToolChoice); err != nil {
		return nil, err
	}
	if string(out.ToolChoice) == `"required"` && (dropped > 0 || len(out.Tools) == 0) && len(in.Tools) > 0 {
		// "Call one of these tools", where some are hosted tools the Chat
		// provider cannot run: dropping them would force a function
		// call the model may not have chosen, or, with no function left,
		// drop the demand itself.
		return nil, reqErr("tool_choice", "tool_choice required with hosted tools (%d of %d tools): a Chat Completions provider can run none of them, so the choice cannot be kept", dropped, len(in.Tools))
	}
	if len(out.Tools) == 0 {
		// OpenAI's Chat refuses both without tools, and Responses clients
		// send them regardless (Codex sends parallel_tool_calls always).
		out.ToolChoice, out.ParallelToolCalls = nil, nil
	}
	return marshal(out), nil
}

// refuseState refuses what a stateless translation cannot do: each of
// these asks the provider to keep (or have kept) a response.
func (in *requestIn) refuseState() error {
	if len(in.PreviousResponseID) > 0 && !isNull(in.PreviousResponseID) {
		return reqErr("previous_response_id", "a stateless translation cannot continue a stored response: send the whole conversation in input instead")
	}
	if in.Store != nil && *in.Store {
		return reqErr("store", "a stateless translation cannot store the response: set store to false")
	}
	if in.Background != nil && *in.Background {
		return reqErr("background", "a stateless translation cannot run a response in the background: set background to false")
	}
	if len(in.Conversation) > 0 && !isNull(in.Conversation) {
		return reqErr("conversation", "a stateless translation cannot use a stored conversation: send the whole conversation in input instead")
	}
	return nil
}

func isNull(b json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(b), []byte("null")) }

// isObject reports whether b is a JSON object.
func isObject(b json.RawMessage) bool {
	var m map[string]json.RawMessage
	return len(bytes.TrimSpace(b)) > 0 && bytes.TrimSpace(b)[0] == '{' && json.Unmarshal(b, &m) == nil
}

// invalid is the chat.RequestError of a request that is not valid Responses.
func invalid(param, format string, args ...any) *chat.RequestError {
	e := reqErr(param, format, args...)
	e.Invalid = true
	return e
}

// notValid is the chat.RequestError of a body that is not a Responses request
// at all; a member of the wrong type is named (without the indexes of
// the arrays it is in: encoding/json does not say them).
func notValid(err error) *chat.RequestError {
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
		return invalid(te.Field, "the body is not a valid OpenAI Responses request: this member cannot be a %s", te.Value)
	}
	return invalid("", "the body is not a valid OpenAI Responses request: %v", err)
}

// knownEffort reports whether effort is a reasoning effort: OpenAI's, and
// Anthropic's max (the anthropic package reads it).
func knownEffort(effort string) bool {
	switch effort {
	case "none", "minimal", "low", "medium", "high", "xhigh", "max":
		return true
	}
	return false
}

// formatToChat translates text.format; text (the default) needs nothing.
func formatToChat(f *formatIn) (json.RawMessage, error) {
	switch f.Type {
	case "", "text":
		return nil, nil
	case "json_object":
		return json.RawMessage(`{"type":"json_object"}`), nil
	case "json_schema":
		var js struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Name        string          `json:"name"`
				Description string          `json:"description,omitempty"`
				Schema      json.RawMessage `json:"schema,omitempty"`
				Strict      *bool           `json:"strict,omitempty"`
			} `json:"json_schema"`
		}
		js.Type = "json_schema"
		js.JSONSchema.Name, js.JSONSchema.Description = f.Name, f.Description
		js.JSONSchema.Schema, js.JSONSchema.Strict = f.Schema, f.Strict
		return marshal(js), nil
	default:
		return nil, invalid("text.format.type", "format %q is not known (text, json_object, json_schema)", f.Type)
	}
}

// toolsToChat translates the function tools; dropped counts the others.
func toolsToChat(tools []toolIn) (out []chat.Tool, dropped int, err error) {
	for i, t := range tools {
		if t.Type != "function" {
			dropped++
			// Hosted tools (web_search, file_search, mcp, namespaces...)
			// and custom tools are offers, not demands: the Chat provider
			// can neither run nor call them, so the model is simply not
			// told of them. Refusing would refuse every Codex CLI request,
			// which offers web_search and a namespace beside its functions.
			// A tool_choice that forces one is still refused.
			continue
		}
		param := fmt.Sprintf("tools[%d]", i)
		if t.Name == "" {
			return nil, 0, invalid(param+".name", "a function tool needs a name")
		}
		var c chat.Tool
		c.Type = "function"
		c.Function.Name, c.Function.Description, c.Function.Strict = t.Name, t.Description, t.Strict
		c.Function.Parameters = t.Parameters
		if len(c.Function.Parameters) == 0 || isNull(c.Function.Parameters) {
			c.Function.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
		} else if !isObject(c.Function.Parameters) {
			return nil, 0, invalid(param+".parameters", "a function's parameters must be a JSON Schema object")
		}
		out = append(out, c)
	}
	return out, dropped, nil
}

func toolChoiceToChat(tc json.RawMessage) (json.RawMessage, error) {
	if len(tc) == 0 || isNull(tc) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(tc, &s) == nil {
		switch s {
		case "auto", "required", "none":
			return marshal(s), nil
		}
		return nil, invalid("tool_choice", "tool_choice %q is not known (auto, required, none)", s)
	}
	var o struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(tc, &o); err != nil || bytes.TrimSpace(tc)[0] != '{' {
		return nil, invalid("tool_choice", "want auto, required, none or an object with a type")
	}
	if o.Type == "function" && o.Name == "" {
		return nil, invalid("tool_choice.name", "a tool_choice of type function names the function to call")
	}
	if o.Type != "function" {
		return nil, reqErr("tool_choice", "only auto, required, none and {\"type\":\"function\",\"name\":...} can be translated, not a tool_choice of type %q", o.Type)
	}
	var c struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	c.Type, c.Function.Name = "function", o.Name
	return marshal(c), nil
}
