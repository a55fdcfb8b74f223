package sim

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
)

// messagesRequest is the part of an Anthropic Messages request the
// simulator reads. max_tokens, temperature and the rest are accepted
// and ignored.
type messagesRequest struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	System   json.RawMessage `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Thinking *struct {
		Type string `json:"type"`
	} `json:"thinking"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
	ToolChoice *struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tool_choice"`

	autoTools bool // the tool-call mode is ToolCallsAuto
}

// wantsThinking reports whether the request asks for thinking blocks.
func (req *messagesRequest) wantsThinking() bool {
	return req.Thinking != nil && (req.Thinking.Type == "enabled" || req.Thinking.Type == "adaptive")
}

// inputTokens estimates the prompt's tokens as ceil(characters / 4) of
// the system prompt and every message's text (string contents, text
// blocks and tool results), at least 1: the same rule as Chat's.
func (req *messagesRequest) inputTokens() int {
	chars := textChars(req.System)
	for _, m := range req.Messages {
		chars += textChars(m.Content)
	}
	return max(1, (chars+3)/4)
}

// textChars counts the characters of a string, or of the text and
// nested content (tool_result) of an array of blocks.
func textChars(raw json.RawMessage) int {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return len([]rune(text))
	}
	var blocks []struct {
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return 0
	}
	n := 0
	for _, b := range blocks {
		n += len([]rune(b.Text))
		if len(b.Content) > 0 {
			n += textChars(b.Content)
		}
	}
	return n
}

// Messages stop reasons.
const (
	stopEndTurn = "end_turn"
	stopToolUse = "tool_use"
)

// msgUsage is the Anthropic usage object.
type msgUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// message is a Messages response, also the message of message_start.
type message struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []contentBlock `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        msgUsage       `json:"usage"`
}

// contentBlock is a thinking, text or tool_use block; the pointer
// fields are those of the block's type.
type contentBlock struct {
	Type      string          `json:"type"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	Text      *string         `json:"text,omitempty"`
	ID        *string         `json:"id,omitempty"`   // tool_use: always sent,
	Name      *string         `json:"name,omitempty"` // even when empty
	Input     json.RawMessage `json:"input,omitempty"`
}

// msgPlan is what one Messages request will be answered with.
type msgPlan struct {
	req       *messagesRequest
	n         int64
	thinking  bool      // a thinking block first
	tool      *toolCall // a tool_use block instead of the text block
	input     int       // estimated input tokens
	signature string

	// reasoning and content are the answer's pieces: the Server's, or
	// none and the echo in the handoff echo mode.
	reasoning, content []string
}

func (p *msgPlan) id() string     { return "msg_sim_" + strconv.FormatInt(p.n, 10) }
func (p *msgPlan) toolID() string { return "toolu_sim_" + strconv.FormatInt(p.n, 10) }

func (p *msgPlan) stopReason() string {
	if p.tool != nil {
		return stopToolUse
	}
	return stopEndTurn
}

// shape is the answer's stream shape.
func (p *msgPlan) shape() streamShape {
	sh := streamShape{lead: 1}
	if p.thinking {
		sh.reasoning = len(p.reasoning)
	}
	if p.tool != nil {
		sh.toolArgs = len(ToolInputFragments)
	} else {
		sh.answer = len(p.content)
	}
	return sh
}

// outputTokens counts one token per delta the answer streams.
func (p *msgPlan) outputTokens() int {
	n := len(p.content)
	if p.tool != nil {
		n = len(ToolInputFragments)
	}
	if p.thinking {
		n += len(p.reasoning)
	}
	return n
}

// signature returns the thinking signature for a seed: opaque and
// base64 like Anthropic's, and fixed so tests can compare it.
func signature(seed int64) string {
	r := newRNG(uint64(seed), 3)
	b := make([]byte, 48)
	for i := range b {
		b[i] = byte(r.next())
	}
	return base64.StdEncoding.EncodeToString(b)
}

// Signature returns the signature of the thinking blocks a Server built
// from cfg sends.
func Signature(cfg Config) string { return signature(cfg.withDefaults().Seed) }

