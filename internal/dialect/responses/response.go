package responses

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// FromChatResponse translates a chat.completion into a Responses
// response object. opt.Created is its created_at (0 takes the
// completion's "created"); opt.Request is the client's Responses request,
// whose settings the response echoes (instructions, tools, tool_choice,
// text, reasoning, temperature...) as OpenAI's does (nil: the defaults).
//
//	Chat Completions                     Responses
//	id (chatcmpl-X)                      id resp_X; items rs_X, msg_X, fc_X_<i>
//	created                              created_at (unless opt.Created)
//	model                                model
//	message.reasoning_content|reasoning  a reasoning item, its text one summary_text
//	  (or content parts of type thinking)
//	message.content (a string, or        a message item: an output_text part
//	  text parts)
//	message.refusal                      a refusal part of that message item
//	message.tool_calls                   function_call items (call_id = the call's id,
//	                                       arguments "{}" when there were none)
//	finish_reason length                 status incomplete, max_output_tokens
//	finish_reason content_filter         status incomplete, content_filter
//	finish_reason pause_turn             status incomplete, pause_turn
//	other finish_reason                  status completed
//	usage prompt/completion/total,       usage input/output/total_tokens,
//	  cached_tokens, reasoning_tokens      cached_tokens, reasoning_tokens
//
// The one choice is read by chat.ReadAnswer: an answer it cannot read
// whole (no choices, a choice other than index 0, which a Responses
// request cannot ask for, a member of the wrong type) is its
// *chat.UnreadableError, which the relay answers with a 502 rather than a
// response with something missing.
func FromChatResponse(body []byte, opt chat.Options) ([]byte, error) {
	var in chatCompletionIn
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, &chat.RequestError{Message: "the upstream answer is not a valid chat.completion: " + err.Error()}
	}
	a, err := chat.ReadAnswer(in.Choices)
	if err != nil {
		return nil, err
	}
	r := newResult(in.ID, in.Model, in.Created, opt)
	r.pieces, r.calls, r.finish = a.Pieces, a.Calls, a.Finish
	r.usage = in.Usage
	return r.marshal("completed"), nil
}

// result is a response being built: from a whole completion (its pieces
// and calls), or from a stream's items (so that the stream's final
// response is FromChatResponse's for the same answer).
type result struct {
	id, base, model string
	created         int64
	echo            requestEcho
	pieces          []chat.Piece
	calls           []chat.ToolCall
	finish          string
	usage           *chatUsageIn
}

func newResult(chatID, model string, created int64, opt chat.Options) *result {
	base := strings.TrimPrefix(chatID, "chatcmpl-")
	if opt.ID != "" {
		base = opt.ID
	}
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
	case chat.FinishPauseTurn:
		// Anthropic paused a long turn (anthropic.FinishPauseTurn): sending
		// the answer back continues it. Not max_output_tokens, which would
		// send the user to raise a limit that is not the cause.
		return "incomplete", json.RawMessage(`{"reason":"pause_turn"}`)
	}
	return "completed", nil
}

// items is the output of a whole completion, as FromChatStream makes it
// of the same answer: each run of reasoning a reasoning item, the text and
// refusal runs the parts of a message item, then the calls.
func (r *result) items() []json.RawMessage {
	out := []json.RawMessage{}
	var nReasoning, nMessage int
	var parts []json.RawMessage
	var msgID string
	var kind chat.Channel
	var run strings.Builder
	endRun := func() {
		switch kind {
		case chat.ChanReasoning:
			out = append(out, reasoningItem(uniqueID(r.reasoningID(), &nReasoning, len(out)), run.String(), true))
		case chat.ChanText:
			parts = append(parts, textPart(run.String()))
		case chat.ChanRefusal:
			parts = append(parts, refusalPart(run.String()))
		}
		run.Reset()
	}
	endMessage := func() {
		if parts != nil {
			out = append(out, messageItem(msgID, parts, "completed"))
			parts = nil
		}
	}
	for _, p := range r.pieces {
		if p.Channel != kind {
			endRun()
			if p.Channel == chat.ChanReasoning {
				endMessage()
			} else if parts == nil { // a message starts
				msgID = uniqueID(r.messageID(), &nMessage, len(out))
			}
			kind = p.Channel
		}
		run.WriteString(p.Text)
	}
	endRun()
	endMessage()
	for i := range r.calls {
		c := &r.calls[i]
		out = append(out, callItem(r.callID(i), r.chatCallID(i, c.ID), c.Function.Name, callArgs(c.Function.Arguments), "completed"))
	}
	return out
}

// uniqueID is base, or base_<output index> when an item of the same kind
// came before (*n counts them): reasoning after text after reasoning.
func uniqueID(base string, n *int, outIdx int) string {
	*n++
	if *n == 1 {
		return base
	}
	return base + "_" + strconv.Itoa(outIdx)
}

// callArgs is a call's arguments as a client gets them: "{}" for a call
// that had none (clients parse them), else as they came.
func callArgs(args string) string {
	if args == "" {
		return "{}"
	}
	return args
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

// messageItem is a message item with parts (each textPart or
// refusalPart): none while in progress.
func messageItem(id string, parts []json.RawMessage, status string) json.RawMessage {
	if parts == nil {
		parts = []json.RawMessage{}
	}
	return marshal(messageOut{Type: "message", ID: id, Status: status, Role: "assistant", Content: parts})
}

func textPart(text string) json.RawMessage {
	return marshal(outputText{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: []any{}})
}

func refusalPart(refusal string) json.RawMessage {
	return marshal(refusalOut{Type: "refusal", Refusal: refusal})
}

func callItem(id, callID, name, args, status string) json.RawMessage {
	return marshal(callOut{Type: "function_call", ID: id, CallID: callID, Name: name, Arguments: args, Status: status})
}
