package splice

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

func dataOf(t testing.TB, ev sse.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(ev.Data, &m); err != nil {
		t.Fatalf("%v: %s", err, ev.Raw)
	}
	return m
}

// at is the index of the n-th (from 0) event of type typ.
func at(t testing.TB, evs []sse.Event, typ string, n int) int {
	t.Helper()
	for i, e := range evs {
		if e.Type == typ {
			if n == 0 {
				return i
			}
			n--
		}
	}
	t.Fatalf("no %s", typ)
	return -1
}

func types(evs []sse.Event) []string {
	var out []string
	for _, e := range evs {
		if e.IsComment() {
			out = append(out, ":")
			continue
		}
		out = append(out, e.Type)
	}
	return out
}

func comment(text string) sse.Event {
	return sse.Event{Raw: sse.AppendComment(nil, text), Retry: -1}
}

var (
	msgOnly = []rspItem{{typ: "message", id: "msg_1", text: "Hello there, this is the first answer of the test."}}
	withRs  = []rspItem{{typ: "reasoning", id: "rs_1", text: "Let me think about it a while."}, msgOnly[0]}
)

func TestResponsesRecorderForwardsAtOnce(t *testing.T) {
	evs := rspBuild("resp_1", withRs, 5)
	rec := NewRecorder(Responses, 1<<20)
	for i, e := range evs {
		if out := rec.Pass(e); len(out) != 1 || string(out[0].Raw) != string(e.Raw) {
			t.Fatalf("event %d (%s): forwarded %d events", i, e.Type, len(out))
		}
	}
}

// From a function_call's output_item.added to response.completed nothing
// is forwarded but comments; then everything, in order.
func TestResponsesRecorderHoldsToolCalls(t *testing.T) {
	for _, typ := range []string{"function_call", "custom_tool_call", "local_shell_call"} {
		build := typ
		if typ == "local_shell_call" {
			build = "function_call"
		}
		items := append(append([]rspItem(nil), msgOnly...), rspItem{typ: build, id: "fc_1", name: "f", text: `{"x":1}`})
		evs := rspBuild("resp_1", items, 2)
		if typ == "local_shell_call" { // rspBuild writes it as a function_call: rename the item type
			for i, e := range evs {
				evs[i] = sse.NewEvent(e.Type, []byte(strings.ReplaceAll(string(e.Data), `"type":"function_call"`, `"type":"local_shell_call"`)))
			}
		}
		first := at(t, evs, "response.output_item.added", 1)
		rec := NewRecorder(Responses, 1<<20)
		var got []sse.Event
		extra := 0
		for i, e := range evs {
			out := rec.Pass(e)
			switch {
			case i < first && len(out) != 1:
				t.Fatalf("%s: event %d before the call: %d forwarded", typ, i, len(out))
			case i >= first && i < len(evs)-1 && len(out) != 0:
				t.Fatalf("%s: event %d (%s) in the call forwarded", typ, i, e.Type)
			case i == first+1:
				if c := rec.Pass(comment("ping")); len(c) != 0 {
					t.Fatalf("%s: a comment forwarded ahead of held events", typ)
				}
				extra++
			}
			for _, o := range out {
				got = append(got, o.Clone())
			}
		}
		if len(got) != len(evs)+extra {
			t.Fatalf("%s: %d events out of %d", typ, len(got), len(evs)+extra)
		}
		if extra == 1 && !got[first+2].IsComment() {
			t.Fatalf("%s: the held comment is not where it came", typ)
		}
		got = slices.DeleteFunc(got, func(e sse.Event) bool { return e.IsComment() })
		for i := range got {
			if string(got[i].Raw) != string(evs[i].Raw) {
				t.Fatalf("%s: event %d out of order", typ, i)
			}
		}
	}
}

// A server-side item (web_search_call) is not held.
func TestResponsesRecorderPassesServerItems(t *testing.T) {
	evs := rspRecordings(t)["responses-web-search.sse"]
	rec := NewRecorder(Responses, 1<<20)
	for i, e := range evs {
		if out := rec.Pass(e); len(out) != 1 {
			t.Fatalf("event %d (%s): %d forwarded", i, e.Type, len(out))
		}
	}
}

