package responses

import "encoding/json"

// chatCompletionIn is the part of a chat.completion FromChatResponse
// reads; chat.ReadAnswer reads the choices.
type chatCompletionIn struct {
	ID      string          `json:"id"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices json.RawMessage `json:"choices"`
	Usage   *chatUsageIn    `json:"usage"`
}

// chatUsageIn is a Chat usage object.
type chatUsageIn struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (u *chatUsageIn) responses() *usageOut {
	o := &usageOut{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	if o.TotalTokens == 0 {
		o.TotalTokens = o.InputTokens + o.OutputTokens
	}
	if u.PromptTokensDetails != nil {
		o.InputTokensDetails.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	if u.CompletionTokensDetails != nil {
		o.OutputTokensDetails.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	return o
}

// responseOut is a Responses response object. Every member the SDKs'
// Response types declare required is written (openai-python validates
// them), null where there is no value.
type responseOut struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Background         bool              `json:"background"`
	Error              json.RawMessage   `json:"error"`
	IncompleteDetails  json.RawMessage   `json:"incomplete_details"`
	Instructions       json.RawMessage   `json:"instructions"`
	MaxOutputTokens    json.RawMessage   `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []json.RawMessage `json:"output"`
	ParallelToolCalls  json.RawMessage   `json:"parallel_tool_calls"`
	PreviousResponseID json.RawMessage   `json:"previous_response_id"`
	Reasoning          json.RawMessage   `json:"reasoning"`
	Store              bool              `json:"store"`
	Temperature        json.RawMessage   `json:"temperature"`
	Text               json.RawMessage   `json:"text"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Tools              json.RawMessage   `json:"tools"`
	TopP               json.RawMessage   `json:"top_p"`
	Truncation         string            `json:"truncation"`
	Usage              *usageOut         `json:"usage,omitempty"`
	User               json.RawMessage   `json:"user"`
	Metadata           json.RawMessage   `json:"metadata"`
}

type usageOut struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// requestEcho is what a response repeats of its request.
type requestEcho struct {
	Instructions      json.RawMessage `json:"instructions"`
	MaxOutputTokens   json.RawMessage `json:"max_output_tokens"`
	ParallelToolCalls json.RawMessage `json:"parallel_tool_calls"`
	Reasoning         json.RawMessage `json:"reasoning"`
	Temperature       json.RawMessage `json:"temperature"`
	Text              json.RawMessage `json:"text"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	Tools             json.RawMessage `json:"tools"`
	TopP              json.RawMessage `json:"top_p"`
	User              json.RawMessage `json:"user"`
	Metadata          json.RawMessage `json:"metadata"`
}

// fill copies the echoed members into o, defaults where the request had
// none (OpenAI's: parallel_tool_calls true, tool_choice auto, tools [],
// text format text, metadata {}).
func (e *requestEcho) fill(o *responseOut) {
	or := func(v json.RawMessage, def string) json.RawMessage {
		if len(v) == 0 {
			return json.RawMessage(def)
		}
		return v
	}
	o.Instructions = or(e.Instructions, "null")
	o.MaxOutputTokens = or(e.MaxOutputTokens, "null")
	o.ParallelToolCalls = or(e.ParallelToolCalls, "true")
	o.Reasoning = or(e.Reasoning, `{"effort":null,"summary":null}`)
	o.Temperature = or(e.Temperature, "null")
	o.Text = or(e.Text, `{"format":{"type":"text"}}`)
	o.ToolChoice = or(e.ToolChoice, `"auto"`)
	o.Tools = or(e.Tools, "[]")
	o.TopP = or(e.TopP, "null")
	o.User = or(e.User, "null")
	o.Metadata = or(e.Metadata, "{}")
	o.PreviousResponseID = json.RawMessage("null")
	o.Truncation = "disabled"
	if o.Error == nil {
		o.Error = json.RawMessage("null")
	}
	if o.IncompleteDetails == nil {
		o.IncompleteDetails = json.RawMessage("null")
	}
}

type reasoningOut struct {
	Type    string        `json:"type"`
	ID      string        `json:"id"`
	Summary []summaryPart `json:"summary"`
}

type summaryPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type messageOut struct {
	Type    string            `json:"type"`
	ID      string            `json:"id"`
	Status  string            `json:"status"`
	Role    string            `json:"role"`
	Content []json.RawMessage `json:"content"`
}

type refusalOut struct {
	Type    string `json:"type"`
	Refusal string `json:"refusal"`
}

type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

type callOut struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}
