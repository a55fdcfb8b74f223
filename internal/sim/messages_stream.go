package sim

import (
	"encoding/json"
	"net/http"
)

// Messages stream event payloads; field order is wire order.
type (
	evMessageStart struct {
		Type    string  `json:"type"`
		Message message `json:"message"`
	}
	evBlockStart struct {
		Type         string       `json:"type"`
		Index        int          `json:"index"`
		ContentBlock contentBlock `json:"content_block"`
	}
	evBlockDelta struct {
		Type  string     `json:"type"`
		Index int        `json:"index"`
		Delta blockDelta `json:"delta"`
	}
	blockDelta struct {
		Type        string  `json:"type"`
		Thinking    *string `json:"thinking,omitempty"`
		Signature   *string `json:"signature,omitempty"`
		Text        *string `json:"text,omitempty"`
		PartialJSON *string `json:"partial_json,omitempty"`
	}
	evIndex struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	evMessageDelta struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	evType struct {
		Type string `json:"type"`
	}
)

// msgPhase is one content block of a stream: its start, its deltas
// (paced by a Pattern) and, for thinking, the signature.
type msgPhase struct {
	start   contentBlock
	pieces  []string
	pattern Pattern
	delta   func(piece string) blockDelta
}

// streamMessage answers a streaming Messages request: after TTFB,
// message_start, ping, the thinking block if asked for (deltas paced by
// the reasoning pattern, then one signature_delta), the text block (or
// the tool_use block) paced by the content pattern, message_delta and
// message_stop. The texts and pacing are the Chat stream's.
func (s *Server) streamMessage(w http.ResponseWriter, r *http.Request, p *msgPlan, f *Fault) error {
	wt := waiter{r.Context()}
	if err := wt.wait(s.cfg.TTFB); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	mw := newTypedWriter(w, f, overloadedError, false)

	start := message{
		ID: p.id(), Type: "message", Role: "assistant", Model: p.req.Model,
		Content: []contentBlock{},
		Usage:   msgUsage{InputTokens: p.input, OutputTokens: 1},
	}
	if err := mw.counted("message_start", evMessageStart{"message_start", start}); err != nil {
		return err
	}
	if err := mw.event("ping", evType{"ping"}); err != nil {
		return err
	}

	var phases []msgPhase
	empty := ""
	if p.thinking {
		phases = append(phases, msgPhase{
			start:   contentBlock{Type: "thinking", Thinking: &empty, Signature: &empty},
			pieces:  p.reasoning,
			pattern: s.cfg.ReasoningPattern,
			delta:   func(x string) blockDelta { return blockDelta{Type: "thinking_delta", Thinking: &x} },
		})
	}
	if p.tool != nil {
		phases = append(phases, msgPhase{
			start:   contentBlock{Type: "tool_use", ID: new(p.toolID()), Name: &p.tool.name, Input: json.RawMessage(`{}`)},
			pieces:  ToolInputFragments,
			pattern: s.cfg.ContentPattern,
			delta:   func(x string) blockDelta { return blockDelta{Type: "input_json_delta", PartialJSON: &x} },
		})
	} else {
		phases = append(phases, msgPhase{
			start:   contentBlock{Type: "text", Text: &empty},
			pieces:  p.content,
			pattern: s.cfg.ContentPattern,
			delta:   func(x string) blockDelta { return blockDelta{Type: "text_delta", Text: &x} },
		})
	}
	for index, ph := range phases {
		if err := mw.event("content_block_start", evBlockStart{"content_block_start", index, ph.start}); err != nil {
			return err
		}
		pc := newPacer(ph.pattern, wt)
		for i, piece := range ph.pieces {
			if err := pc.before(i); err != nil {
				return err
			}
			if err := mw.counted("content_block_delta", evBlockDelta{"content_block_delta", index, ph.delta(piece)}); err != nil {
				return err
			}
		}
		if ph.start.Type == "thinking" {
			sig := blockDelta{Type: "signature_delta", Signature: &p.signature}
			if err := mw.event("content_block_delta", evBlockDelta{"content_block_delta", index, sig}); err != nil {
				return err
			}
		}
		if err := mw.event("content_block_stop", evIndex{"content_block_stop", index}); err != nil {
			return err
		}
	}

	if err := mw.beforeFinish(); err != nil { // as in Chat
		return err
	}
	var md evMessageDelta
	md.Type = "message_delta"
	md.Delta.StopReason = p.stopReason()
	md.Usage.OutputTokens = p.outputTokens()
	if err := mw.event("message_delta", md); err != nil {
		return err
	}
	if err := mw.beforeEnd(); err != nil {
		return err
	}
	return mw.event("message_stop", evType{"message_stop"})
}
