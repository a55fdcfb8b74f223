package splice

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

func TestChatRecorderForwardsText(t *testing.T) {
	r := NewRecorder(Chat, 1<<20)
	for _, ev := range []sse.Event{
		chunkEv(t, `{"role":"assistant","content":""}`, "null"),
		chunkEv(t, `{"reasoning_content":"Hmm."}`, "null"),
		chunkEv(t, `{"content":"Hello"}`, "null"),
		chunkEv(t, `{"content":" there","tool_calls":null,"refusal":null}`, "null"),
		block(t, ": keep-alive\n\n"),
	} {
		out := r.Pass(ev)
		if len(out) != 1 || string(out[0].Raw) != string(ev.Raw) {
			t.Fatalf("Pass(%s) = %q, want it forwarded as it is", ev.Raw, datas(out))
		}
	}
	if r.Overflow() {
		t.Fatal("Overflow")
	}
}

func TestChatRecorderHolds(t *testing.T) {
	for name, first := range map[string]sse.Event{
		"tool call":     chunkEv(t, `{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}`, "null"),
		"function call": chunkEv(t, `{"function_call":{"name":"f","arguments":""}}`, "null"),
		"finish":        chunkEv(t, `{"content":"!"}`, `"stop"`),
		"refusal":       chunkEv(t, `{"refusal":"I can't"}`, "null"),
	} {
		t.Run(name, func(t *testing.T) {
			r := NewRecorder(Chat, 1<<20)
			feed(r, chunkEv(t, `{"role":"assistant","content":""}`, "null"), chunkEv(t, `{"content":"Hi"}`, "null"))
			later := []sse.Event{first, chunkEv(t, `{"content":" more"}`, "null"),
				block(t, `data: {"id":"c1","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`+"\n\n")}
			for _, ev := range later {
				if out := r.Pass(ev); len(out) != 0 {
					t.Fatalf("Pass(%s) = %q, want it held", ev.Data, datas(out))
				}
			}
			ping := block(t, ": ping\n\n")
			if out := r.Pass(ping); len(out) != 0 {
				t.Fatalf("a comment while holding: %q, want it held behind the held events (the upstream's order)", datas(out))
			}
			out := feed(r, doneEv(t))
			want := append(datas(later), ": ping", "[DONE]")
			if fmt.Sprint(datas(out)) != fmt.Sprint(want) {
				t.Fatalf("[DONE] released %q,\nwant %q", datas(out), want)
			}
			// Held again after the release: a spliced stream's own tail.
			if out := r.Pass(first); len(out) != 0 {
				t.Fatalf("after [DONE]: %q, want held", datas(out))
			}
		})
	}
}

func TestChatRecorderErrorReleases(t *testing.T) {
	for _, errEv := range []sse.Event{
		block(t, `data: {"error":{"message":"overloaded","type":"server_error"}}`+"\n\n"),
		block(t, "event: error\ndata: {\"message\":\"boom\"}\n\n"),
	} {
		r := NewRecorder(Chat, 1<<20)
		call := chunkEv(t, `{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{"}}]}`, "null")
		feed(r, chunkEv(t, `{"content":"Hi"}`, "null"), call)
		out := feed(r, errEv)
		if got := datas(out); len(got) != 2 || got[0] != string(call.Data) || got[1] != string(errEv.Data) {
			t.Errorf("error %q while holding: %q, want the held call and the error", errEv.Raw, got)
		}
	}
	// An error member that is null is no error.
	r := NewRecorder(Chat, 1<<20)
	feed(r, chunkEv(t, `{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}`, "null"))
	if out := feed(r, block(t, `data: {"id":"c1","error":null,"choices":[{"index":0,"delta":{"content":"x"}}]}`+"\n\n")); len(out) != 0 {
		t.Errorf("error null: %q, want held", datas(out))
	}
}

