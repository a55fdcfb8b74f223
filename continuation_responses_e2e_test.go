package llmrelay_test

// Continuation after the commit point (issue 30) as a Responses API client
// sees it: the simulator breaks a stream at a chosen point (in the answer,
// right after the first event, before the end event, in the reasoning,
// inside a tool call's arguments), a second simulator with the same seed
// continues it, and the client (raw SSE, openai-go, the openai Node SDK,
// Codex CLI) gets one valid stream whose text is the unbroken answer. Upstream
// apis openai (native), chat and anthropic (translated), also across dialects.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/llmrelay/caddy-llm-relay/internal/sim"
	"github.com/llmrelay/caddy-llm-relay/internal/splice"
)

// contRspSeed and the token counts are every /…/ simulator's on :9085: the
// same seed, so each generates the same answer.
const (
	contRspSeed      = 31
	contRspReasoning = 16
	contRspContent   = 40
)

// contRspCases are the faults, one simulator each, at /<case>/ on :9085;
// /good/ answers whole, /overlap/ whole too but a continuation repeats the
// last 12 runes of the answer so far (splice.MinOverlap is 8); /fail/ answers 503; /again/ drops
// every stream after 4 data events (a continuation too).
var contRspCases = map[string]string{
	"answer": "drop_in answer",
	"first":  "drop_after 1",
	"second": "drop_after 2",
	"end":    "drop_before_end",
	"reason": "drop_in reasoning",
	"tool":   "drop_in tool_args",
	"again":  "drop_after 4",
	"errin":  "error_in answer",
	"good":   "",
}

func contRspSite() string {
	var b strings.Builder
	b.WriteString("http://127.0.0.1:9085 {\n")
	names := make([]string, 0, len(contRspCases))
	for n := range contRspCases {
		names = append(names, n)
	}
	slices.Sort(names)
	sim := func(name, extra string) {
		fmt.Fprintf(&b, "\thandle /%s/* {\n\t\tllm_simulator {\n\t\t\tseed %d\n\t\t\treasoning_tokens %d\n\t\t\tcontent_tokens %d\n\t\t\tpattern steady 0\n", name, contRspSeed, contRspReasoning, contRspContent)
		if extra != "" {
			fmt.Fprintf(&b, "\t\t\t%s\n", extra)
		}
		b.WriteString("\t\t}\n\t}\n")
	}
	for _, n := range names {
		sim(n, contRspCases[n])
	}
	sim("overlap", "continue_overlap 12")
	b.WriteString("\thandle /fail/* {\n\t\tllm_simulator {\n\t\t\tfail 503\n\t\t}\n\t}\n}\n")
	return b.String()
}

var contRspAPIs = []string{"openai", "chat", "anthropic"}

// contRspRelay has an upstream <case>-<api> per simulator and api, and a
// model <case>-<from>-<to> per fault case and pair of apis (the same
// three, and three across dialects): to <case>-<from>, then good-<to>;
// overlap-<from>-<to>: to answer-<from>, then overlap-<to>.
// Extra model lines go in extra.
func contRspRelay(extra string) string {
	var b strings.Builder
	b.WriteString("llm_relay {\n\t\tkey sk-cont-rsp\n")
	ups := []string{"answer", "first", "second", "end", "errin", "reason", "tool", "again", "good", "overlap", "fail"}
	for _, u := range ups {
		for _, api := range contRspAPIs {
			fmt.Fprintf(&b, "\t\tupstream %s-%s http://127.0.0.1:9085/%s/v1 {\n\t\t\tapi %s\n\t\t}\n", u, api, u, api)
		}
	}
	for _, c := range contRspFaults {
		for _, p := range contRspPairs {
			up := c
			if c == "toolend" {
				up = "end"
			}
			fmt.Fprintf(&b, "\t\tmodel %s-%s-%s {\n\t\t\tto %s-%s sim-reasoner\n\t\t\tto good-%s sim-reasoner\n\t\t}\n", c, p[0], p[1], up, p[0], p[1])
		}
	}
	for _, p := range contRspPairs {
		fmt.Fprintf(&b, "\t\tmodel overlap-%s-%s {\n\t\t\tto answer-%s sim-reasoner\n\t\t\tto overlap-%s sim-reasoner\n\t\t}\n", p[0], p[1], p[0], p[1])
	}
	b.WriteString(extra)
	b.WriteString("\t\tfailover {\n\t\t\tbackoff 1ms 1ms\n\t\t}\n\t}")
	return b.String()
}

var contRspPairs = [][2]string{
	{"openai", "openai"}, {"chat", "chat"}, {"anthropic", "anthropic"},
	{"openai", "chat"}, {"chat", "anthropic"}, {"anthropic", "openai"},
}

// contRspWant is the unbroken answer and reasoning.
func contRspWant() (reasoning, answer string) {
	r, c := sim.Texts(sim.Config{Seed: contRspSeed, ReasoningTokens: new(contRspReasoning), ContentTokens: new(contRspContent)})
	return strings.Join(r, ""), strings.Join(c, "")
}

// rspEvent is one event of a raw Responses stream.
type rspEvent struct {
	Type     string          `json:"type"`
	Seq      *int            `json:"sequence_number"`
	OutIdx   *int            `json:"output_index"`
	ItemID   string          `json:"item_id"`
	Delta    string          `json:"delta"`
	Item     json.RawMessage `json:"item"`
	Response json.RawMessage `json:"response"`
	raw      string
}

