package pace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// The Pacer on OpenAI Responses streams: text split and merged with the
// event line kept, every event renumbered so sequence_number stays
// strictly increasing, everything else whole and in order.

// rxStream builds a Responses stream with consecutive sequence numbers.
type rxStream struct {
	t    testing.TB
	seq  int
	arrs []arrival
}

// add appends an event of type typ whose data is the type, the next
// sequence number, then rest (empty, or starting with a comma).
func (s *rxStream) add(at time.Duration, typ, rest string) {
	data := fmt.Sprintf(`{"type":%q,"sequence_number":%d%s}`, typ, s.seq, rest)
	s.seq++
	s.arrs = append(s.arrs, arrival{at: at, ev: oneEvent(s.t, rx(data))})
}

func (s *rxStream) delta(at time.Duration, typ, item, text string) {
	lit := AppendString(nil, []byte(text))
	rest := fmt.Sprintf(`,"item_id":%q,"output_index":0,"content_index":0,"delta":%s`, item, lit)
	if typ == "response.output_text.delta" {
		// Obfuscation differs per event, as OpenAI sends it by default.
		rest += fmt.Sprintf(`,"logprobs":[],"obfuscation":"o%d"`, s.seq)
	}
	s.add(at, typ, rest)
}

const rxUsage = `{"input_tokens":36,"input_tokens_details":{"cached_tokens":12},"output_tokens":87,"output_tokens_details":{"reasoning_tokens":64},"total_tokens":123}`

// rxReasoningItem is a finished reasoning item: its summary and content
// repeat the reasoning text.
const rxReasoningItem = `{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"The user asks"}],"content":[{"type":"reasoning_text","text":"The user asks"}],"encrypted_content":"gAAAAB"}`

// rxFnArgs is a function call's argument delta, to be passed whole.
const rxFnArgs = `{\"city\": \"Paris\", \"units\": \"celsius\", \"days\": 3}`

// realisticResponses is a Responses stream with a reasoning summary,
// reasoning text, an answer and a function call, in bursts. It returns the
// arrivals and the expected text per channel.
func realisticResponses(t testing.TB, first int) ([]arrival, [2]string) {
	ms := time.Millisecond
	s := &rxStream{t: t, seq: first}
	s.add(0, "response.created", `,"response":{"id":"resp_1","status":"in_progress","usage":null}`)
	s.add(0, "response.in_progress", `,"response":{"id":"resp_1","status":"in_progress","usage":null}`)
	s.add(5*ms, "response.output_item.added", `,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}`)
	s.add(5*ms, "response.reasoning_summary_part.added", `,"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}`)
	var reason, answer strings.Builder
	at := 100 * ms
	for i, x := range rsThink {
		if i%3 == 0 {
			at += 350 * ms
		}
		typ := "response.reasoning_summary_text.delta"
		if i >= 4 {
			typ = "response.reasoning_text.delta"
		}
		s.delta(at+time.Duration(i)*ms, typ, "rs_1", x)
		reason.WriteString(x)
	}
	at += 50 * ms
	s.add(at, "response.reasoning_summary_text.done", `,"item_id":"rs_1","output_index":0,"summary_index":0,"text":"The user asks"`)
	s.add(at, "response.reasoning_summary_part.done", `,"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":"The user asks"}`)
	s.add(at, "response.output_item.done", `,"output_index":0,"item":`+rxReasoningItem)
	s.add(at, "response.output_item.added", `,"output_index":1,"item":{"id":"msg_1","type":"message","content":[]}`)
	for i, x := range rsText {
		if i%2 == 0 {
			at += 300 * ms
		}
		s.delta(at+time.Duration(i)*ms, "response.output_text.delta", "msg_1", x)
		answer.WriteString(x)
	}
	at += 20 * ms
	s.add(at, "response.output_text.done", `,"item_id":"msg_1","output_index":1,"content_index":0,"text":"27 × 453"`)
	s.add(at, "response.output_item.added", `,"output_index":2,"item":{"id":"fc_1","type":"function_call","name":"weather","arguments":""}`)
	s.add(at, "response.function_call_arguments.delta", `,"item_id":"fc_1","output_index":2,"delta":"`+rxFnArgs+`"`)
	s.add(at, "response.function_call_arguments.done", `,"item_id":"fc_1","output_index":2,"arguments":"`+rxFnArgs+`"`)
	s.add(at, "response.completed", `,"response":{"id":"resp_1","status":"completed","output":[`+rxReasoningItem+`,{"id":"msg_1","type":"message","content":[]}],"usage":`+rxUsage+`}`)
	return s.arrs, [2]string{answer.String(), reason.String()}
}

