package sim

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// serveRec answers one request in process, without a network.
func serveRec(s *Server, path, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("POST", path, strings.NewReader(body)))
	return rec
}

// FuzzMessages posts arbitrary bodies to the Messages endpoint. Each is
// answered 200 or an Anthropic 400; a 200 answer is well formed, and the
// stream of the same request (stream set to true) reassembles to the
// same blocks, stop reason and usage as the non-stream answer.
func FuzzMessages(f *testing.F) {
	f.Add(msgBody(``))
	f.Add(msgBody(`"thinking":{"type":"enabled","budget_tokens":1024},`))
	f.Add(msgBody(`"thinking":{"type":"adaptive"},"system":[{"type":"text","text":"sys"}],`))
	f.Add(msgToolBody + `}`)
	f.Add(`{"tools":[{"name":"a"}],"tool_choice":{"type":"tool","name":"b"},"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"x"}]}]}]}`)
	f.Add(`{"tools":[{"name":"a"}],"tool_choice":{"type":"tool"},"messages":[{"role":"user","content":[{"type":"text","text":"é"}]}]}`)
	f.Add(`{"thinking":null,"tool_choice":null,"messages":null}`)
	f.Add(`{"model":7}`)
	f.Add(`[]`)
	f.Add(``)
	s, err := New(Config{Seed: 5, ReasoningTokens: new(5), ContentTokens: new(4), ReasoningPattern: fast, ContentPattern: fast})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		rec := serveRec(s, "/v1/messages", body)
		if rec.Code != 200 {
			var e anthropicError
			if rec.Code != 400 || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error.Type != "invalid_request_error" {
				t.Fatalf("status %d body %s", rec.Code, rec.Body)
			}
			return
		}
		var m message
		dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("bad answer %s: %v", rec.Body, err)
		}
		if m.Type != "message" || m.StopReason == nil || len(m.Content) == 0 {
			t.Fatalf("bad answer %s", rec.Body)
		}
		last := m.Content[len(m.Content)-1]
		if (last.Type == "tool_use") != (*m.StopReason == "tool_use") || (last.Type != "tool_use" && last.Type != "text") {
			t.Fatalf("last block %s with stop %s", last.Type, *m.StopReason)
		}
		if m.Content[0].Type == "thinking" && (m.Content[0].Signature == nil || *m.Content[0].Signature == "") {
			t.Fatalf("thinking without a signature: %s", rec.Body)
		}

		// The same request streamed.
		var req map[string]any
		if json.Unmarshal([]byte(body), &req) != nil || req == nil {
			return // accepted by the simulator but not a JSON object (trailing data, null)
		}
		req["stream"] = true
		streamed, _ := json.Marshal(req)
		rec = serveRec(s, "/v1/messages", string(streamed))
		if rec.Code != 200 {
			t.Fatalf("stream: status %d", rec.Code)
		}
		events, err := readMsgEvents(t, rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		r := reassemble(t, events)
		if r.stopReason != *m.StopReason || int(r.outputTokens) != m.Usage.OutputTokens || len(r.blocks) != len(m.Content) {
			t.Fatalf("stream %v stop %q out %v; answer %s", r.types, r.stopReason, r.outputTokens, rec.Body)
		}
		for i, b := range m.Content {
			if r.blocks[i]["type"] != b.Type {
				t.Fatalf("block %d: streamed %v, answered %s", i, r.blocks[i]["type"], b.Type)
			}
			switch b.Type {
			case "thinking":
				if r.thinking != *b.Thinking || len(r.signatures) != 1 || r.signatures[0] != *b.Signature {
					t.Fatalf("thinking differs")
				}
			case "text":
				if r.text != *b.Text {
					t.Fatalf("text differs")
				}
			case "tool_use":
				if r.json != string(b.Input) || b.Name == nil || r.blocks[i]["name"] != *b.Name || b.ID == nil || !strings.HasPrefix(*b.ID, "toolu_sim_") || !strings.HasPrefix(r.blocks[i]["id"].(string), "toolu_sim_") {
					t.Fatalf("tool_use differs: %q %v vs %s %v", r.json, r.blocks[i], b.Input, b)
				}
			}
		}
	})
}
