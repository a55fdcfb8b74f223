package responses

import (
	"encoding/json"
	"strconv"
	"strings"
)

// ResponseOptions tune FromChatResponse and ResponsesStream.
type ResponseOptions struct {
	// Created is the response's created_at (Unix seconds): the caller's
	// clock. 0 takes the completion's "created".
	Created int64
	// Request is the client's Responses request, whose settings the
	// response echoes (instructions, tools, tool_choice, text, reasoning,
	// temperature...) as OpenAI's does; nil gives the defaults.
	Request []byte
}

// FromChatResponse translates a chat.completion into a Responses
// response object.
//
//	Chat Completions                     Responses
//	id (chatcmpl-X)                      id resp_X; items rs_X, msg_X, fc_X_<i>
//	created                              created_at (unless opt.Created)
//	model                                model
//	message.reasoning_content|reasoning  a reasoning item, its text one summary_text
//	message.content (and refusal)        a message item, one output_text part
//	message.tool_calls                   function_call items (call_id = the call's id)
//	finish_reason length                 status incomplete, max_output_tokens
//	finish_reason content_filter         status incomplete, content_filter
//	finish_reason pause_turn             status incomplete, pause_turn
//	other finish_reason                  status completed
//	usage prompt/completion/total,       usage input/output/total_tokens,
//	  cached_tokens, reasoning_tokens      cached_tokens, reasoning_tokens
//
// Only the first choice is read (a Responses request cannot ask for n>1).
func FromChatResponse(chat []byte, opt ResponseOptions) ([]byte, error) {
	var in chatCompletionIn
	if err := json.Unmarshal(chat, &in); err != nil {
		return nil, &RequestError{Message: "the upstream answer is not a valid chat.completion: " + err.Error()}
	}
	r := newResult(in.ID, in.Model, in.Created, opt)
	if len(in.Choices) > 0 {
		m := &in.Choices[0].Message
		r.reasoning.WriteString(m.ReasoningContent)
		if m.ReasoningContent == "" {
			r.reasoning.WriteString(m.Reasoning)
		}
		r.text.WriteString(m.Content)
		r.text.WriteString(m.Refusal)
		for i, tc := range m.ToolCalls {
			r.calls = append(r.calls, callState{id: r.chatCallID(i, tc.ID), name: tc.Function.Name})
			r.calls[len(r.calls)-1].args.WriteString(tc.Function.Arguments)
		}
		r.finish = in.Choices[0].FinishReason
	}
	r.usage = in.Usage
	return r.marshal("completed"), nil
}

// result is a response being built: from a whole completion, or from a
// stream's chunks (so the stream's final response is FromChatResponse's).
type result struct {
	id, base, model string
	created         int64
	echo            requestEcho
	reasoning, text strings.Builder
	calls           []callState
	finish          string
	usage           *chatUsageIn
}

type callState struct {
	id, name string
	args     strings.Builder
	started  bool // ResponsesStream: its item was opened
}

func newResult(chatID, model string, created int64, opt ResponseOptions) *result {
	base := strings.TrimPrefix(chatID, "chatcmpl-")
	if base == "" {
		base = "0"
	}
	r := &result{id: "resp_" + base, base: base, model: model, created: created}
	if opt.Created != 0 {
		r.created = opt.Created
	}
	if opt.Request != nil {
		_ = json.Unmarshal(opt.Request, &r.echo) // a request that did not decode was refused already
	}
	return r
}

func (r *result) reasoningID() string { return "rs_" + r.base }
func (r *result) messageID() string   { return "msg_" + r.base }
func (r *result) callID(i int) string { return "fc_" + r.base + "_" + strconv.Itoa(i) }

// chatCallID is the call_id of the i-th call: the provider's id, or one
// made up when it gave none (some Chat providers do not), since the
// client must send it back with the call's output (and ToChatRequest
// refuses a call without one).
func (r *result) chatCallID(i int, id string) string {
	if id != "" {
		return id
	}
	return "call_" + r.base + "_" + strconv.Itoa(i)
}

// status is the final status and incomplete_details of the response.
func (r *result) status() (string, json.RawMessage) {
	switch r.finish {
	case "length":
		return "incomplete", json.RawMessage(`{"reason":"max_output_tokens"}`)
	case "content_filter":
		return "incomplete", json.RawMessage(`{"reason":"content_filter"}`)
	case "pause_turn":
		// Anthropic paused a long turn (anthropic.FinishPauseTurn): sending
		// the answer back continues it. Not max_output_tokens, which would
		// send the user to raise a limit that is not the cause.
		return "incomplete", json.RawMessage(`{"reason":"pause_turn"}`)
	}
	return "completed", nil
}

// items is the output: reasoning, then the message, then the calls.
func (r *result) items() []json.RawMessage {
	out := []json.RawMessage{}
	if r.reasoning.Len() > 0 {
		out = append(out, reasoningItem(r.reasoningID(), r.reasoning.String(), true))
	}
	if r.text.Len() > 0 {
		out = append(out, messageItem(r.messageID(), r.text.String(), "completed"))
	}
	for i := range r.calls {
		c := &r.calls[i]
		out = append(out, callItem(r.callID(i), c.id, c.name, c.args.String(), "completed"))
	}
	return out
}

// marshal writes the response object: with status "completed" (which
// the finish reason may make "incomplete"), the whole answer; with
// another status (in_progress for response.created), no output yet.
func (r *result) marshal(status string) []byte {
	if status == "completed" {
		return r.marshalOutput(r.items())
	}
	o := r.object(status, []json.RawMessage{})
	r.echo.fill(&o)
	return marshal(o)
}

// marshalOutput writes the finished response with output.
func (r *result) marshalOutput(output []json.RawMessage) []byte {
	st, details := r.status()
	o := r.object(st, output)
	o.IncompleteDetails = details
	if r.usage != nil {
		o.Usage = r.usage.responses()
	}
	r.echo.fill(&o)
	return marshal(o)
}

// marshalFailed writes the response of a stream that failed.
func (r *result) marshalFailed(output []json.RawMessage, code, msg string) []byte {
	o := r.object("failed", output)
	o.Error = marshal(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{code, msg})
	r.echo.fill(&o)
	return marshal(o)
}

func (r *result) object(status string, output []json.RawMessage) responseOut {
	o := responseOut{ID: r.id, Object: "response", CreatedAt: r.created, Model: r.model,
		Output: output, Status: status}
	if output == nil {
		o.Output = []json.RawMessage{}
	}
	return o
}

func reasoningItem(id, text string, summary bool) json.RawMessage {
	it := reasoningOut{Type: "reasoning", ID: id, Summary: []summaryPart{}}
	if summary {
		it.Summary = append(it.Summary, summaryPart{Type: "summary_text", Text: text})
	}
	return marshal(it)
}

func messageItem(id, text, status string) json.RawMessage {
	it := messageOut{Type: "message", ID: id, Status: status, Role: "assistant", Content: []outputText{}}
	if status == "completed" {
		it.Content = append(it.Content, outputText{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: []any{}})
	}
	return marshal(it)
}

func callItem(id, callID, name, args, status string) json.RawMessage {
	return marshal(callOut{Type: "function_call", ID: id, CallID: callID, Name: name, Arguments: args, Status: status})
}
