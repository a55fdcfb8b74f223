package genai

import (
	"bytes"
	"encoding/json"

	"github.com/llmrelay/caddy-llm-relay/internal/jsonscan"
)

// Facts are what an answer says of itself, for gen_ai.response.*: its
// id, the model that answered, and why each choice stopped, in the
// client's dialect (what the client was sent).
type Facts struct {
	ID, Model     string
	FinishReasons []string
}

// Dialects of the answers Scan reads (the client's).
const (
	DialectChat      = "chat"      // Chat Completions (Gemini clients too: the relay's pivot)
	DialectMessages  = "messages"  // Anthropic Messages
	DialectResponses = "responses" // OpenAI Responses
)

// ScanEvent reads one stream event's data, in dialect, into f: the first
// id and model seen, and every finish reason. Events that cannot hold
// any are passed over without decoding.
func (f *Facts) ScanEvent(dialect string, data []byte) {
	switch dialect {
	case DialectMessages:
		if bytes.Contains(data, []byte(`"message_start"`)) || bytes.Contains(data, []byte(`"stop_reason"`)) {
			f.scanMessages(data)
		}
	case DialectResponses:
		if bytes.Contains(data, []byte(`"response"`)) {
			f.scanResponses(data, true)
		}
	default:
		// Every chunk names finish_reason, nearly all as null: decoded
		// are the first chunk and those with a reason.
		if f.ID == "" || jsonscan.MayHaveMember(data, `"finish_reason"`, '"') {
			f.scanChat(data)
		}
	}
}

// ScanAnswer reads a whole (non-stream) answer in dialect.
func (f *Facts) ScanAnswer(dialect string, body []byte) {
	switch dialect {
	case DialectMessages:
		var m struct {
			ID         string `json:"id"`
			Model      string `json:"model"`
			StopReason string `json:"stop_reason"`
		}
		if json.Unmarshal(body, &m) == nil {
			f.set(m.ID, m.Model)
			f.finish(m.StopReason)
		}
	case DialectResponses:
		f.scanResponses(body, false)
	default:
		var c struct {
			ID      string `json:"id"`
			Model   string `json:"model"`
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if json.Unmarshal(body, &c) == nil {
			f.set(c.ID, c.Model)
			for _, ch := range c.Choices {
				f.finish(ch.FinishReason)
			}
		}
	}
}

func (f *Facts) scanChat(data []byte) {
	var c struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
	}
	if json.Unmarshal(data, &c) != nil {
		return
	}
	f.set(c.ID, c.Model)
	for _, ch := range c.Choices {
		if ch.FinishReason != nil {
			f.finish(*ch.FinishReason)
		}
	}
}

func (f *Facts) scanMessages(data []byte) {
	var m struct {
		Type    string `json:"type"`
		Message struct {
			ID    string `json:"id"`
			Model string `json:"model"`
		} `json:"message"`
		Delta struct {
			StopReason string `json:"stop_reason"`
		} `json:"delta"`
	}
	if json.Unmarshal(data, &m) != nil {
		return
	}
	switch m.Type {
	case "message_start":
		f.set(m.Message.ID, m.Message.Model)
	case "message_delta":
		f.finish(m.Delta.StopReason)
	}
}

// scanResponses reads a Responses event (event: its response member) or
// a whole response. Its finish reason is its status, or for an incomplete
// one the reason it gives.
func (f *Facts) scanResponses(data []byte, event bool) {
	type response struct {
		ID                string `json:"id"`
		Model             string `json:"model"`
		Status            string `json:"status"`
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
	}
	var r response
	if event {
		var ev struct {
			Type     string   `json:"type"`
			Response response `json:"response"`
		}
		if json.Unmarshal(data, &ev) != nil {
			return
		}
		r = ev.Response
		switch ev.Type {
		case "response.completed", "response.incomplete", "response.failed":
		default:
			r.Status = "" // in progress: not a finish
		}
	} else if json.Unmarshal(data, &r) != nil {
		return
	}
	f.set(r.ID, r.Model)
	switch {
	case r.IncompleteDetails != nil && r.IncompleteDetails.Reason != "":
		f.finish(r.IncompleteDetails.Reason)
	case r.Status != "" && r.Status != "in_progress" && r.Status != "queued":
		f.finish(r.Status)
	}
}

func (f *Facts) set(id, model string) {
	if f.ID == "" {
		f.ID = id
	}
	if f.Model == "" {
		f.Model = model
	}
}

// maxFinishReasons bounds the list (one per choice; n is small).
const maxFinishReasons = 16

func (f *Facts) finish(reason string) {
	if reason != "" && len(f.FinishReasons) < maxFinishReasons {
		f.FinishReasons = append(f.FinishReasons, reason)
	}
}
