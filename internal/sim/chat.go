package sim

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
)

// chatRequest is the part of a chat completion request the simulator reads.
type chatRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`

	// autoTools: the tool-call mode is ToolCallsAuto.
	autoTools bool

	// form is the reasoning form of the answer: the config's, or the
	// request's ReasoningFormHeader.
	form string

	// reasoning and content are the answer's pieces: the Server's, or
	// none and the echo in the handoff echo mode, or none and the rest
	// of the answer in a continuation.
	reasoning, content []string

	// continued is set when the request continues an answer (see
	// continueChat): content is the rest, sent without tags in every
	// reasoning form, and there is no tool call.
	continued bool

	// call is the tool call the answer makes, or nil.
	call *toolCall
}

// promptTokens estimates the prompt's tokens as ceil(characters / 4) of
// the messages' string contents (and text parts), at least 1.
func (req *chatRequest) promptTokens() int {
	chars := 0
	for _, m := range req.Messages {
		var text string
		if json.Unmarshal(m.Content, &text) == nil {
			chars += len([]rune(text))
			continue
		}
		var parts []struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &parts) == nil {
			for _, part := range parts {
				chars += len([]rune(part.Text))
			}
		}
	}
	return max(1, (chars+3)/4)
}

// shape is the answer's stream shape counted in pieces: a stream in a
// tags form has other deltas, but the same phases.
func (req *chatRequest) shape() streamShape {
	sh := streamShape{lead: 1, reasoning: len(req.reasoning)}
	if req.call != nil {
		sh.toolHead, sh.toolArgs = 1, len(ToolInputFragments)
	} else {
		sh.answer = len(req.content)
	}
	return sh
}

// chat answers POST .../chat/completions: it draws the request's fault,
// then answers with an error status, stalls, streams or completes.
func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	n := s.requests.Add(1)
	req := chatRequest{form: s.cfg.ReasoningForm}
	if h := r.Header.Get(ReasoningFormHeader); h != "" {
		if err := validateForm(h); err != nil {
			writeError(w, http.StatusBadRequest, ReasoningFormHeader+": "+err.Error(), "invalid_request_error", "invalid_header")
			return
		}
		req.form = h
	}
	echo, err := s.echoMode(r.Header.Get(EchoHeader))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), "invalid_request_error", "invalid_header")
		return
	}
	if req.autoTools, err = s.autoTools(r.Header.Get(ToolCallsHeader)); err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), "invalid_request_error", "invalid_header")
		return
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error(), "invalid_request_error", "invalid_json")
		return
	}
	req.reasoning, req.content = s.reasoning, s.content
	if h := r.Header.Get(ReasoningTokensHeader); h != "" {
		n, err := strconv.Atoi(h)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, ReasoningTokensHeader+": want a whole number >= 0", "invalid_request_error", "invalid_header")
			return
		}
		req.reasoning = req.reasoning[:min(n, len(req.reasoning))]
	}
	if echo == EchoHandoff {
		req.reasoning, req.content = nil, echoPieces(req.echo())
	}
	if req.Model == "" {
		req.Model = s.cfg.Models[0]
	}
	s.continueChat(&req, echo == EchoHandoff)
	if !req.continued {
		req.call = req.chatToolCall()
	}

	f := s.pickFault(uint64(n))
	switch {
	case f != nil && (f.Kind == FaultStatus || f.Kind == FaultOverloaded):
		writeStatusFault(w, f)
		return
	case f != nil && f.Kind == FaultStall:
		err = s.stall(r)
	case req.Stream:
		err = s.stream(w, r, &req, n, f)
	default:
		err = s.complete(w, r, &req, n, s.place(f, n, req.shape()))
	}
	if errors.Is(err, errDrop) || errors.Is(err, errClosed) {
		// net/http (and Caddy) close the connection without finishing
		// the response: the client sees an unexpected EOF.
		panic(http.ErrAbortHandler)
	}
}

// stall never answers; it returns when the client goes away or the
// Server is closed. The first stall on an http.Server registers Close to
// run when that server starts a graceful shutdown, which would otherwise
// wait for the stalled request forever.
func (s *Server) stall(r *http.Request) error {
	if hs, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok {
		if _, seen := s.watched.LoadOrStore(hs, true); !seen {
			hs.RegisterOnShutdown(s.Close)
		}
	}
	select {
	case <-r.Context().Done():
		return r.Context().Err()
	case <-s.closed:
		return errClosed
	}
}

// completion is a non-streaming chat.completion response.
type completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   any                `json:"usage"` // usage, or plainUsage in the tags forms
}

type completionChoice struct {
	Index   int `json:"index"`
	Message struct {
		Role             string         `json:"role"`
		Content          *string        `json:"content"` // null with tool calls
		ReasoningContent string         `json:"reasoning_content,omitempty"`
		ToolCalls        []chatToolCall `json:"tool_calls,omitempty"`
	} `json:"message"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
}

// complete answers a non-streaming request after TTFB. In a tags form
// the content is the whole tagged text (see TaggedContent), with no
// reasoning_content, and the usage has no reasoning_tokens detail.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, req *chatRequest, n int64, f *Fault) error {
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
	head := s.head(req, n, "chat.completion")
	tool := req.call
	resp := completion{
		ID: head.ID, Object: head.Object, Created: head.Created, Model: head.Model,
		Choices: []completionChoice{{FinishReason: finishStop}},
	}
	msg := &resp.Choices[0].Message
	msg.Role = "assistant"
	answer, answerTokens := strings.Join(req.content, ""), len(req.content)
	if tool != nil {
		resp.Choices[0].FinishReason = finishToolCalls
		answer, answerTokens = "", len(ToolInputFragments)
		msg.ToolCalls = []chatToolCall{{
			ID: "call_sim_" + strconv.FormatInt(n, 10), Type: "function",
			Function: chatFunction{Name: tool.name, Arguments: ToolInput},
		}}
	}
	u := newUsage(req.promptTokens(), len(req.reasoning), answerTokens)
	if req.form == ReasoningFields || req.continued {
		msg.ReasoningContent = strings.Join(req.reasoning, "")
		if tool == nil {
			msg.Content = &answer
		}
		resp.Usage = u
		if req.form != ReasoningFields {
			resp.Usage = u.plain()
		}
	} else {
		content := TaggedContent(req.form, strings.Join(req.reasoning, ""), answer)
		msg.Content = &content
		resp.Usage = u.plain()
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(resp)
}