// rawResponses posts a streaming Responses request and returns its events
// and comments.
func rawResponses(t *testing.T, body string) (events []rspEvent, comments []string, raw string) {
	t.Helper()
	resp := postPath(t, "/v1/responses", body, "Authorization", "Bearer sk-cont-rsp")
	raw = readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	sc := bufio.NewScanner(strings.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if c, ok := strings.CutPrefix(line, ":"); ok {
			comments = append(comments, strings.TrimSpace(c))
			continue
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev rspEvent
		if err := json.Unmarshal([]byte(d), &ev); err != nil {
			t.Fatalf("not JSON: %q", d)
		}
		ev.raw = d
		events = append(events, ev)
	}
	return events, comments, raw
}

// rspStream is a raw Responses stream, checked by checkRspStream.
type rspStream struct {
	events    []rspEvent
	seamAt    int // the number of events before the relay-continued comment, -1 none
	comment   string
	text      string // the output_text deltas joined
	summary   string // the reasoning summary deltas joined
	completed *rspFinal
	end       string // the last event's type
}

// rspFinal is the part of response.completed (or .failed) the tests read.
type rspFinal struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Output []struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Content   []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Summary []struct {
			Text string `json:"text"`
		} `json:"summary"`
	} `json:"output"`
	Usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// outputText is the final output's message text.
func (f *rspFinal) outputText() string {
	var b strings.Builder
	for _, it := range f.Output {
		if it.Type == "message" {
			for _, c := range it.Content {
				if c.Type == "output_text" {
					b.WriteString(c.Text)
				}
			}
		}
	}
	return b.String()
}

// streamContRsp posts a streaming Responses request for model (tools: a
// forced get_weather call; else with reasoning) and returns its events.
func streamContRsp(t *testing.T, model string, tools bool) (*rspStream, string) {
	t.Helper()
	body := `{"model":"` + model + `","stream":true,"input":"hi","reasoning":{"effort":"low","summary":"auto"}}`
	if tools {
		body = `{"model":"` + model + `","stream":true,"input":"hi","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"input":{"type":"string"}}}}],"tool_choice":"required"}`
	}
	resp := postPath(t, "/v1/responses", body, "Authorization", "Bearer sk-cont-rsp")
	raw := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: status %d: %s", model, resp.StatusCode, raw)
	}
	s := &rspStream{seamAt: -1}
	sc := bufio.NewScanner(strings.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if c, ok := strings.CutPrefix(line, ": relay-continued "); ok {
			if s.seamAt < 0 {
				s.seamAt, s.comment = len(s.events), c
			}
			continue
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev rspEvent
		if err := json.Unmarshal([]byte(d), &ev); err != nil {
			t.Fatalf("%s: an event that is not JSON: %q\n%s", model, d, raw)
		}
		ev.raw = d
		s.events = append(s.events, ev)
	}
	return s, raw
}

// checkRspStream checks a Responses stream's validity: sequence_number
// strictly +1 from the first event, one response.created, output_index
// contiguous from 0 in the order items are added, each item added once and
// done once, every event of an item naming its id; a stream that completed
// has response.completed last, once, with the deltas' text as its output.
// It fills s's text, summary, completed and end.
func checkRspStream(t *testing.T, name string, s *rspStream, raw string) {
	t.Helper()
	fail := func(format string, a ...any) {
		t.Helper()
		t.Errorf("%s: "+format+"\nstream:\n%s", append(append([]any{name}, a...), raw)...)
	}
	if len(s.events) == 0 {
		fail("no events")
		return
	}
	var ids []string
	doneIdx := map[int]bool{}
	created, ends := 0, 0
	for i, ev := range s.events {
		if ev.Seq == nil && ev.Type == "error" && i > 0 && i == len(s.events)-1 {
			// The relay's own in-band error (streamend.go) has no
			// sequence_number, as before issue 30; the SDKs raise on it.
			ev.Seq = new(*s.events[i-1].Seq + 1)
		}
		if ev.Seq == nil {
			fail("event %d (%s) has no sequence_number", i, ev.Type)
			return
		}
		if i > 0 && *ev.Seq != *s.events[i-1].Seq+1 {
			fail("sequence_number %d after %d (event %d, %s)", *ev.Seq, *s.events[i-1].Seq, i, ev.Type)
			return
		}
		switch ev.Type {
		case "response.created":
			created++
		case "response.completed", "response.incomplete", "response.failed", "error":
			ends++
			if i != len(s.events)-1 {
				fail("%s is not the last event", ev.Type)
			}
			if ev.Type != "error" {
				var r rspFinal
				if err := json.Unmarshal(ev.Response, &r); err != nil {
					fail("%s: response: %v", ev.Type, err)
				}
				s.completed = &r
			}
		case "response.output_text.delta":
			s.text += ev.Delta
		case "response.reasoning_summary_text.delta":
			s.summary += ev.Delta
		}
		if ev.OutIdx == nil {
			continue
		}
		idx := *ev.OutIdx
		var itemID string
		if len(ev.Item) > 0 {
			var it struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(ev.Item, &it)
			itemID = it.ID
		}
		switch ev.Type {
		case "response.output_item.added":
			if idx != len(ids) {
				fail("output_item.added at output_index %d, want %d (contiguous)", idx, len(ids))
				return
			}
			ids = append(ids, itemID)
			continue
		case "response.output_item.done":
			if doneIdx[idx] {
				fail("output_item.done twice for output_index %d", idx)
			}
			doneIdx[idx] = true
			ev.ItemID = itemID
		}
		if idx >= len(ids) {
			fail("%s at output_index %d, before its output_item.added", ev.Type, idx)
			return
		}
		if doneIdx[idx] && ev.Type != "response.output_item.done" {
			fail("%s at output_index %d after its output_item.done", ev.Type, idx)
		}
		if ev.ItemID != ids[idx] {
			fail("%s at output_index %d names item %q, added as %q", ev.Type, idx, ev.ItemID, ids[idx])
		}
	}
	if created != 1 || s.events[0].Type != "response.created" {
		fail("%d response.created, first event %s; want one, first", created, s.events[0].Type)
	}
	s.end = s.events[len(s.events)-1].Type
	if ends != 1 {
		fail("%d end events (completed, incomplete, failed, error); want one, last", ends)
	}
	if s.end == "response.completed" {
		if len(doneIdx) != len(ids) {
			fail("%d items added, %d done", len(ids), len(doneIdx))
		}
		if got := s.completed.outputText(); got != s.text {
			fail("response.completed's output text\n%q\ndiffers from the deltas'\n%q", got, s.text)
		}
		if len(s.completed.Output) != len(ids) {
			fail("response.completed has %d output items; the stream added %d", len(s.completed.Output), len(ids))
		}
	}
}

