package sim

import "encoding/json"

// turns maps a Gemini conversation onto the dialect-neutral turns the
// echo and continuation rules read: role "model" is "assistant", and a
// turn's content is its text parts, thoughts left out, as text blocks.
func (req *geminiRequest) turns() []turn {
	out := make([]turn, len(req.Contents))
	for i, c := range req.Contents {
		role := c.Role
		if role == "model" {
			role = "assistant"
		}
		type block struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		blocks := []block{}
		for _, p := range c.Parts {
			if !p.Thought && p.Text != "" {
				blocks = append(blocks, block{"text", p.Text})
			}
		}
		raw, _ := json.Marshal(blocks)
		out[i] = turn{role, raw}
	}
	return out
}

// echo is the handoff echo of a Gemini request; its system prompt is
// systemInstruction.
func (req *geminiRequest) echo() string {
	var system []json.RawMessage
	if req.SystemInstruction != nil {
		system = append(system, (&geminiRequest{Contents: []geminiContent{*req.SystemInstruction}}).turns()[0].content)
	}
	return handoffEcho(req.turns(), system)
}

// continueGemini applies the continuation rule to a Gemini request: a
// conversation ending with a model turn (a prefill), or with one and
// then a user turn holding ContinueMarker, gets the rest of the answer.
func (s *Server) continueGemini(req *geminiRequest, echo bool) ([]string, bool) {
	return s.continued(req.turns(), echo, func(start int) (bool, string) {
		head := *req
		head.Contents = req.Contents[:start]
		return head.geminiToolCall() != nil, head.echo()
	})
}
