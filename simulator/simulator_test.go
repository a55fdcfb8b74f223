package simulator

import (
	"context"
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

func TestSimulatorCaddyfile(t *testing.T) {
	d := caddyfile.NewTestDispenser(`llm_simulator {
		model sim-a sim-b
		model sim-c
		seed 7
		reasoning_tokens 0
		content_tokens 12
		pattern clustered 10 250ms 2ms
		content_pattern steady 0
		ttfb 150ms
		fail 503 0.3
		fail 429 retry_after 2
		fail 500 25% retry_after "Wed, 21 Oct 2015 07:28:00 GMT"
		stall 0.05
		overloaded
		overloaded 10% retry_after 5
		drop_after 5
		error_after 0 0.5
	}`)
	var s Simulator
	if err := s.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"models":["sim-a","sim-b","sim-c"],"seed":7,"reasoning_tokens":0,"content_tokens":12,` +
		`"reasoning_pattern":{"kind":"clustered","burst":10,"pause":250000000,"spread":2000000},` +
		`"content_pattern":{"kind":"steady","rate":0},"ttfb":150000000,"faults":[` +
		`{"kind":"status","status":503,"rate":0.3},` +
		`{"kind":"status","status":429,"retry_after":"2"},` +
		`{"kind":"status","status":500,"retry_after":"Wed, 21 Oct 2015 07:28:00 GMT","rate":0.25},` +
		`{"kind":"stall","rate":0.05},` +
		`{"kind":"overloaded"},` +
		`{"kind":"overloaded","retry_after":"5","rate":0.1},` +
		`{"kind":"drop","after":5},` +
		`{"kind":"error","rate":0.5}]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestSimulatorCaddyfileDefaults(t *testing.T) {
	for _, in := range []string{"llm_simulator", "llm_simulator {\n}", "llm_simulator {\n\tpattern steady\n}"} {
		var s Simulator
		if err := s.UnmarshalCaddyfile(caddyfile.NewTestDispenser(in)); err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if s.ReasoningTokens != nil || s.ContentTokens != nil || len(s.Faults) != 0 ||
			(s.ContentPattern != nil && s.ContentPattern.Rate != nil) {
			t.Errorf("%q: unexpected settings %+v", in, s)
		}
	}
}

func TestSimulatorCaddyfileErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"llm_simulator foo", "takes no arguments"},
		{"llm_simulator {\n\tbogus 1\n}", `unrecognized llm_simulator subdirective "bogus"; expected model, seed,`},
		{"llm_simulator {\n\tmodel\n}", "wrong argument count or unexpected line ending after 'model', at Testfile:2"},
		{"llm_simulator {\n\tseed x\n}", `seed: must be an integer, got "x", at Testfile:2`},
		{"llm_simulator {\n\tseed 1\n\tseed 2\n}", "seed already specified, at Testfile:3"},
		{"llm_simulator {\n\treasoning_tokens -1\n}", "reasoning_tokens: must be a whole number of tokens >= 0, got \"-1\", at Testfile:2"},
		{"llm_simulator {\n\n\tcontent_tokens 1 2\n}", "Testfile:3"},
		{"llm_simulator {\n\tpattern\n}", "pattern: expected `pattern steady [<tokens_per_sec>]`"},
		{"llm_simulator {\n\tpattern bursty\n}", `pattern: kind must be steady or clustered, got "bursty", at Testfile:2`},
		{"llm_simulator {\n\tpattern steady fast\n}", `pattern steady: tokens per second must be a number >= 0`},
		{"llm_simulator {\n\treasoning_pattern clustered 0\n}", `reasoning_pattern clustered: burst_tokens must be a whole number > 0, got "0", at Testfile:2`},
		{"llm_simulator {\n\tcontent_pattern clustered 20 soon\n}", `content_pattern clustered: pause must be a positive duration like 800ms, got "soon"`},
		{"llm_simulator {\n\tpattern clustered 20 1s 0s\n}", `spread must be a positive duration`},
		{"llm_simulator {\n\tpattern clustered 1 2s 3ms 4\n}", "Testfile:2"},
		{"llm_simulator {\n\tttfb 1\n}", `ttfb: "1" is not a duration >= 0; write it like 250ms or 2s, at Testfile:2`},
		{"llm_simulator {\n\tfail\n}", "Testfile:2"},
		{"llm_simulator {\n\tfail 200\n}", `fail: status must be an HTTP error status 400-599, got "200", at Testfile:2`},
		{"llm_simulator {\n\tfail 503 1.5\n}", `fail: rate must be a probability in (0, 1] like 0.3 or 30%, got "1.5", at Testfile:2`},
		{"llm_simulator {\n\tfail 503 0\n}", "fail: rate must be a probability"},
		{"llm_simulator {\n\tfail 503 retry_after\n}", "fail: expected `fail <status> [<rate>] [retry_after <value>]`"},
		{"llm_simulator {\n\tfail 503 0.5 0.5\n}", `fail: unexpected argument "0.5"`},
		{"llm_simulator {\n\tstall 1 2\n}", "Testfile:2"},
		{"llm_simulator {\n\toverloaded often\n}", `overloaded: rate must be a probability in (0, 1] like 0.3 or 30%, got "often", at Testfile:2`},
		{"llm_simulator {\n\toverloaded retry_after\n}", "overloaded: expected `overloaded [<rate>] [retry_after <value>]`, at Testfile:2"},
		{"llm_simulator {\n\toverloaded 0.5 0.5\n}", `overloaded: unexpected argument "0.5"; expected ` + "`overloaded [<rate>] [retry_after <value>]`"},
		{"llm_simulator {\n\toverloaded retry_after 1 0.5\n}", `overloaded: unexpected argument "0.5"`},
		{"llm_simulator {\n\tstall often\n}", `stall: rate must be a probability`},
		{"llm_simulator {\n\tdrop_after\n}", "Testfile:2"},
		{"llm_simulator {\n\tdrop_after -3\n}", `drop_after: events must be a whole number >= 0, got "-3"`},
		{"llm_simulator {\n\terror_after 3 200%\n}", `error_after: rate must be a probability`},
	} {
		var s Simulator
		err := s.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got error %v\nwant one containing %q", tc.in, err, tc.want)
		}
	}
}

