package sim

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// postTo sends a POST with an Anthropic-style key header to path.
func postTo(t *testing.T, ts *httptest.Server, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", "sk-ant-sim")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// msgEvent is one Messages stream event, decoded loosely.
type msgEvent struct {
	typ  string // the event: line
	data map[string]any
	raw  string
}

// readMsgEvents parses a Messages stream with internal/sse. err is nil on
// a clean end and the read error otherwise.
func readMsgEvents(t *testing.T, body io.Reader) ([]msgEvent, error) {
	t.Helper()
	r := sse.NewReader(body, 0)
	var out []msgEvent
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
		out = append(out, msgEvent{ev.Type, data, string(ev.Data)})
	}
}

// reassembled is what a client rebuilds from a Messages stream.
type reassembled struct {
	thinking, text, json string
	signatures           []string
	blocks               []map[string]any // content_block_start blocks, in order
	stopReason           string
	outputTokens         float64
	types                []string // event types, in order
}

// reassemble checks the block structure (indexes start at 0, deltas
// only inside an open block) and joins each channel's deltas.
func reassemble(t *testing.T, events []msgEvent) reassembled {
	t.Helper()
	var r reassembled
	var sb struct{ thinking, text, json strings.Builder }
	open := -1
	for _, ev := range events {
		r.types = append(r.types, ev.typ)
		switch ev.typ {
		case "content_block_start":
			if idx := int(ev.data["index"].(float64)); open != -1 || idx != len(r.blocks) {
				t.Errorf("block %d starts while %d is open (%d started)", idx, open, len(r.blocks))
			}
			open = len(r.blocks)
			r.blocks = append(r.blocks, ev.data["content_block"].(map[string]any))
		case "content_block_delta":
			if int(ev.data["index"].(float64)) != open {
				t.Errorf("delta for block %v while %d is open", ev.data["index"], open)
			}
			d := ev.data["delta"].(map[string]any)
			switch d["type"] {
			case "thinking_delta":
				sb.thinking.WriteString(d["thinking"].(string))
			case "text_delta":
				sb.text.WriteString(d["text"].(string))
			case "input_json_delta":
				sb.json.WriteString(d["partial_json"].(string))
			case "signature_delta":
				r.signatures = append(r.signatures, d["signature"].(string))
			default:
				t.Errorf("unknown delta %v", d)
			}
		case "content_block_stop":
			if int(ev.data["index"].(float64)) != open {
				t.Errorf("stop for block %v while %d is open", ev.data["index"], open)
			}
			open = -1
		case "message_delta":
			r.stopReason, _ = ev.data["delta"].(map[string]any)["stop_reason"].(string)
			r.outputTokens, _ = ev.data["usage"].(map[string]any)["output_tokens"].(float64)
		}
	}
	r.thinking, r.text, r.json = sb.thinking.String(), sb.text.String(), sb.json.String()
	return r
}

// msgResponse decodes a non-streaming Messages answer.
type msgResponse struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Role         string  `json:"role"`
	Model        string  `json:"model"`
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Content      []struct {
		Type      string          `json:"type"`
		Thinking  *string         `json:"thinking"`
		Signature *string         `json:"signature"`
		Text      *string         `json:"text"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	} `json:"content"`
	Usage map[string]int `json:"usage"`
}

func decodeMsg(t *testing.T, resp *http.Response) msgResponse {
	t.Helper()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var m msgResponse
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// msgBody builds a Messages request body; extra is spliced in as more
// top-level fields (e.g. `"stream":true,`).
func msgBody(extra string) string {
	return `{"model":"claude-sim",` + extra + `"max_tokens":1024,"system":"be brief","messages":[{"role":"user","content":"hello world!"}]}`
}