func TestChatRecorderSeam(t *testing.T) {
	r := NewRecorder(Chat, 1<<20)
	feed(r,
		chunkEv(t, `{"role":"assistant","content":"","reasoning_content":""}`, "null"),
		chunkEv(t, `{"reasoning_content":"Let me think."}`, "null"),
	)
	s := r.Seam()
	if s.Answer != "" || s.Reasoning != "Let me think." || !s.InReasoning || s.Discarded != 0 || s.OutputTokens == 0 {
		t.Fatalf("seam in the reasoning: %+v", s)
	}

	r = NewRecorder(Chat, 1<<20)
	feed(r,
		chunkEv(t, `{"role":"assistant","content":""}`, "null"),
		chunkEv(t, `{"reasoning":"Plan."}`, "null"),
		chunkEv(t, `{"content":"The answer"}`, "null"),
		chunkEv(t, `{"content":[{"type":"text","text":" is"}]}`, "null"), // Mistral's text part
		chunkEv(t, `{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a"}}]}`, "null"),
		chunkEv(t, `{"tool_calls":[{"index":0,"function":{"arguments":"\":1}"}}]}`, "null"),
	)
	s = r.Seam()
	if s.Answer != "The answer is" || s.Reasoning != "Plan." || s.InReasoning || s.Discarded != 2 || s.ToolCalls != 0 {
		t.Fatalf("seam in a tool call: %+v", s)
	}
	if want := usage.EstimateTokens([]byte("The answer is")) + usage.EstimateTokens([]byte("Plan.")); s.OutputTokens != want {
		t.Fatalf("OutputTokens %d, want %d", s.OutputTokens, want)
	}

	// Tool calls count once handed, at [DONE] (Mistral's have no index).
	for path, want := range map[string]int{"openai/chat-parallel-tool-calls.sse": 2, "mistral/tool-call.sse": 1, "alibaba/tool-call.sse": 1} {
		_, s = seamOf(t, readRecording(t, "../../testdata/recordings/"+path)...)
		if s.ToolCalls != want || s.Discarded != 0 {
			t.Errorf("%s, whole: %d tool calls, %d discarded; want %d, 0", path, s.ToolCalls, s.Discarded, want)
		}
	}
}

func TestChatRecorderOverflow(t *testing.T) {
	r := NewRecorder(Chat, 400)
	text := chunkEv(t, `{"content":"Hello"}`, "null")
	feed(r, text)
	if r.Overflow() {
		t.Fatal("Overflow after one chunk")
	}
	feed(r, text, text)
	if !r.Overflow() {
		t.Fatal("no Overflow past maxBytes")
	}

	// Held events beyond the bound go out: a seam is lost anyway.
	r = NewRecorder(Chat, 600)
	call := chunkEv(t, `{"tool_calls":[{"index":0,"function":{"arguments":"xxxxxxxxxx"}}]}`, "null")
	if out := feed(r, call); len(out) != 0 {
		t.Fatal("a tool call not held")
	}
	if out := feed(r, call, call); len(out) != 3 || !r.Overflow() {
		t.Fatalf("overflow while holding: %d events out, Overflow %v; want all 3 out", len(out), r.Overflow())
	}
}

func TestChatRecorderMultiChoice(t *testing.T) {
	// A tool call's index is not a choice's.
	r := NewRecorder(Chat, 1<<20)
	feed(r, chunkEv(t, `{"tool_calls":[{"index":1,"function":{"arguments":"x"}}]}`, "null"))
	if r.Overflow() {
		t.Fatal("a tool call of index 1 taken for a second choice")
	}
	r = NewRecorder(Chat, 1<<20)
	feed(r, block(t, `data: {"id":"c1","choices":[{"delta":{"content":"x"},"index":1,"finish_reason":null}]}`+"\n\n"))
	if !r.Overflow() {
		t.Fatal("choice index 1: no Overflow")
	}
	r = NewRecorder(Chat, 1<<20)
	evs := readRecording(t, "../../testdata/recordings/openai/chat-three-choices.sse")
	feed(r, evs[:2]...)
	if r.Overflow() {
		t.Fatal("Overflow before a second choice")
	}
	feed(r, evs[2])
	if !r.Overflow() {
		t.Fatal("chat-three-choices: no Overflow at its choice 1")
	}
}

// seamOf passes evs through a new recorder and returns it with its seam.
func seamOf(t *testing.T, evs ...sse.Event) (Recorder, *Seam) {
	r := NewRecorder(Chat, 1<<20)
	feed(r, evs...)
	return r, r.Seam()
}

func decode(t *testing.T, ev sse.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(ev.Data, &m); err != nil {
		t.Fatalf("%v: %s", err, ev.Data)
	}
	return m
}

