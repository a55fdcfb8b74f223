package pace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/traces"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// The Pacer on Anthropic Messages streams: text split and merged with the
// event line kept, every other event whole and in order, thinking blocks
// hidden whole with the later blocks renumbered, usage merged.

// mb builds the data of Messages events.
func mbStart(idx int, typ string) string {
	switch typ {
	case "thinking":
		return fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"thinking","thinking":"","signature":""}}`, idx)
	case "redacted_thinking":
		return fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4a"}}`, idx)
	case "tool_use":
		return fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}`, idx)
	}
	return fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, idx)
}

func mbDelta(idx int, deltaType, field, text string) string {
	lit := AppendString(nil, []byte(text))
	return fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":%q,%q:%s}}`, idx, deltaType, field, lit)
}

func mbThink(idx int, text string) string { return mbDelta(idx, "thinking_delta", "thinking", text) }
func mbText(idx int, text string) string  { return mbDelta(idx, "text_delta", "text", text) }
func mbSig(idx int) string {
	return mbDelta(idx, "signature_delta", "signature", "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds8NdhcT")
}
func mbJSON(idx int) string {
	return mbDelta(idx, "input_json_delta", "partial_json", `{"location": "San Fra`)
}
func mbStop(idx int) string { return fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, idx) }

// msgArr is one Messages event arriving at at.
func msgArr(t testing.TB, at time.Duration, data string) arrival {
	return arrival{at: at, ev: oneEvent(t, am(data))}
}

// Texts of the realistic stream: thinking, then the answer; a large delta
// in each, which pacing must split.
var (
	rsThink = []string{
		"The user asks for 27 × 453. ", "Let me break it down:\n", "27 × 400 = 10,800\n", "27 × 53 = 1,431\n",
		strings.Repeat("Double-checking each partial product carefully, digit by digit. ", 6),
		"Sum: 10,800 + 1,431 = 12,231. ", "思考：答案是一万二千二百三十一。", "✓",
	}
	rsText = []string{
		"27 × 453 = **12,231**.", "\n\nHere is how: ", "split 453 into 400 + 53, ",
		strings.Repeat("multiply each part by 27 and add the results together; ", 8),
		"\"quoted\" \\ back\tslash 🎉👨‍👩‍👧", " Done.",
	}
)

const rsUsageWant = `{"cache_creation_input_tokens":0,"cache_read_input_tokens":2048,"input_tokens":472,"output_tokens":215}`

// realisticMessages is a Messages stream with extended thinking, in bursts.
func realisticMessages(t testing.TB) []arrival {
	ms := time.Millisecond
	arrs := []arrival{msgArr(t, 0, amStart), msgArr(t, 0, amPing), msgArr(t, 5*ms, mbStart(0, "thinking"))}
	at := 100 * ms
	for i, s := range rsThink {
		if i%3 == 0 {
			at += 350 * ms
		}
		arrs = append(arrs, msgArr(t, at+time.Duration(i)*ms, mbThink(0, s)))
	}
	at += 50 * ms
	arrs = append(arrs, msgArr(t, at, mbSig(0)), msgArr(t, at, mbStop(0)), msgArr(t, at, mbStart(1, "text")))
	for i, s := range rsText {
		if i%2 == 0 {
			at += 300 * ms
		}
		if i == 3 {
			arrs = append(arrs, msgArr(t, at, amPing))
		}
		arrs = append(arrs, msgArr(t, at+time.Duration(i)*ms, mbText(1, s)))
	}
	at += 20 * ms
	return append(arrs, msgArr(t, at, mbStop(1)), msgArr(t, at, amMsgDelta), msgArr(t, at, amMsgStop))
}

// msgView is what a client sees of a Messages stream.
type msgView struct {
	events     []sse.Event // data events, in order
	text       [2]strings.Builder
	textEvents int
	starts     []string // content_block.type of each block, by output index
	last       string   // type of the last event
}

