package sim

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/handoff"
)

// piecesSent returns m when text is the first m of pieces joined, or -1.
func piecesSent(pieces []string, text string) int {
	joined := ""
	for m := 0; m <= len(pieces); m++ {
		if joined == text {
			return m
		}
		if m < len(pieces) {
			joined += pieces[m]
		}
	}
	return -1
}

// checkMiddle checks that text is about the middle of the phase made
// of pieces: the first m of k pieces, k/4 <= m <= 3k/4, 1 <= m < k.
func checkMiddle(t *testing.T, label string, pieces []string, text string) {
	t.Helper()
	k := len(pieces)
	m := piecesSent(pieces, text)
	if m < 1 || m >= k || m < k/4 || m > (3*k+3)/4 {
		t.Errorf("%s: %d of %d deltas sent (%q), want about half", label, m, k, text)
	}
}

// endsWithFault checks that a stream was cut by kind: a dropped
// connection, or an in-band error event as its last event, and never
// its end event.
func endsWithFault(t *testing.T, label, kind string, g got) {
	t.Helper()
	switch kind {
	case FaultDrop:
		if g.err == nil || g.last() == "error" {
			t.Errorf("%s: want a dropped connection, got %v, last %q", label, g.err, g.last())
		}
	case FaultError:
		if g.err != nil || g.last() != "error" {
			t.Errorf("%s: want an in-band error last, got %v, events %v", label, g.err, g.types)
		}
	}
	for _, end := range []string{"[DONE]", "message_stop", "response.completed"} {
		if slices.Contains(g.types, end) {
			t.Errorf("%s: the stream has its end event %s", label, end)
		}
	}
}

// withoutError returns the event types before an in-band error.
func withoutError(types []string) []string {
	if n := len(types); n > 0 && types[n-1] == "error" {
		return types[:n-1]
	}
	return types
}

// TestFaultInPhase: drop_in and error_in cut a stream in the middle of
// the phase they name, in every dialect.
func TestFaultInPhase(t *testing.T) {
	reasoning, content := Texts(contCfg)
	for _, kind := range []string{FaultDrop, FaultError} {
		for _, in := range []string{InReasoning, InAnswer, InToolArgs} {
			cfg := contCfg
			cfg.Faults = []Fault{{Kind: kind, In: in}}
			_, ts := startServer(t, cfg)
			for _, d := range dialects {
				for n := range 3 { // three requests: three draws of the place
					label := fmt.Sprintf("%s in %s, %s #%d", kind, in, dialectNames[d], n+1)
					g := readGot(t, d, true, postDialect(t, ts.URL, ts.Client(), d, convo{stream: true, tools: in == InToolArgs}.body(d)))
					endsWithFault(t, label, kind, g)
					switch in {
					case InReasoning:
						checkMiddle(t, label, reasoning, g.reasoning)
						if g.text != "" {
							t.Errorf("%s: answer text %q", label, g.text)
						}
					case InAnswer:
						checkMiddle(t, label, content, g.text)
						if g.reasoning != strings.Join(reasoning, "") {
							t.Errorf("%s: reasoning %q", label, g.reasoning)
						}
					case InToolArgs:
						checkMiddle(t, label, ToolInputFragments, g.args)
						if g.name != "lookup" || g.reasoning != strings.Join(reasoning, "") {
							t.Errorf("%s: tool %q, reasoning %q", label, g.name, g.reasoning)
						}
					}
				}
			}
		}
	}
}

// TestFaultInPhaseDeterministic: the place drawn in the phase depends on
// the seed and the request's number only, and varies between requests.
func TestFaultInPhaseDeterministic(t *testing.T) {
	cfg := contCfg
	cfg.Faults = []Fault{{Kind: FaultError, In: InAnswer}}
	_, content := Texts(cfg)
	places := func() []int {
		_, ts := startServer(t, cfg)
		var out []int
		for range 8 {
			g := readGot(t, handoff.Chat, true, postDialect(t, ts.URL, ts.Client(), handoff.Chat, convo{stream: true}.body(handoff.Chat)))
			out = append(out, piecesSent(content, g.text))
		}
		return out
	}
	a, b := places(), places()
	if !slices.Equal(a, b) {
		t.Errorf("two simulators with one seed cut at %v and %v", a, b)
	}
	if slices.Min(a) == slices.Max(a) {
		t.Errorf("every request cut at %d: the place is not drawn", a[0])
	}
}

// TestFaultInPhaseAbsent: a request whose answer has no such phase gets
// its whole answer: no reasoning asked for, a text answer for tool_args,
// a tool call for answer.
func TestFaultInPhaseAbsent(t *testing.T) {
	for _, tc := range []struct {
		in    string
		cfg   Config
		tools bool
	}{
		{InReasoning, Config{Seed: 3, ReasoningTokens: new(0), ReasoningPattern: fast, ContentPattern: fast}, false},
		{InToolArgs, contCfg, false},
		{InAnswer, contCfg, true},
	} {
		cfg := tc.cfg
		cfg.Faults = []Fault{{Kind: FaultDrop, In: tc.in}}
		_, ts := startServer(t, cfg)
		for _, d := range dialects {
			for _, stream := range []bool{true, false} {
				g := readGot(t, d, stream, postDialect(t, ts.URL, ts.Client(), d, convo{stream: stream, tools: tc.tools}.body(d)))
				if g.err != nil || (tc.tools && g.args != ToolInput) || (!tc.tools && g.text == "") {
					t.Errorf("%s, %s stream=%v: %+v", tc.in, dialectNames[d], stream, g)
				}
			}
		}
	}
}

