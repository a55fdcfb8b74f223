package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// ToolInput is the fixed input of every simulated tool call: the
// arguments string of a Chat tool call and the input object of a
// Messages tool_use block. It is fixed so tests can compare it exactly.
const ToolInput = `{"input":"sim"}`

// ToolInputFragments is ToolInput as streamed: one Chat arguments delta
// or one Messages input_json_delta per fragment. There are several so a
// relay that keeps only the last fragment, or splits one, is caught.
var ToolInputFragments = []string{`{"input"`, `:"si`, `m"}`}

// toolCall is the simulator's decision to answer with a tool call.
type toolCall struct {
	name string
}

// The tool rule, the same in every dialect: a request gets a tool call
// instead of a text answer when it has tools, forces one (Chat
// tool_choice "required" or {"type":"function",...}; Messages
// {"type":"any"} or {"type":"tool","name":...}; Responses "required" or
// {"type":"function","name":...}; Gemini functionCallingConfig mode
// "ANY"), and does not already carry a tool result as its last turn. The
// last condition makes a round trip end: call, then result, then text.
// In the ToolCallsAuto mode a request that leaves the choice to the
// model (no tool choice, or "auto"; Gemini: no mode, AUTO or VALIDATED)
// gets a call of its first tool too, as a model that decides to use one
// would: how a client that never forces a call (Gemini CLI, Claude Code,
// Codex) is made to run a tool. "none" never gets one.

// chatToolCall applies the tool rule to a Chat request.
func (req *chatRequest) chatToolCall() *toolCall {
	if len(req.Tools) == 0 {
		return nil
	}
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "tool" {
		return nil
	}
	choice := bytes.TrimSpace(req.ToolChoice)
	if req.autoTools && leftToModel(choice) {
		return &toolCall{name: req.Tools[0].Function.Name}
	}
	var mode string
	if json.Unmarshal(choice, &mode) == nil {
		if mode != "required" {
			return nil // "auto", "none"
		}
		return &toolCall{name: req.Tools[0].Function.Name}
	}
	var forced struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(choice, &forced) != nil || forced.Type != "function" {
		return nil
	}
	if forced.Function.Name != "" {
		return &toolCall{name: forced.Function.Name}
	}
	return &toolCall{name: req.Tools[0].Function.Name}
}

// messagesToolCall applies the tool rule to a Messages request.
func (req *messagesRequest) messagesToolCall() *toolCall {
	if len(req.Tools) == 0 || req.lastUserHasToolResult() {
		return nil
	}
	if req.autoTools && (req.ToolChoice == nil || req.ToolChoice.Type == "auto") {
		return &toolCall{name: req.Tools[0].Name}
	}
	if req.ToolChoice == nil {
		return nil
	}
	switch req.ToolChoice.Type {
	case "any":
		return &toolCall{name: req.Tools[0].Name}
	case "tool":
		if req.ToolChoice.Name == "" {
			return &toolCall{name: req.Tools[0].Name}
		}
		return &toolCall{name: req.ToolChoice.Name}
	}
	return nil // "auto", "none"
}

// lastUserHasToolResult reports whether the last user message carries a
// tool_result block, i.e. the client is answering an earlier call.
func (req *messagesRequest) lastUserHasToolResult() bool {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		var blocks []struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			return false // a plain string: no tool result
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				return true
			}
		}
		return false
	}
	return false
}

// finishToolCalls is the Chat finish_reason of a tool call answer.
var finishToolCalls = "tool_calls"

// chatToolCall is a Chat tool call: whole in a completion (no index),
// in pieces in a stream (index always 0, the simulator calls one tool).
type chatToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// chatToolDeltas returns the tool_calls deltas of a streamed call, as
// OpenAI streams them: the id and name with empty arguments, then one
// delta per fragment of the arguments.
func chatToolDeltas(id, name string) []delta {
	zero := 0
	out := []delta{{ToolCalls: []chatToolCall{{
		Index: &zero, ID: id, Type: "function", Function: chatFunction{Name: name},
	}}}}
	for _, frag := range ToolInputFragments {
		out = append(out, delta{ToolCalls: []chatToolCall{{Index: &zero, Function: chatFunction{Arguments: frag}}}})
	}
	return out
}

// responsesToolCall applies the tool rule to a Responses request: a
// function tool, tool_choice "required" or {"type":"function","name":...}
// (the name at the top level, unlike Chat's), and a last input item
// that is not a function_call_output. "required" calls the first
// function tool; tools of other types (web_search, ...) are never called.
func (req *respRequest) responsesToolCall() *toolCall {
	var tools []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(req.Tools, &tools) != nil {
		return nil
	}
	first := ""
	for _, t := range tools {
		if t.Type == "function" {
			first = t.Name
			break
		}
	}
	if first == "" {
		return nil
	}
	if items := req.items(); len(items) > 0 && items[len(items)-1].Type == "function_call_output" {
		return nil
	}
	choice := bytes.TrimSpace(req.ToolChoice)
	if req.autoTools && leftToModel(choice) {
		return &toolCall{name: first}
	}
	var mode string
	if json.Unmarshal(choice, &mode) == nil {
		if mode != "required" {
			return nil // "auto", "none"
		}
		return &toolCall{name: first}
	}
	var forced struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(choice, &forced) != nil || forced.Type != "function" {
		return nil
	}
	if forced.Name != "" {
		return &toolCall{name: forced.Name}
	}
	return &toolCall{name: first}
}

// leftToModel reports whether a Chat or Responses tool_choice leaves the
// choice to the model: absent, null or "auto".
func leftToModel(choice []byte) bool {
	var mode *string
	if len(choice) == 0 {
		return true
	}
	if json.Unmarshal(choice, &mode) != nil {
		return false // an object: a forced function
	}
	return mode == nil || *mode == "auto"
}

// Tool-call modes (Config.ToolCalls).
const (
	ToolCallsForced = "forced"
	ToolCallsAuto   = "auto"
)

// ToolCallsHeader is the request header that sets the tool-call mode of
// one request.
const ToolCallsHeader = "X-Sim-Tool-Calls"

func validateToolCalls(mode string) error {
	switch mode {
	case "", ToolCallsForced, ToolCallsAuto:
		return nil
	}
	return fmt.Errorf("unknown mode %q (want %q or %q)", mode, ToolCallsForced, ToolCallsAuto)
}

// autoTools reports whether the request's tool-call mode, the header's
// (h) or else the config's, is ToolCallsAuto; err when the header names
// an unknown mode.
func (s *Server) autoTools(h string) (bool, error) {
	if h == "" {
		return s.cfg.ToolCalls == ToolCallsAuto, nil
	}
	if err := validateToolCalls(h); err != nil {
		return false, fmt.Errorf("%s: %w", ToolCallsHeader, err)
	}
	return h == ToolCallsAuto, nil
}