// viewMessages parses a Messages stream as a strict client would: every
// data event has an event line naming its type, blocks are numbered 0, 1,
// 2 … in order, deltas and stops belong to the open block, text deltas
// match their block's type.
func viewMessages(t testing.TB, out []byte) msgView {
	t.Helper()
	var v msgView
	rd := sse.NewReader(bytes.NewReader(out), 0)
	open := -1
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		if ev.Unterminated {
			t.Fatalf("output ends with a cut-off block %q", ev.Raw)
		}
		if !ev.HasData {
			if !ev.IsComment() {
				t.Fatalf("output block without data %q", ev.Raw)
			}
			continue
		}
		var d struct {
			Type         string
			Index        *int
			Delta        map[string]any
			ContentBlock struct{ Type string } `json:"content_block"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatalf("output event %q: %v", ev.Data, err)
		}
		if ev.Type != d.Type {
			t.Fatalf("event line %q for data type %q: %q", ev.Type, d.Type, ev.Raw)
		}
		v.events = append(v.events, ev.Clone())
		v.last = d.Type
		switch d.Type {
		case "content_block_start":
			if open >= 0 || d.Index == nil || *d.Index != len(v.starts) {
				t.Fatalf("block start %q with block %d open, %d before it", ev.Data, open, len(v.starts))
			}
			open = *d.Index
			v.starts = append(v.starts, d.ContentBlock.Type)
		case "content_block_delta":
			if d.Index == nil || *d.Index != open || open < 0 {
				t.Fatalf("delta %q outside its block (open: %d)", ev.Data, open)
			}
			block := v.starts[open]
			switch d.Delta["type"] {
			case "text_delta":
				if block != "text" {
					t.Fatalf("text delta in a %s block", block)
				}
				v.text[0].WriteString(d.Delta["text"].(string))
				v.textEvents++
			case "thinking_delta":
				if block != "thinking" {
					t.Fatalf("thinking delta in a %s block", block)
				}
				v.text[1].WriteString(d.Delta["thinking"].(string))
				v.textEvents++
			}
		case "content_block_stop":
			if d.Index == nil || *d.Index != open {
				t.Fatalf("stop %q, open block %d", ev.Data, open)
			}
			open = -1
		}
	}
	if open >= 0 {
		t.Fatalf("block %d never stopped", open)
	}
	return v
}

func emitted(ems []emission) []byte {
	var all []byte
	for _, e := range ems {
		all = append(all, e.raw...)
	}
	return all
}

func inputBytes(arrs []arrival) []byte {
	var all []byte
	for _, a := range arrs {
		all = append(all, a.ev.Raw...)
	}
	return all
}

func TestMessagesPaced(t *testing.T) {
	arrs := realisticMessages(t)
	in := viewMessages(t, inputBytes(arrs))
	sig := am(mbSig(0))
	for _, m := range modes {
		ems, p := simulate(t, Config{Mode: m, Format: FormatMessages}, arrs)
		out := emitted(ems)
		v := viewMessages(t, out)
		for ch := range v.text {
			if v.text[ch].String() != in.text[ch].String() {
				t.Fatalf("%s: channel %d\ngot  %q\nwant %q", m, ch, v.text[ch].String(), in.text[ch].String())
			}
		}
		if !bytes.Contains(out, []byte(sig)) {
			t.Fatalf("%s: signature_delta not passed whole", m)
		}
		if v.last != "message_stop" || !bytes.HasSuffix(out, []byte(am(amMsgStop))) {
			t.Fatalf("%s: stream ends with %s", m, v.last)
		}
		if got := string(p.Stats().Usage); got != rsUsageWant {
			t.Fatalf("%s: usage %s, want %s", m, got, rsUsageWant)
		}
		u, ok := usage.ParseUsage(p.Stats().Usage)
		if !ok || u.Prompt != 472+2048 || u.Cached != 2048 || u.Completion != 215 {
			t.Fatalf("%s: usage reads as %+v", m, u)
		}
		if st := p.Stats(); st.RunesIn != st.RunesOut || st.RunesIn != utf8.RuneCountInString(in.text[0].String()+in.text[1].String()) {
			t.Fatalf("%s: runes in %d, out %d", m, st.RunesIn, st.RunesOut)
		}
		if m == ModeOff {
			if !bytes.Equal(out, inputBytes(arrs)) {
				t.Fatalf("off: output differs from input")
			}
			continue
		}
		// The large deltas were split: no output event carries them whole,
		// and there are more text events than came in.
		for _, ev := range v.events {
			for _, big := range []string{rsThink[4], rsText[3]} {
				if bytes.Contains(ev.Data, AppendString(nil, []byte(big))) {
					t.Fatalf("%s: large delta sent whole: %q", m, ev.Data)
				}
			}
		}
		if v.textEvents <= in.textEvents {
			t.Fatalf("%s: %d text events out for %d in: nothing was split", m, v.textEvents, in.textEvents)
		}
		// Everything but text deltas passes byte for byte, in order.
		var gotOther, wantOther []string
		for _, ev := range v.events {
			if c, _ := ClassifyMessages(&ev, nil); c.Kind != KindText {
				gotOther = append(gotOther, string(ev.Raw))
			}
		}
		for _, a := range arrs {
			if c, _ := ClassifyMessages(&a.ev, nil); c.Kind != KindText {
				wantOther = append(wantOther, string(a.ev.Raw))
			}
		}
		if strings.Join(gotOther, "") != strings.Join(wantOther, "") {
			t.Fatalf("%s: other events differ\ngot  %q\nwant %q", m, gotOther, wantOther)
		}
	}
}

// Pieces merge only within one block: two blocks of text arriving at once
// are not joined into one event, though their lane is the same.
func TestMessagesMergeWithinBlock(t *testing.T) {
	ms := time.Millisecond
	arrs := []arrival{msgArr(t, 0, amStart), msgArr(t, 0, mbStart(0, "text"))}
	for i := range 20 {
		arrs = append(arrs, msgArr(t, 10*ms, mbText(0, fmt.Sprintf("a%d ", i))))
	}
	arrs = append(arrs, msgArr(t, 10*ms, mbStop(0)), msgArr(t, 10*ms, mbStart(1, "text")))
	for i := range 20 {
		arrs = append(arrs, msgArr(t, 10*ms, mbText(1, fmt.Sprintf("b%d ", i))))
	}
	arrs = append(arrs, msgArr(t, 10*ms, mbStop(1)), msgArr(t, 10*ms, amMsgStop))
	ems, _ := simulate(t, Config{Mode: ModePace, Format: FormatMessages}, arrs)
	v := viewMessages(t, emitted(ems))
	if v.textEvents >= 40 {
		t.Fatalf("%d text events for 40 deltas at once: nothing merged", v.textEvents)
	}
	for _, ev := range v.events {
		if bytes.Contains(ev.Data, []byte("a19 b0")) || bytes.Contains(ev.Data, []byte(`"index":0`)) && bytes.Contains(ev.Data, []byte("b1")) {
			t.Fatalf("merged across blocks: %q", ev.Data)
		}
	}
	if v.text[0].String() != "a0 a1 a2 a3 a4 a5 a6 a7 a8 a9 a10 a11 a12 a13 a14 a15 a16 a17 a18 a19 b0 b1 b2 b3 b4 b5 b6 b7 b8 b9 b10 b11 b12 b13 b14 b15 b16 b17 b18 b19 " {
		t.Fatalf("text %q", v.text[0].String())
	}
}

// A ping is forwarded in its turn but does not hurry the text before it,
// unlike any other event.
func TestMessagesPingIsNotABarrier(t *testing.T) {
	ms := time.Millisecond
	build := func(mid string) []arrival {
		arrs := []arrival{msgArr(t, 0, amStart), msgArr(t, 0, mbStart(0, "text")),
			msgArr(t, 10*ms, mbText(0, strings.Repeat("word ", 120)))}
		if mid != "" {
			arrs = append(arrs, msgArr(t, 20*ms, mid))
		}
		return append(arrs, msgArr(t, 2*time.Second, mbStop(0)), msgArr(t, 2*time.Second, amMsgStop))
	}
	// textTimes lists when each text event went out, and what it carried.
	textTimes := func(ems []emission) []string {
		var out []string
		for _, e := range ems {
			for _, ev := range readEvents(t, string(e.raw)) {
				if c, _ := ClassifyMessages(&ev, nil); c.Kind == KindText {
					out = append(out, fmt.Sprintf("%v %s", e.at, c.Text))
				}
			}
		}
		return out
	}
	cfg := Config{Mode: ModePace, Format: FormatMessages}
	base, _ := simulate(t, cfg, build(""))
	ping, _ := simulate(t, cfg, build(amPing))
	barrier, _ := simulate(t, cfg, build(`{"type":"future_event"}`))
	want := textTimes(base)
	if last := base[len(base)-1]; len(want) < 3 {
		t.Fatalf("the backlog went out in %d events (last at %v): not paced", len(want), last.at)
	}
	if got := textTimes(ping); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("a ping changed the pacing\ngot  %q\nwant %q", got, want)
	}
	if got := textTimes(barrier); strings.Join(got, "\n") == strings.Join(want, "\n") {
		t.Fatalf("a barrier did not hurry the text: the ping test proves nothing")
	}
	if !bytes.Contains(emitted(ping), []byte(am(amPing))) {
		t.Fatalf("ping not forwarded")
	}
}

// interleavedMessages: thinking 0, text 1, thinking 2, tool_use 3,
// redacted_thinking 4, text 5.
func interleavedMessages(t testing.TB) (arrs []arrival, thinkRunes int) {
	ms := time.Millisecond
	at := time.Duration(0)
	add := func(data string) {
		at += 7 * ms
		arrs = append(arrs, msgArr(t, at, data))
	}
	think := func(idx int, texts ...string) {
		add(mbStart(idx, "thinking"))
		for _, s := range texts {
			add(mbThink(idx, s))
			thinkRunes += utf8.RuneCountInString(s)
		}
		add(mbSig(idx))
		add(mbStop(idx))
	}
	add(amStart)
	add(amPing)
	think(0, "First, ", "what is asked? ", strings.Repeat("Hmm. ", 30))
	add(mbStart(1, "text"))
	add(mbText(1, "Let me check the weather. "))
	add(mbText(1, strings.Repeat("Looking it up. ", 20)))
	add(mbStop(1))
	think(2, "A tool is needed.")
	add(mbStart(3, "tool_use"))
	add(mbJSON(3))
	add(mbStop(3))
	add(mbStart(4, "redacted_thinking"))
	add(mbStop(4))
	add(mbStart(5, "text"))
	add(mbText(5, "Sunny, 21 °C."))
	add(mbStop(5))
	add(amMsgDelta)
	add(amMsgStop)
	return arrs, thinkRunes
}

func TestMessagesHideReasoning(t *testing.T) {
	arrs, thinkRunes := interleavedMessages(t)
	in := viewMessages(t, inputBytes(arrs))
	// What the client must get besides text: the input's other events
	// minus the thinking blocks, renumbered (1→0, 3→1, 5→2), with only
	// the index digits changed.
	renum := map[int]int{1: 0, 3: 1, 5: 2}
	var want []string
	for _, a := range arrs {
		c, _ := ClassifyMessages(&a.ev, nil)
		s := string(a.ev.Raw)
		if c.Kind == KindText || c.msg.index == 0 || c.msg.index == 2 || c.msg.index == 4 {
			continue
		}
		if to, ok := renum[c.msg.index]; ok {
			s = strings.Replace(s, fmt.Sprintf(`"index":%d`, c.msg.index), fmt.Sprintf(`"index":%d`, to), 1)
		}
		want = append(want, s)
	}
	for _, m := range modes {
		ems, p := simulate(t, Config{Mode: m, Format: FormatMessages, HideReasoning: true}, arrs)
		out := emitted(ems)
		v := viewMessages(t, out)
		if got := strings.Join(v.starts, ","); got != "text,tool_use,text" {
			t.Fatalf("%s: blocks %s", m, got)
		}
		if v.text[1].Len() != 0 || bytes.Contains(out, []byte("signature")) || bytes.Contains(out, []byte("thinking")) {
			t.Fatalf("%s: reasoning leaked: %q", m, out)
		}
		if v.text[0].String() != in.text[0].String() {
			t.Fatalf("%s: text %q, want %q", m, v.text[0].String(), in.text[0].String())
		}
		var got []string
		for _, ev := range v.events {
			if c, _ := ClassifyMessages(&ev, nil); c.Kind != KindText {
				got = append(got, string(ev.Raw))
			}
		}
		if strings.Join(got, "") != strings.Join(want, "") {
			t.Fatalf("%s: other events\ngot  %q\nwant %q", m, got, want)
		}
		if st := p.Stats(); st.HiddenRunes != thinkRunes {
			t.Fatalf("%s: %d runes hidden, want %d", m, st.HiddenRunes, thinkRunes)
		}
		if string(p.Stats().Usage) != `{"cache_creation_input_tokens":0,"cache_read_input_tokens":2048,"input_tokens":472,"output_tokens":215}` {
			t.Fatalf("%s: usage %s", m, p.Stats().Usage)
		}
	}
}

// A truncating budget that runs out inside a thinking block: the block's
// further deltas (signature included) are dropped, its stop kept; a later
// thinking block is dropped whole and the blocks after it renumbered.
func TestMessagesBudgetTruncate(t *testing.T) {
	arrs, thinkRunes := interleavedMessages(t)
	first := []string{"First, ", "what is asked? "}
	budget := usage.EstimateTokens([]byte(first[0])) + usage.EstimateTokens([]byte(first[1]))
	for _, m := range modes {
		ems, p := simulate(t, Config{Mode: m, Format: FormatMessages, ReasoningBudget: budget}, arrs)
		out := emitted(ems)
		v := viewMessages(t, out)
		if got := strings.Join(v.starts, ","); got != "thinking,text,tool_use,text" {
			t.Fatalf("%s: blocks %s", m, got)
		}
		if got := v.text[1].String(); got != strings.Join(first, "") {
			t.Fatalf("%s: reasoning %q", m, got)
		}
		if bytes.Contains(out, []byte("signature_delta")) {
			t.Fatalf("%s: the truncated block's signature was sent", m)
		}
		if !bytes.Contains(out, []byte(am(mbStop(0)))) {
			t.Fatalf("%s: the truncated block was not closed", m)
		}
		if !bytes.Contains(out, []byte(`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use"`)) {
			t.Fatalf("%s: tool_use not renumbered to 2: %q", m, out)
		}
		st := p.Stats()
		if want := thinkRunes - utf8.RuneCountInString(strings.Join(first, "")); st.HiddenRunes != want {
			t.Fatalf("%s: %d runes hidden, want %d", m, st.HiddenRunes, want)
		}
		if p.OverBudget() {
			t.Fatalf("%s: truncate ended the stream", m)
		}
	}
}

