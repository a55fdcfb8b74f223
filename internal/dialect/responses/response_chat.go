package responses

import (
	"cmp"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// wholeAnswer collects what a whole response says (an outSink).
type wholeAnswer struct {
	texts [chat.ChanRefusal + 1]strings.Builder
	calls []chat.ToolCall
}

func (w *wholeAnswer) text(ch chat.Channel, b []byte) { w.texts[ch].Write(b) }

func (w *wholeAnswer) callStart(_ int, id, name string) {
	w.calls = append(w.calls, chat.ToolCall{ID: id, Type: "function", Function: chat.FunctionCall{Name: name}})
}

func (w *wholeAnswer) callArgs(call int, b []byte) { w.calls[call].Function.Arguments += string(b) }

// ToChatResponse translates a Responses response object into a
// chat.completion: the reverse of FromChatResponse.
//
//	Responses                            Chat Completions
//	id resp_X                            id chatcmpl-X
//	created_at                           created (unless opt.Created)
//	model                                model
//	reasoning items: summary_text and    message.reasoning_content (the parts of
//	  reasoning_text parts                 an item set off by a blank line)
//	message items: output_text parts     message.content (joined; "" when there
//	                                       is no text, null when there is none
//	                                       but tool calls or a refusal)
//	message items: refusal parts         message.refusal
//	function_call items                  message.tool_calls (id = call_id)
//	web_search_call, file_search_call,   dropped (tools the provider ran: the
//	  code_interpreter_call,               answer about them is text)
//	  image_generation_call, mcp_call,
//	  mcp_list_tools
//	status completed                     finish_reason stop, or tool_calls when
//	                                       there are calls
//	status incomplete: content_filter    finish_reason content_filter
//	status incomplete: anything else     finish_reason length (pause_turn:
//	                                       chat.FinishPauseTurn with
//	                                       opt.KeepPauseTurn)
//	usage input/output/total_tokens,     usage prompt/completion/total_tokens,
//	  cached_tokens, reasoning_tokens      cached_tokens, reasoning_tokens
//
// An item of another type (a call the client would have to run that is
// not a function's), or a part that does not belong in its item, is a
// *chat.UnreadableError: the relay answers 502 rather than something with
// a piece missing. A response that is not finished (failed, in_progress,
// queued) is an error too: it holds no answer.
func ToChatResponse(body []byte, opt chat.Options) ([]byte, error) {
	var in responseIn
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, errors.New("the Responses answer is not a response object: " + err.Error())
	}
	if in.Object != "response" {
		return nil, errors.New("the Responses answer is not a response object (object " + strconv.Quote(in.Object) + ")")
	}
	if in.Status != "completed" && in.Status != "incomplete" {
		return nil, errors.New("the Responses answer holds no answer: its status is " + strconv.Quote(in.Status))
	}
	var w wholeAnswer
	r := outReader{sink: &w}
	for i, raw := range in.Output {
		r.doneRaw(i, raw)
	}
	if r.err != nil {
		return nil, r.err
	}
	finish := in.finish(r.calls > 0, opt)
	c := chat.Completion{ID: chatID(in.ID), Object: "chat.completion", Model: in.Model}
	c.Created = json.RawMessage(strconv.FormatInt(cmp.Or(opt.Created, in.CreatedAt), 10))
	m := chat.Message{Role: "assistant", ToolCalls: w.calls}
	if text := w.texts[chat.ChanText].String(); text != "" || len(w.calls) == 0 && w.texts[chat.ChanRefusal].Len() == 0 {
		m.Content = &text
	}
	if s := w.texts[chat.ChanRefusal].String(); s != "" {
		m.Refusal = &s
	}
	if s := w.texts[chat.ChanReasoning].String(); s != "" {
		m.ReasoningContent = &s
	}
	c.Choices = []chat.Choice{{Message: m, Logprobs: json.RawMessage("null"), FinishReason: &finish}}
	if in.Usage != nil {
		c.Usage = chat.AppendUsage(nil, in.chatUsage())
	}
	return c.JSON(), nil
}
