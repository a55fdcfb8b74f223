package sim

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

const respTools = `"tools":[{"type":"web_search"},{"type":"function","name":"get_weather","parameters":{"type":"object"}},{"type":"function","name":"other"}],`

func TestResponsesToolRule(t *testing.T) {
	callInput := `"input":[{"role":"user","content":"weather?"}]`
	resultInput := `"input":[{"role":"user","content":"weather?"},` +
		`{"type":"function_call","call_id":"call_sim_1","name":"get_weather","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"call_sim_1","output":"sunny"}]`
	for _, tc := range []struct {
		name, body string
		want       string // the tool called, "" for text
	}{
		{"required calls the first function", respTools + `"tool_choice":"required",` + callInput, "get_weather"},
		{"forced by name", respTools + `"tool_choice":{"type":"function","name":"other"},` + callInput, "other"},
		{"forced without name", respTools + `"tool_choice":{"type":"function"},` + callInput, "get_weather"},
		{"auto", respTools + `"tool_choice":"auto",` + callInput, ""},
		{"none", respTools + `"tool_choice":"none",` + callInput, ""},
		{"absent choice", respTools + callInput, ""},
		{"no tools", `"tool_choice":"required",` + callInput, ""},
		{"no function tools", `"tools":[{"type":"web_search"}],"tool_choice":"required",` + callInput, ""},
		{"hosted choice", respTools + `"tool_choice":{"type":"web_search"},` + callInput, ""},
		{"result ends the round trip", respTools + `"tool_choice":"required",` + resultInput, ""},
		{"string input", respTools + `"tool_choice":"required","input":"weather?"`, "get_weather"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m",` + tc.body + `}`
			req := respRequest{}
			if err := json.Unmarshal([]byte(body), &req); err != nil {
				t.Fatal(err)
			}
			got := req.responsesToolCall()
			if (got == nil) != (tc.want == "") || (got != nil && got.name != tc.want) {
				t.Errorf("tool call %+v, want %q", got, tc.want)
			}
		})
	}
}

// TestResponsesToolRoundTrip runs a round trip as a client does: a
// forced call, streamed and not, then the call's output, answered with
// the text.
func TestResponsesToolRoundTrip(t *testing.T) {
	_, wantC := Texts(msgCfg)
	for _, reasoning := range []string{``, `"reasoning":{"effort":"low"},`} {
		s, ts := startServer(t, msgCfg)
		ask := respTools + reasoning + `"tool_choice":"required","input":[{"role":"user","content":"weather?"}]`

		o := decodeRespObj(t, postTo(t, ts, "/v1/responses", `{"model":"m",`+ask+`}`))
		call := o.Output[len(o.Output)-1]
		if call.Type != "function_call" || call.ID != "fc_sim_1" || call.CallID != "call_sim_1" ||
			call.Name != "get_weather" || call.Arguments != ToolInput || call.Status != "completed" {
			t.Errorf("call item %+v", call)
		}
		if o.Usage.OutputTokens-*o.Usage.OutputTokensDetails.ReasoningTokens != len(ToolInputFragments) {
			t.Errorf("usage %+v", o.Usage)
		}

		events, err := readRespEvents(t, postTo(t, ts, "/v1/responses", `{"model":"m","stream":true,`+ask+`}`).Body)
		if err != nil {
			t.Fatal(err)
		}
		got := reassembleResp(t, events)
		if got.args != ToolInput || got.argsDone != ToolInput || got.text != "" {
			t.Errorf("arguments %q, done %q, text %q", got.args, got.argsDone, got.text)
		}
		var deltas []string
		for _, ev := range events {
			if ev.typ == "response.function_call_arguments.delta" {
				deltas = append(deltas, ev.data["delta"].(string))
			}
		}
		if !slices.Equal(deltas, ToolInputFragments) {
			t.Errorf("argument deltas %q, want the fragments unsplit %q", deltas, ToolInputFragments)
		}
		wantTail := []string{"response.output_item.added", "response.function_call_arguments.delta",
			"response.function_call_arguments.delta", "response.function_call_arguments.delta",
			"response.function_call_arguments.done", "response.output_item.done"}
		if n := len(got.types); n < 7 || !slices.Equal(got.types[n-7:n-1], wantTail) || got.types[n-1] != "response.completed" {
			t.Errorf("events %q, want to end with %q and response.completed", got.types, wantTail)
		}
		added := events[slices.IndexFunc(events, func(e respEvent) bool {
			return e.typ == "response.output_item.added" && e.data["item"].(map[string]any)["type"] == "function_call"
		})].data["item"].(map[string]any)
		if added["arguments"] != "" || added["call_id"] != "call_sim_2" || added["name"] != "get_weather" || added["status"] != "in_progress" {
			t.Errorf("added item %v", added)
		}

		answer := `{"model":"m",` + respTools + reasoning + `"tool_choice":"required","input":[{"role":"user","content":"weather?"},` +
			`{"type":"function_call","call_id":"call_sim_1","name":"get_weather","arguments":"{\"input\":\"sim\"}"},` +
			`{"type":"function_call_output","call_id":"call_sim_1","output":"sunny"}]}`
		o = decodeRespObj(t, postTo(t, ts, "/v1/responses", answer))
		msg := o.Output[len(o.Output)-1]
		if msg.Type != "message" || len(msg.Content) != 1 || msg.Content[0].Text != strings.Join(wantC, "") {
			t.Errorf("answer after the output %+v", msg)
		}
		if s.Requests() != 3 {
			t.Errorf("Requests() = %d", s.Requests())
		}
	}
}
