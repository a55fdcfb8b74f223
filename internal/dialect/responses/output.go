package responses

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// The reading of a Responses answer as Chat, which ToChatResponse (the
// items of a whole response) and ToChatStream (the items as the events
// build them) share: each text part says its text on its Chat channel
// (output_text content, refusal, reasoning summaries and reasoning text
// as reasoning), each function_call is a tool call, in the order they
// come. Whatever says a part's text again (a .done event, an item's done
// event, the final response) is checked against what was said: the rest
// of it is said when it only adds to the end of the latest text of its
// channel, and anything else cannot be said faithfully
// (*chat.UnreadableError). So no text is lost, whichever of the events
// carrying it an upstream sends.

// outputItemIn is an output item of a Responses answer.
type outputItemIn struct {
	Type      string         `json:"type"`
	ID        string         `json:"id"`
	CallID    string         `json:"call_id"`
	Name      string         `json:"name"`
	Arguments *string        `json:"arguments"`
	Content   []outputPartIn `json:"content"`
	Summary   []outputPartIn `json:"summary"`
}

// outputPartIn is a part of an output item: a message's output_text or
// refusal, a reasoning item's summary_text or reasoning_text.
type outputPartIn struct {
	Type    string  `json:"type"`
	Text    *string `json:"text"`
	Refusal *string `json:"refusal"`
}

// text is the part's text.
func (p *outputPartIn) text() string {
	if p.Type == "refusal" {
		return deref(p.Refusal)
	}
	return deref(p.Text)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// itemKind is what an output item is to a Chat client.
type itemKind uint8

const (
	itemMessage   itemKind = iota + 1 // text and refusal parts
	itemReasoning                     // summary and reasoning_text parts
	itemCall                          // a function_call: a tool call
	itemDropped                       // the work of a tool the provider ran itself
)

// kindOf is the kind of an item type; 0 for one Chat cannot carry.
func kindOf(typ string) itemKind {
	switch typ {
	case "message":
		return itemMessage
	case "reasoning":
		return itemReasoning
	case "function_call":
		return itemCall
	}
	if serverItems[typ] {
		return itemDropped
	}
	return 0
}

// serverItems are the item types of the tools the provider runs itself:
// their calls and results are not for the client, and the model's answer
// about them comes as text. Any other type (computer_call,
// custom_tool_call, local_shell_call, mcp_approval_request...) asks the
// client for something a Chat client cannot be asked, and is unreadable.
var serverItems = map[string]bool{
	"web_search_call": true, "file_search_call": true, "code_interpreter_call": true,
	"image_generation_call": true, "mcp_call": true, "mcp_list_tools": true,
}

// outItem is an output item being read.
type outItem struct {
	index int // output_index
	id    string
	kind  itemKind
	parts []*outPart
	// said reports reasoning text said for the item: each later part of
	// it is set off by a blank line (a summary's parts are paragraphs).
	said bool
	// A function_call's: its Chat index, name, arguments said so far.
	call int
	name string
	args []byte
}

// outPart is a part of an item being read.
type outPart struct {
	item *outItem
	// summary is a reasoning item's summary part (else a content part);
	// index is its summary_index or content_index.
	summary bool
	index   int
	ch      chat.Channel
	text    []byte // said so far
}

// before reports whether p comes before q in the answer.
func (p *outPart) before(q *outPart) bool {
	if p.item.index != q.item.index {
		return p.item.index < q.item.index
	}
	if p.summary != q.summary {
		return p.summary // a reasoning item's summary, then its content
	}
	return p.index < q.index
}

// outSink receives what the answer says, in order.
type outSink interface {
	text(ch chat.Channel, b []byte)
	callStart(call int, id, name string)
	callArgs(call int, b []byte)
}

// outReader reads output items into an outSink.
type outReader struct {
	sink  outSink
	items []*outItem
	last  [chat.ChanRefusal + 1]*outPart // by channel: the part that said its latest text
	calls int
	err   *chat.UnreadableError // the first reason the answer is unreadable
}

// fail records why the answer cannot be read faithfully; the first
// reason stands.
func (r *outReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = &chat.UnreadableError{Reason: fmt.Sprintf(format, args...)}
	}
}

