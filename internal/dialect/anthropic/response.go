package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// ToChatResponse translates a Messages answer into a chat.completion, for
// a Chat client of an Anthropic upstream. opt.Created is the Unix time to
// stamp (Messages answers carry none); opt.KeepPauseTurn gives pause_turn
// the finish_reason chat.FinishPauseTurn instead of "length", for an
// answer that goes on to a Responses client.
//
//	Messages                    chat.completion
//	id, model                   id, model
//	text blocks                 message.content (joined; null when none)
//	thinking blocks             message.reasoning_content (joined)
//	tool_use blocks             message.tool_calls (arguments = compact input)
//	stop_reason                 finish_reason (FinishReason; pause_turn is
//	                            "length", or chat.FinishPauseTurn on request)
//	usage.input_tokens +        usage.prompt_tokens
//	  cache_read + cache_creation
//	usage.output_tokens         usage.completion_tokens
//	cache_read_input_tokens     usage.prompt_tokens_details.cached_tokens
//	cache_creation_input_tokens usage.cache_creation_input_tokens (when > 0,
//	                            so cache writes can be priced)
func ToChatResponse(msg []byte, opt chat.Options) ([]byte, error) {
	var in messageOut
	if err := json.Unmarshal(msg, &in); err != nil {
		return nil, errors.New("the Anthropic answer is not a message: " + err.Error())
	}
	if in.Type != "message" {
		return nil, errors.New("the Anthropic answer is not a message (type " + strconvQuote(in.Type) + ")")
	}
	var texts, thoughts []string
	var calls []chat.ToolCall
	for _, b := range in.Content {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "thinking":
			thoughts = append(thoughts, b.Thinking)
		case "tool_use":
			var c chat.ToolCall
			c.ID, c.Type = b.ID, "function"
			c.Function.Name = b.Name
			c.Function.Arguments = compactJSON(b.Input)
			calls = append(calls, c)
		}
	}
	m := chatAnswerMessage{Role: "assistant", ToolCalls: calls}
	if len(texts) > 0 {
		s := strings.Join(texts, "")
		m.Content = &s
	}
	if len(thoughts) > 0 {
		m.ReasoningContent = strings.Join(thoughts, "")
	}
	u := in.Usage.chat()
	finish := FinishReason(in.StopReason)
	if in.StopReason == "pause_turn" && opt.KeepPauseTurn {
		finish = chat.FinishPauseTurn
	}
	out := chatCompletion{
		ID: in.ID, Object: "chat.completion", Created: opt.Created, Model: in.Model,
		Choices: []chatChoice{{Message: m, FinishReason: finish}},
		Usage:   &u,
	}
	return marshal(out), nil
}

// FromChatResponse translates a chat.completion into a Messages answer,
// for an Anthropic client of a Chat provider: the reverse of
// ToChatResponse. The message is read by chat.ReadAnswer, every part of
// it: reasoning (reasoning_content or reasoning, or content parts of type
// thinking) becomes a thinking block with an empty signature (Chat
// providers sign nothing), content and a refusal a text block, in the
// order they came (consecutive ones of a kind in one block), and the stop
// reason is "refusal" when there is a refusal. An answer chat.ReadAnswer
// cannot read whole (no choices, a second choice, a member of the wrong
// type) is its *chat.UnreadableError, as are arguments that are not a JSON
// object: the relay answers 502 rather than something with a piece
// missing.
func FromChatResponse(body []byte, _ chat.Options) ([]byte, error) {
	var in chatCompletionIn
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, errors.New("the Chat Completions answer is not a chat.completion: " + err.Error())
	}
	a, err := chat.ReadAnswer(in.Choices)
	if err != nil {
		return nil, err
	}
	content := []block{}
	refused := false
	for _, p := range a.Pieces {
		typ := "text"
		switch p.Channel {
		case chat.ChanReasoning:
			typ = "thinking"
		case chat.ChanRefusal:
			refused = true
		}
		if n := len(content); n > 0 && content[n-1].Type == typ {
			if typ == "thinking" {
				t := *content[n-1].Thinking + p.Text
				content[n-1].Thinking = &t
			} else {
				content[n-1].Text += p.Text
			}
			continue
		}
		if typ == "thinking" {
			thinking, empty := p.Text, ""
			content = append(content, block{Type: "thinking", Thinking: &thinking, Signature: &empty})
		} else {
			content = append(content, block{Type: "text", Text: p.Text})
		}
	}
	for i, tc := range a.Calls {
		input := json.RawMessage(compactJSON(json.RawMessage(tc.Function.Arguments)))
		if !isObject(input) {
			return nil, &chat.UnreadableError{Reason: fmt.Sprintf("the arguments of tool call %d are not a JSON object", i)}
		}
		content = append(content, block{Type: "tool_use", ID: ToolUseID(tc.ID), Name: tc.Function.Name, Input: input})
	}
	stop := StopReason(a.Finish)
	if refused {
		stop = "refusal"
	}
	out := messageAnswer{
		ID: in.ID, Type: "message", Role: "assistant", Model: in.Model, Content: content,
		StopReason: stop, Usage: in.Usage.messages(),
	}
	return marshal(out), nil
}