// simProvision provisions s as Caddy would.
func simProvision(t *testing.T, s *Simulator) error {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := s.Provision(ctx); err != nil {
		return err
	}
	t.Cleanup(func() { _ = s.Cleanup() })
	return s.Validate()
}

func TestSimulatorJSONConfig(t *testing.T) {
	var s Simulator
	cfg := `{"seed":5,"reasoning_tokens":3,"content_pattern":{"kind":"clustered","pause":"250ms"},"ttfb":"10ms","faults":[{"kind":"drop","after":2,"rate":0.1},{"kind":"overloaded","retry_after":"1","rate":0.2}]}`
	if err := caddy.StrictUnmarshalJSON([]byte(cfg), &s); err != nil {
		t.Fatal(err)
	}
	if err := simProvision(t, &s); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ cfg, want string }{
		{`{"faults":[{"kind":"explode"}]}`, `llm_simulator: faults[0]: unknown kind "explode"`},
		{`{"reasoning_pattern":{"kind":"wavy"}}`, `llm_simulator: reasoning pattern: unknown kind "wavy"`},
		{`{"content_tokens":-1}`, "llm_simulator: content tokens: must be >= 0"},
		{`{"content_pattern":{"kind":"clustered","rate":5}}`, "llm_simulator: content_pattern: rate applies to steady patterns only"},
		{`{"reasoning_pattern":{"burst":5}}`, "llm_simulator: reasoning_pattern: burst, pause and spread apply to clustered patterns only"},
		{`{"faults":[{"kind":"stall","status":503}]}`, "llm_simulator: faults[0]: status applies to status faults only"},
		{`{"faults":[{"kind":"overloaded","status":529}]}`, "llm_simulator: faults[0]: status applies to status faults only"},
		{`{"faults":[{"kind":"drop","retry_after":"2"}]}`, "llm_simulator: faults[0]: retry_after applies to status and overloaded faults only"},
		{`{"faults":[{"kind":"overloaded","after":1}]}`, "llm_simulator: faults[0]: after applies to drop and error faults only"},
		{`{"faults":[{"kind":"status","status":503,"after":1}]}`, "llm_simulator: faults[0]: after applies to drop and error faults only"},
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

func TestSimulatorServeHTTP(t *testing.T) {
	var s Simulator
	d := caddyfile.NewTestDispenser(`llm_simulator {
		seed 9
		reasoning_tokens 4
		content_tokens 6
		pattern steady 0
	}`)
	if err := s.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if err := simProvision(t, &s); err != nil {
		t.Fatal(err)
	}
	wantR, wantC := sim.Texts(sim.Config{Seed: 9, ReasoningTokens: new(4), ContentTokens: new(6)})
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		t.Error("the simulator called next")
		return nil
	})
	serve := func(method, path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
		rec := httptest.NewRecorder()
		if err := s.ServeHTTP(rec, req, next); err != nil {
			t.Fatalf("ServeHTTP: %v", err)
		}
		return rec
	}

	rec := serve("POST", "/sim/v1/chat/completions", `{"model":"x","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/event-stream" || !rec.Flushed {
		t.Fatalf("stream: status %d, type %q, flushed %v", rec.Code, rec.Header().Get("Content-Type"), rec.Flushed)
	}
	var reasoning, content strings.Builder
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("bad event %q: %v", data, err)
		}
		for _, ch := range c.Choices {
			reasoning.WriteString(ch.Delta.ReasoningContent)
			content.WriteString(ch.Delta.Content)
		}
	}
	if reasoning.String() != strings.Join(wantR, "") || content.String() != strings.Join(wantC, "") {
		t.Errorf("streamed texts differ:\n%q %q\n%q %q", reasoning.String(), content.String(), wantR, wantC)
	}
	if !strings.HasSuffix(rec.Body.String(), "data: [DONE]\n\n") {
		t.Errorf("stream does not end with [DONE]")
	}

	rec = serve("POST", "/v1/chat/completions", `{"model":"x"}`)
	var resp struct {
		Choices []struct {
			Message struct {
				Content          string `json:"content"`
				ReasoningContent string `json:"reasoning_content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || rec.Code != 200 {
		t.Fatalf("non-stream: %d %v", rec.Code, err)
	}
	if m := resp.Choices[0].Message; m.Content != strings.Join(wantC, "") || m.ReasoningContent != strings.Join(wantR, "") {
		t.Errorf("non-stream texts differ: %+v", m)
	}

	rec = serve("GET", "/v1/models", "")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"id":"sim-reasoner"`) {
		t.Errorf("models: %d %s", rec.Code, rec.Body)
	}
	rec = serve("GET", "/v1/nothing", "")
	if rec.Code != 404 {
		t.Errorf("unknown path: %d", rec.Code)
	}
}

// TestSimulatorOverloadedServes checks the overloaded knob end to end
// through the module: Anthropic's 529 on Messages, OpenAI's 503 on Chat.
func TestSimulatorOverloadedServes(t *testing.T) {
	var s Simulator
	if err := s.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_simulator {\n\toverloaded retry_after 7\n}")); err != nil {
		t.Fatal(err)
	}
	if err := simProvision(t, &s); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path   string
		status int
		body   string
	}{
		{"/v1/messages", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		{"/anthropic/v1/messages/count_tokens", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		{"/v1/chat/completions", 503, `{"error":{"message":"simulated upstream overloaded","type":"server_error","code":"overloaded"}}`},
		{"/v1/responses", 503, `{"error":{"message":"simulated upstream overloaded","type":"server_error","code":"overloaded"}}`},
	} {
		req := httptest.NewRequest("POST", tc.path, strings.NewReader(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
		req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
		rec := httptest.NewRecorder()
		if err := s.ServeHTTP(rec, req, nil); err != nil {
			t.Fatal(err)
		}
		if rec.Code != tc.status || strings.TrimSpace(rec.Body.String()) != tc.body || rec.Header().Get("Retry-After") != "7" {
			t.Errorf("%s: %d %s (Retry-After %q), want %d %s", tc.path, rec.Code, rec.Body, rec.Header().Get("Retry-After"), tc.status, tc.body)
		}
	}
}

// TestSimulatorServesMessages checks that the module answers Messages
// with the same answer text as Chat.
func TestSimulatorServesMessages(t *testing.T) {
	var s Simulator
	if err := s.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_simulator {\n\tseed 3\n\tcontent_tokens 5\n\tpattern steady 0\n}")); err != nil {
		t.Fatal(err)
	}
	if err := simProvision(t, &s); err != nil {
		t.Fatal(err)
	}
	_, wantC := sim.Texts(sim.Config{Seed: 3, ContentTokens: new(5)})
	req := httptest.NewRequest("POST", "/v1/messages", strings.NewReader(`{"model":"claude-x","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("x-api-key", "anything")
	req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
	rec := httptest.NewRecorder()
	if err := s.ServeHTTP(rec, req, nil); err != nil {
		t.Fatal(err)
	}
	var m struct {
		Model   string `json:"model"`
		Content []struct{ Type, Text string }
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || rec.Code != 200 {
		t.Fatalf("%d %v", rec.Code, err)
	}
	if m.Model != "claude-x" || len(m.Content) != 1 || m.Content[0].Text != strings.Join(wantC, "") {
		t.Errorf("answer %+v", m)
	}
}

func TestSimulatorReasoningForm(t *testing.T) {
	var s Simulator
	d := caddyfile.NewTestDispenser("llm_simulator {\n\tseed 4\n\treasoning_tokens 3\n\tcontent_tokens 2\n\treasoning_form tags_unopened\n}")
	if err := s.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(s); !strings.Contains(string(got), `"reasoning_form":"tags_unopened"`) {
		t.Errorf("JSON %s lacks the form", got)
	}
	if err := simProvision(t, &s); err != nil {
		t.Fatal(err)
	}
	wantR, wantC := sim.Texts(sim.Config{Seed: 4, ReasoningTokens: new(3), ContentTokens: new(2)})
	serve := func(form string) string {
		req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"model":"x"}`))
		if form != "" {
			req.Header.Set(sim.ReasoningFormHeader, form)
		}
		req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
		rec := httptest.NewRecorder()
		if err := s.ServeHTTP(rec, req, nil); err != nil {
			t.Fatal(err)
		}
		return rec.Body.String()
	}
	var resp struct {
		Choices []struct {
			Message map[string]string `json:"message"`
		} `json:"choices"`
	}
	body := serve("")
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if m := resp.Choices[0].Message; m["content"] != strings.Join(wantR, "")+"\n</think>\n\n"+strings.Join(wantC, "") || m["reasoning_content"] != "" {
		t.Errorf("tags_unopened answer %q", m)
	}
	if body := serve("tags"); !strings.Contains(body, `"content":"<think>\n`) {
		t.Errorf("the header did not select tags: %s", body)
	}

	for _, tc := range []struct{ in, want string }{
		{"llm_simulator {\n\treasoning_form xml\n}", `reasoning_form: must be fields, tags or tags_unopened, got "xml", at Testfile:2`},
		{"llm_simulator {\n\treasoning_form\n}", "wrong argument count or unexpected line ending after 'reasoning_form', at Testfile:2"},
		{"llm_simulator {\n\treasoning_form tags tags\n}", "Testfile:2"},
		{"llm_simulator {\n\treasoning_form tags\n\treasoning_form fields\n}", "reasoning_form already specified, at Testfile:3"},
	} {
		var s Simulator
		err := s.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got error %v\nwant one containing %q", tc.in, err, tc.want)
		}
	}

	var bad Simulator
	if err := caddy.StrictUnmarshalJSON([]byte(`{"reasoning_form":"xml"}`), &bad); err != nil {
		t.Fatal(err)
	}
	err := simProvision(t, &bad)
	if want := `llm_simulator: reasoning form: unknown form "xml" (want "fields", "tags" or "tags_unopened")`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("provision: %v, want %q", err, want)
	}
	var good Simulator
	if err := caddy.StrictUnmarshalJSON([]byte(`{"reasoning_form":"tags"}`), &good); err != nil || simProvision(t, &good) != nil {
		t.Errorf("JSON reasoning_form tags: %v", err)
	}
}