// The error action ends the stream at the delta that passes the budget,
// which is not sent.
func TestMessagesBudgetError(t *testing.T) {
	arrs, _ := interleavedMessages(t)
	budget := usage.EstimateTokens([]byte("First, "))
	for _, action := range []BudgetAction{BudgetError, BudgetFailover} {
		p := NewPacer(Config{Mode: ModePace, Format: FormatMessages, ReasoningBudget: budget, BudgetAction: action})
		var out []byte
		for _, a := range arrs {
			p.Push(&a.ev, t0.Add(a.at))
			if p.OverBudget() {
				p.End(t0.Add(a.at))
				if !bytes.Contains(a.ev.Data, []byte("what is asked")) {
					t.Fatalf("%v: over budget at %q", action, a.ev.Data)
				}
				break
			}
		}
		if !p.OverBudget() {
			t.Fatalf("%v: never over budget", action)
		}
		for now := t0; !p.Empty(); now = now.Add(10 * time.Millisecond) {
			b, _ := p.Next(now)
			out = append(out, b...)
		}
		if bytes.Contains(out, []byte("what is asked")) || !bytes.Contains(out, []byte("First, ")) {
			t.Fatalf("%v: output %q", action, out)
		}
	}
}

// Run ends a Messages stream at message_stop (EndDone), also when the
// upstream cut it off after the data line, and reports the merged usage.
func TestRunMessagesEndings(t *testing.T) {
	body := am(amStart) + am(amPing) + am(mbStart(0, "text")) + am(mbText(0, "Hello")) + am(mbStop(0)) + am(amMsgDelta)
	cases := []struct {
		name string
		tail string
		want End
		out  string
	}{
		{"message_stop", am(amMsgStop), EndDone, am(amMsgStop)},
		{"unterminated message_stop", strings.TrimSuffix(am(amMsgStop), "\n\n"), EndDone, am(amMsgStop)},
		{"unterminated message_stop without event line", "data: " + amMsgStop, EndDone, "data: " + amMsgStop + "\n\n"},
		{"eof", "", EndEOF, am(amMsgDelta)},
		{"unterminated other", "event: content_block_start\ndata: {", EndUnterminated, am(amMsgDelta)},
	}
	for _, m := range modes {
		for _, c := range cases {
			synctest.Test(t, func(t *testing.T) {
				steps := []traces.Step{{At: 0, Raw: []byte(body)}}
				if c.tail != "" {
					steps = append(steps, traces.Step{At: time.Second, Raw: []byte(c.tail)})
				}
				out := &clientOut{}
				res, _ := runTrace(t, Config{Mode: m, Format: FormatMessages, Heartbeat: 15 * time.Second}, steps, out)
				if res.End != c.want {
					t.Fatalf("%s %s: ended %v, want %v", m, c.name, res.End, c.want)
				}
				if !strings.HasSuffix(out.buf.String(), c.out) {
					t.Fatalf("%s %s: client got %q", m, c.name, out.buf.String())
				}
				if string(res.Stats.Usage) != rsUsageWant {
					t.Fatalf("%s %s: usage %s", m, c.name, res.Stats.Usage)
				}
				if !strings.HasPrefix(c.tail, "data:") {
					viewMessages(t, out.buf.Bytes())
				}
			})
		}
	}
}

