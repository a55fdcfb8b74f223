package responses

import (
	"encoding/json"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// requestIn is the part of a Responses request ToChatRequest reads.
type requestIn struct {
	Model              json.RawMessage `json:"model"`
	Instructions       string          `json:"instructions"`
	Input              json.RawMessage `json:"input"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	User               string          `json:"user"`
	SafetyIdentifier   string          `json:"safety_identifier"`
	Stream             bool            `json:"stream"`
	Store              *bool           `json:"store"`
	Background         *bool           `json:"background"`
	PreviousResponseID json.RawMessage `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
	ParallelToolCalls  *bool           `json:"parallel_tool_calls"`
	Tools              []toolIn        `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Reasoning          *struct {
		Effort *string `json:"effort"`
	} `json:"reasoning"`
	Text *struct {
		Format *formatIn `json:"format"`
	} `json:"text"`
}

type formatIn struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}

type toolIn struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// itemIn is the union of the input items ToChatRequest reads.
type itemIn struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

type partIn struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	Detail   string `json:"detail"`
}

// chatRequestOut is the Chat Completions request ToChatRequest writes.
type chatRequestOut struct {
	Model               json.RawMessage   `json:"model,omitempty"`
	Messages            []json.RawMessage `json:"messages"`
	MaxTokens           *int              `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int              `json:"max_completion_tokens,omitempty"`
	Temperature         *float64          `json:"temperature,omitempty"`
	TopP                *float64          `json:"top_p,omitempty"`
	User                string            `json:"user,omitempty"`
	ReasoningEffort     string            `json:"reasoning_effort,omitempty"`
	ResponseFormat      json.RawMessage   `json:"response_format,omitempty"`
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

// chatMsg is any Chat message: Content is a string, []chatPart, or nil.
type chatMsg struct {
	Role       string          `json:"role"`
	Content    any             `json:"content"`
	ToolCalls  []chat.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type chatPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}
