package anthropic

import "encoding/json"

// msgStreamEvent is the union of the Messages stream events ToChatStream
// reads off its slow path (everything but text and thinking deltas). A
// struct, not a map: encoding/json fills only the members named here.
type msgStreamEvent struct {
	Type    string `json:"type"`
	Index   *int   `json:"index"`
	Message struct {
		ID    string         `json:"id"`
		Model string         `json:"model"`
		Usage msgStreamUsage `json:"usage"`
	} `json:"message"`
	ContentBlock struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		Thinking string          `json:"thinking"`
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Input    json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage msgStreamUsage `json:"usage"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// msgStreamUsage is a Messages usage object; nil members were absent.
type msgStreamUsage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
}

// overlay takes the members u has: message_delta repeats or corrects
// some of message_start's counts.
func (c *chatStreamUsage) overlay(u *msgStreamUsage) {
	set := func(dst *int, p *int) {
		if p != nil {
			*dst = *p
		}
	}
	set(&c.input, u.InputTokens)
	set(&c.output, u.OutputTokens)
	set(&c.cacheRead, u.CacheReadInputTokens)
	set(&c.cacheCreation, u.CacheCreationInputTokens)
}

// streamErrorStatus is the HTTP status Anthropic documents for an error
// type: the key to chat.ErrorType, so that an error in the middle of a
// stream gets the OpenAI type the same error gets before it.
func streamErrorStatus(typ string) int {
	switch typ {
	case "invalid_request_error":
		return 400
	case "authentication_error":
		return 401
	case "billing_error":
		return 402
	case "permission_error":
		return 403
	case "not_found_error":
		return 404
	case "request_too_large":
		return 413
	case "rate_limit_error":
		return 429
	case "timeout_error":
		return 504
	case "overloaded_error":
		return StatusOverloaded
	}
	return 500 // api_error, anything new
}