// An in-band error event ends nothing by itself and is a barrier, as for
// Chat; the stream reports it.
func TestRunMessagesInBandError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		body := am(amStart) + am(mbStart(0, "text")) + am(mbText(0, strings.Repeat("text ", 100))) + am(amError)
		out := &clientOut{}
		res, _ := runTrace(t, Config{Mode: ModePace, Format: FormatMessages}, []traces.Step{{At: 0, Raw: []byte(body)}}, out)
		if res.End != EndEOF || !res.SawError {
			t.Fatalf("ended %v, saw error %v", res.End, res.SawError)
		}
		if !strings.HasSuffix(out.buf.String(), am(amError)) {
			t.Fatalf("client got %q", out.buf.String())
		}
		if len(out.writes) < 2 {
			t.Fatalf("the text before the error was not paced: %d writes", len(out.writes))
		}
		if last := out.writes[len(out.writes)-1].at; last > DefaultFlush+50*time.Millisecond {
			t.Fatalf("the error waited %v behind the text", last)
		}
	})
}

// The usage object is message_start's, overlaid by each message_delta's
// non-null members; DropUsage changes nothing for Messages.
func TestMessagesUsageMerge(t *testing.T) {
	cases := []struct {
		name  string
		datas []string
		want  string
	}{
		{"anthropic", []string{amStart, amMsgDelta}, rsUsageWant},
		{"start only", []string{amStart}, `{"cache_creation_input_tokens":0,"cache_read_input_tokens":2048,"input_tokens":472,"output_tokens":2}`},
		{"delta only", []string{amMsgDelta}, `{"output_tokens":215}`},
		{"delta repeats final input and cache counts, nulls ignored",
			[]string{amStart, `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"input_tokens":480,"cache_read_input_tokens":null,"output_tokens":9,"server_tool_use":{"web_search_requests":1}}}`},
			`{"cache_creation_input_tokens":0,"cache_read_input_tokens":2048,"input_tokens":480,"output_tokens":9,"server_tool_use":{"web_search_requests":1}}`},
		{"two deltas", []string{amStart, `{"type":"message_delta","delta":{},"usage":{"output_tokens":5}}`, amMsgDelta}, rsUsageWant},
		{"null usage", []string{`{"type":"message_start","message":{"usage":null}}`, `{"type":"message_delta","usage":null}`}, ``},
		{"usage in another event is not read", []string{`{"type":"content_block_stop","index":0,"usage":{"output_tokens":1}}`}, ``},
	}
	for _, c := range cases {
		for _, m := range modes {
			p := NewPacer(Config{Mode: m, Format: FormatMessages, DropUsage: true})
			var out []byte
			for _, d := range c.datas {
				ev := oneEvent(t, am(d))
				p.Push(&ev, t0)
				b, _ := p.Next(t0)
				out = append(out, b...)
			}
			if got := string(p.Stats().Usage); got != c.want {
				t.Errorf("%s %s: usage %s, want %s", c.name, m, got, c.want)
			}
			for _, d := range c.datas {
				if !bytes.Contains(out, []byte(am(d))) {
					t.Errorf("%s %s: %s not forwarded", c.name, m, d)
				}
			}
		}
	}
}