// A break inside a tool call: the client got none of it; Seam counts it.
func TestResponsesSeamDiscardsHeldCall(t *testing.T) {
	evs := rspSynthetic()
	k := at(t, evs, "response.function_call_arguments.delta", 3)
	rec := NewRecorder(Responses, 1<<20)
	got := passAll(rec, evs[:k])
	first := at(t, evs, "response.output_item.added", 2)
	if len(got) != first {
		t.Fatalf("%d events forwarded, want %d (up to the call)", len(got), first)
	}
	s := rec.Seam()
	if s.Discarded != k-first || s.ToolCalls != 0 {
		t.Fatalf("Discarded %d ToolCalls %d, want %d 0", s.Discarded, s.ToolCalls, k-first)
	}
	if !strings.HasPrefix(s.Answer, "The answer is forty-two") || s.InReasoning {
		t.Fatalf("seam %+v", s)
	}
}

func TestResponsesSeam(t *testing.T) {
	evs := rspBuild("resp_1", withRs, 5)
	for _, c := range []struct {
		name                   string
		k                      int
		answer, reasoning      string
		inReasoning, outTokens bool
	}{
		{"nothing", 2, "", "", false, false},
		{"in reasoning", at(t, evs, "response.reasoning_summary_text.delta", 2), "", "Let me thi", true, true},
		{"between items", at(t, evs, "response.output_item.added", 1), "", withRs[0].text, true, true},
		{"in the answer", at(t, evs, "response.output_text.delta", 3), "Hello there, th", withRs[0].text, false, true},
	} {
		rec := NewRecorder(Responses, 1<<20)
		passAll(rec, evs[:c.k])
		s := rec.Seam()
		if s.Answer != c.answer || s.Reasoning != c.reasoning || s.InReasoning != c.inReasoning || (s.OutputTokens > 0) != c.outTokens {
			t.Errorf("%s: seam %+v", c.name, s)
		}
	}
}

func TestResponsesRecorderOverflow(t *testing.T) {
	evs := rspSynthetic()
	rec := NewRecorder(Responses, 600)
	var n int
	for _, e := range evs {
		n += len(rec.Pass(e))
	}
	if !rec.Overflow() {
		t.Fatal("no overflow")
	}
	if n != len(evs) {
		t.Fatalf("%d events forwarded of %d: an overflow releases what was held", n, len(evs))
	}
	// Held events are released at the overflow, not kept past the bound.
	rec = NewRecorder(Responses, 1<<20)
	passAll(rec, evs[:at(t, evs, "response.output_item.added", 2)+1])
	r := rec.(*rspRecorder)
	r.max = r.used + 10
	if out := rec.Pass(evs[len(evs)-2]); !rec.Overflow() || len(out) != 2 {
		t.Fatalf("overflow %v, %d released", rec.Overflow(), len(out))
	}
}

// rsp_splice breaks evs before event k and splices cont with o; it returns the
// client's stream and the seam.
func rsp_splice(t *testing.T, evs []sse.Event, k int, cont []sse.Event, o Options) ([]sse.Event, *Seam) {
	t.Helper()
	rec := NewRecorder(Responses, 1<<20)
	client := passAll(rec, evs[:k])
	s := rec.Seam()
	return append(client, spliceAll(rec, s.Splicer(o), cont)...), s
}

func view(t *testing.T, evs []sse.Event) *rspView {
	t.Helper()
	v, err := viewStream(evs)
	if err != nil {
		t.Fatalf("%v\n%s", err, rsp_dump(evs))
	}
	return v
}