// contRspFaults are the fault cases that have a model per pair of apis:
// each a simulator's but toolend, the end simulator asked for a tool call
// (the break falls after the whole call, before response.completed).
var contRspFaults = []string{"answer", "first", "second", "end", "errin", "reason", "tool", "toolend"}

// isToolCase: the case's request forces a get_weather call.
func isToolCase(c string) bool { return c == "tool" || c == "toolend" }

// relayedLogs waits (bounded) until the relay logged at least n requests
// (a log line is written after the client read the stream's end) and
// returns the log.
func relayedLogs(t *testing.T, logFile string, n int) string {
	t.Helper()
	waitFor(t, 10*time.Second, fmt.Sprintf("%d relayed log lines", n), func() bool {
		return strings.Count(readLog(t, logFile), `"msg":"relayed"`) >= n
	})
	return readLog(t, logFile)
}

// contRspWhere is where each fault case breaks, as the seam comment and the
// log line name it; "first" breaks right after response.created, before
// the relay committed the stream: an invisible failover, no seam.
// "second" breaks right after the first delta (of the reasoning); "errin"
// is an in-band error event (server_error) in the middle of the answer.
var contRspWhere = map[string]string{"answer": "answer", "second": "reasoning", "end": "answer", "errin": "answer", "reason": "reasoning", "tool": "tool_call", "toolend": "tool_call"}

// TestContinuationResponsesRaw: every fault case, for every pair of
// upstream apis, read as raw SSE: one valid stream, continued (the seam
// comment), whose text is the unbroken answer; a tool call never seen
// before the seam and exactly one complete in the output; the reasoning
// lane marked; usage at least the continuation's own; the log line's
// continued array.
func TestContinuationResponsesRaw(t *testing.T) {
	logFile := startRelay(t, contRspRelay(""), contRspSite())
	wantReasoning, want := contRspWant()
	for _, c := range contRspFaults {
		for _, p := range contRspPairs {
			model := c + "-" + p[0] + "-" + p[1]
			s, raw := streamContRsp(t, model, isToolCase(c))
			checkRspStream(t, model, s, raw)
			if c == "first" {
				if s.seamAt >= 0 || s.text != want || s.end != "response.completed" {
					t.Errorf("%s: a break before the commit point: seam %q, text %q, end %s; want an invisible failover to the unbroken answer", model, s.comment, s.text, s.end)
				}
				continue
			}
			// A break inside a held tool call is where=tool_call, also
			// when the call followed reasoning with no text (a Chat
			// simulator reasons before its call; the next target then
			// reasons again, marked).
			where := contRspWhere[c]
			if s.seamAt < 0 || !strings.HasPrefix(s.comment, "upstream=good-"+p[1]+" model=sim-reasoner at_token=") ||
				!strings.HasSuffix(s.comment, " where="+where) {
				t.Errorf("%s: seam comment %q (after %d events); want one naming good-%s where=%s\n%s", model, s.comment, s.seamAt, p[1], where, raw)
				continue
			}
			if s.end != "response.completed" || s.completed == nil || s.completed.Status != "completed" {
				t.Errorf("%s: ends with %s; want response.completed\n%s", model, s.end, raw)
				continue
			}
			// usage: at least what the continuation sent after the seam
			after := 0
			for _, ev := range s.events[s.seamAt:] {
				if strings.HasSuffix(ev.Type, ".delta") && ev.Delta != splice.Marker {
					after++
				}
			}
			if u := s.completed.Usage; u.OutputTokens < after || u.InputTokens == 0 || u.TotalTokens != u.InputTokens+u.OutputTokens {
				t.Errorf("%s: usage %+v; want output_tokens >= the %d deltas after the seam", model, u, after)
			}
			if isToolCase(c) {
				checkOneCall(t, model, s, raw)
				continue
			}
			if s.text != want {
				t.Errorf("%s: text\n%q\nwant the unbroken answer\n%q", model, s.text, want)
			}
			if c == "reason" {
				// mark: what was handed, the marker, the whole reasoning again
				i := strings.Index(s.summary, splice.Marker)
				if i <= 0 || !strings.HasPrefix(wantReasoning, s.summary[:i]) || s.summary[:i] == wantReasoning || s.summary[i+len(splice.Marker):] != wantReasoning {
					t.Errorf("%s: reasoning lane %q; want a part of %q, the marker, then all of it", model, s.summary, wantReasoning)
				}
			}
		}
	}
	// A continuation that first repeats the last 12 runes of the answer so
	// far: the relay drops them, the text is exact.
	for _, p := range contRspPairs {
		model := "overlap-" + p[0] + "-" + p[1]
		s, raw := streamContRsp(t, model, false)
		checkRspStream(t, model, s, raw)
		if !strings.HasPrefix(s.comment, "upstream=overlap-"+p[1]+" ") || s.end != "response.completed" || s.text != want {
			t.Errorf("%s: seam %q, end %s, text\n%q\nwant\n%q", model, s.comment, s.end, s.text, want)
		}
	}
	logs := relayedLogs(t, logFile, (len(contRspFaults)+1)*len(contRspPairs))
	for _, c := range []string{"answer", "reason", "tool"} {
		for _, p := range contRspPairs {
			mustContain(t, logs, `"continued":[{"from":"`+c+"-"+p[0]+` (sim-reasoner)","to":"good-`+p[1]+` (sim-reasoner)","at_token":`)
		}
	}
	if n := strings.Count(logs, `"where":"reasoning"`); n < len(contRspPairs) {
		t.Errorf("%d continuations logged where reasoning; want %d", n, len(contRspPairs))
	}
}