func TestSimulatorEcho(t *testing.T) {
	var s Simulator
	d := caddyfile.NewTestDispenser("llm_simulator {\n\tseed 4\n\techo handoff\n}")
	if err := s.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(s); !strings.Contains(string(got), `"echo":"handoff"`) {
		t.Errorf("JSON %s lacks the echo", got)
	}
	if err := simProvision(t, &s); err != nil {
		t.Fatal(err)
	}
	serve := func(s *Simulator, path, echo, body string) string {
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		if echo != "" {
			req.Header.Set(sim.EchoHeader, echo)
		}
		req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
		rec := httptest.NewRecorder()
		if err := s.ServeHTTP(rec, req, nil); err != nil {
			t.Fatal(err)
		}
		return rec.Body.String()
	}
	prefill := `{"model":"x","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"<think>\nfirst \"this\"\nthen 推理\n</think>"}]}`
	var resp struct {
		Choices []struct {
			Message map[string]string `json:"message"`
		} `json:"choices"`
	}
	body := serve(&s, "/v1/chat/completions", "", prefill)
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if m := resp.Choices[0].Message; m["content"] != "handoff:prefill:first \"this\"\nthen 推理" || m["reasoning_content"] != "" {
		t.Errorf("echo answer %q", m)
	}

	// Without the setting, the header asks for the echo.
	var plain Simulator
	if err := simProvision(t, &plain); err != nil {
		t.Fatal(err)
	}
	if body := serve(&plain, "/v1/messages", "", `{"model":"x","max_tokens":8,"system":"<think>\nS\n</think>","messages":[{"role":"user","content":"hi"}]}`); strings.Contains(body, "handoff:") {
		t.Errorf("echo without the header: %s", body)
	}
	if body := serve(&plain, "/v1/messages", sim.EchoHandoff, `{"model":"x","max_tokens":8,"system":"<think>\nS\n</think>","messages":[{"role":"user","content":"hi"}]}`); !strings.Contains(body, `"text":"handoff:system:S"`) {
		t.Errorf("the header did not echo: %s", body)
	}
	if body := serve(&plain, "/v1/responses", "all", `{"model":"x","input":"hi"}`); !strings.Contains(body, `X-Sim-Echo: unknown mode \"all\" (want \"handoff\")`) {
		t.Errorf("unknown header value: %s", body)
	}

	for _, tc := range []struct{ in, want string }{
		{"llm_simulator {\n\techo all\n}", `echo: must be handoff, got "all", at Testfile:2`},
		{"llm_simulator {\n\techo\n}", "wrong argument count or unexpected line ending after 'echo', at Testfile:2"},
		{"llm_simulator {\n\techo handoff handoff\n}", "Testfile:2"},
		{"llm_simulator {\n\techo handoff\n\techo handoff\n}", "echo already specified, at Testfile:3"},
	} {
		var s Simulator
		err := s.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got error %v\nwant one containing %q", tc.in, err, tc.want)
		}
	}

	var bad Simulator
	if err := caddy.StrictUnmarshalJSON([]byte(`{"echo":"all"}`), &bad); err != nil {
		t.Fatal(err)
	}
	err := simProvision(t, &bad)
	if want := `llm_simulator: echo: unknown mode "all" (want "handoff")`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("provision: %v, want %q", err, want)
	}
	var good Simulator
	if err := caddy.StrictUnmarshalJSON([]byte(`{"echo":"handoff"}`), &good); err != nil || simProvision(t, &good) != nil {
		t.Errorf("JSON echo handoff: %v", err)
	}
}
