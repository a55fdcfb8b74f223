package simulator

import (
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmrelay/caddy-llm-relay/internal/sim"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// serveResponses provisions a simulator from a Caddyfile block and
// posts one Responses request to it.
func serveResponses(t *testing.T, block, body string) *httptest.ResponseRecorder {
	t.Helper()
	var s Simulator
	if err := s.UnmarshalCaddyfile(caddyfile.NewTestDispenser(block)); err != nil {
		t.Fatal(err)
	}
	if err := simProvision(t, &s); err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "/openai/v1/responses", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer anything")
	req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
	rec := httptest.NewRecorder()
	if err := s.ServeHTTP(rec, req, nil); err != nil {
		t.Fatal(err)
	}
	return rec
}

// responsesEvents parses a Responses stream: each event's type, and its
// data decoded.
func responsesEvents(t *testing.T, body io.Reader) (types []string, data []map[string]any) {
	t.Helper()
	r := sse.NewReader(body, 0)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return types, data
		}
		if err != nil {
			t.Fatal(err)
		}
		var d map[string]any
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatalf("event %s: %v", ev.Type, err)
		}
		if d["sequence_number"] != float64(len(types)) {
			t.Errorf("event %d %s: sequence_number %v", len(types), ev.Type, d["sequence_number"])
		}
		types, data = append(types, ev.Type), append(data, d)
	}
}

// TestSimulatorServesResponses checks that the module, configured from
// a Caddyfile, streams Responses with the Chat texts (the reasoning as a
// summary when asked for) and ends with response.completed.
func TestSimulatorServesResponses(t *testing.T) {
	block := "llm_simulator {\n\tseed 3\n\treasoning_tokens 4\n\tcontent_tokens 5\n\tpattern steady 0\n}"
	wantR, wantC := sim.Texts(sim.Config{Seed: 3, ReasoningTokens: new(4), ContentTokens: new(5)})
	rec := serveResponses(t, block, `{"model":"gpt-x","stream":true,"reasoning":{"effort":"low","summary":"auto"},"input":"hi"}`)
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/event-stream" || !rec.Flushed {
		t.Fatalf("status %d, type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	types, data := responsesEvents(t, rec.Body)
	var summary, text strings.Builder
	for i, typ := range types {
		switch typ {
		case "response.reasoning_summary_text.delta":
			summary.WriteString(data[i]["delta"].(string))
		case "response.output_text.delta":
			text.WriteString(data[i]["delta"].(string))
		}
	}
	if summary.String() != strings.Join(wantR, "") || text.String() != strings.Join(wantC, "") {
		t.Errorf("summary %q text %q, want %q %q", summary.String(), text.String(), wantR, wantC)
	}
	if len(types) < 3 || types[0] != "response.created" || types[len(types)-1] != "response.completed" {
		t.Fatalf("events %q", types)
	}
	resp := data[len(data)-1]["response"].(map[string]any)
	if resp["model"] != "gpt-x" || resp["status"] != "completed" || resp["usage"].(map[string]any)["output_tokens"] != float64(9) {
		t.Errorf("completed %v", resp)
	}

	// Not streaming: the same text in one message item.
	rec = serveResponses(t, block, `{"model":"gpt-x","input":[{"role":"user","content":"hi"}]}`)
	var o struct {
		Output []struct {
			Type    string
			Content []struct{ Type, Text string }
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &o); err != nil || rec.Code != 200 {
		t.Fatalf("%d %v", rec.Code, err)
	}
	if len(o.Output) != 1 || o.Output[0].Type != "message" || o.Output[0].Content[0].Text != strings.Join(wantC, "") {
		t.Errorf("answer %+v", o)
	}
}

// TestSimulatorResponsesErrorAfter checks the error_after knob on a
// Responses stream: the counted events, then `event: error`.
func TestSimulatorResponsesErrorAfter(t *testing.T) {
	block := "llm_simulator {\n\tcontent_tokens 5\n\tpattern steady 0\n\terror_after 3\n}"
	rec := serveResponses(t, block, `{"stream":true,"input":"hi"}`)
	types, data := responsesEvents(t, rec.Body)
	// created (counted), in_progress, item and part added, 2 deltas (counted), the error.
	want := "response.created response.in_progress response.output_item.added response.content_part.added " +
		"response.output_text.delta response.output_text.delta error"
	if strings.Join(types, " ") != want {
		t.Fatalf("events %q, want %s", types, want)
	}
	e := data[len(data)-1]
	if nested, _ := e["error"].(map[string]any); nested == nil || nested["message"] != e["message"] || e["code"] != "server_error" {
		t.Errorf("error event %v", e)
	}
}