func (r *outReader) item(index int) *outItem {
	for _, x := range r.items {
		if x.index == index {
			return x
		}
	}
	return nil
}

// add starts the item at index (output_item.added) and says what it
// already holds.
func (r *outReader) add(index int, it *outputItemIn) {
	if index < 0 {
		r.fail("an output_index of %d", index)
		return
	}
	if r.item(index) != nil {
		r.fail("item %d added twice", index)
		return
	}
	x := &outItem{index: index, id: it.ID, kind: kindOf(it.Type)}
	if x.kind == 0 {
		r.fail("output item type %q has no Chat Completions counterpart", it.Type)
		return
	}
	r.items = append(r.items, x)
	if x.kind == itemCall {
		x.call, x.name = r.calls, it.Name
		r.calls++
		id := it.CallID
		if id == "" {
			id = it.ID
		}
		r.sink.callStart(x.call, id, x.name)
	}
	r.settleItem(x, it)
}

// done checks the item at index against it, whole (output_item.done, an
// item of the final response), and says what was missing. An item not
// added before is added now.
func (r *outReader) done(index int, it *outputItemIn) {
	x := r.item(index)
	if x == nil {
		r.add(index, it)
		return
	}
	if kindOf(it.Type) != x.kind {
		r.fail("item %d is of type %q now", index, it.Type)
		return
	}
	r.settleItem(x, it)
}

// doneRaw is done for an item still in JSON.
func (r *outReader) doneRaw(index int, raw json.RawMessage) {
	var it outputItemIn
	if err := json.Unmarshal(raw, &it); err != nil {
		r.fail("output item %d is not an object of the expected shape: %v", index, err)
		return
	}
	r.done(index, &it)
}

// settleItem says what it holds that was not said of x.
func (r *outReader) settleItem(x *outItem, it *outputItemIn) {
	switch x.kind {
	case itemMessage:
		r.settleParts(x, false, it.Content)
	case itemReasoning:
		r.settleParts(x, true, it.Summary)
		r.settleParts(x, false, it.Content)
	case itemCall:
		if it.Name != x.name {
			r.fail("function call %d is named %q, then %q", x.call, x.name, it.Name)
			return
		}
		if it.Arguments != nil {
			r.settleArgs(x, *it.Arguments)
		}
	}
}

func (r *outReader) settleParts(x *outItem, summary bool, parts []outputPartIn) {
	for i := range parts {
		pt := &parts[i]
		if p := r.part(x, summary, i, pt.Type); p != nil {
			r.settle(p, pt.text())
		}
	}
}

// partTypes are the part types of each kind of item, with their channel:
// a message's content, a reasoning item's summary and content.
var partTypes = map[string]struct {
	kind    itemKind
	summary bool
	ch      chat.Channel
}{
	"output_text":    {itemMessage, false, chat.ChanText},
	"refusal":        {itemMessage, false, chat.ChanRefusal},
	"summary_text":   {itemReasoning, true, chat.ChanReasoning},
	"reasoning_text": {itemReasoning, false, chat.ChanReasoning},
}

// part is x's part of type typ at index (a summary part or a content
// part), made at its first mention; nil, the answer unreadable, when the
// type does not belong there or contradicts an earlier mention.
func (r *outReader) part(x *outItem, summary bool, index int, typ string) *outPart {
	pt, ok := partTypes[typ]
	if !ok || pt.kind != x.kind || pt.summary != summary {
		r.fail("a part of type %q in item %d", typ, x.index)
		return nil
	}
	if index < 0 {
		r.fail("a part index of %d in item %d", index, x.index)
		return nil
	}
	for _, p := range x.parts {
		if p.summary == summary && p.index == index {
			if p.ch != pt.ch {
				r.fail("part %d of item %d is of type %q now", index, x.index, typ)
				return nil
			}
			return p
		}
	}
	p := &outPart{item: x, summary: summary, index: index, ch: pt.ch}
	x.parts = append(x.parts, p)
	return p
}

