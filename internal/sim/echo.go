package sim

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Echo modes: what an answer echoes of its request instead of the
// generated text.
const (
	// EchoHandoff answers with the reasoning a hand-off injected into the
	// request (see EchoText), and sends no reasoning, so a test can check
	// the injection byte for byte.
	EchoHandoff = "handoff"
)

// EchoHeader is the request header that sets the echo mode of one
// request (Config.Echo sets it for every request), in all four
// dialects.
const EchoHeader = "X-Sim-Echo"

// The wrapper a hand-off puts the reasoning in (internal/handoff.Wrap).
const (
	wrapOpen  = "<think>\n"
	wrapClose = "\n</think>"
)

// echoRunes is the length of an echoed answer's pieces, one delta and one
// output token each: a token is about 4 characters, the rule the
// simulator estimates prompt tokens by.
const echoRunes = 4

func validateEcho(mode string) error {
	switch mode {
	case "", EchoHandoff:
		return nil
	}
	return fmt.Errorf("unknown mode %q (want %q)", mode, EchoHandoff)
}

// EchoText is the answer in the handoff echo mode to a request that
// carries reasoning at where ("prefill", "user" or "system"):
// "handoff:<where>:<reasoning>"; "handoff:none:" when it carries none.
func EchoText(where, reasoning string) string {
	return "handoff:" + where + ":" + reasoning
}

// echoPieces cuts an echoed answer into its deltas: echoRunes runes each
// (the last may be shorter), so no delta splits a UTF-8 sequence.
func echoPieces(text string) []string {
	var out []string
	for text != "" {
		n, i := 0, 0
		for i < len(text) && n < echoRunes {
			_, size := utf8.DecodeRuneInString(text[i:])
			i += size
			n++
		}
		out = append(out, text[:i])
		text = text[i:]
	}
	return out
}

// unwrap returns the text between the first "<think>\n" of s and the
// last "\n</think>" after it.
func unwrap(s string) (string, bool) {
	_, after, ok := strings.Cut(s, wrapOpen)
	if !ok {
		return "", false
	}
	end := strings.LastIndex(after, wrapClose)
	if end < 0 {
		return "", false
	}
	return after[:end], true
}

// unwrapContent finds the wrapper in a message's content: a string, or
// an array of parts (text, input_text or output_text), the last part
// holding it.
func unwrapContent(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return unwrap(s)
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	for i := len(parts) - 1; i >= 0; i-- {
		if r, ok := unwrap(parts[i].Text); ok {
			return r, true
		}
	}
	return "", false
}

// turn is a message's role and content, in any dialect.
type turn struct {
	role    string
	content json.RawMessage
}

// handoffEcho is the echo of the reasoning injected into a conversation
// and its system prompts, searched for in order: a prefill (the last
// turn is an assistant's holding the wrapper), the last user turn, the
// system prompts.
func handoffEcho(turns []turn, system []json.RawMessage) string {
	if n := len(turns); n > 0 && turns[n-1].role == "assistant" {
		if r, ok := unwrapContent(turns[n-1].content); ok {
			return EchoText("prefill", r)
		}
	}
	for i := len(turns) - 1; i >= 0; i-- {
		if turns[i].role == "user" {
			if r, ok := unwrapContent(turns[i].content); ok {
				return EchoText("user", r)
			}
			break
		}
	}
	for _, raw := range system {
		if r, ok := unwrapContent(raw); ok {
			return EchoText("system", r)
		}
	}
	return EchoText("none", "")
}

// echo is the handoff echo of a chat completion request; its system
// prompts are the system and developer messages.
func (req *chatRequest) echo() string {
	turns := make([]turn, len(req.Messages))
	var system []json.RawMessage
	for i, m := range req.Messages {
		turns[i] = turn{m.Role, m.Content}
		if m.Role == "system" || m.Role == "developer" {
			system = append(system, m.Content)
		}
	}
	return handoffEcho(turns, system)
}

// echo is the handoff echo of a Messages request.
func (req *messagesRequest) echo() string {
	turns := make([]turn, len(req.Messages))
	for i, m := range req.Messages {
		turns[i] = turn{m.Role, m.Content}
	}
	return handoffEcho(turns, []json.RawMessage{req.System})
}

// echo is the handoff echo of a Responses request: its turns are the
// input items (a function call or its output has no role), its system
// prompts the instructions, then any system or developer items.
func (req *respRequest) echo() string {
	items := req.items()
	turns := make([]turn, len(items))
	var system []json.RawMessage
	if req.Instructions != nil {
		raw, _ := json.Marshal(*req.Instructions)
		system = append(system, raw)
	}
	for i, it := range items {
		turns[i] = turn{it.Role, it.Content}
		if it.Role == "system" || it.Role == "developer" {
			system = append(system, it.Content)
		}
	}
	return handoffEcho(turns, system)
}

// echoMode returns the request's echo mode: the header's, else the
// config's; err when the header names an unknown mode.
func (s *Server) echoMode(h string) (string, error) {
	if h == "" {
		return s.cfg.Echo, nil
	}
	if err := validateEcho(h); err != nil {
		return "", fmt.Errorf("%s: %w", EchoHeader, err)
	}
	return h, nil
}