// checkOneCall: the client saw no part of a tool call before the seam, and
// the stream and its final output hold exactly one function_call, complete,
// with JSON arguments.
func checkOneCall(t *testing.T, model string, s *rspStream, raw string) {
	t.Helper()
	for _, ev := range s.events[:s.seamAt] {
		if strings.Contains(ev.Type, "function_call") || strings.Contains(string(ev.Item), `"function_call"`) {
			t.Errorf("%s: the client got %s of a tool call before the seam\n%s", model, ev.Type, raw)
		}
	}
	added := 0
	for _, ev := range s.events {
		if ev.Type == "response.output_item.added" && strings.Contains(string(ev.Item), `"type":"function_call"`) {
			added++
		}
	}
	var calls int
	for _, it := range s.completed.Output {
		if it.Type == "function_call" {
			calls++
			var args map[string]any
			if it.Name != "get_weather" || json.Unmarshal([]byte(it.Arguments), &args) != nil {
				t.Errorf("%s: call %s(%q): want get_weather with JSON arguments", model, it.Name, it.Arguments)
			}
		}
	}
	if added != 1 || calls != 1 {
		t.Errorf("%s: %d function_call items added, %d in the output; want exactly one\n%s", model, added, calls, raw)
	}
}

// contRspExtra are the models of the hide and failure tests.
const contRspExtra = `		model hide-openai-openai {
			to reason-openai sim-reasoner
			to good-openai sim-reasoner
			failover {
				continue_reasoning hide
			}
		}
		model hide-chat-anthropic {
			to reason-chat sim-reasoner
			to good-anthropic sim-reasoner
			failover {
				continue_reasoning hide
			}
		}
		model exhaust-fail {
			to answer-openai sim-reasoner
			to fail-openai sim-reasoner
		}
		model exhaust-again {
			to answer-chat sim-reasoner
			to again-chat sim-reasoner
		}
		model errmode {
			to answer-openai sim-reasoner
			to good-openai sim-reasoner
			failover {
				after_commit error
			}
		}
`

// goRspResult is what openai-go made of a Responses stream.
type goRspResult struct {
	deltas, summary string
	completed       responses.Response
	sawCompleted    bool
	err             error
}

// goRspStream streams model with openai-go (tools: a forced get_weather
// call), accumulating the output_text and reasoning summary deltas.
func goRspStream(t *testing.T, model string, tools bool) goRspResult {
	t.Helper()
	client := openai.NewClient(option.WithBaseURL(relayBase+"/v1"), option.WithAPIKey("sk-cont-rsp"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortLow, Summary: shared.ReasoningSummaryAuto}}
	if tools {
		params = responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
			Tools:      []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object", "properties": map[string]any{"input": map[string]any{"type": "string"}}}, false)},
			ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)}}
	}
	s := client.Responses.NewStreaming(ctx, params)
	defer s.Close()
	var r goRspResult
	for s.Next() {
		switch ev := s.Current(); ev.Type {
		case "response.output_text.delta":
			r.deltas += ev.Delta
		case "response.reasoning_summary_text.delta":
			r.summary += ev.Delta
		case "response.completed":
			r.completed, r.sawCompleted = ev.Response, true
		}
	}
	r.err = s.Err()
	return r
}

// reasoningSummaries are the summary texts of each reasoning item.
func reasoningSummaries(out []responses.ResponseOutputItemUnion) [][]string {
	var rs [][]string
	for _, it := range out {
		if it.Type == "reasoning" {
			var texts []string
			for _, p := range it.Summary {
				texts = append(texts, p.Text)
			}
			rs = append(rs, texts)
		}
	}
	return rs
}

