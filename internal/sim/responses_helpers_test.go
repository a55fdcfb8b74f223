package sim

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// respEvent is one Responses stream event, decoded loosely.
type respEvent struct {
	typ  string // the event: line
	data map[string]any
	raw  string
	at   time.Time // when it was read
}

// readRespEvents parses a Responses stream with internal/sse and checks
// the envelope every event must have: data.type equal to the event
// line, and sequence_number 0, 1, 2, ... in order. err is nil on a
// clean end and the read error otherwise.
func readRespEvents(t *testing.T, body io.Reader) ([]respEvent, error) {
	t.Helper()
	r := sse.NewReader(body, 0)
	var out []respEvent
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if ev.Unterminated {
			return out, io.ErrUnexpectedEOF
		}
		var data map[string]any
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			t.Fatalf("event %q: bad data %q: %v", ev.Type, ev.Data, err)
		}
		if data["type"] != ev.Type {
			t.Errorf("event %q carries data.type %v", ev.Type, data["type"])
		}
		if seq, ok := data["sequence_number"].(float64); !ok || int(seq) != len(out) {
			t.Errorf("event %d (%s): sequence_number %v", len(out), ev.Type, data["sequence_number"])
		}
		out = append(out, respEvent{ev.Type, data, string(ev.Data), time.Now()})
	}
}

// respStream is what a client rebuilds from a Responses stream.
type respStream struct {
	summary, text, args string
	summaryDone         string // reasoning_summary_text.done's text
	textDone, argsDone  string // output_text.done's text, arguments.done's
	types               []string
	completed           map[string]any // response.completed's response
}

// reassembleResp joins each channel's deltas and checks that every
// delta names the item that output_item.added opened at its index.
func reassembleResp(t *testing.T, events []respEvent) respStream {
	t.Helper()
	var r respStream
	var summary, text, args strings.Builder
	open := map[float64]string{} // output_index -> item id
	for _, ev := range events {
		r.types = append(r.types, ev.typ)
		d := ev.data
		if idx, ok := d["output_index"].(float64); ok && ev.typ != "response.output_item.added" {
			if id, has := d["item_id"]; has && open[idx] != id {
				t.Errorf("%s for item %v at index %v, open there: %q", ev.typ, id, idx, open[idx])
			}
		}
		switch ev.typ {
		case "response.output_item.added":
			item := d["item"].(map[string]any)
			open[d["output_index"].(float64)] = item["id"].(string)
		case "response.reasoning_summary_text.delta":
			summary.WriteString(d["delta"].(string))
		case "response.reasoning_summary_text.done":
			r.summaryDone = d["text"].(string)
		case "response.output_text.delta":
			text.WriteString(d["delta"].(string))
		case "response.output_text.done":
			r.textDone = d["text"].(string)
		case "response.function_call_arguments.delta":
			args.WriteString(d["delta"].(string))
		case "response.function_call_arguments.done":
			r.argsDone = d["arguments"].(string)
		case "response.completed":
			r.completed = d["response"].(map[string]any)
		}
	}
	r.summary, r.text, r.args = summary.String(), text.String(), args.String()
	return r
}

// respObj decodes a response object (non-streaming answer or the
// payload of response.completed).
type respObj struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Status    string `json:"status"`
	Model     string `json:"model"`
	CreatedAt int64  `json:"created_at"`
	Output    []struct {
		Type    string `json:"type"`
		ID      string `json:"id"`
		Status  string `json:"status"`
		Role    string `json:"role"`
		Summary []struct {
			Type, Text string
		} `json:"summary"`
		Content []struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			Annotations []any  `json:"annotations"`
		} `json:"content"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"output"`
	Usage struct {
		InputTokens        int `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens *int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int `json:"output_tokens"`
		OutputTokensDetails struct {
			ReasoningTokens *int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
		TotalTokens int `json:"total_tokens"`
	} `json:"usage"`
}

func decodeRespObj(t *testing.T, resp *http.Response) respObj {
	t.Helper()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var o respObj
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		t.Fatal(err)
	}
	return o
}

// respBody builds a Responses request body; extra is spliced in as
// more top-level fields (e.g. `"stream":true,`).
func respBody(extra string) string {
	return `{"model":"gpt-sim",` + extra + `"instructions":"be brief","input":"hello world!"}`
}

// chatTexts returns the reasoning and content a Chat stream of the
// same server carries.
func chatTexts(t *testing.T, events []event) (reasoning, content string) {
	t.Helper()
	var r, c strings.Builder
	for _, ev := range events[:len(events)-1] { // all but [DONE]
		for _, ch := range decodeChunk(t, ev.data).Choices {
			if ch.Delta.ReasoningContent != nil {
				r.WriteString(*ch.Delta.ReasoningContent)
			}
			if ch.Delta.Content != nil {
				c.WriteString(*ch.Delta.Content)
			}
		}
	}
	return r.String(), c.String()
}