// The continuation's start is dropped, sequence numbers go on, the comment
// comes first.
func TestResponsesSpliceSequenceAndComment(t *testing.T) {
	evs := rspBuild("resp_1", msgOnly, 5)
	k := at(t, evs, "response.output_text.delta", 2)
	cont := rspBuild("resp_2", []rspItem{{typ: "message", id: "msg_2", text: "rest."}}, 5)
	got, _ := rsp_splice(t, evs, k, cont, Options{Comment: "continued on b"})
	if !got[k].IsComment() || string(got[k].Raw) != ": continued on b\n\n" {
		t.Fatalf("event %d = %q, want the comment", k, got[k].Raw)
	}
	if d := dataOf(t, got[k+1]); d["sequence_number"] != float64(k) {
		t.Fatalf("first spliced event's sequence_number %v, want %d", d["sequence_number"], k)
	}
	for _, e := range got[k:] {
		if e.Type == "response.created" || e.Type == "response.in_progress" {
			t.Fatalf("%s spliced", e.Type)
		}
	}
	view(t, got)
}

// A break in an output_text part: the continuation's message is the same
// item, its text after the handed text.
func TestResponsesSpliceContinuesOpenMessage(t *testing.T) {
	evs := rspBuild("resp_1", withRs, 5)
	k := at(t, evs, "response.output_text.delta", 3)
	cont := rspBuild("resp_2", []rspItem{{typ: "message", id: "msg_2", text: "and the rest."}}, 4)
	got, s := rsp_splice(t, evs, k, cont, Options{MaxOverlap: -1})
	spliced := types(got[k:])
	if strings.Contains(strings.Join(spliced, " "), "output_item.added") || strings.Contains(strings.Join(spliced, " "), "content_part.added") {
		t.Fatalf("a second item or part added: %v", spliced)
	}
	v := view(t, got)
	if len(v.items) != 2 || v.items[1].id != "msg_1" {
		t.Fatalf("items %+v", v.items)
	}
	want := s.Answer + "and the rest."
	if v.text() != want || v.items[1].content[0] != want {
		t.Fatalf("text %q, want %q", v.text(), want)
	}
	done := v.items[1].done
	if c := list(done["content"]); len(c) != 1 || c[0].(map[string]any)["text"] != want {
		t.Fatalf("item done %v", done)
	}
}

// A break in a message between its parts: the continuation's parts follow.
func TestResponsesSpliceContinuesMessageAfterPart(t *testing.T) {
	evs := rspBuild("resp_1", msgOnly, 5)
	k := at(t, evs, "response.output_item.done", 0)
	cont := rspBuild("resp_2", []rspItem{{typ: "message", id: "msg_2", text: " More."}}, 4)
	got, _ := rsp_splice(t, evs, k, cont, Options{MaxOverlap: -1})
	v := view(t, got)
	if len(v.items) != 1 || len(v.items[0].content) != 2 || v.text() != msgOnly[0].text+" More." {
		t.Fatalf("items %+v text %q", v.items, v.text())
	}
}

// A break in a message followed by a tool call: the message is closed with
// the text handed, the call follows at the next index.
func TestResponsesSpliceClosesMessageBeforeCall(t *testing.T) {
	evs := rspBuild("resp_1", msgOnly, 5)
	k := at(t, evs, "response.output_text.delta", 2)
	cont := rspBuild("resp_2", []rspItem{{typ: "function_call", id: "fc_2", name: "f", text: `{"a":1}`}}, 4)
	got, s := rsp_splice(t, evs, k, cont, Options{MaxOverlap: -1})
	v := view(t, got)
	if len(v.items) != 2 || v.items[0].done["status"] != "incomplete" || v.items[1].typ != "function_call" || v.text() != s.Answer {
		t.Fatalf("items %+v", v.items)
	}
	if c := v.calls(); len(c) != 1 || c[0].args != `{"a":1}` {
		t.Fatalf("calls %+v", c)
	}
}

func reasoningCont() []sse.Event {
	return rspBuild("resp_2", []rspItem{
		{typ: "reasoning", id: "rs_2", text: "New thoughts."},
		{typ: "message", id: "msg_2", text: "The answer."},
	}, 4)
}