func TestChatSplicerHead(t *testing.T) {
	_, s := seamOf(t, chunkEv(t, `{"role":"assistant","content":""}`, "null"), chunkEv(t, `{"content":"Hi"}`, "null"))
	sp := s.Splicer(Options{MaxOverlap: -1})
	out := splice(sp, nil,
		contEv(t, `{"content":" there"}`, "null"),
		block(t, `data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"!"}}]}`+"\n\n"), // no head at all
	)
	if len(out) != 2 {
		t.Fatalf("out %q", datas(out))
	}
	for _, ev := range out {
		m := decode(t, ev)
		if m["id"] != "c1" || m["created"] != 100.0 || m["model"] != "m1" || m["system_fingerprint"] != "fp1" {
			t.Errorf("chunk %s: want the first stream's id, created, model, fingerprint", ev.Data)
		}
	}

	// The first stream had no fingerprint: none is made up.
	_, s = seamOf(t, block(t, `data: {"id":"c9","created":5,"model":"m9","choices":[{"index":0,"delta":{"content":"Hi"}}]}`+"\n\n"))
	out = splice(s.Splicer(Options{}), nil, contEv(t, `{"content":"Yo"}`, "null"))
	if m := decode(t, out[0]); m["id"] != "c9" || m["system_fingerprint"] != nil {
		t.Errorf("chunk %s: want id c9 and no fingerprint", out[0].Data)
	}
}

func TestChatSplicerRole(t *testing.T) {
	_, s := seamOf(t, chunkEv(t, `{"role":"assistant","content":""}`, "null"), chunkEv(t, `{"content":"Hi"}`, "null"))
	out := splice(s.Splicer(Options{MaxOverlap: -1}), nil,
		contEv(t, `{"role":"assistant","content":""}`, "null"),
		contEv(t, `{"role":"assistant","content":" you"}`, "null"),
	)
	if got := datas(out); len(got) != 1 || strings.Contains(got[0], "role") || !strings.Contains(got[0], `"content":" you"`) {
		t.Fatalf("role chunks: %q, want the role-only chunk dropped and the role taken off the other", got)
	}
	// Nothing was handed: the client has no role yet, it keeps the
	// continuation's (once).
	_, s = seamOf(t)
	out = splice(s.Splicer(Options{}), nil,
		contEv(t, `{"role":"assistant","content":""}`, "null"),
		contEv(t, `{"role":"assistant","content":"Hi"}`, "null"),
	)
	c := newClient()
	c.read(out...)
	if c.roles != 1 || c.content.String() != "Hi" {
		t.Fatalf("no role handed: %q, want one role chunk", datas(out))
	}
	// Text was handed without a role (a provider that sends none): the
	// continuation's role goes out.
	_, s = seamOf(t, chunkEv(t, `{"content":"Hi"}`, "null"))
	out = splice(s.Splicer(Options{MaxOverlap: -1}), nil, contEv(t, `{"role":"assistant","content":" there"}`, "null"))
	c = newClient()
	if c.read(out...); c.roles != 1 {
		t.Fatalf("text without a role handed: %q, want the role kept", datas(out))
	}
}

func TestChatSplicerComment(t *testing.T) {
	_, s := seamOf(t, chunkEv(t, `{"content":"Hi"}`, "null"))
	sp := s.Splicer(Options{Comment: "continued on b (model m2)", MaxOverlap: -1})
	out := splice(sp, nil, contEv(t, `{"content":" a"}`, "null"), contEv(t, `{"content":" b"}`, "null"), block(t, ": ping\n\n"))
	got := datas(out)
	if len(got) != 4 || got[0] != ": continued on b (model m2)" || got[3] != ": ping" {
		t.Fatalf("out %q, want the comment once, first", got)
	}
}

