package chat

import "encoding/json"

// The Chat Completions members the translators write (Chat Completions is
// the pivot every other dialect is translated through), in OpenAI's member
// order.

// ToolCall is one entry of an assistant message's tool_calls.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall is a tool call's function: its name and its arguments, a
// JSON object as a string.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is one entry of a request's tools.
type Tool struct {
	Type     string   `json:"type"` // "function"
	Function Function `json:"function"`
}

// Function is a function tool's definition.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict,omitempty"`
}