// A break in the reasoning: the broken item is closed with what was
// handed (its encrypted_content kept), the marker is the continuation's
// reasoning item's first summary part (Mark), or its reasoning is dropped
// (Hide).
func TestResponsesSpliceReasoningRestart(t *testing.T) {
	evs := rspBuild("resp_1", withRs, 5)
	k := at(t, evs, "response.reasoning_summary_text.delta", 2)
	got, s := rsp_splice(t, evs, k, reasoningCont(), Options{Reasoning: Mark})
	if !s.InReasoning {
		t.Fatal("not InReasoning")
	}
	v := view(t, got)
	if len(v.items) != 3 {
		t.Fatalf("%d items", len(v.items))
	}
	broken := v.items[0].done
	if broken["encrypted_content"] != "enc-rs_1" || list(broken["summary"])[0].(map[string]any)["text"] != s.Reasoning {
		t.Fatalf("the broken item done as %v", broken)
	}
	if r := v.items[1]; r.id != "rs_2" || len(r.summary) != 2 || r.summary[0] != Marker || r.summary[1] != "New thoughts." {
		t.Fatalf("the continuation's reasoning %+v", r)
	}
	if v.reasoning != s.Reasoning+Marker+"New thoughts." {
		t.Fatalf("reasoning lane %q", v.reasoning)
	}

	got, _ = rsp_splice(t, evs, k, reasoningCont(), Options{Reasoning: Hide})
	v = view(t, got)
	if len(v.items) != 2 || v.items[1].typ != "message" || v.reasoning != s.Reasoning {
		t.Fatalf("Hide: items %+v, reasoning %q", v.items, v.reasoning)
	}
}

// After the answer began, the continuation's reasoning is never shown.
func TestResponsesSpliceDropsReasoningAfterAnswer(t *testing.T) {
	evs := rspBuild("resp_1", withRs, 5)
	k := at(t, evs, "response.output_text.delta", 1)
	got, _ := rsp_splice(t, evs, k, reasoningCont(), Options{Reasoning: Mark, MaxOverlap: -1})
	v := view(t, got)
	if strings.Contains(v.reasoning, "New thoughts") || strings.Contains(v.reasoning, Marker) || len(v.items) != 2 {
		t.Fatalf("reasoning %q, items %d", v.reasoning, len(v.items))
	}
	for _, it := range list(v.final["output"]) {
		if it.(map[string]any)["id"] == "rs_2" {
			t.Fatal("the dropped reasoning item in the final output")
		}
	}
}

// The continuation's leading text that repeats the seam is dropped, even
// when the repeat spans deltas; with MaxOverlap < 0 it is kept.
func TestResponsesSpliceOverlap(t *testing.T) {
	evs := rspBuild("resp_1", msgOnly, 5)
	k := at(t, evs, "response.output_text.delta", 6)
	rec := NewRecorder(Responses, 1<<20)
	passAll(rec, evs[:k])
	answer := rec.Seam().Answer
	repeat := tailRunes(answer, 12)
	cont := rspBuild("resp_2", []rspItem{{typ: "message", id: "msg_2", text: repeat + "new words."}}, 3)
	for _, c := range []struct {
		max  int
		want string
	}{{0, answer + "new words."}, {-1, answer + repeat + "new words."}} {
		got, _ := rsp_splice(t, evs, k, cont, Options{MaxOverlap: c.max})
		if v := view(t, got); v.text() != c.want {
			t.Errorf("MaxOverlap %d: %q, want %q", c.max, v.text(), c.want)
		}
	}
	// The seam's space once.
	k = at(t, evs, "response.output_text.delta", 5) // "Hello there, this is the " handed
	rec = NewRecorder(Responses, 1<<20)
	passAll(rec, evs[:k])
	answer = rec.Seam().Answer
	if !strings.HasSuffix(answer, " ") {
		t.Fatalf("answer %q", answer)
	}
	cont = rspBuild("resp_2", []rspItem{{typ: "message", id: "msg_2", text: "  spaced."}}, 1)
	got, _ := rsp_splice(t, evs, k, cont, Options{})
	if v := view(t, got); v.text() != answer+"spaced." {
		t.Errorf("%q, want %q", v.text(), answer+"spaced.")
	}
}