// messageOut is a Messages answer as read.
type messageOut struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	Model      string `json:"model"`
	Content    []part `json:"content"`
	StopReason string `json:"stop_reason"`
	Usage      Usage  `json:"usage"`
}

// messageAnswer is a Messages answer as written.
type messageAnswer struct {
	ID           string        `json:"id"`
	Type         string        `json:"type"`
	Role         string        `json:"role"`
	Model        string        `json:"model"`
	Content      []block       `json:"content"`
	StopReason   string        `json:"stop_reason"`
	StopSequence *string       `json:"stop_sequence"`
	Usage        MessagesUsage `json:"usage"`
}

type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *ChatUsage   `json:"usage,omitempty"`
}

type chatChoice struct {
	Index        int               `json:"index"`
	Message      chatAnswerMessage `json:"message"`
	Logprobs     *struct{}         `json:"logprobs"`
	FinishReason string            `json:"finish_reason"`
}

type chatAnswerMessage struct {
	Role             string          `json:"role"`
	Content          *string         `json:"content"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	ToolCalls        []chat.ToolCall `json:"tool_calls,omitempty"`
}

// chatCompletionIn is the part of a chat.completion FromChatResponse
// reads; chat.ReadAnswer reads the choices.
type chatCompletionIn struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Choices json.RawMessage `json:"choices"`
	Usage   ChatUsageIn     `json:"usage"`
}

// Usage is Messages usage as Anthropic reports it (message, message_start
// and message_delta carry it). Input tokens exclude cache reads and
// writes.
type Usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
}

// ChatUsage is usage in Chat Completions' names. Prompt tokens include
// cached ones; CacheCreationInputTokens is not OpenAI's, but Anthropic's
// cache writes kept for pricing (the relay's usage parser reads it).
type ChatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens,omitempty"`
}

// chat converts Anthropic usage to Chat Completions usage.
func (u Usage) chat() ChatUsage {
	var c ChatUsage
	c.PromptTokens = u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
	c.CompletionTokens = u.OutputTokens
	c.TotalTokens = c.PromptTokens + c.CompletionTokens
	c.PromptTokensDetails.CachedTokens = u.CacheReadInputTokens
	c.CacheCreationInputTokens = u.CacheCreationInputTokens
	return c
}

// ChatUsageIn is Chat Completions usage as read.
type ChatUsageIn struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	// PromptCacheHitTokens is DeepSeek's name for cached prompt tokens.
	PromptCacheHitTokens int `json:"prompt_cache_hit_tokens"`
}

// MessagesUsage is usage in Messages' names, as written.
type MessagesUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

// messages converts Chat Completions usage to Anthropic usage.
func (u ChatUsageIn) messages() MessagesUsage {
	cached := min(max(u.PromptTokensDetails.CachedTokens, u.PromptCacheHitTokens, 0), u.PromptTokens)
	written := min(max(u.CacheCreationInputTokens, 0), u.PromptTokens-cached)
	return MessagesUsage{
		InputTokens:              u.PromptTokens - cached - written,
		CacheCreationInputTokens: written,
		CacheReadInputTokens:     cached,
		OutputTokens:             u.CompletionTokens,
	}
}

func strconvQuote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return string(marshal(s))
}
