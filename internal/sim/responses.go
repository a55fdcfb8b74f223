package sim

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// respRequest is the part of an OpenAI Responses request the simulator
// reads. temperature, store, metadata and the rest are accepted and
// ignored; tools and tool_choice are echoed back raw, as OpenAI does.
type respRequest struct {
	Model           string          `json:"model"`
	Stream          bool            `json:"stream"`
	Input           json.RawMessage `json:"input"` // a string or an array of items
	Instructions    *string         `json:"instructions"`
	MaxOutputTokens *int            `json:"max_output_tokens"`
	Reasoning       *struct {
		Effort  *string `json:"effort"`
		Summary *string `json:"summary"`
	} `json:"reasoning"`
	Tools      json.RawMessage `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`

	autoTools bool // the tool-call mode is ToolCallsAuto
}

// respItem is one input item, decoded loosely: a message (with or
// without "type":"message"), a function_call, a function_call_output
// or a reasoning item.
type respItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or input_text parts
	Output  json.RawMessage `json:"output"`  // function_call_output: a string or parts
}

// items returns the input items; a string input is one user message.
// An input that is neither gives no items (the simulator is lenient).
func (req *respRequest) items() []respItem {
	var text string
	if json.Unmarshal(req.Input, &text) == nil {
		raw, _ := json.Marshal(text)
		return []respItem{{Type: "message", Role: "user", Content: raw}}
	}
	var items []respItem
	if json.Unmarshal(req.Input, &items) != nil {
		return nil
	}
	return items
}

// wantsReasoning reports whether the request asks for reasoning: a
// reasoning member whose effort is not "none".
func (req *respRequest) wantsReasoning() bool {
	return req.Reasoning != nil && (req.Reasoning.Effort == nil || *req.Reasoning.Effort != "none")
}

// inputTokens estimates the prompt's tokens as ceil(characters / 4) of
// the instructions and every input item's text (message contents and
// function call outputs), at least 1: the same rule as Chat's.
func (req *respRequest) inputTokens() int {
	chars := 0
	if req.Instructions != nil {
		chars += len([]rune(*req.Instructions))
	}
	for _, it := range req.items() {
		chars += textChars(it.Content) + textChars(it.Output)
	}
	return max(1, (chars+3)/4)
}

// respPlan is what one Responses request will be answered with.
type respPlan struct {
	req       *respRequest
	n         int64
	created   int64
	reasoning bool      // a reasoning item first
	tool      *toolCall // a function_call item instead of the message
	input     int       // estimated input tokens

	// summary (the reasoning) and content are the answer's pieces: the
	// Server's, or none and the echo in the handoff echo mode.
	summary, content []string
}

func (p *respPlan) suffix() string      { return "sim_" + strconv.FormatInt(p.n, 10) }
func (p *respPlan) id() string          { return "resp_" + p.suffix() }
func (p *respPlan) reasoningID() string { return "rs_" + p.suffix() }
func (p *respPlan) messageID() string   { return "msg_" + p.suffix() }
func (p *respPlan) callItemID() string  { return "fc_" + p.suffix() }
func (p *respPlan) callID() string      { return "call_" + p.suffix() }

// shape is the answer's stream shape.
func (p *respPlan) shape() streamShape {
	sh := streamShape{lead: 1}
	if p.reasoning {
		sh.reasoning = len(p.summary)
	}
	if p.tool != nil {
		sh.toolArgs = len(ToolInputFragments)
	} else {
		sh.answer = len(p.content)
	}
	return sh
}