// messages answers POST .../messages: like chat, it draws the request's
// fault, then answers with an error status, stalls, streams or completes.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	n := s.requests.Add(1)
	echo, err := s.echoMode(r.Header.Get(EchoHeader))
	if err != nil {
		writeAnthropicError(w, http.StatusBadRequest, err.Error())
		return
	}
	var req messagesRequest
	if req.autoTools, err = s.autoTools(r.Header.Get(ToolCallsHeader)); err != nil {
		writeAnthropicError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req); err != nil {
		writeAnthropicError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	if req.Model == "" {
		req.Model = s.cfg.Models[0]
	}
	plan := &msgPlan{
		req: &req, n: n,
		tool:      req.messagesToolCall(),
		input:     req.inputTokens(),
		signature: s.signature,
		reasoning: s.reasoning, content: s.content,
	}
	if echo == EchoHandoff {
		plan.reasoning, plan.content = nil, echoPieces(req.echo())
	}
	s.continueMessages(&req, plan, echo == EchoHandoff)
	plan.thinking = req.wantsThinking() && len(plan.reasoning) > 0
	f := s.place(s.pickFault(uint64(n)), n, plan.shape())
	switch {
	case f != nil && (f.Kind == FaultStatus || f.Kind == FaultOverloaded):
		writeAnthropicFault(w, f)
		return
	case f != nil && f.Kind == FaultStall:
		err = s.stall(r)
	case req.Stream:
		err = s.streamMessage(w, r, plan, f)
	default:
		err = s.completeMessage(w, r, plan, f)
	}
	if errors.Is(err, errDrop) || errors.Is(err, errClosed) {
		panic(http.ErrAbortHandler) // as in chat: the client sees an unexpected EOF
	}
}

// completeMessage answers a non-streaming Messages request after TTFB.
func (s *Server) completeMessage(w http.ResponseWriter, r *http.Request, p *msgPlan, f *Fault) error {
	if err := (waiter{r.Context()}).wait(s.cfg.TTFB); err != nil {
		return err
	}
	if f != nil && f.Kind == FaultDrop {
		return errDrop
	}
	if f != nil && f.Kind == FaultError {
		writeAnthropicError(w, http.StatusInternalServerError, inBandError.Error.Message)
		return nil
	}
	stop := p.stopReason()
	resp := message{
		ID: p.id(), Type: "message", Role: "assistant", Model: p.req.Model,
		Content:    []contentBlock{},
		StopReason: &stop,
		Usage:      msgUsage{InputTokens: p.input, OutputTokens: p.outputTokens()},
	}
	if p.thinking {
		thinking, sig := strings.Join(p.reasoning, ""), p.signature
		resp.Content = append(resp.Content, contentBlock{Type: "thinking", Thinking: &thinking, Signature: &sig})
	}
	if p.tool != nil {
		resp.Content = append(resp.Content, contentBlock{
			Type: "tool_use", ID: new(p.toolID()), Name: &p.tool.name, Input: json.RawMessage(ToolInput),
		})
	} else {
		text := strings.Join(p.content, "")
		resp.Content = append(resp.Content, contentBlock{Type: "text", Text: &text})
	}
	return writeJSON(w, resp)
}

// countTokens answers POST .../messages/count_tokens with the same
// estimate as a Messages answer's usage.input_tokens. It is a request
// like any other: counted, and subject to the fault draw (a drop closes
// the connection, an error fault answers 500).
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	n := s.requests.Add(1)
	var req messagesRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req); err != nil {
		writeAnthropicError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	f := s.pickFault(uint64(n))
	var err error
	switch {
	case f != nil && (f.Kind == FaultStatus || f.Kind == FaultOverloaded):
		writeAnthropicFault(w, f)
		return
	case f != nil && f.Kind == FaultStall:
		err = s.stall(r)
	case f != nil && f.Kind == FaultDrop:
		err = errDrop
	case f != nil && f.Kind == FaultError:
		writeAnthropicError(w, http.StatusInternalServerError, inBandError.Error.Message)
	default:
		err = writeJSON(w, struct {
			InputTokens int `json:"input_tokens"`
		}{req.inputTokens()})
	}
	if errors.Is(err, errDrop) || errors.Is(err, errClosed) {
		panic(http.ErrAbortHandler)
	}
}

// writeJSON writes v as a 200 JSON response, without HTML escaping so
// the text reaches the client byte for byte as generated.
func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
