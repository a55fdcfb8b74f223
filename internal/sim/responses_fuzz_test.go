package sim

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"
)

// FuzzResponses posts arbitrary bodies to the Responses endpoint. Each
// is answered 200 or an OpenAI 400; a 200 answer is a completed
// response object (decoded strictly) ending in a message or a
// function_call item, and the stream of the same request (stream set to
// true) is well formed and its response.completed carries the same
// output and usage as the non-stream answer.
func FuzzResponses(f *testing.F) {
	f.Add(respBody(``))
	f.Add(respBody(`"reasoning":{"effort":"high","summary":"auto"},`))
	f.Add(respBody(`"reasoning":{"effort":"none"},`))
	f.Add(`{"input":[{"role":"user","content":[{"type":"input_text","text":"é"}]}],` + respTools + `"tool_choice":"required"}`)
	f.Add(`{"input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x"}]}],` + respTools + `"tool_choice":{"type":"function","name":"z"}}`)
	f.Add(`{"tools":[{"type":"function"}],"tool_choice":"required","input":7}`)
	f.Add(`{"reasoning":null,"tools":null,"tool_choice":null,"input":null,"instructions":null}`)
	f.Add(`{"stream":true,"input":"x"}`)
	f.Add(`{"model":7}`)
	f.Add(`[]`)
	f.Add(``)
	s, err := New(Config{Seed: 5, ReasoningTokens: new(5), ContentTokens: new(4), ReasoningPattern: fast, ContentPattern: fast})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		rec := serveRec(s, "/v1/responses", body)
		if rec.Code != 200 {
			var e apiError
			if rec.Code != 400 || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error.Type != "invalid_request_error" {
				t.Fatalf("status %d body %s", rec.Code, rec.Body)
			}
			return
		}
		if rec.Header().Get("Content-Type") == "text/event-stream" { // the body asked for a stream
			events, err := readRespEvents(t, rec.Body)
			if err != nil || reassembleResp(t, events).completed == nil {
				t.Fatalf("stream %s: %v", rec.Body, err)
			}
			return
		}
		var o respObject
		dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			t.Fatalf("bad answer %s: %v", rec.Body, err)
		}
		if o.Object != "response" || o.Status != "completed" || o.Usage == nil || len(o.Output) == 0 || len(o.Output) > 2 {
			t.Fatalf("bad answer %s", rec.Body)
		}
		last := o.Output[len(o.Output)-1]
		if last.Type != "message" && (last.Type != "function_call" || last.Arguments == nil || *last.Arguments != ToolInput || last.Name == "") {
			t.Fatalf("last item %s", rec.Body)
		}
		if len(o.Output) == 2 && (o.Output[0].Type != "reasoning" || o.Usage.OutputTokensDetails.ReasoningTokens != 5) {
			t.Fatalf("first item %s", rec.Body)
		}
		if o.Usage.TotalTokens != o.Usage.InputTokens+o.Usage.OutputTokens || o.Usage.InputTokens < 1 {
			t.Fatalf("usage %+v", *o.Usage)
		}

		// The same request streamed.
		var req map[string]any
		if json.Unmarshal([]byte(body), &req) != nil || req == nil {
			return // accepted by the simulator but not a JSON object (trailing data, null)
		}
		req["stream"] = true
		streamed, _ := json.Marshal(req)
		rec = serveRec(s, "/v1/responses", string(streamed))
		if rec.Code != 200 {
			t.Fatalf("stream: status %d", rec.Code)
		}
		events, err := readRespEvents(t, rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		r := reassembleResp(t, events)
		if r.completed == nil || events[len(events)-1].typ != "response.completed" {
			t.Fatalf("stream %v", r.types)
		}
		// The two requests differ only in their number, which the ids carry.
		got, _ := json.Marshal(r.completed["output"])
		want, _ := json.Marshal(o.Output)
		got, want = simID.ReplaceAll(got, []byte("sim_N")), simID.ReplaceAll(want, []byte("sim_N"))
		gotU, _ := json.Marshal(r.completed["usage"])
		wantU, _ := json.Marshal(o.Usage)
		if !jsonEqual(got, want) || !jsonEqual(gotU, wantU) {
			t.Fatalf("streamed output %s usage %s\nanswered %s usage %s", got, gotU, want, wantU)
		}
	})
}

var simID = regexp.MustCompile(`sim_[0-9]+`)

// jsonEqual compares two JSON documents by value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ax, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	return bytes.Equal(ax, by)
}