// respUsage is the Responses usage object.
type respUsage struct {
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

// usage counts one output token per delta the answer streams, the
// reasoning deltas only when they are sent.
func (p *respPlan) usage(s *Server) *respUsage {
	u := &respUsage{InputTokens: p.input}
	out := len(p.content)
	if p.tool != nil {
		out = len(ToolInputFragments)
	}
	if p.reasoning {
		u.OutputTokensDetails.ReasoningTokens = len(p.summary)
		out += len(p.summary)
	}
	u.OutputTokens = out
	u.TotalTokens = p.input + out
	return u
}

// respObject is a Responses `response` object: the non-streaming answer
// and the payload of response.created, .in_progress and .completed. It
// carries every member openai-go's Response has, so nothing decodes as
// missing; field order is OpenAI's wire order.
type respObject struct {
	ID                 string          `json:"id"`
	Object             string          `json:"object"`
	CreatedAt          int64           `json:"created_at"`
	Status             string          `json:"status"`
	Error              *struct{}       `json:"error"`              // always null
	IncompleteDetails  *struct{}       `json:"incomplete_details"` // always null
	Instructions       *string         `json:"instructions"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Model              string          `json:"model"`
	Output             []respItemOut   `json:"output"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Reasoning          respReasoning   `json:"reasoning"`
	Store              bool            `json:"store"`
	Temperature        float64         `json:"temperature"`
	Text               json.RawMessage `json:"text"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Tools              json.RawMessage `json:"tools"`
	TopP               float64         `json:"top_p"`
	Truncation         string          `json:"truncation"`
	Usage              *respUsage      `json:"usage"` // null until completed
	Metadata           struct{}        `json:"metadata"`
	AccessPrograms     struct {
		Cyber string `json:"cyber"`
	} `json:"access_programs"` // required by openai-go v3.102's Response
}

type respReasoning struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// respItemOut is an output item: reasoning, message or function_call;
// the pointer fields are those of the item's type.
type respItemOut struct {
	Type      string      `json:"type"`
	ID        string      `json:"id"`
	Status    string      `json:"status,omitempty"` // not on reasoning items
	Summary   *[]respPart `json:"summary,omitempty"`
	Role      string      `json:"role,omitempty"`
	Content   *[]respPart `json:"content,omitempty"`
	CallID    string      `json:"call_id,omitempty"`
	Name      string      `json:"name,omitempty"`
	Arguments *string     `json:"arguments,omitempty"`
}

// respPart is a summary_text part or an output_text content part.
type respPart struct {
	Type        string    `json:"type"`
	Text        string    `json:"text"`
	Annotations *[]string `json:"annotations,omitempty"` // output_text: always []
	Logprobs    *[]string `json:"logprobs,omitempty"`    // output_text: always []
}

// object returns the response object in a given status, with the
// given output items; usage only when completed.
func (p *respPlan) object(s *Server, status string, output []respItemOut) respObject {
	o := respObject{
		ID: p.id(), Object: "response", CreatedAt: p.created, Status: status,
		Instructions: p.req.Instructions, MaxOutputTokens: p.req.MaxOutputTokens,
		Model: p.req.Model, Output: output, ParallelToolCalls: true,
		Temperature: 1, TopP: 1, Truncation: "disabled",
		Text:       json.RawMessage(`{"format":{"type":"text"}}`),
		ToolChoice: orRaw(p.req.ToolChoice, `"auto"`),
		Tools:      orRaw(p.req.Tools, `[]`),
	}
	o.AccessPrograms.Cyber = "standard"
	if p.req.Reasoning != nil {
		o.Reasoning = respReasoning{p.req.Reasoning.Effort, p.req.Reasoning.Summary}
	}
	if status == "completed" {
		o.Usage = p.usage(s)
	}
	return o
}

// orRaw returns raw, or def when raw is absent or null.
func orRaw(raw json.RawMessage, def string) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(def)
	}
	return raw
}

// Output item constructors: done gives the finished item, else the
// item as output_item.added announces it.

func (p *respPlan) reasoningItem(text string, done bool) respItemOut {
	parts := []respPart{}
	if done {
		parts = append(parts, respPart{Type: "summary_text", Text: text})
	}
	return respItemOut{Type: "reasoning", ID: p.reasoningID(), Summary: &parts}
}

func (p *respPlan) messageItem(text string, done bool) respItemOut {
	it := respItemOut{Type: "message", ID: p.messageID(), Status: "in_progress", Role: "assistant", Content: &[]respPart{}}
	if done {
		it.Status = "completed"
		it.Content = &[]respPart{outputText(text)}
	}
	return it
}

func (p *respPlan) callItem(done bool) respItemOut {
	args, status := "", "in_progress"
	if done {
		args, status = ToolInput, "completed"
	}
	return respItemOut{Type: "function_call", ID: p.callItemID(), Status: status, CallID: p.callID(), Name: p.tool.name, Arguments: &args}
}

// outputText is an output_text part with its empty annotations.
func outputText(text string) respPart {
	return respPart{Type: "output_text", Text: text, Annotations: &[]string{}, Logprobs: &[]string{}}
}

// responses answers POST .../responses: like chat, it draws the
// request's fault, then answers with an error status, stalls, streams
// or completes. Every error body is OpenAI's.
func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	n := s.requests.Add(1)
	echo, err := s.echoMode(r.Header.Get(EchoHeader))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), "invalid_request_error", "invalid_header")
		return
	}
	var req respRequest
	if req.autoTools, err = s.autoTools(r.Header.Get(ToolCallsHeader)); err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), "invalid_request_error", "invalid_header")
		return
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error(), "invalid_request_error", "invalid_json")
		return
	}
	if req.Model == "" {
		req.Model = s.cfg.Models[0]
	}
	plan := &respPlan{
		req: &req, n: n, created: time.Now().Unix(),
		tool:    req.responsesToolCall(),
		input:   req.inputTokens(),
		summary: s.reasoning, content: s.content,
	}
	if echo == EchoHandoff {
		plan.summary, plan.content = nil, echoPieces(req.echo())
	}
	s.continueResponses(&req, plan, echo == EchoHandoff)
	plan.reasoning = req.wantsReasoning() && len(plan.summary) > 0
	f := s.place(s.pickFault(uint64(n)), n, plan.shape())
	switch {
	case f != nil && (f.Kind == FaultStatus || f.Kind == FaultOverloaded):
		writeStatusFault(w, f)
		return
	case f != nil && f.Kind == FaultStall:
		err = s.stall(r)
	case req.Stream:
		err = s.streamResponse(w, r, plan, f)
	default:
		err = s.completeResponse(w, r, plan, f)
	}
	if errors.Is(err, errDrop) || errors.Is(err, errClosed) {
		panic(http.ErrAbortHandler) // as in chat: the client sees an unexpected EOF
	}
}

// completeResponse answers a non-streaming Responses request after TTFB.
func (s *Server) completeResponse(w http.ResponseWriter, r *http.Request, p *respPlan, f *Fault) error {
	if err := (waiter{r.Context()}).wait(s.cfg.TTFB); err != nil {
		return err
	}
	if f != nil && f.Kind == FaultDrop {
		return errDrop
	}
	if f != nil && f.Kind == FaultError {
		e := inBandError.Error
		writeError(w, http.StatusInternalServerError, e.Message, e.Type, e.Code)
		return nil
	}
	var output []respItemOut
	if p.reasoning {
		output = append(output, p.reasoningItem(strings.Join(p.summary, ""), true))
	}
	if p.tool != nil {
		output = append(output, p.callItem(true))
	} else {
		output = append(output, p.messageItem(strings.Join(p.content, ""), true))
	}
	return writeJSON(w, p.object(s, "completed", output))
}