// TestContinuationResponsesGoSDK: openai-go streams every fault case for
// every pair of upstream apis without an error; the deltas and the
// completed response's text are the unbroken answer; a reasoning restart
// is the closed partial item, then the continuation's item whose first
// summary part is the marker; a tool call is one function_call.
func TestContinuationResponsesGoSDK(t *testing.T) {
	startRelay(t, contRspRelay(contRspExtra), contRspSite())
	wantReasoning, want := contRspWant()
	for _, c := range contRspFaults {
		for _, p := range contRspPairs {
			model := c + "-" + p[0] + "-" + p[1]
			r := goRspStream(t, model, isToolCase(c))
			if r.err != nil || !r.sawCompleted || r.completed.Status != "completed" {
				t.Errorf("%s: stream error %v, completed %v (%s)", model, r.err, r.sawCompleted, r.completed.Status)
				continue
			}
			if r.completed.Usage.OutputTokens == 0 || r.completed.Usage.InputTokens == 0 {
				t.Errorf("%s: usage %+v", model, r.completed.Usage)
			}
			if isToolCase(c) {
				var calls []responses.ResponseOutputItemUnion
				for _, it := range r.completed.Output {
					if it.Type == "function_call" {
						calls = append(calls, it)
					}
				}
				var args map[string]any
				if len(calls) != 1 || calls[0].Name != "get_weather" || json.Unmarshal([]byte(calls[0].Arguments.OfString), &args) != nil {
					t.Errorf("%s: calls %+v; want one get_weather call with JSON arguments", model, calls)
				}
				continue
			}
			if r.deltas != want || r.completed.OutputText() != want {
				t.Errorf("%s: deltas\n%q\ncompleted text\n%q\nwant\n%q", model, r.deltas, r.completed.OutputText(), want)
			}
			if c == "reason" {
				rs := reasoningSummaries(r.completed.Output)
				if len(rs) != 2 || len(rs[0]) != 1 || !strings.HasPrefix(wantReasoning, rs[0][0]) || rs[0][0] == wantReasoning ||
					!slices.Equal(rs[1], []string{splice.Marker, wantReasoning}) {
					t.Errorf("%s: reasoning items %q; want the part handed, then [marker, the whole reasoning]", model, rs)
				}
			}
		}
	}
}

// TestContinuationResponsesHide: with continue_reasoning hide a break in
// the reasoning shows the reasoning handed (its item closed) and none of
// the continuation's; the answer is whole.
func TestContinuationResponsesHide(t *testing.T) {
	startRelay(t, contRspRelay(contRspExtra), contRspSite())
	wantReasoning, want := contRspWant()
	for _, model := range []string{"hide-openai-openai", "hide-chat-anthropic"} {
		s, raw := streamContRsp(t, model, false)
		checkRspStream(t, model, s, raw)
		if !strings.HasSuffix(s.comment, "where=reasoning") || s.text != want || s.end != "response.completed" {
			t.Errorf("%s: seam %q, end %s, text\n%q\nwant\n%q", model, s.comment, s.end, s.text, want)
		}
		if s.summary == "" || !strings.HasPrefix(wantReasoning, s.summary) || s.summary == wantReasoning {
			t.Errorf("%s: reasoning lane %q; want only the part handed of %q", model, s.summary, wantReasoning)
		}
		r := goRspStream(t, model, false)
		if rs := reasoningSummaries(r.completed.Output); r.err != nil || r.deltas != want || len(rs) != 1 || len(rs[0]) != 1 || !strings.HasPrefix(wantReasoning, rs[0][0]) || rs[0][0] == wantReasoning {
			t.Errorf("%s: openai-go: %v, text %q, reasoning items %q; want the part handed, closed, alone", model, r.err, r.deltas, rs)
		}
	}
}

// TestContinuationResponsesFails: a continuation that fails too (the next
// target answers 503; the continuation itself breaks, the chain
// exhausted) and after_commit error end the stream with the in-band error,
// never response.completed, and openai-go raises.
func TestContinuationResponsesFails(t *testing.T) {
	logFile := startRelay(t, contRspRelay(contRspExtra), contRspSite())
	for _, tc := range []struct {
		model     string
		continued bool // a continuation was spliced before the error
	}{{"exhaust-fail", false}, {"exhaust-again", true}, {"errmode", false}} {
		s, raw := streamContRsp(t, tc.model, false)
		checkRspStream(t, tc.model, s, raw)
		if s.end != "error" && s.end != "response.failed" || s.text == "" {
			t.Errorf("%s: ends with %s after %q; want the in-band error after some text\n%s", tc.model, s.end, s.text, raw)
		}
		if (s.seamAt >= 0) != tc.continued {
			t.Errorf("%s: seam comment %q; want one: %v\n%s", tc.model, s.comment, tc.continued, raw)
		}
		r := goRspStream(t, tc.model, false)
		if r.err == nil || r.sawCompleted {
			t.Errorf("%s: openai-go raised %v (completed %v); want an error", tc.model, r.err, r.sawCompleted)
		}
	}
	logs := relayedLogs(t, logFile, 6)
	errmode := 0
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `"msg":"relayed"`) && strings.Contains(line, `"alias":"errmode"`) {
			errmode++
			if strings.Contains(line, `"continued"`) || !strings.Contains(line, `"stream_error":"upstream_stream_interrupted"`) {
				t.Errorf("after_commit error: want the stream's error, not continued: %s", line)
			}
		}
	}
	if errmode != 2 {
		t.Errorf("%d errmode requests logged; want 2", errmode)
	}
	mustContain(t, logs, `"continued":[{"from":"answer-chat (sim-reasoner)","to":"again-chat (sim-reasoner)"`)
}