// say says more text of p. It must come at the end of its channel's text
// so far: after any text of a later part, it would land in the wrong
// place.
func (r *outReader) say(p *outPart, b []byte) {
	if len(b) == 0 || r.err != nil {
		return
	}
	if l := r.last[p.ch]; l != nil && l != p && !l.before(p) {
		r.fail("text for part %d of item %d after text of a later part", p.index, p.item.index)
		return
	}
	r.last[p.ch] = p
	if p.ch == chat.ChanReasoning {
		if len(p.text) == 0 && p.item.said {
			r.sink.text(p.ch, paragraph)
		}
		p.item.said = true
	}
	p.text = append(p.text, b...)
	r.sink.text(p.ch, b)
}

// paragraph sets off one part of a reasoning item from the one before.
var paragraph = []byte("\n\n")

// settle checks p's whole text: what was said must begin it, and the
// rest is said now.
func (r *outReader) settle(p *outPart, full string) {
	if !strings.HasPrefix(full, string(p.text)) {
		r.fail("part %d of item %d is not the text its deltas said", p.index, p.item.index)
		return
	}
	r.say(p, []byte(full[len(p.text):]))
}

// sayArgs says more of x's arguments.
func (r *outReader) sayArgs(x *outItem, b []byte) {
	if len(b) == 0 || r.err != nil {
		return
	}
	x.args = append(x.args, b...)
	r.sink.callArgs(x.call, b)
}

// settleArgs checks x's whole arguments, as settle does text.
func (r *outReader) settleArgs(x *outItem, full string) {
	if !strings.HasPrefix(full, string(x.args)) {
		r.fail("the arguments of function call %d are not what their deltas said", x.call)
		return
	}
	r.sayArgs(x, []byte(full[len(x.args):]))
}

// responseIn is the part of a Responses response object the translators
// into Chat read.
type responseIn struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	CreatedAt         int64             `json:"created_at"`
	Status            string            `json:"status"`
	Model             string            `json:"model"`
	Output            []json.RawMessage `json:"output"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Usage *usageOut `json:"usage"`
}

// chatID is the Chat id of a response: chatcmpl-X for resp_X, as
// FromChatResponse makes resp_X of chatcmpl-X.
func chatID(id string) string {
	if base, ok := strings.CutPrefix(id, "resp_"); ok {
		return "chatcmpl-" + base
	}
	return id
}

// finish is the finish_reason of a finished response (status completed
// or incomplete): the inverse of result.status; a completed answer that
// calls tools is "tool_calls".
func (in *responseIn) finish(calls bool, opt chat.Options) string {
	if in.Status == "incomplete" {
		reason := ""
		if in.IncompleteDetails != nil {
			reason = in.IncompleteDetails.Reason
		}
		switch {
		case reason == "content_filter":
			return "content_filter"
		case reason == chat.FinishPauseTurn && opt.KeepPauseTurn:
			return chat.FinishPauseTurn
		}
		return "length" // max_output_tokens, pause_turn for a Chat client, anything new
	}
	if calls {
		return "tool_calls"
	}
	return "stop"
}

// chatUsage is the response's usage in Chat's terms.
func (in *responseIn) chatUsage() chat.ChunkUsage {
	u := in.Usage
	total := u.TotalTokens
	if total == 0 {
		total = u.InputTokens + u.OutputTokens
	}
	return chat.ChunkUsage{Prompt: u.InputTokens, Completion: u.OutputTokens, Total: total,
		Cached: u.InputTokensDetails.CachedTokens, Reasoning: u.OutputTokensDetails.ReasoningTokens}
}
