package sim

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ContinueMarker starts the user turn a relay appends, after the answer
// so far as an assistant turn, to ask a model without prefill to
// continue it. The simulator treats any user turn whose text starts
// with it (after leading whitespace) as that instruction.
const ContinueMarker = "Your previous reply was cut off"

// The continuation rule, the same in the four dialects: a request
// whose conversation ends with an assistant turn (a prefill: Messages'
// trailing assistant message, Chat's trailing assistant message, with
// or without DeepSeek's and Mistral's "prefix": true or vLLM's
// "continue_final_message": true, Responses' trailing assistant message
// item, Gemini's trailing model turn), or with an assistant turn and then a user turn holding the
// continue instruction (ContinueMarker), asks to continue the answer P
// held by that assistant turn. The simulator answers the conversation
// without that tail as usual (the text is the same for every request of
// a seed, see Texts, or the echo of the conversation without the tail),
// and when that answer is text starting with P (or with P right-trimmed
// of white space: Anthropic refuses a prefill ending in white space, so
// a relay trims it), it sends the rest only: no reasoning, the rest of
// the text (after Config.ContinueOverlap runes of P repeated), and the
// usual end. Otherwise it answers the whole request as usual.

// tail finds the continuation tail of a conversation: the index of the
// assistant turn that starts it and its text. ok is false when the
// conversation does not end with one.
func tail(turns []turn) (start int, answer string, ok bool) {
	n := len(turns)
	if n > 0 && turns[n-1].role == "user" && strings.HasPrefix(strings.TrimLeftFunc(turnText(turns[n-1].content), unicode.IsSpace), ContinueMarker) {
		n--
	}
	if n == 0 || turns[n-1].role != "assistant" {
		return 0, "", false
	}
	answer = turnText(turns[n-1].content)
	return n - 1, answer, answer != ""
}

// turnText is the text of a message's content: a string, or the joined
// text of its parts or blocks (text, input_text or output_text; others,
// such as thinking blocks, have no "text").
func turnText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text":
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// continuePieces returns the deltas that continue an answer made of
// pieces after the answer so far p, and whether the answer starts with
// p (or with p right-trimmed of white space). The first delta is the
// last overlap runes of the matched p followed by the rest of the piece
// p ends in (when either is non-empty); then the following pieces.
func continuePieces(pieces []string, p string, overlap int) ([]string, bool) {
	full := strings.Join(pieces, "")
	if p == "" {
		return nil, false
	}
	if !strings.HasPrefix(full, p) {
		p = strings.TrimRightFunc(p, unicode.IsSpace)
		if p == "" || !strings.HasPrefix(full, p) {
			return nil, false
		}
	}
	cut := len(p)
	first := lastRunes(p, overlap)
	var out []string
	off := 0
	for _, piece := range pieces {
		end := off + len(piece)
		switch {
		case end <= cut:
		case off < cut:
			first += piece[cut-off:]
		default:
			out = append(out, piece)
		}
		off = end
	}
	if first != "" {
		out = append([]string{first}, out...)
	}
	return out, true
}

// lastRunes returns the last n runes of s (all of s when it has fewer).
func lastRunes(s string, n int) string {
	i := len(s)
	for ; n > 0 && i > 0; n-- {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return s[i:]
}

// continueChat applies the continuation rule to a Chat request: when it
// asks to continue an answer the simulator would give, it sets the
// request's content to the rest, with no reasoning and no tool call.
func (s *Server) continueChat(req *chatRequest, echo bool) {
	turns := make([]turn, len(req.Messages))
	for i, m := range req.Messages {
		turns[i] = turn{m.Role, m.Content}
	}
	rest, ok := s.continued(turns, echo, func(start int) (bool, string) {
		head := *req
		head.Messages = req.Messages[:start]
		return head.chatToolCall() != nil, head.echo()
	})
	if ok {
		req.reasoning, req.content, req.continued = nil, rest, true
	}
}

// continued is the rest of the answer for a request whose turns may end
// with a continuation tail: the answer the simulator gives the
// conversation before the tail (head: whether that one calls a tool, and
// its echo), without the answer so far the tail holds. ok is false when
// the request asks for no continuation, or for one of another answer.
func (s *Server) continued(turns []turn, echo bool, head func(start int) (toolCall bool, echoed string)) ([]string, bool) {
	start, p, ok := tail(turns)
	if !ok {
		return nil, false
	}
	calls, echoed := head(start)
	if calls {
		return nil, false
	}
	content := s.content
	if echo {
		content = echoPieces(echoed)
	}
	return continuePieces(content, p, s.cfg.ContinueOverlap)
}

// continueMessages applies the continuation rule to a Messages request.
func (s *Server) continueMessages(req *messagesRequest, plan *msgPlan, echo bool) {
	turns := make([]turn, len(req.Messages))
	for i, m := range req.Messages {
		turns[i] = turn{m.Role, m.Content}
	}
	rest, ok := s.continued(turns, echo, func(start int) (bool, string) {
		head := *req
		head.Messages = req.Messages[:start]
		return head.messagesToolCall() != nil, head.echo()
	})
	if ok {
		plan.reasoning, plan.content, plan.tool = nil, rest, nil
	}
}

// continueResponses applies the continuation rule to a Responses
// request; its turns are the input items (a function call or its output
// has no role).
func (s *Server) continueResponses(req *respRequest, plan *respPlan, echo bool) {
	var raws []json.RawMessage
	if json.Unmarshal(req.Input, &raws) != nil {
		return // a string input is one user message
	}
	items := req.items()
	if len(items) != len(raws) {
		return
	}
	turns := make([]turn, len(items))
	for i, it := range items {
		if it.Type == "" || it.Type == "message" {
			turns[i] = turn{it.Role, it.Content}
		}
	}
	rest, ok := s.continued(turns, echo, func(start int) (bool, string) {
		head := *req
		head.Input, _ = json.Marshal(raws[:start])
		return head.responsesToolCall() != nil, head.echo()
	})
	if ok {
		plan.summary, plan.content, plan.tool = nil, rest, nil
	}
}