// contRspNode is one line of e2e/node/continuation-responses.mjs.
type contRspNode struct {
	Model     string     `json:"model"`
	Text      string     `json:"text"`
	Deltas    string     `json:"deltas"`
	Summary   string     `json:"summary"`
	Status    string     `json:"status"`
	Reasoning [][]string `json:"reasoning"`
	Calls     []struct {
		ID        string `json:"id"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"calls"`
	Usage *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
	Error *struct {
		Name    string `json:"name"`
		Message string `json:"message"`
	} `json:"error"`
}

// runContRspNode runs the script for specs (<model>:text|tools), one line
// each.
func runContRspNode(t *testing.T, specs ...string) map[string]contRspNode {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join("e2e", "node", "continuation-responses.mjs"), relayBase + "/v1", "sk-cont-rsp"}, specs...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NO_COLOR=1"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	out := map[string]contRspNode{}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var r contRspNode
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("node: not a JSON line: %q\nstderr: %s", line, stderr.String())
		}
		out[r.Model] = r
	}
	if len(out) != len(specs) {
		t.Fatalf("node printed %d lines for %d specs:\n%s\nstderr: %s", len(out), len(specs), stdout.String(), stderr.String())
	}
	return out
}

// TestContinuationResponsesNode: the openai npm client's responses.stream
// helper builds finalResponse() without an error for every fault case and
// pair of upstream apis, its text the unbroken answer; the reasoning lane
// marked (mark) or cut (hide); one function_call; the failures raise.
func TestContinuationResponsesNode(t *testing.T) {
	requireNodeTool(t, filepath.Join("openai", "package.json"), "the openai Node SDK")
	startRelay(t, contRspRelay(contRspExtra), contRspSite())
	wantReasoning, want := contRspWant()
	var specs []string
	for _, c := range contRspFaults {
		for _, p := range contRspPairs {
			mode := "text"
			if isToolCase(c) {
				mode = "tools"
			}
			specs = append(specs, c+"-"+p[0]+"-"+p[1]+":"+mode)
		}
	}
	for _, p := range contRspPairs {
		specs = append(specs, "overlap-"+p[0]+"-"+p[1]+":text")
	}
	specs = append(specs, "hide-openai-openai:text", "hide-chat-anthropic:text", "exhaust-fail:text", "exhaust-again:text", "errmode:text")
	got := runContRspNode(t, specs...)
	for _, c := range contRspFaults {
		for _, p := range contRspPairs {
			model := c + "-" + p[0] + "-" + p[1]
			r := got[model]
			if r.Error != nil || r.Status != "completed" || r.Usage == nil || r.Usage.OutputTokens == 0 {
				t.Errorf("%s: %+v (error %+v)", model, r, r.Error)
				continue
			}
			if isToolCase(c) {
				var args map[string]any
				if len(r.Calls) != 1 || r.Calls[0].Name != "get_weather" || json.Unmarshal([]byte(r.Calls[0].Arguments), &args) != nil {
					t.Errorf("%s: calls %+v; want one get_weather call with JSON arguments", model, r.Calls)
				}
				continue
			}
			if r.Text != want || r.Deltas != want {
				t.Errorf("%s: finalResponse text\n%q\ndeltas\n%q\nwant\n%q", model, r.Text, r.Deltas, want)
			}
			if c == "reason" {
				i := strings.Index(r.Summary, splice.Marker)
				if len(r.Reasoning) != 2 || !slices.Equal(r.Reasoning[1], []string{splice.Marker, wantReasoning}) ||
					i <= 0 || r.Summary[:i] != r.Reasoning[0][0] || r.Summary[i+len(splice.Marker):] != wantReasoning {
					t.Errorf("%s: reasoning lane %q, items %q; want the part handed, the marker, the whole reasoning", model, r.Summary, r.Reasoning)
				}
			}
		}
	}
	for _, p := range contRspPairs {
		model := "overlap-" + p[0] + "-" + p[1]
		if r := got[model]; r.Error != nil || r.Text != want || r.Deltas != want {
			t.Errorf("%s: %+v (error %+v); want the text %q, the repeat dropped", model, r, r.Error, want)
		}
	}
	for _, model := range []string{"hide-openai-openai", "hide-chat-anthropic"} {
		r := got[model]
		if r.Error != nil || r.Text != want || len(r.Reasoning) != 1 || r.Summary == "" || r.Summary == wantReasoning ||
			!strings.HasPrefix(wantReasoning, r.Summary) || strings.Contains(r.Summary, splice.Marker) {
			t.Errorf("%s: %+v; want the whole answer and only the reasoning handed", model, r)
		}
	}
	for _, model := range []string{"exhaust-fail", "exhaust-again", "errmode"} {
		if r := got[model]; r.Error == nil || r.Status == "completed" {
			t.Errorf("%s: the SDK raised nothing: %+v", model, r)
		}
	}
}

// fakeBreakInCall is a native Responses upstream that sends a whole
// message item, then a function_call whose arguments it breaks off in.
func fakeBreakInCall(t *testing.T) *fakeUpstream {
	return newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		resp := `"response":{"id":"resp_A","object":"response","created_at":1,"status":"in_progress","model":"m","output":[]}`
		msg := `{"type":"message","id":"msg_A","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Let me check the weather. ","annotations":[]}]}`
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, responsesEvent(0, "response.created", resp)+
			responsesEvent(1, "response.in_progress", resp)+
			responsesEvent(2, "response.output_item.added", `"output_index":0,"item":{"type":"message","id":"msg_A","status":"in_progress","role":"assistant","content":[]}`)+
			responsesEvent(3, "response.content_part.added", `"item_id":"msg_A","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}`)+
			responsesEvent(4, "response.output_text.delta", `"item_id":"msg_A","output_index":0,"content_index":0,"delta":"Let me check ","logprobs":[]`)+
			responsesEvent(5, "response.output_text.delta", `"item_id":"msg_A","output_index":0,"content_index":0,"delta":"the weather. ","logprobs":[]`)+
			responsesEvent(6, "response.output_text.done", `"item_id":"msg_A","output_index":0,"content_index":0,"text":"Let me check the weather. ","logprobs":[]`)+
			responsesEvent(7, "response.content_part.done", `"item_id":"msg_A","output_index":0,"content_index":0,"part":{"type":"output_text","text":"Let me check the weather. ","annotations":[]}`)+
			responsesEvent(8, "response.output_item.done", `"output_index":0,"item":`+msg)+
			responsesEvent(9, "response.output_item.added", `"output_index":1,"item":{"type":"function_call","id":"fc_A","status":"in_progress","call_id":"call_A","name":"get_weather","arguments":""}`)+
			responsesEvent(10, "response.function_call_arguments.delta", `"item_id":"fc_A","output_index":1,"delta":"{\"city\":\"Pa"`))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	})
}

