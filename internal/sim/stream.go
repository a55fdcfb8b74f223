package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
)

// errDrop asks the handler to abort the connection.
var errDrop = errors.New("simulated connection drop")

// errClosed reports that the Server was closed while a request stalled.
var errClosed = errors.New("simulator closed")

// errFaulted reports that an in-band error event ended the stream.
var errFaulted = errors.New("simulated in-band error")

// chunk is an OpenAI chat.completion.chunk; field order is wire order.
type chunk struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices []chunkChoice   `json:"choices"`
	Usage   json.RawMessage `json:"usage,omitempty"` // absent, null, or the usage object
}

type chunkChoice struct {
	Index        int       `json:"index"`
	Delta        delta     `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"` // always null
	FinishReason *string   `json:"finish_reason"`
}

type delta struct {
	Role             string         `json:"role,omitempty"`
	Content          *string        `json:"content,omitempty"`
	ReasoningContent *string        `json:"reasoning_content,omitempty"`
	ToolCalls        []chatToolCall `json:"tool_calls,omitempty"`
}

// usage is the OpenAI usage object.
type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func newUsage(prompt, reasoning, content int) usage {
	var u usage
	u.PromptTokens = prompt
	u.CompletionTokens = reasoning + content
	u.TotalTokens = prompt + reasoning + content
	u.CompletionTokensDetails.ReasoningTokens = reasoning
	return u
}

// plainUsage is the usage object of a server that does not tell
// reasoning apart (vLLM, SGLang and Ollama without a reasoning parser):
// the reasoning is counted in completion_tokens, and there are no details.
type plainUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func (u usage) plain() plainUsage {
	return plainUsage{u.PromptTokens, u.CompletionTokens, u.TotalTokens}
}

var (
	jsonNull   = json.RawMessage("null")
	finishStop = "stop"
)

// sseWriter writes `data: <json>\n\n` events and flushes each one. It
// counts data events and trips the request's drop or error fault when
// the count reaches the fault's After.
type sseWriter struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	buf          bytes.Buffer
	head         chunk // id, object, created, model
	includeUsage bool
	fault        *Fault // drop or error fault not yet tripped, or nil
	sent         int    // data events sent
}

// choice sends one chunk with a single choice. A fault placed by After
// trips right after the After-th (before the first when After is 0).
func (sw *sseWriter) choice(d delta, finish *string) error {
	if tripsAt(sw.fault, sw.sent) {
		return sw.trip()
	}
	c := sw.head
	c.Choices = []chunkChoice{{Delta: d, FinishReason: finish}}
	if sw.includeUsage {
		c.Usage = jsonNull
	}
	if err := sw.event(c); err != nil {
		return err
	}
	sw.sent++
	if tripsAt(sw.fault, sw.sent) {
		return sw.trip()
	}
	return nil
}

// finish sends the finish chunk, the usage chunk if requested, and
// [DONE]. A fault still pending trips before the finish chunk, or, when
// placed BeforeEnd, instead of [DONE].
func (sw *sseWriter) finish(reason *string, u any) error {
	if sw.fault != nil && !sw.fault.BeforeEnd {
		return sw.trip()
	}
	c := sw.head
	c.Choices = []chunkChoice{{Delta: delta{}, FinishReason: reason}}
	if sw.includeUsage {
		c.Usage = jsonNull
	}
	if err := sw.event(c); err != nil {
		return err
	}
	if sw.includeUsage {
		raw, err := json.Marshal(u)
		if err != nil {
			return err
		}
		c.Choices = []chunkChoice{}
		c.Usage = raw
		if err := sw.event(c); err != nil {
			return err
		}
	}
	if sw.fault != nil {
		return sw.trip()
	}
	return sw.raw("[DONE]")
}

// trip applies the pending fault.
func (sw *sseWriter) trip() error {
	f := sw.fault
	sw.fault = nil
	if f.Kind == FaultDrop {
		_ = sw.rc.Flush() // make sure the client has the headers and events so far
		return errDrop
	}
	if err := sw.event(inBandError); err != nil {
		return err
	}
	return errFaulted
}

func (sw *sseWriter) event(v any) error {
	sw.buf.Reset()
	sw.buf.WriteString("data: ")
	enc := json.NewEncoder(&sw.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // compact JSON plus "\n"
		return err
	}
	sw.buf.WriteByte('\n')
	return sw.send()
}

func (sw *sseWriter) raw(data string) error {
	sw.buf.Reset()
	sw.buf.WriteString("data: " + data + "\n\n")
	return sw.send()
}

func (sw *sseWriter) send() error {
	if _, err := sw.w.Write(sw.buf.Bytes()); err != nil {
		return err
	}
	return sw.rc.Flush()
}

// stream answers a streaming request: after TTFB, the role chunk, the
// reasoning deltas and the content deltas (or the tool call's deltas, see
// chatToolCall), each phase paced by its Pattern, then the finish chunk,
// the usage chunk and [DONE]. In a tags form the reasoning deltas are
// content deltas of the tagged text, cut by cutTagged with draws keyed
// by (seed, request). A drop or error fault trips after its After data
// events, whatever their form.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, req *chatRequest, n int64, f *Fault) error {
	wt := waiter{r.Context()}
	if err := wt.wait(s.cfg.TTFB); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)

	sw := &sseWriter{
		w:            w,
		rc:           http.NewResponseController(w),
		head:         s.head(req, n, "chat.completion.chunk"),
		includeUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
	}
	var reasoning, answer []delta
	tool := req.call
	var answerText []string // in content
	if tool == nil {
		answerText = req.content
	}
	if req.form == ReasoningFields || req.continued {
		for _, piece := range req.reasoning {
			reasoning = append(reasoning, delta{ReasoningContent: &piece})
		}
		for _, piece := range answerText {
			answer = append(answer, delta{Content: &piece})
		}
	} else {
		think, ans := cutTagged(req.form, req.reasoning, answerText, newRNG(uint64(s.cfg.Seed), uint64(n), tagCutKey))
		for _, piece := range think {
			reasoning = append(reasoning, delta{Content: &piece})
		}
		for _, piece := range ans {
			answer = append(answer, delta{Content: &piece})
		}
	}
	sh := streamShape{lead: 1, reasoning: len(reasoning), answer: len(answer)}
	if tool != nil {
		answer = append(answer, chatToolDeltas("call_sim_"+strconv.FormatInt(n, 10), tool.name)...)
		sh.toolHead, sh.toolArgs = 1, len(ToolInputFragments)
	}
	sw.fault = s.place(f, n, sh)
	empty := ""
	if err := sw.choice(delta{Role: "assistant", Content: &empty}, nil); err != nil {
		return err
	}
	phases := []struct {
		deltas  []delta
		pattern Pattern
	}{
		{reasoning, s.cfg.ReasoningPattern},
		{answer, s.cfg.ContentPattern},
	}
	for _, ph := range phases {
		pc := newPacer(ph.pattern, wt)
		for i, d := range ph.deltas {
			if err := pc.before(i); err != nil {
				return err
			}
			if err := sw.choice(d, nil); err != nil {
				return err
			}
		}
	}
	finish, answerTokens := &finishStop, len(req.content)
	if tool != nil {
		finish, answerTokens = &finishToolCalls, len(ToolInputFragments)
	}
	u := newUsage(req.promptTokens(), len(req.reasoning), answerTokens)
	if req.form != ReasoningFields {
		return sw.finish(finish, u.plain())
	}
	return sw.finish(finish, u)
}