// TestFaultInPhaseNotStreaming: a non-streaming answer with the phase
// gets the fault as drop and error faults do: a closed connection or a
// 500.
func TestFaultInPhaseNotStreaming(t *testing.T) {
	for _, kind := range []string{FaultDrop, FaultError} {
		cfg := contCfg
		cfg.Faults = []Fault{{Kind: kind, In: InAnswer}}
		_, ts := startServer(t, cfg)
		for _, d := range dialects {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+echoPaths[d], strings.NewReader(convo{}.body(d)))
			resp, err := ts.Client().Do(req)
			switch {
			case kind == FaultDrop && err == nil:
				resp.Body.Close()
				t.Errorf("drop, %s: answered %d", dialectNames[d], resp.StatusCode)
			case kind == FaultError && (err != nil || resp.StatusCode != 500):
				t.Errorf("error, %s: %v", dialectNames[d], err)
			}
			if err == nil {
				resp.Body.Close()
			}
		}
	}
}

// TestFaultBeforeEnd: before_end sends everything but the stream's end
// event: Chat's finish and usage chunks but not [DONE], Messages'
// message_delta but not message_stop, Responses' last output_item.done
// but not response.completed.
func TestFaultBeforeEnd(t *testing.T) {
	reasoning, content := Texts(contCfg)
	wantLast := map[handoff.Dialect]string{handoff.Chat: "usage", handoff.Messages: "message_delta", handoff.Responses: "response.output_item.done"}
	for _, kind := range []string{FaultDrop, FaultError} {
		cfg := contCfg
		cfg.Faults = []Fault{{Kind: kind, BeforeEnd: true}}
		_, ts := startServer(t, cfg)
		for _, d := range dialects {
			for _, tools := range []bool{false, true} {
				label := fmt.Sprintf("%s before_end, %s tools=%v", kind, dialectNames[d], tools)
				g := readGot(t, d, true, postDialect(t, ts.URL, ts.Client(), d, convo{stream: true, tools: tools}.body(d)))
				endsWithFault(t, label, kind, g)
				types := withoutError(g.types)
				if len(types) == 0 || types[len(types)-1] != wantLast[d] {
					t.Errorf("%s: events %v, want the last %s", label, types, wantLast[d])
				}
				if d == handoff.Chat && !slices.Contains(types, "finish") {
					t.Errorf("%s: no finish chunk: %v", label, types)
				}
				if g.reasoning != strings.Join(reasoning, "") || (!tools && g.text != strings.Join(content, "")) || (tools && g.args != ToolInput) {
					t.Errorf("%s: not the whole answer: %+v", label, g)
				}
			}
		}
	}
}

// TestFaultAfterOne: drop_after 1 and error_after 1 trip right after the
// first data event, before anything else.
func TestFaultAfterOne(t *testing.T) {
	first := map[handoff.Dialect]string{handoff.Chat: "role", handoff.Messages: "message_start", handoff.Responses: "response.created"}
	for _, kind := range []string{FaultDrop, FaultError} {
		cfg := contCfg
		cfg.Faults = []Fault{{Kind: kind, After: 1}}
		_, ts := startServer(t, cfg)
		for _, d := range dialects {
			g := readGot(t, d, true, postDialect(t, ts.URL, ts.Client(), d, convo{stream: true}.body(d)))
			label := fmt.Sprintf("%s after 1, %s", kind, dialectNames[d])
			endsWithFault(t, label, kind, g)
			if types := withoutError(g.types); !slices.Equal(types, []string{first[d]}) {
				t.Errorf("%s: events %v, want %s alone", label, types, first[d])
			}
		}
	}
}

func TestFaultPlaceValidates(t *testing.T) {
	for _, tc := range []struct {
		f    Fault
		want string
	}{
		{Fault{Kind: FaultDrop, In: "thinking"}, `drop: unknown phase "thinking" (want "reasoning", "answer" or "tool_args")`},
		{Fault{Kind: FaultError, In: InAnswer, BeforeEnd: true}, "error: in answer and before_end are two places; give one"},
		{Fault{Kind: FaultDrop, In: InAnswer, After: 3}, "drop: after counts events from the start; leave it 0 with in or before_end"},
		{Fault{Kind: FaultDrop, BeforeEnd: true, After: 3}, "leave it 0 with in or before_end"},
		{Fault{Kind: FaultStall, In: InAnswer}, "stall: in and before_end apply to drop and error faults only"},
		{Fault{Kind: FaultStatus, Status: 500, BeforeEnd: true}, "status: in and before_end apply to drop and error faults only"},
	} {
		_, err := New(Config{Faults: []Fault{tc.f}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.f, err, tc.want)
		}
	}
	if _, err := New(Config{ContinueOverlap: -1}); err == nil || !strings.Contains(err.Error(), "continue overlap: must be >= 0 runes, got -1") {
		t.Errorf("ContinueOverlap -1: %v", err)
	}
}