// fakeCallResponses continues natively with a whole function_call and its
// own usage: 11 in, 7 out.
func fakeCallResponses(t *testing.T) *fakeUpstream {
	return newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		resp := `"response":{"id":"resp_B","object":"response","created_at":2,"status":"in_progress","model":"m","output":[]}`
		call := `{"type":"function_call","id":"fc_B","status":"completed","call_id":"call_B","name":"get_weather","arguments":"{\"city\":\"Paris\"}"}`
		done := `"response":{"id":"resp_B","object":"response","created_at":2,"status":"completed","model":"m","output":[` + call + `],"usage":{"input_tokens":11,"input_tokens_details":{"cached_tokens":0},"output_tokens":7,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":18}}`
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, responsesEvent(0, "response.created", resp)+
			responsesEvent(1, "response.output_item.added", `"output_index":0,"item":{"type":"function_call","id":"fc_B","status":"in_progress","call_id":"call_B","name":"get_weather","arguments":""}`)+
			responsesEvent(2, "response.function_call_arguments.delta", `"item_id":"fc_B","output_index":0,"delta":"{\"city\":"`)+
			responsesEvent(3, "response.function_call_arguments.delta", `"item_id":"fc_B","output_index":0,"delta":"\"Paris\"}"`)+
			responsesEvent(4, "response.function_call_arguments.done", `"item_id":"fc_B","output_index":0,"name":"get_weather","arguments":"{\"city\":\"Paris\"}"`)+
			responsesEvent(5, "response.output_item.done", `"output_index":0,"item":`+call)+
			responsesEvent(6, "response.completed", done))
	})
}