func TestChatSplicerReasoning(t *testing.T) {
	for _, c := range []struct {
		name   string
		first  string // the first stream's reasoning delta
		marker string // the marker chunk's delta
	}{
		{"reasoning_content", `{"reasoning_content":"Let me"}`, `{"reasoning_content":` + chatQuote(Marker) + `}`},
		{"reasoning", `{"reasoning":"Let me","channel":"analysis"}`, `{"reasoning":` + chatQuote(Marker) + `}`},
		{"thinking", `{"content":[{"type":"thinking","thinking":[{"type":"text","text":"Let me"}]}]}`,
			`{"content":[{"type":"thinking","thinking":[{"type":"text","text":` + chatQuote(Marker) + `}]}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, s := seamOf(t, chunkEv(t, `{"role":"assistant","content":""}`, "null"), chunkEv(t, c.first, "null"))
			if !s.InReasoning {
				t.Fatal("not InReasoning")
			}
			cont := []sse.Event{
				contEv(t, `{"role":"assistant","content":"","reasoning_content":""}`, "null"),
				contEv(t, `{"reasoning_content":"Think"}`, "null"),
				contEv(t, `{"content":"Answer"}`, "null"),
			}
			out := splice(s.Splicer(Options{Reasoning: Mark}), nil, cont...)
			if len(out) != 3 || !strings.Contains(string(out[0].Data), `"delta":`+c.marker+`,`) {
				t.Fatalf("Mark: %q, want the marker chunk %s first", datas(out), c.marker)
			}
			cl := newClient()
			cl.read(out...)
			if cl.reasoning.String() != Marker+"Think" || cl.content.String() != "Answer" {
				t.Fatalf("Mark: reasoning %q, content %q", cl.reasoning.String(), cl.content.String())
			}
			// The marker and the new reasoning are in the first stream's member.
			if want := strings.SplitN(c.first, `"`, 3)[1]; !strings.Contains(string(out[1].Data), `"`+want+`"`) {
				t.Fatalf("Mark: %s, want the reasoning in %q", out[1].Data, want)
			}

			out = splice(s.Splicer(Options{Reasoning: Hide}), nil, cont...)
			if got := datas(out); len(got) != 1 || strings.Contains(got[0], "Think") || strings.Contains(got[0], "reasoning") {
				t.Fatalf("Hide: %q, want the answer alone", got)
			}
		})
	}

	// The answer had begun: the continuation's reasoning is dropped.
	_, s := seamOf(t, chunkEv(t, `{"reasoning_content":"R"}`, "null"), chunkEv(t, `{"content":"A"}`, "null"))
	out := splice(s.Splicer(Options{Reasoning: Mark, MaxOverlap: -1}), nil,
		contEv(t, `{"reasoning_content":"Think"}`, "null"), contEv(t, `{"content":"B","reasoning_content":"more"}`, "null"))
	if got := datas(out); len(got) != 1 || strings.Contains(got[0], "reasoning") || strings.Contains(got[0], Marker[2:10]) {
		t.Fatalf("after the answer: %q, want B alone", got)
	}
}

func chatQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestChatSplicerOverlap(t *testing.T) {
	_, s := seamOf(t, chunkEv(t, `{"content":"The answer is forty-two"}`, "null"))
	sp := s.Splicer(Options{})
	cont := []string{"is ", "forty", "-two", ", because", " of this."}
	var out []sse.Event
	for i, text := range cont {
		got := splice(sp, nil, contEv(t, `{"content":`+chatQuote(text)+`}`, "null"))
		if i < 3 && len(got) != 0 {
			t.Fatalf("text %d (%q): %q, want it held while it may repeat the seam", i, text, datas(got))
		}
		out = append(out, got...)
	}
	cl := newClient()
	cl.read(out...)
	if cl.content.String() != ", because of this." || len(cl.errs) > 0 {
		t.Fatalf("content %q (%v), want the repeat dropped", cl.content.String(), cl.errs)
	}

	// The end decides: a continuation that only repeats.
	_, s = seamOf(t, chunkEv(t, `{"content":"The answer is forty-two"}`, "null"))
	out = splice(s.Splicer(Options{}), nil, contEv(t, `{"content":"forty-two"}`, "null"), contEv(t, `{}`, `"stop"`), doneEv(t))
	if got := datas(out); len(got) != 2 || strings.Contains(got[0], "forty") || !strings.Contains(got[0], `"stop"`) {
		t.Fatalf("repeat then finish: %q", got)
	}

	// A space at the seam, sent once.
	_, s = seamOf(t, chunkEv(t, `{"content":"Hello "}`, "null"))
	out = splice(s.Splicer(Options{}), nil, contEv(t, `{"content":" "}`, "null"), contEv(t, `{"content":" world"}`, "null"), doneEv(t))
	cl = newClient()
	cl.read(out...)
	if cl.content.String() != "world" {
		t.Fatalf("space at the seam: %q", cl.content.String())
	}

	// MaxOverlap < 0: nothing held, nothing dropped.
	_, s = seamOf(t, chunkEv(t, `{"content":"The answer is forty-two"}`, "null"))
	if out := splice(s.Splicer(Options{MaxOverlap: -1}), nil, contEv(t, `{"content":"forty-two"}`, "null")); len(out) != 1 {
		t.Fatalf("MaxOverlap -1: %q", datas(out))
	}
}

