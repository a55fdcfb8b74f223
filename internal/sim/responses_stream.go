package sim

import (
	"net/http"
	"strings"
)

// respErrorEvent is the in-band `event: error`. OpenAI documents code,
// message and param at the top level, but the live API nests them
// under "error", and that member is what openai-go and openai-node
// raise on (a payload with a top-level "error"); so both are sent.
type respErrorEvent struct {
	Type    string        `json:"type"`
	Error   respErrorBody `json:"error"`
	Code    string        `json:"code"`
	Message string        `json:"message"`
	Param   *string       `json:"param"`
}

type respErrorBody struct {
	Type    string  `json:"type"`
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
}

// responsesInBandError is the data of the error fault's `event: error`.
func responsesInBandError() respErrorEvent {
	msg := inBandError.Error.Message
	return respErrorEvent{
		Type:  "error",
		Error: respErrorBody{Type: "server_error", Code: "server_error", Message: msg},
		Code:  "server_error", Message: msg,
	}
}

// Responses stream event payloads; field order is wire order, and
// sequence_number is appended by typedWriter.event.
type (
	evResponse struct {
		Type     string     `json:"type"`
		Response respObject `json:"response"`
	}
	evItem struct {
		Type        string      `json:"type"`
		OutputIndex int         `json:"output_index"`
		Item        respItemOut `json:"item"`
	}
	evSummaryPart struct {
		Type         string   `json:"type"`
		ItemID       string   `json:"item_id"`
		OutputIndex  int      `json:"output_index"`
		SummaryIndex int      `json:"summary_index"`
		Part         respPart `json:"part"`
	}
	evSummaryText struct {
		Type         string  `json:"type"`
		ItemID       string  `json:"item_id"`
		OutputIndex  int     `json:"output_index"`
		SummaryIndex int     `json:"summary_index"`
		Delta        *string `json:"delta,omitempty"`
		Text         *string `json:"text,omitempty"`
	}
	evContentPart struct {
		Type         string   `json:"type"`
		ItemID       string   `json:"item_id"`
		OutputIndex  int      `json:"output_index"`
		ContentIndex int      `json:"content_index"`
		Part         respPart `json:"part"`
	}
	evOutputText struct {
		Type         string   `json:"type"`
		ItemID       string   `json:"item_id"`
		OutputIndex  int      `json:"output_index"`
		ContentIndex int      `json:"content_index"`
		Delta        *string  `json:"delta,omitempty"`
		Text         *string  `json:"text,omitempty"`
		Logprobs     []string `json:"logprobs"` // always []
	}
	evArguments struct {
		Type        string  `json:"type"`
		ItemID      string  `json:"item_id"`
		OutputIndex int     `json:"output_index"`
		Delta       *string `json:"delta,omitempty"`
		Name        string  `json:"name,omitempty"` // .done only
		Arguments   *string `json:"arguments,omitempty"`
	}
)

// streamResponse answers a streaming Responses request: after TTFB,
// response.created and response.in_progress; the reasoning item if
// asked for (its summary deltas paced by the reasoning pattern); the
// message item (output_text deltas) or the function_call item
// (arguments deltas), paced by the content pattern; response.completed.
// The texts and pacing are the Chat stream's.
func (s *Server) streamResponse(w http.ResponseWriter, r *http.Request, p *respPlan, f *Fault) error {
	wt := waiter{r.Context()}
	if err := wt.wait(s.cfg.TTFB); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rw := newTypedWriter(w, f, responsesInBandError(), true)

	if err := rw.counted("response.created", evResponse{"response.created", p.object(s, "in_progress", []respItemOut{})}); err != nil {
		return err
	}
	if err := rw.event("response.in_progress", evResponse{"response.in_progress", p.object(s, "in_progress", []respItemOut{})}); err != nil {
		return err
	}
	var output []respItemOut
	if p.reasoning {
		item, err := s.streamReasoning(rw, wt, p, len(output))
		if err != nil {
			return err
		}
		output = append(output, item)
	}
	var item respItemOut
	var err error
	if p.tool != nil {
		item, err = s.streamCall(rw, wt, p, len(output))
	} else {
		item, err = s.streamText(rw, wt, p, len(output))
	}
	if err != nil {
		return err
	}
	output = append(output, item)

	if err := rw.beforeFinish(); err != nil { // as in Chat
		return err
	}
	if err := rw.beforeEnd(); err != nil {
		return err
	}
	return rw.event("response.completed", evResponse{"response.completed", p.object(s, "completed", output)})
}