// fakeCallChat continues as a Chat Completions upstream: a tool call in
// three argument fragments, then its usage: 11 in, 7 out.
func fakeCallChat(t *testing.T) *fakeUpstream {
	return newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		tc := func(members string) string {
			return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,` + members + `}]},"finish_reason":null}]}`
		}
		streamEvents(w, 0,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}`,
			tc(`"id":"call_B","type":"function","function":{"name":"get_weather","arguments":""}`),
			tc(`"function":{"arguments":"{\"city\":"}`),
			tc(`"function":{"arguments":"\"Paris\"}"}`),
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`,
			`[DONE]`)
	})
}

// TestContinuationResponsesToolCallExact: a break inside a function_call's
// arguments after a whole message item, continued by a target that makes
// the call whole (natively, or as a Chat upstream): the client (raw SSE,
// openai-go, the openai npm client) gets the message, then exactly one
// function_call, the second target's, with its JSON arguments, never a
// byte of the first's; usage at least the second target's own; the fake
// upstreams each get one request per client request; the log line's
// continued array names both.
func TestContinuationResponsesToolCallExact(t *testing.T) {
	a1, a2 := fakeBreakInCall(t), fakeBreakInCall(t)
	bRsp, bChat := fakeCallResponses(t), fakeCallChat(t)
	logFile := startRelay(t, `llm_relay {
		key sk-cont-rsp
		upstream a1 `+a1.v1()+`
		upstream a2 `+a2.v1()+`
		upstream brsp `+bRsp.v1()+`
		upstream bchat `+bChat.v1()+` {
			api chat
		}
		model native {
			to a1
			to brsp
		}
		model cross {
			to a2
			to bchat
		}
		failover {
			backoff 1ms 1ms
		}
	}`)
	series := func(alias, up string) string {
		return `llm_relay_continuations_total{alias="` + alias + `",upstream="` + up + `",where="tool_call"}`
	}
	m0 := scrapeMetrics(t)
	before := map[string]float64{"native": metricValue(t, m0, series("native", "brsp")), "cross": metricValue(t, m0, series("cross", "bchat"))}
	const text = "Let me check the weather. "
	requests := 0 // per model
	for _, tc := range []struct{ model, to, callID string }{{"native", "brsp", "call_B"}, {"cross", "bchat", "call_B"}} {
		s, raw := streamContRsp(t, tc.model, true)
		checkRspStream(t, tc.model, s, raw)
		if s.seamAt < 0 || s.end != "response.completed" || s.text != text || !strings.HasPrefix(s.comment, "upstream="+tc.to+" ") || !strings.HasSuffix(s.comment, "where=tool_call") {
			t.Fatalf("%s: seam %q, end %s, text %q\n%s", tc.model, s.comment, s.end, s.text, raw)
		}
		if strings.Contains(raw, "fc_A") || strings.Contains(raw, "call_A") || strings.Contains(raw, `\"Pa"`) {
			t.Errorf("%s: the client got part of the broken call\n%s", tc.model, raw)
		}
		checkOneCall(t, tc.model, s, raw)
		out := s.completed.Output
		if len(out) != 2 || out[0].Type != "message" || out[0].ID != "msg_A" || out[1].Type != "function_call" ||
			out[1].CallID != tc.callID || out[1].Arguments != `{"city":"Paris"}` {
			t.Errorf("%s: output %+v; want msg_A, then the second target's call with {\"city\":\"Paris\"}", tc.model, out)
		}
		if u := s.completed.Usage; u.OutputTokens < 7 || u.InputTokens < 11 || u.TotalTokens != u.InputTokens+u.OutputTokens {
			t.Errorf("%s: usage %+v; want at least the continuing target's 11 in, 7 out", tc.model, u)
		}

		r := goRspStream(t, tc.model, true)
		var calls []responses.ResponseOutputItemUnion
		for _, it := range r.completed.Output {
			if it.Type == "function_call" {
				calls = append(calls, it)
			}
		}
		if r.err != nil || r.deltas != text || len(calls) != 1 || calls[0].CallID != tc.callID || calls[0].Arguments.OfString != `{"city":"Paris"}` ||
			r.completed.Usage.OutputTokens < 7 {
			t.Errorf("%s: openai-go: %v, text %q, calls %+v, usage %+v", tc.model, r.err, r.deltas, calls, r.completed.Usage)
		}
	}
	requests = 2
	_, noNode := exec.LookPath("node")
	_, noSDK := os.Stat(filepath.Join("e2e", "node", "node_modules", "openai", "package.json"))
	if (noNode != nil || noSDK != nil) && os.Getenv("RELAY_REQUIRE_NODE") == "1" {
		t.Fatal("node or the openai Node SDK is missing (RELAY_REQUIRE_NODE=1)")
	}
	if noNode == nil && !testing.Short() {
		if noSDK == nil {
			got := runContRspNode(t, "native:tools", "cross:tools")
			requests++
			for _, model := range []string{"native", "cross"} {
				r := got[model]
				if r.Error != nil || r.Status != "completed" || r.Text != text || len(r.Calls) != 1 || r.Calls[0].CallID != "call_B" ||
					r.Calls[0].Arguments != `{"city":"Paris"}` || r.Usage == nil || r.Usage.OutputTokens < 7 {
					t.Errorf("%s: openai npm: %+v (error %+v)", model, r, r.Error)
				}
			}
		}
	}
	for _, f := range []*fakeUpstream{a1, a2, bRsp, bChat} {
		if n := len(f.requests()); n != requests {
			t.Errorf("an upstream got %d requests for %d client requests to its model", n, requests)
		}
	}
	// The continuation's request carries the answer so far.
	for _, f := range []*fakeUpstream{bRsp, bChat} {
		b, _ := json.Marshal(f.requests()[0].body)
		if !strings.Contains(string(b), "Let me check the weather.") {
			t.Errorf("the continuation's request does not carry the answer so far: %s", b)
		}
	}
	logs := relayedLogs(t, logFile, 2*requests)
	mustContain(t, logs, `"continued":[{"from":"a1 (native)","to":"brsp (native)","at_token":`, `"continued":[{"from":"a2 (cross)","to":"bchat (cross)","at_token":`)
	m1 := scrapeMetrics(t)
	for alias, up := range map[string]string{"native": "brsp", "cross": "bchat"} {
		if d := metricValue(t, m1, series(alias, up)) - before[alias]; d != float64(requests) {
			t.Errorf("%s grew by %v; want %d", series(alias, up), d, requests)
		}
	}
	if n := strings.Count(logs, `"where":"tool_call"`); n < 2*requests {
		t.Errorf("%d continuations logged where tool_call; want %d", n, 2*requests)
	}
}

// TestContinuationResponsesCodex: Codex CLI (`codex exec`) through the
// relay to an upstream that breaks mid-answer, continued by the next
// (Chat translated, and native Responses): Codex prints the whole answer
// once and exits 0, and it sent one request (the relay logged one
// /v1/responses request per run, continued, and no other).
func TestContinuationResponsesCodex(t *testing.T) {
	codex := requireNodeTool(t, filepath.Join(".bin", "codex"), "Codex CLI")
	logFile := startRelay(t, contRspRelay(""), contRspSite())
	_, want := contRspWant()
	for _, model := range []string{"answer-chat-chat", "answer-openai-openai"} {
		before := strings.Count(readLog(t, logFile), `"msg":"relayed"`)
		stdout, stderr, err := runCodex(t, codex, relayBase+"/v1", "sk-cont-rsp", model, "Say hi")
		logs := relayedLogs(t, logFile, before+1)
		if err != nil || strings.TrimSpace(stdout) != strings.TrimSpace(want) || strings.Count(stdout, strings.TrimSpace(want)) != 1 {
			t.Errorf("%s: codex exec (%v) printed\n%q\nwant the whole answer once\n%q\nstderr: %s\nrelay log:\n%s", model, err, stdout, want, stderr, logs)
			continue
		}
		var relayed []string
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, `"msg":"relayed"`) {
				relayed = append(relayed, line)
			}
		}
		relayed = relayed[before:]
		if len(relayed) != 1 || !strings.Contains(relayed[0], `"api":"responses"`) || !strings.Contains(relayed[0], `"status":200`) ||
			!strings.Contains(relayed[0], `"continued":[{"from":"answer-`) || strings.Contains(relayed[0], `"stream_error"`) {
			t.Errorf("%s: want one continued Responses request (Codex did not re-POST); the relay logged:\n%s", model, strings.Join(relayed, "\n"))
		}
	}
}