func TestChatSplicerUsage(t *testing.T) {
	_, s := seamOf(t, chunkEv(t, `{"content":"Hi"}`, "null"))
	early := usage.Usage{Prompt: 100, Completion: 10, Reasoning: 4, Cached: 50}
	for _, c := range []struct{ in, want string }{
		{`{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,"completion_tokens_details":{"reasoning_tokens":1},"prompt_tokens_details":{"cached_tokens":2}}`,
			`{"prompt_tokens":107,"completion_tokens":13,"total_tokens":120,"completion_tokens_details":{"reasoning_tokens":5},"prompt_tokens_details":{"cached_tokens":52}}`},
		{`{"prompt_tokens":7,"total_tokens":10,"completion_tokens":3}`, // Mistral's: the details are made
			`{"prompt_tokens":107,"total_tokens":120,"completion_tokens":13,"prompt_tokens_details":{"cached_tokens":50},"completion_tokens_details":{"reasoning_tokens":4}}`},
		{`{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,"prompt_cache_hit_tokens":1,"prompt_cache_miss_tokens":6,"completion_tokens_details":null}`, // DeepSeek's
			`{"prompt_tokens":107,"completion_tokens":13,"total_tokens":120,"prompt_cache_hit_tokens":51,"prompt_cache_miss_tokens":56,"completion_tokens_details":{"reasoning_tokens":4},"prompt_tokens_details":{"cached_tokens":50}}`},
	} {
		out := splice(s.Splicer(Options{Earlier: early}), nil,
			block(t, `data: {"id":"k2","choices":[],"usage":`+c.in+"}\n\n"))
		var m struct{ Usage json.RawMessage }
		if len(out) != 1 || json.Unmarshal(out[0].Data, &m) != nil || string(m.Usage) != c.want {
			t.Errorf("usage %s:\ngot  %q\nwant %s", c.in, datas(out), c.want)
		}
		if u, ok := usage.ParseUsage(m.Usage); !ok || u.Prompt != 107 || u.Completion != 13 || u.Cached < 50 || u.Reasoning < 4 {
			t.Errorf("usage %s: ParseUsage %+v", c.in, u)
		}
	}
	// In the finish chunk (DeepSeek, Groq), null, and no Earlier.
	out := splice(s.Splicer(Options{Earlier: early, MaxOverlap: -1}), nil,
		contEv(t, `{"content":"x"}`, "null"),
		block(t, `data: {"id":"k2","choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`+"\n\n"),
	)
	if len(out) != 2 || !strings.Contains(string(out[1].Data), `"usage":{"prompt_tokens":101,"completion_tokens":11,"total_tokens":112,`) {
		t.Errorf("usage in a finish chunk: %q", datas(out))
	}
	out = splice(s.Splicer(Options{}), nil, block(t, `data: {"id":"k2","choices":[],"usage":{"prompt_tokens":1}}`+"\n\n"))
	if !strings.Contains(string(out[0].Data), `"usage":{"prompt_tokens":1}`) {
		t.Errorf("no Earlier: %q", datas(out))
	}
}

func TestChatSplicerPasses(t *testing.T) {
	_, s := seamOf(t, chunkEv(t, `{"content":"The answer is forty-two"}`, "null"))
	sp := s.Splicer(Options{})
	held := splice(sp, nil, contEv(t, `{"content":"forty"}`, "null"))
	if len(held) != 0 {
		t.Fatal("not held")
	}
	errEv := block(t, `data: {"error":{"message":"overloaded","type":"server_error"}}`+"\n\n")
	out := splice(sp, nil, errEv)
	// The held text goes out (decided by the error), then the error as it came.
	if got := datas(out); len(got) != 2 || !strings.Contains(got[0], `"content":"forty"`) || got[1] != string(errEv.Data) {
		t.Fatalf("error: %q", got)
	}
	for _, ev := range []sse.Event{doneEv(t), block(t, "event: error\ndata: {\"x\":1}\n\n"), block(t, "data: not json\n\n"), block(t, ": c\n\n")} {
		if out := splice(sp, nil, ev); len(out) != 1 || string(out[0].Raw) != string(ev.Raw) {
			t.Errorf("%q: %q, want it passed as it is", ev.Raw, datas(out))
		}
	}
}

func TestChatSplicerToolCalls(t *testing.T) {
	_, s := seamOf(t, chunkEv(t, `{"role":"assistant","content":""}`, "null"), chunkEv(t, `{"content":"Let me look."}`, "null"))
	sp := s.Splicer(Options{MaxOverlap: -1})
	call := `{"content":null,"tool_calls":[{"index":1,"id":"call_9","type":"function","function":{"name":"f","arguments":"{\"q\":"}}]}`
	out := splice(sp, nil, contEv(t, call, "null"), contEv(t, `{"tool_calls":[{"index":1,"function":{"arguments":"1}"}}]}`, "null"), contEv(t, `{}`, `"tool_calls"`))
	cl := newClient()
	cl.read(out...)
	if len(out) != 3 || cl.calls[1] == nil || cl.calls[1].ID != "call_9" || cl.calls[1].Args != `{"q":1}` || cl.finish != "tool_calls" {
		t.Fatalf("tool calls: %q", datas(out))
	}
}