// The end event: the first's id, created_at and model; the items handed
// then the continuation's; usage plus Earlier.
func TestResponsesSpliceFinal(t *testing.T) {
	evs := rspBuild("resp_1", withRs, 5)
	k := at(t, evs, "response.output_item.added", 1)
	cont := rspBuild("resp_2", []rspItem{{typ: "message", id: "msg_2", text: "Hi."}}, 4)
	got, _ := rsp_splice(t, evs, k, cont, Options{Earlier: earlier})
	v := view(t, got)
	f := v.final
	if f["id"] != "resp_1" || f["model"] != "m-resp_1" || f["created_at"] != float64(1700000000) {
		t.Fatalf("final %v %v %v", f["id"], f["model"], f["created_at"])
	}
	out := list(f["output"])
	if len(out) != 2 || out[0].(map[string]any)["id"] != "rs_1" || out[1].(map[string]any)["id"] != "msg_2" {
		t.Fatalf("output %v", out)
	}
	u, _ := json.Marshal(f["usage"])
	want := `{"input_tokens":110,"input_tokens_details":{"cached_tokens":52},"output_tokens":27,"output_tokens_details":{"reasoning_tokens":8},"total_tokens":137}`
	if string(u) != want {
		t.Fatalf("usage %s, want %s", u, want)
	}
}

// error and response.failed pass, renumbered, with the first's id.
func TestResponsesSpliceErrorPasses(t *testing.T) {
	evs := rspBuild("resp_1", msgOnly, 5)
	k := at(t, evs, "response.output_text.delta", 2)
	cont := rspBuild("resp_2", nil, 4)[:2]
	cont = append(cont,
		sse.NewEvent("error", []byte(`{"type":"error","sequence_number":2,"code":"server_error","message":"boom"}`)),
		sse.NewEvent("response.failed", []byte(`{"type":"response.failed","sequence_number":3,"response":{"id":"resp_2","status":"failed","output":[]}}`)))
	got, _ := rsp_splice(t, evs, k, cont, Options{})
	tail := got[len(got)-2:]
	e, f := dataOf(t, tail[0]), dataOf(t, tail[1])
	if e["type"] != "error" || e["sequence_number"] != float64(k) {
		t.Fatalf("error event %v", e)
	}
	if r := f["response"].(map[string]any); f["sequence_number"] != float64(k+1) || r["id"] != "resp_1" {
		t.Fatalf("failed event %v", f)
	}
}

// A second break after a continuation: the seam holds both streams' text.
func TestResponsesSecondSeam(t *testing.T) {
	evs := rspBuild("resp_1", msgOnly, 5)
	k := at(t, evs, "response.output_text.delta", 2)
	rec := NewRecorder(Responses, 1<<20)
	passAll(rec, evs[:k])
	s1 := rec.Seam()
	cont := rspBuild("resp_2", []rspItem{{typ: "message", id: "msg_2", text: "continued text here"}}, 5)
	spliceAll(rec, s1.Splicer(Options{MaxOverlap: -1}), cont[:at(t, cont, "response.output_text.delta", 2)])
	s2 := rec.Seam()
	if s2.Answer != s1.Answer+"continued " {
		t.Fatalf("second seam %q", s2.Answer)
	}
}

// Odd events of the first stream (a delta that is no string, a text part
// without a content_index) leave a seam the splicer can use.
func TestResponsesSpliceOddEvents(t *testing.T) {
	first := []sse.Event{
		sse.NewEvent("response.created", []byte(`{"type":"response.created","sequence_number":0,"response":{"id":"r1"}}`)),
		sse.NewEvent("response.output_item.added", []byte(`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"m1"}}`)),
		sse.NewEvent("response.output_text.delta", []byte(`{"type":"response.output_text.delta","sequence_number":2,"output_index":0,"delta":"Hello"}`)),
		sse.NewEvent("response.output_text.delta", []byte(`{"type":"response.output_text.delta","sequence_number":3,"output_index":0,"content_index":0,"delta":7}`)),
	}
	cont := rspBuild("resp_2", []rspItem{{typ: "message", id: "m2", text: " world"}}, 3)
	cont = append(cont[:5], append([]sse.Event{sse.NewEvent("response.output_text.delta",
		[]byte(`{"type":"response.output_text.delta","sequence_number":9,"output_index":0,"content_index":0,"delta":null}`))}, cont[5:]...)...)
	for k := range first {
		rec := NewRecorder(Responses, 1<<20)
		passAll(rec, first[:k+1])
		for _, e := range spliceAll(rec, rec.Seam().Splicer(Options{}), cont) {
			checkBlock(t, e)
		}
	}
}

