package simulator

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmrelay/caddy-llm-relay/internal/sim"
)

// TestSimulatorContinuationCaddyfile: continue_overlap and the placed
// faults parse to the JSON form, which loads back and provisions.
func TestSimulatorContinuationCaddyfile(t *testing.T) {
	d := caddyfile.NewTestDispenser(`llm_simulator {
		continue_overlap 3
		drop_in reasoning
		error_in tool_args 25%
		drop_in answer 0.5
		drop_before_end
		error_before_end 0.1
	}`)
	var s Simulator
	if err := s.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"continue_overlap":3,"faults":[` +
		`{"kind":"drop","in":"reasoning"},` +
		`{"kind":"error","in":"tool_args","rate":0.25},` +
		`{"kind":"drop","in":"answer","rate":0.5},` +
		`{"kind":"drop","before_end":true},` +
		`{"kind":"error","before_end":true,"rate":0.1}]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var back Simulator
	if err := caddy.StrictUnmarshalJSON(got, &back); err != nil {
		t.Fatal(err)
	}
	if err := simProvision(t, &back); err != nil {
		t.Fatal(err)
	}
}

func TestSimulatorContinuationCaddyfileErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"llm_simulator {\n\tcontinue_overlap\n}", "wrong argument count or unexpected line ending after 'continue_overlap', at Testfile:2"},
		{"llm_simulator {\n\tcontinue_overlap -1\n}", `continue_overlap: must be a whole number of runes >= 0, got "-1", at Testfile:2`},
		{"llm_simulator {\n\tcontinue_overlap 2\n\tcontinue_overlap 3\n}", "continue_overlap already specified, at Testfile:3"},
		{"llm_simulator {\n\tdrop_in\n}", "drop_in: expected `drop_in reasoning|answer|tool_args [<rate>]`, at Testfile:2"},
		{"llm_simulator {\n\terror_in thinking\n}", `error_in: phase must be reasoning, answer or tool_args, got "thinking", at Testfile:2`},
		{"llm_simulator {\n\tdrop_in answer 0.5 0.5\n}", "drop_in: expected `drop_in reasoning|answer|tool_args [<rate>]`, at Testfile:2"},
		{"llm_simulator {\n\tdrop_in answer 2\n}", `drop_in: rate must be a probability in (0, 1] like 0.3 or 30%, got "2", at Testfile:2`},
		{"llm_simulator {\n\tdrop_before_end 0.5 1\n}", "drop_before_end: expected `drop_before_end [<rate>]`, at Testfile:2"},
		{"llm_simulator {\n\terror_before_end often\n}", `error_before_end: rate must be a probability`},
		{"llm_simulator {\n\tdrop_inside answer\n}", "drop_in, error_in, drop_before_end or error_before_end"},
	} {
		var s Simulator
		err := s.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got error %v\nwant one containing %q", tc.in, err, tc.want)
		}
	}
}

func TestSimulatorContinuationJSONErrors(t *testing.T) {
	for _, tc := range []struct{ cfg, want string }{
		{`{"continue_overlap":-2}`, "llm_simulator: continue overlap: must be >= 0 runes, got -2"},
		{`{"faults":[{"kind":"drop","in":"thinking"}]}`, `llm_simulator: faults[0]: drop: unknown phase "thinking" (want "reasoning", "answer" or "tool_args")`},
		{`{"faults":[{"kind":"error","in":"answer","after":4}]}`, "llm_simulator: faults[0]: error: after counts events from the start; leave it 0 with in or before_end"},
		{`{"faults":[{"kind":"drop","in":"answer","before_end":true}]}`, "llm_simulator: faults[0]: drop: in answer and before_end are two places; give one"},
		{`{"faults":[{"kind":"stall","before_end":true}]}`, "llm_simulator: faults[0]: stall: in and before_end apply to drop and error faults only"},
		{`{"faults":[{"kind":"overloaded","in":"answer"}]}`, "llm_simulator: faults[0]: overloaded: in and before_end apply to drop and error faults only"},
	} {
		var s Simulator
		if err := caddy.StrictUnmarshalJSON([]byte(tc.cfg), &s); err != nil {
			t.Fatal(err)
		}
		err := simProvision(t, &s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want error containing %q", tc.cfg, err, tc.want)
		}
	}
}

// TestSimulatorContinuationServeHTTP: the module passes continue_overlap
// through: a Messages prefill gets the rest after the overlap, with no
// thinking.
func TestSimulatorContinuationServeHTTP(t *testing.T) {
	var s Simulator
	d := caddyfile.NewTestDispenser(`llm_simulator {
		seed 9
		content_tokens 12
		pattern steady 0
		continue_overlap 2
	}`)
	if err := s.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if err := simProvision(t, &s); err != nil {
		t.Fatal(err)
	}
	_, content := sim.Texts(sim.Config{Seed: 9, ContentTokens: new(12)})
	full := strings.Join(content, "")
	p := strings.Join(content[:5], "")
	body, _ := json.Marshal(map[string]any{
		"model": "m", "max_tokens": 99, "thinking": map[string]any{"type": "enabled", "budget_tokens": 64},
		"messages": []map[string]any{{"role": "user", "content": "hi"}, {"role": "assistant", "content": p}},
	})
	req := httptest.NewRequest("POST", "/v1/messages", strings.NewReader(string(body)))
	req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
	rec := httptest.NewRecorder()
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	if err := s.ServeHTTP(rec, req, next); err != nil {
		t.Fatal(err)
	}
	var m struct {
		Content []struct {
			Type, Text string
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || len(m.Content) != 1 || m.Content[0].Type != "text" {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	r := []rune(p)
	if want := string(r[len(r)-2:]) + full[len(p):]; m.Content[0].Text != want {
		t.Errorf("continuation %q, want %q", m.Content[0].Text, want)
	}
}
