package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// ToChatResponse translates a Gemini generateContent answer into a
// chat.completion, for a Chat client of a Gemini upstream. opt.Created
// is the Unix time to stamp (Gemini answers carry none); opt.Model names
// the model when the answer has no modelVersion.
//
//	Gemini                                  chat.completion
//	responseId, modelVersion                id, model
//	candidates[0] text parts                message.content (joined; null when none)
//	candidates[0] thought parts             message.reasoning_content (joined)
//	candidates[0] functionCall parts        message.tool_calls (id: the call's, else
//	                                        CallID(0, n) for the n-th call; its thoughtSignature
//	                                        rides in the id; arguments = args, compact)
//	finishReason                            finish_reason (FinishReason)
//	promptFeedback.blockReason, no          finish_reason content_filter, no content
//	  candidates
//	usageMetadata                           usage (see UsageMetadata)
//
// An answer with more than one candidate (the relay asks for one), or
// parts Chat cannot carry (inline data, code execution), is an error: the
// relay answers 502 rather than something with a piece missing.
func ToChatResponse(body []byte, opt chat.Options) ([]byte, error) {
	var in generateResponse
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, errors.New("the Gemini answer is not a GenerateContentResponse: " + err.Error())
	}
	if len(in.Candidates) > 1 {
		return nil, &chat.UnreadableError{Reason: "the Gemini answer has more than the one candidate the relay asks for"}
	}
	m := chatAnswerMessage{Role: "assistant"}
	finish := "stop"
	if len(in.Candidates) == 0 {
		if in.PromptFeedback == nil || in.PromptFeedback.BlockReason == "" {
			return nil, &chat.UnreadableError{Reason: "the Gemini answer has no candidate and no block reason"}
		}
		finish = "content_filter"
	} else {
		c := in.Candidates[0]
		var texts, thoughts []string
		if c.Content != nil {
			for i, p := range c.Content.Parts {
				if why := answerPartRefusal(&p); why != "" {
					return nil, &chat.UnreadableError{Reason: fmt.Sprintf("part %d of the Gemini answer: %s", i, why)}
				}
				switch {
				case p.FunctionCall != nil:
					m.ToolCalls = append(m.ToolCalls, toolCall(p, 0, len(m.ToolCalls)))
				case p.Text != nil && p.Thought:
					thoughts = append(thoughts, *p.Text)
				case p.Text != nil:
					texts = append(texts, *p.Text)
				case p.Thought:
					// A thought with only a signature: nothing to read.
				default:
					return nil, &chat.UnreadableError{Reason: fmt.Sprintf("part %d of the Gemini answer has no Chat Completions counterpart", i)}
				}
			}
		}
		if len(texts) > 0 {
			s := strings.Join(texts, "")
			m.Content = &s
		}
		m.ReasoningContent = strings.Join(thoughts, "")
		finish = FinishReason(c.FinishReason, len(m.ToolCalls) > 0)
	}
	model := in.ModelVersion
	if model == "" {
		model = opt.Model
	}
	out := chatCompletion{ID: in.ResponseID, Object: "chat.completion", Created: opt.Created, Model: model,
		Choices: []chatChoice{{Message: m, FinishReason: finish}}}
	if in.UsageMetadata != nil {
		out.Usage = chat.AppendUsage(nil, in.UsageMetadata.chatUsage())
	}
	return marshal(out), nil
}

// answerPartRefusal says why a part of a Gemini answer cannot become
// Chat ("" when it can), the same for ToChatResponse and ToChatStream, so
// that an answer read whole or streamed is refused for the same parts: a
// part Chat has no counterpart for (inline data, thought images among it,
// a file, code execution, one of a kind this package does not know), a
// function response, or a call without a name, whose arguments stream
// (partialArgs) or are not a JSON object. A part that is none of these
// and carries no text or call (a signature alone) is the caller's.
func answerPartRefusal(p *part) string {
	switch {
	case p.FunctionCall != nil:
		fc := p.FunctionCall
		switch {
		case fc.streamed():
			return fmt.Sprintf("function call %q streams its arguments (partialArgs), which are not translated: turn streamFunctionCallArguments off", fc.Name)
		case fc.Name == "":
			return "a function call without a name"
		case !isNullOrAbsent(fc.Args) && !isObject(fc.Args):
			return fmt.Sprintf("the args of function call %q are not a JSON object", fc.Name)
		}
	case p.InlineData != nil, p.FileData != nil, !isNullOrAbsent(p.ExecutableCode), !isNullOrAbsent(p.CodeExecutionResult):
		return "a part with no Chat Completions counterpart"
	case p.FunctionResponse != nil:
		return "a function response in the model's answer"
	case p.Text == nil && p.Unknown:
		// A kind of part newer than this package: refused rather than
		// left out of the answer.
		return "a part with no Chat Completions counterpart"
	}
	return ""
}