// rxView is what a client sees of a Responses stream.
type rxView struct {
	events     []sse.Event
	text       [2]strings.Builder // by Channel-1: answer, reasoning
	textEvents int
	seqs       []int
	types      []string
}

// viewResponses parses a Responses stream as a strict client would: every
// data event has an event line naming its data's type and a
// sequence_number.
func viewResponses(t testing.TB, out []byte) rxView {
	t.Helper()
	var v rxView
	rd := sse.NewReader(bytes.NewReader(out), 0)
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		if !ev.HasData {
			continue
		}
		var d struct {
			Type  string `json:"type"`
			Seq   *int   `json:"sequence_number"`
			Delta string `json:"delta"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatalf("bad data %q: %v", ev.Data, err)
		}
		if ev.Type != d.Type || d.Seq == nil {
			t.Fatalf("event line %q for data %q", ev.Type, ev.Data)
		}
		v.events = append(v.events, ev.Clone())
		v.seqs = append(v.seqs, *d.Seq)
		v.types = append(v.types, d.Type)
		if ch, ok := rspDeltaTypes[d.Type]; ok {
			v.text[ch-1].WriteString(d.Delta)
			v.textEvents++
		}
	}
	return v
}

// checkSeqs checks that the numbers count up by one from first.
func checkSeqs(t testing.TB, name string, seqs []int, first int) {
	t.Helper()
	for i, n := range seqs {
		if n != first+i {
			t.Fatalf("%s: sequence numbers %v, want %d, %d, … without gaps", name, seqs, first, first+1)
		}
	}
}

var seqRE = regexp.MustCompile(`"sequence_number":\d+`)

// withoutSeq blanks the sequence numbers of events.
func withoutSeq(b []byte) string { return seqRE.ReplaceAllString(string(b), `"sequence_number":N`) }

func TestResponsesPaced(t *testing.T) {
	for _, first := range []int{0, 7} {
		arrs, want := realisticResponses(t, first)
		in := inputBytes(arrs)
		for _, m := range modes {
			name := fmt.Sprintf("%s from %d", m, first)
			ems, p := simulate(t, Config{Mode: m, Format: FormatResponses}, arrs)
			out := emitted(ems)
			v := viewResponses(t, out)
			if v.text[0].String() != want[0] || v.text[1].String() != want[1] {
				t.Fatalf("%s: text\ngot  %q / %q\nwant %q / %q", name, v.text[0].String(), v.text[1].String(), want[0], want[1])
			}
			checkSeqs(t, name, v.seqs, first)
			if v.types[len(v.types)-1] != "response.completed" {
				t.Fatalf("%s: ends with %s", name, v.types[len(v.types)-1])
			}
			if got := string(p.Stats().Usage); got != rxUsage {
				t.Fatalf("%s: usage %s", name, got)
			}
			u, ok := usage.ParseUsage(p.Stats().Usage)
			if !ok || u.Prompt != 36 || u.Cached != 12 || u.Completion != 87 || u.Reasoning != 64 {
				t.Fatalf("%s: usage reads as %+v", name, u)
			}
			if st := p.Stats(); st.RunesIn != st.RunesOut || st.RunesIn != utf8.RuneCountInString(want[0]+want[1]) {
				t.Fatalf("%s: runes in %d, out %d", name, st.RunesIn, st.RunesOut)
			}
			if m == ModeOff {
				if !bytes.Equal(out, in) {
					t.Fatalf("off: output differs from input")
				}
				continue
			}
			if v.textEvents <= len(rsThink)+len(rsText) {
				t.Fatalf("%s: %d text events: nothing was split", name, v.textEvents)
			}
			// Everything but text deltas passes whole and in order, only
			// the sequence numbers changed.
			var got, wantOther []string
			for _, ev := range v.events {
				if c, _ := ClassifyResponses(&ev, nil); c.Kind != KindText {
					got = append(got, withoutSeq(ev.Raw))
				}
			}
			for _, a := range arrs {
				if c, _ := ClassifyResponses(&a.ev, nil); c.Kind != KindText {
					wantOther = append(wantOther, withoutSeq(a.ev.Raw))
				}
			}
			if strings.Join(got, "") != strings.Join(wantOther, "") {
				t.Fatalf("%s: other events differ\ngot  %q\nwant %q", name, got, wantOther)
			}
			if !strings.Contains(withoutSeq(out), `"delta":"`+rxFnArgs+`"`) {
				t.Fatalf("%s: function call arguments not whole", name)
			}
		}
	}
}