// A continuation that breaks in turn: the second seam is everything
// handed, through both streams.
func TestChatRecorderSecondBreak(t *testing.T) {
	r := NewRecorder(Chat, 1<<20)
	cl := newClient()
	cl.read(feed(r,
		chunkEv(t, `{"role":"assistant","content":""}`, "null"),
		chunkEv(t, `{"reasoning_content":"First thoughts."}`, "null"),
	)...)
	s := r.Seam()
	sp := s.Splicer(Options{Reasoning: Mark})
	cl.read(splice(sp, r,
		contEv(t, `{"role":"assistant","content":""}`, "null"),
		contEv(t, `{"reasoning_content":"Again."}`, "null"),
		contEv(t, `{"content":"The answer"}`, "null"),
		contEv(t, `{"content":" is"}`, "null"),
		contEv(t, `{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{"}}]}`, "null"),
	)...)
	s2 := r.Seam()
	if s2.Answer != "The answer is" || s2.Reasoning != "First thoughts."+Marker+"Again." || s2.InReasoning || s2.Discarded != 1 {
		t.Fatalf("second seam %+v", s2)
	}
	cl.read(splice(s2.Splicer(Options{}), r,
		block(t, `data: {"id":"k3","created":300,"model":"m3","choices":[{"index":0,"delta":{"role":"assistant","content":"answer is 42."}}]}`+"\n\n"),
		block(t, `data: {"id":"k3","created":300,"model":"m3","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n"),
		doneEv(t),
	)...)
	if cl.content.String() != "The answer is 42." || cl.roles != 1 || len(cl.ids) != 1 || cl.ids["c1"] == 0 || cl.finish != "stop" || cl.dones != 1 {
		t.Fatalf("client: content %q roles %d ids %v finish %q", cl.content.String(), cl.roles, cl.ids, cl.finish)
	}
}

func BenchmarkChatRecorderPass(b *testing.B) {
	ev := block(b, "data: "+chunkData(`{"content":" token"}`, "null")+"\n\n")
	b.ReportAllocs()
	b.SetBytes(int64(len(ev.Data)))
	r := NewRecorder(Chat, 1<<40)
	for b.Loop() {
		r.Pass(ev)
	}
}

func BenchmarkChatScan(b *testing.B) {
	data := []byte(chunkData(`{"content":" token"}`, "null"))
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		scanChunk(data)
	}
}

// BenchmarkChatRecorderStream is what a stream that never breaks pays:
// a fresh Recorder, a role chunk, 20 content chunks, the finish, [DONE].
func BenchmarkChatRecorderStream(b *testing.B) {
	evs := []sse.Event{block(b, "data: "+chunkData(`{"role":"assistant","content":""}`, "null")+"\n\n")}
	for range 20 {
		evs = append(evs, block(b, "data: "+chunkData(`{"content":" token"}`, "null")+"\n\n"))
	}
	evs = append(evs, block(b, "data: "+chunkData(`{}`, `"stop"`)+"\n\n"), block(b, "data: [DONE]\n\n"))
	b.ReportAllocs()
	for b.Loop() {
		r := NewRecorder(Chat, 8<<20)
		for _, ev := range evs {
			r.Pass(ev)
		}
		r.Release()
	}
}

// InToolCall tells a break in a held tool call from one after a held
// finish.
func TestChatSeamInToolCall(t *testing.T) {
	r := NewRecorder(Chat, 1<<20)
	feed(r, chunkEv(t, `{"content":"Hi"}`, "null"), chunkEv(t, `{}`, `"stop"`))
	if s := r.Seam(); s.Discarded != 1 || s.InToolCall {
		t.Fatalf("after a held finish: %+v", s)
	}
	r = NewRecorder(Chat, 1<<20)
	feed(r, chunkEv(t, `{"content":"Hi"}`, "null"), chunkEv(t, `{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a"}}]}`, "null"))
	if s := r.Seam(); s.Discarded != 1 || !s.InToolCall {
		t.Fatalf("inside a tool call: %+v", s)
	}
}