// Renumbering edits only the index digits, wherever the index sits, and a
// renumbered text event is still split and merged around its new envelope.
func TestMessagesRenumberText(t *testing.T) {
	ms := time.Millisecond
	long := strings.Repeat("after the index ", 40)
	late := fmt.Sprintf(`{"type":"content_block_delta","delta":{"type":"text_delta","text":%s},"index":10}`, AppendString(nil, []byte(long)))
	arrs := []arrival{msgArr(t, 0, amStart)}
	for i := range 10 {
		arrs = append(arrs, msgArr(t, 0, mbStart(i, "thinking")), msgArr(t, 0, mbThink(i, "x")), msgArr(t, 0, mbStop(i)))
	}
	arrs = append(arrs, msgArr(t, 0, mbStart(10, "text")), msgArr(t, 10*ms, late), msgArr(t, 10*ms, mbText(10, "short")),
		msgArr(t, 2*time.Second, mbStop(10)), msgArr(t, 2*time.Second, amMsgStop))
	for _, m := range modes {
		ems, _ := simulate(t, Config{Mode: m, Format: FormatMessages, HideReasoning: true}, arrs)
		out := emitted(ems)
		v := viewMessages(t, out)
		if v.text[0].String() != long+"short" || len(v.starts) != 1 {
			t.Fatalf("%s: text %q, blocks %v", m, v.text[0].String(), v.starts)
		}
		if m == ModeOff {
			if want := strings.Replace(am(late), `"index":10`, `"index":0`, 1); !bytes.Contains(out, []byte(want)) {
				t.Fatalf("off: renumbered event not byte-exact: %q", out)
			}
			continue
		}
		if v.textEvents < 3 {
			t.Fatalf("%s: long delta not split: %d text events", m, v.textEvents)
		}
		for _, ev := range v.events {
			if c, _ := ClassifyMessages(&ev, nil); c.Kind == KindText && !bytes.HasSuffix(ev.Data, []byte(`},"index":0}`)) && !bytes.Contains(ev.Data, []byte(`"index":0,"delta"`)) {
				t.Fatalf("%s: piece %q", m, ev.Data)
			}
		}
	}
}