// toolCall is the Chat tool call of a functionCall part (part i of
// content ci, for its minted id) that answerPartRefusal let pass.
func toolCall(p part, ci, i int) chat.ToolCall {
	fc := p.FunctionCall
	id := fc.ID
	if id == "" {
		id = CallID(ci, i)
	}
	return chat.ToolCall{ID: withSignature(id, p.ThoughtSignature), Type: "function",
		Function: chat.FunctionCall{Name: fc.Name, Arguments: compactJSON(fc.Args)}}
}

// FromChatResponse translates a chat.completion into a Gemini
// generateContent answer, for a Gemini client of a Chat provider: the
// reverse of ToChatResponse. The message is read by chat.ReadAnswer,
// every part of it: reasoning becomes text parts with thought: true,
// content and a refusal text parts, in the order they came (consecutive
// ones of a kind in one part), then each tool call a functionCall part
// (id: the Chat id without the signature it carries, which goes back on
// the part as its thoughtSignature). modelVersion is opt.Model (the model
// the client named in its path) or the answer's; responseId opt.ID or the
// answer's id. An answer chat.ReadAnswer cannot read whole, or arguments
// that are not a JSON object, are a *chat.UnreadableError.
func FromChatResponse(body []byte, opt chat.Options) ([]byte, error) {
	var in chatCompletionIn
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, errors.New("the Chat Completions answer is not a chat.completion: " + err.Error())
	}
	a, err := chat.ReadAnswer(in.Choices)
	if err != nil {
		return nil, err
	}
	parts := []part{}
	lastThought := false
	for _, p := range a.Pieces {
		thought := p.Channel == chat.ChanReasoning
		if n := len(parts); n > 0 && lastThought == thought {
			t := *parts[n-1].Text + p.Text
			parts[n-1].Text = &t
			continue
		}
		parts = append(parts, part{Thought: thought, Text: &p.Text})
		lastThought = thought
	}
	if len(parts) == 0 && len(a.Calls) == 0 {
		parts = append(parts, textPart("")) // as Gemini writes an empty answer, and FromChatStream its end
	}
	for i, tc := range a.Calls {
		p, err := callPart(tc.ID, tc.Function.Name, tc.Function.Arguments)
		if err != nil {
			return nil, &chat.UnreadableError{Reason: fmt.Sprintf("tool call %d: %v", i, err)}
		}
		parts = append(parts, p)
	}
	out := generateResponse{
		Candidates:   []candidate{{Content: &content{Role: "model", Parts: parts}, FinishReason: GeminiFinishReason(a.Finish), Index: new(int)}},
		ModelVersion: in.Model, ResponseID: in.ID,
	}
	if opt.Model != "" {
		out.ModelVersion = opt.Model
	}
	if opt.ID != "" {
		out.ResponseID = opt.ID
	}
	if u := in.Usage; u != nil {
		um := usageMetadata(u.PromptTokens, u.CompletionTokens, u.TotalTokens,
			max(u.PromptTokensDetails.CachedTokens, u.PromptCacheHitTokens), u.CompletionTokensDetails.ReasoningTokens)
		out.UsageMetadata = &um
	}
	return marshal(out), nil
}

// callPart is the functionCall part of a Chat tool call; args must be a
// JSON object (or empty: none).
func callPart(id, name, args string) (part, error) {
	raw := []byte(args)
	if strings.TrimSpace(args) == "" {
		raw = []byte("{}")
	}
	if !isObject(raw) {
		return part{}, errors.New("the arguments are not a JSON object")
	}
	base, sig := splitSignature(id)
	return part{ThoughtSignature: sig, FunctionCall: &functionCall{ID: base, Name: name, Args: json.RawMessage(compactJSON(raw))}}, nil
}

type chatCompletion struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices []chatChoice    `json:"choices"`
	Usage   json.RawMessage `json:"usage,omitempty"`
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
	Usage   *chatUsageIn    `json:"usage"`
}

// chatUsageIn is Chat Completions usage as read.
type chatUsageIn struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	// PromptCacheHitTokens is DeepSeek's name for cached prompt tokens.
	PromptCacheHitTokens int `json:"prompt_cache_hit_tokens"`
}