// BenchmarkResponsesRecorder: the cost per event of a stream that never
// breaks (the web search recording: reasoning, a server-side call, text).
func BenchmarkResponsesRecorder(b *testing.B) {
	evs := rspRecordings(b)["responses-web-search.sse"]
	b.ReportAllocs()
	for b.Loop() {
		rec := NewRecorder(Responses, 1<<20)
		for _, e := range evs {
			rec.Pass(e)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}

// A break in raw reasoning text (reasoning_text deltas, as open models
// send): the item is closed with a reasoning_text.done and its content.
func TestResponsesSpliceClosesReasoningText(t *testing.T) {
	first := []sse.Event{
		sse.NewEvent("response.created", []byte(`{"type":"response.created","sequence_number":0,"response":{"id":"r1","created_at":5,"model":"m"}}`)),
		sse.NewEvent("response.output_item.added", []byte(`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"reasoning","id":"rs1","summary":[]}}`)),
		sse.NewEvent("response.reasoning_text.delta", []byte(`{"type":"response.reasoning_text.delta","sequence_number":2,"item_id":"rs1","output_index":0,"content_index":0,"delta":"Hmm, "}`)),
		sse.NewEvent("response.reasoning_text.delta", []byte(`{"type":"response.reasoning_text.delta","sequence_number":3,"item_id":"rs1","output_index":0,"content_index":0,"delta":"let me see"}`)),
	}
	got, s := rsp_splice(t, first, len(first), reasoningCont(), Options{Reasoning: Hide})
	if !s.InReasoning || s.Reasoning != "Hmm, let me see" {
		t.Fatalf("seam %+v", s)
	}
	v := view(t, got)
	var done bool
	for _, e := range got {
		if e.Type == "response.reasoning_text.done" {
			d := dataOf(t, e)
			done = d["text"] == "Hmm, let me see" && d["item_id"] == "rs1" && d["content_index"] == float64(0)
		}
	}
	c := list(v.items[0].done["content"])
	if !done || len(c) != 1 || c[0].(map[string]any)["text"] != "Hmm, let me see" || len(v.items) != 2 {
		t.Fatalf("reasoning_text.done %v, item %v, %d items", done, v.items[0].done, len(v.items))
	}
}

// response.incomplete ends a continuation as response.completed does.
func TestResponsesSpliceIncomplete(t *testing.T) {
	evs := rspBuild("resp_1", msgOnly, 5)
	k := at(t, evs, "response.output_text.delta", 2)
	cont := rspBuild("resp_2", []rspItem{{typ: "message", id: "msg_2", text: "cut"}}, 5)
	last := len(cont) - 1
	cont[last] = sse.NewEvent("response.incomplete", []byte(strings.Replace(string(cont[last].Data), "response.completed", "response.incomplete", 1)))
	got, s := rsp_splice(t, evs, k, cont, Options{MaxOverlap: -1})
	v := view(t, got)
	if got[len(got)-1].Type != "response.incomplete" || v.final["id"] != "resp_1" || v.text() != s.Answer+"cut" {
		t.Fatalf("end %s, id %v, text %q", got[len(got)-1].Type, v.final["id"], v.text())
	}
}

// Text is written as providers write it: <, > and & not escaped.
func TestResponsesSpliceNoHTMLEscape(t *testing.T) {
	evs := rspBuild("resp_1", msgOnly, 5)
	k := at(t, evs, "response.output_text.delta", 2)
	cont := rspBuild("resp_2", []rspItem{{typ: "message", id: "msg_2", text: "<b>&</b>"}}, 20)
	got, _ := rsp_splice(t, evs, k, cont, Options{MaxOverlap: -1})
	for _, e := range got[k:] {
		if e.Type == "response.output_text.done" && !strings.Contains(string(e.Data), "<b>&</b>") {
			t.Fatalf("%s", e.Data)
		}
	}
}