// paced sends one counted event per piece, each when pattern makes it due.
func (rw *typedWriter) paced(wt waiter, pattern Pattern, pieces []string, ev func(piece string) (string, any)) error {
	pc := newPacer(pattern, wt)
	for i, piece := range pieces {
		if err := pc.before(i); err != nil {
			return err
		}
		typ, v := ev(piece)
		if err := rw.counted(typ, v); err != nil {
			return err
		}
	}
	return nil
}

// streamReasoning streams the reasoning item at index idx, its one
// summary part's text as reasoning_summary_text deltas.
func (s *Server) streamReasoning(rw *typedWriter, wt waiter, p *respPlan, idx int) (respItemOut, error) {
	text := strings.Join(p.summary, "")
	id := p.reasoningID()
	if err := rw.event("response.output_item.added", evItem{"response.output_item.added", idx, p.reasoningItem("", false)}); err != nil {
		return respItemOut{}, err
	}
	const added, partDone = "response.reasoning_summary_part.added", "response.reasoning_summary_part.done"
	if err := rw.event(added, evSummaryPart{added, id, idx, 0, respPart{Type: "summary_text"}}); err != nil {
		return respItemOut{}, err
	}
	const delta, done = "response.reasoning_summary_text.delta", "response.reasoning_summary_text.done"
	err := rw.paced(wt, s.cfg.ReasoningPattern, p.summary, func(x string) (string, any) {
		return delta, evSummaryText{Type: delta, ItemID: id, OutputIndex: idx, Delta: &x}
	})
	if err != nil {
		return respItemOut{}, err
	}
	if err := rw.event(done, evSummaryText{Type: done, ItemID: id, OutputIndex: idx, Text: &text}); err != nil {
		return respItemOut{}, err
	}
	if err := rw.event(partDone, evSummaryPart{partDone, id, idx, 0, respPart{Type: "summary_text", Text: text}}); err != nil {
		return respItemOut{}, err
	}
	item := p.reasoningItem(text, true)
	return item, rw.event("response.output_item.done", evItem{"response.output_item.done", idx, item})
}

// streamText streams the message item at index idx, its one
// output_text part as output_text deltas.
func (s *Server) streamText(rw *typedWriter, wt waiter, p *respPlan, idx int) (respItemOut, error) {
	text := strings.Join(p.content, "")
	id := p.messageID()
	if err := rw.event("response.output_item.added", evItem{"response.output_item.added", idx, p.messageItem("", false)}); err != nil {
		return respItemOut{}, err
	}
	const added, partDone = "response.content_part.added", "response.content_part.done"
	if err := rw.event(added, evContentPart{added, id, idx, 0, outputText("")}); err != nil {
		return respItemOut{}, err
	}
	const delta, done = "response.output_text.delta", "response.output_text.done"
	err := rw.paced(wt, s.cfg.ContentPattern, p.content, func(x string) (string, any) {
		return delta, evOutputText{Type: delta, ItemID: id, OutputIndex: idx, Delta: &x, Logprobs: []string{}}
	})
	if err != nil {
		return respItemOut{}, err
	}
	if err := rw.event(done, evOutputText{Type: done, ItemID: id, OutputIndex: idx, Text: &text, Logprobs: []string{}}); err != nil {
		return respItemOut{}, err
	}
	if err := rw.event(partDone, evContentPart{partDone, id, idx, 0, outputText(text)}); err != nil {
		return respItemOut{}, err
	}
	item := p.messageItem(text, true)
	return item, rw.event("response.output_item.done", evItem{"response.output_item.done", idx, item})
}

// streamCall streams the function_call item at index idx, its
// arguments as ToolInputFragments, one delta each (never split).
func (s *Server) streamCall(rw *typedWriter, wt waiter, p *respPlan, idx int) (respItemOut, error) {
	id := p.callItemID()
	if err := rw.event("response.output_item.added", evItem{"response.output_item.added", idx, p.callItem(false)}); err != nil {
		return respItemOut{}, err
	}
	const delta, done = "response.function_call_arguments.delta", "response.function_call_arguments.done"
	err := rw.paced(wt, s.cfg.ContentPattern, ToolInputFragments, func(x string) (string, any) {
		return delta, evArguments{Type: delta, ItemID: id, OutputIndex: idx, Delta: &x}
	})
	if err != nil {
		return respItemOut{}, err
	}
	args := ToolInput
	if err := rw.event(done, evArguments{Type: done, ItemID: id, OutputIndex: idx, Name: p.tool.name, Arguments: &args}); err != nil {
		return respItemOut{}, err
	}
	item := p.callItem(true)
	return item, rw.event("response.output_item.done", evItem{"response.output_item.done", idx, item})
}
