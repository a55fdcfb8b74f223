package pace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/traces"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// reasoningTypes are the events hidden with the reasoning.
var reasoningTypes = map[string]bool{
	"response.reasoning_text.delta":         true,
	"response.reasoning_summary_text.delta": true,
	"response.reasoning_text.done":          true,
	"response.reasoning_summary_text.done":  true,
	"response.reasoning_summary_part.added": true,
	"response.reasoning_summary_part.done":  true,
}

// Hidden reasoning: its deltas and the events repeating its text are
// dropped in every mode, the rest renumbered without gaps and otherwise
// unchanged.
func TestResponsesHideReasoning(t *testing.T) {
	arrs, want := realisticResponses(t, 3)
	var wantOther []any
	for _, a := range arrs {
		if c, _ := ClassifyResponses(&a.ev, nil); c.Kind != KindText && !reasoningTypes[a.ev.Type] {
			wantOther = append(wantOther, hiddenView(t, a.ev.Data, true))
		}
	}
	for _, m := range modes {
		ems, p := simulate(t, Config{Mode: m, Format: FormatResponses, HideReasoning: true}, arrs)
		out := emitted(ems)
		v := viewResponses(t, out)
		for _, typ := range v.types {
			if reasoningTypes[typ] {
				t.Fatalf("%s: %s sent", m, typ)
			}
		}
		if v.text[1].Len() != 0 || bytes.Contains(out, []byte("The user asks")) {
			t.Fatalf("%s: reasoning leaked", m)
		}
		if v.text[0].String() != want[0] {
			t.Fatalf("%s: answer %q", m, v.text[0].String())
		}
		checkSeqs(t, m.String(), v.seqs, 3)
		var got []any
		for _, ev := range v.events {
			if c, _ := ClassifyResponses(&ev, nil); c.Kind != KindText {
				got = append(got, hiddenView(t, ev.Data, false))
			}
		}
		if !reflect.DeepEqual(got, wantOther) {
			t.Fatalf("%s: other events\ngot  %v\nwant %v", m, got, wantOther)
		}
		if !bytes.Contains(out, []byte(`"encrypted_content":"gAAAAB"`)) {
			t.Fatalf("%s: the reasoning item's encrypted content was lost", m)
		}
		if st := p.Stats(); st.HiddenRunes != utf8.RuneCountInString(want[1]) {
			t.Fatalf("%s: %d runes hidden, want %d", m, st.HiddenRunes, utf8.RuneCountInString(want[1]))
		}
	}
}

// hiddenView decodes an event's data without its sequence number and,
// when strip is set, with the reasoning items' summary emptied and content
// removed, as hiding reasoning must leave them.
func hiddenView(t *testing.T, data []byte, strip bool) any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("data %q: %v", data, err)
	}
	delete(v, "sequence_number")
	if !strip {
		return v
	}
	items := []any{v["item"]}
	if r, ok := v["response"].(map[string]any); ok {
		if out, ok := r["output"].([]any); ok {
			items = append(items, out...)
		}
	}
	for _, it := range items {
		if m, ok := it.(map[string]any); ok && m["type"] == "reasoning" {
			delete(m, "content")
			if _, ok := m["summary"]; ok {
				m["summary"] = []any{}
			}
		}
	}
	return v
}

// A truncating budget: the reasoning deltas up to the budget go out, the
// later ones and the .done events do not; the answer is whole.
func TestResponsesBudgetTruncate(t *testing.T) {
	arrs, want := realisticResponses(t, 0)
	first := rsThink[0] + rsThink[1]
	budget := usage.EstimateTokens([]byte(rsThink[0])) + usage.EstimateTokens([]byte(rsThink[1]))
	for _, m := range modes {
		ems, p := simulate(t, Config{Mode: m, Format: FormatResponses, ReasoningBudget: budget}, arrs)
		v := viewResponses(t, emitted(ems))
		if v.text[1].String() != first || v.text[0].String() != want[0] {
			t.Fatalf("%s: reasoning %q, answer %q", m, v.text[1].String(), v.text[0].String())
		}
		checkSeqs(t, m.String(), v.seqs, 0)
		for _, typ := range v.types {
			if typ == "response.reasoning_summary_text.done" {
				t.Fatalf("%s: %s sent after truncation", m, typ)
			}
		}
		if p.OverBudget() {
			t.Fatalf("%s: truncate ended the stream", m)
		}
		if want := utf8.RuneCountInString(want[1]) - utf8.RuneCountInString(first); p.Stats().HiddenRunes != want {
			t.Fatalf("%s: %d runes hidden, want %d", m, p.Stats().HiddenRunes, want)
		}
	}
}

// The error action ends the stream at the delta that passes the budget.
func TestResponsesBudgetError(t *testing.T) {
	arrs, _ := realisticResponses(t, 0)
	p := NewPacer(Config{Mode: ModePace, Format: FormatResponses, ReasoningBudget: 1, BudgetAction: BudgetError})
	pushed := 0
	for _, a := range arrs {
		p.Push(&a.ev, t0)
		pushed++
		if p.OverBudget() {
			break
		}
	}
	if !p.OverBudget() || arrs[pushed-1].ev.Type != "response.reasoning_summary_text.delta" {
		t.Fatalf("over budget %v after %d events", p.OverBudget(), pushed)
	}
}

// Deltas that arrive together merge into events that each take one
// number; the number may sit after the text.
func TestResponsesMergeAndSuffixNumber(t *testing.T) {
	ms := time.Millisecond
	for _, after := range []bool{false, true} {
		var arrs []arrival
		seq := 0
		add := func(at time.Duration, data string) {
			arrs = append(arrs, arrival{at: at, ev: oneEvent(t, rx(data))})
			seq++
		}
		add(0, `{"type":"response.created","sequence_number":0,"response":{}}`)
		var want strings.Builder
		for i := range 30 {
			text := fmt.Sprintf("w%d ", i)
			if i == 29 {
				text = strings.Repeat("a long tail to split ", 30)
			}
			want.WriteString(text)
			lit := AppendString(nil, []byte(text))
			d := fmt.Sprintf(`{"type":"response.output_text.delta","sequence_number":%d,"item_id":"msg_1","output_index":0,"content_index":0,"delta":%s,"logprobs":[]}`, seq, lit)
			if after {
				d = fmt.Sprintf(`{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":%s,"logprobs":[],"sequence_number":%d}`, lit, seq)
			}
			add(10*ms, d)
		}
		add(2*time.Second, fmt.Sprintf(`{"type":"response.completed","sequence_number":%d,"response":{"usage":{"input_tokens":1,"output_tokens":2}}}`, seq))
		ems, p := simulate(t, Config{Mode: ModePace, Format: FormatResponses}, arrs)
		v := viewResponses(t, emitted(ems))
		name := fmt.Sprintf("number after text %v", after)
		if v.text[0].String() != want.String() {
			t.Fatalf("%s: text %q", name, v.text[0].String())
		}
		checkSeqs(t, name, v.seqs, 0)
		if v.textEvents >= 29 {
			t.Fatalf("%s: %d text events for 30 deltas at once: nothing merged", name, v.textEvents)
		}
		if last := v.events[len(v.events)-2]; !bytes.Contains(last.Data, []byte("split ")) || bytes.Contains(last.Data, []byte(strings.Repeat("a long tail to split ", 30))) {
			t.Fatalf("%s: the long delta was not split: %q", name, last.Data)
		}
		if string(p.Stats().Usage) != `{"input_tokens":1,"output_tokens":2}` {
			t.Fatalf("%s: usage %s", name, p.Stats().Usage)
		}
	}
}

// Run ends a Responses stream at response.completed or .incomplete
// (EndDone), also when the upstream cut it off after the data line.
func TestRunResponsesEndings(t *testing.T) {
	created := rx(`{"type":"response.created","sequence_number":0,"response":{}}`)
	text := rx(`{"type":"response.output_text.delta","sequence_number":1,"item_id":"m","output_index":0,"content_index":0,"delta":"Hello"}`)
	done := `{"type":"response.completed","sequence_number":2,"response":{"usage":` + rxUsage + `}}`
	incomplete := `{"type":"response.incomplete","sequence_number":2,"response":{"usage":` + rxUsage + `}}`
	failed := `{"type":"response.failed","sequence_number":2,"response":{"error":{"code":"server_error"}}}`
	cases := []struct {
		name  string
		tail  string
		want  End
		out   string
		usage string
		err   bool
	}{
		{"completed", rx(done), EndDone, rx(done), rxUsage, false},
		{"incomplete", rx(incomplete), EndDone, rx(incomplete), rxUsage, false},
		{"unterminated completed", strings.TrimSuffix(rx(done), "\n\n"), EndDone, rx(done), rxUsage, false},
		{"failed then eof", rx(failed), EndEOF, rx(failed), "", true},
		{"eof", "", EndEOF, text, "", false},
		{"unterminated other", "event: response.output_item.added\ndata: {", EndUnterminated, text, "", false},
	}
	for _, m := range modes {
		for _, c := range cases {
			synctest.Test(t, func(t *testing.T) {
				steps := []traces.Step{{At: 0, Raw: []byte(created + text)}}
				if c.tail != "" {
					steps = append(steps, traces.Step{At: time.Second, Raw: []byte(c.tail)})
				}
				out := &clientOut{}
				res, _ := runTrace(t, Config{Mode: m, Format: FormatResponses, Heartbeat: 15 * time.Second}, steps, out)
				if res.End != c.want || res.SawError != c.err {
					t.Fatalf("%s %s: ended %v (error %v), want %v", m, c.name, res.End, res.SawError, c.want)
				}
				if !strings.HasSuffix(out.buf.String(), c.out) {
					t.Fatalf("%s %s: client got %q", m, c.name, out.buf.String())
				}
				if string(res.Stats.Usage) != c.usage {
					t.Fatalf("%s %s: usage %s", m, c.name, res.Stats.Usage)
				}
				checkSeqs(t, c.name, viewResponses(t, out.buf.Bytes()).seqs, 0)
			})
		}
	}
}
