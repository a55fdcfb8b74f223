package splice

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// mev makes a Messages event.
func mev(typ, data string) sse.Event { return sse.NewEvent(typ, []byte(data)) }

func mStart(id string, in int) sse.Event {
	return mev("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":%q,"type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`, id, in))
}
func mBlock(i int, typ string) sse.Event {
	cb := map[string]string{
		"text":            `{"type":"text","text":""}`,
		"thinking":        `{"type":"thinking","thinking":"","signature":""}`,
		"tool_use":        `{"type":"tool_use","id":"toolu_1","name":"f","input":{}}`,
		"server_tool_use": `{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}`,
		"result":          `{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]}`,
		"redacted":        `{"type":"redacted_thinking","data":"opaque"}`,
	}[typ]
	return mev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":%s}`, i, cb))
}
func mDelta(i int, typ, field, s string) sse.Event {
	return mev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":%q,%q:%s}}`, i, typ, field, quote(s)))
}
func mText(i int, s string) sse.Event  { return mDelta(i, "text_delta", "text", s) }
func mThink(i int, s string) sse.Event { return mDelta(i, "thinking_delta", "thinking", s) }
func mSig(i int, s string) sse.Event   { return mDelta(i, "signature_delta", "signature", s) }
func mJSON(i int, s string) sse.Event  { return mDelta(i, "input_json_delta", "partial_json", s) }
func mStop(i int) sse.Event {
	return mev("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
}
func mPing() sse.Event        { return mev("ping", `{"type":"ping"}`) }
func mMessageStop() sse.Event { return mev("message_stop", `{"type":"message_stop"}`) }
func mMessageDelta(stop string, out int) sse.Event {
	return mev("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, stop, out))
}

// pass feeds evs through r, returning (clones of) what the client gets.
func pass(r Recorder, evs ...sse.Event) []sse.Event {
	var out []sse.Event
	for _, ev := range evs {
		for _, o := range r.Pass(ev) {
			out = append(out, o.Clone())
		}
	}
	return out
}

// splice feeds evs through sp, then r.
func msgSplice(r Recorder, sp Splicer, evs ...sse.Event) []sse.Event {
	var out []sse.Event
	for _, ev := range evs {
		for _, o := range sp.Next(ev) {
			out = append(out, pass(r, o)...)
		}
	}
	return out
}

// clientMessage is a client's reassembly of a Messages stream, as an SDK
// accumulator builds it, with the stream's rules checked.
type clientMessage struct {
	starts   int
	id       string
	blocks   []clientBlock
	stop     string
	usage    map[string]int
	stopped  bool // message_stop
	comments []string
}

type clientBlock struct {
	typ                   string
	text, thinking, input string
	signature             string
	open                  bool
	raw                   json.RawMessage // content_block
	name                  string
}

func (m *clientMessage) text() string {
	var b strings.Builder
	for _, bl := range m.blocks {
		b.WriteString(bl.text)
	}
	return b.String()
}

func (m *clientMessage) thinking() string {
	var b strings.Builder
	for _, bl := range m.blocks {
		b.WriteString(bl.thinking)
	}
	return b.String()
}

// wire is what reassemble reads of an event.
type wire struct {
	Type         string          `json:"type"`
	Index        *int            `json:"index"`
	Message      json.RawMessage `json:"message"`
	ContentBlock json.RawMessage `json:"content_block"`
	Delta        struct {
		Type        string  `json:"type"`
		Text        *string `json:"text"`
		Thinking    *string `json:"thinking"`
		Signature   *string `json:"signature"`
		PartialJSON *string `json:"partial_json"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage map[string]any `json:"usage"`
}

// wires caches the parse of large events (the recordings' search
// results), which the property test reads thousands of times.
var wires = map[string]*wire{}

func parseWire(data []byte) (*wire, error) {
	if w, ok := wires[string(data)]; ok {
		return w, nil
	}
	w := new(wire)
	if err := json.Unmarshal(data, w); err != nil {
		return nil, err
	}
	if len(data) > 512 {
		wires[string(data)] = w
	}
	return w, nil
}

// reassemble reads evs as a client would; complete asks for a finished
// message (all blocks stopped, message_stop last).
func reassemble(evs []sse.Event, complete bool) (*clientMessage, error) {
	m := &clientMessage{usage: map[string]int{}}
	open := -1
	for n, ev := range evs {
		if ev.IsComment() {
			m.comments = append(m.comments, string(ev.Raw))
			continue
		}
		if m.stopped {
			return m, fmt.Errorf("event %d (%s) after message_stop", n, ev.Type)
		}
		w, err := parseWire(ev.Data)
		if err != nil {
			return m, fmt.Errorf("event %d (%s): data %q: %v", n, ev.Type, ev.Data, err)
		}
		if w.Type != ev.Type {
			return m, fmt.Errorf("event %d: event %q, data type %q", n, ev.Type, w.Type)
		}
		if ev.Type != "message_start" && ev.Type != "ping" && m.starts == 0 {
			return m, fmt.Errorf("event %d (%s) before message_start", n, ev.Type)
		}
		switch ev.Type {
		case "message_start":
			m.starts++
			if m.starts > 1 {
				return m, fmt.Errorf("event %d: a second message_start", n)
			}
			var s struct {
				ID    string         `json:"id"`
				Usage map[string]any `json:"usage"`
			}
			json.Unmarshal(w.Message, &s)
			m.id = s.ID
			addUsage(m.usage, s.Usage)
		case "content_block_start":
			if w.Index == nil || *w.Index != len(m.blocks) {
				return m, fmt.Errorf("event %d: block start index %v, want %d", n, w.Index, len(m.blocks))
			}
			if open >= 0 {
				return m, fmt.Errorf("event %d: block %d starts while %d is open", n, *w.Index, open)
			}
			var cb struct{ Type, Name string }
			if err := json.Unmarshal(w.ContentBlock, &cb); err != nil {
				return m, fmt.Errorf("event %d: content_block: %v", n, err)
			}
			m.blocks = append(m.blocks, clientBlock{typ: cb.Type, name: cb.Name, open: true, raw: w.ContentBlock})
			open = *w.Index
		case "content_block_delta":
			if w.Index == nil || *w.Index != open || open < 0 {
				return m, fmt.Errorf("event %d: delta for %v, open %d", n, w.Index, open)
			}
			b := &m.blocks[open]
			d := w.Delta
			switch {
			case d.Type == "text_delta" && d.Text != nil && b.typ == "text":
				b.text += *d.Text
			case d.Type == "thinking_delta" && d.Thinking != nil && b.typ == "thinking":
				b.thinking += *d.Thinking
			case d.Type == "signature_delta" && d.Signature != nil && b.typ == "thinking":
				b.signature += *d.Signature
			case d.Type == "input_json_delta" && d.PartialJSON != nil:
				b.input += *d.PartialJSON
			case d.Type == "citations_delta":
			default:
				return m, fmt.Errorf("event %d: delta %s in a %s block", n, d.Type, b.typ)
			}
		case "content_block_stop":
			if w.Index == nil || *w.Index != open || open < 0 {
				return m, fmt.Errorf("event %d: stop for %v, open %d", n, w.Index, open)
			}
			m.blocks[open].open = false
			if b := m.blocks[open]; b.typ == "tool_use" || b.typ == "server_tool_use" {
				if b.input != "" && !json.Valid([]byte(b.input)) {
					return m, fmt.Errorf("event %d: %s input %q", n, b.typ, b.input)
				}
			}
			open = -1
		case "message_delta":
			if open >= 0 {
				return m, fmt.Errorf("event %d: message_delta with block %d open", n, open)
			}
			if m.stop != "" {
				return m, fmt.Errorf("event %d: a second message_delta", n)
			}
			if w.Delta.StopReason != nil {
				m.stop = *w.Delta.StopReason
			}
			if m.stop == "" {
				m.stop = "?"
			}
			addUsage(m.usage, w.Usage)
		case "message_stop":
			if m.stop == "" {
				return m, fmt.Errorf("event %d: message_stop without message_delta", n)
			}
			m.stopped = true
		case "ping", "error":
		default:
			return m, fmt.Errorf("event %d: type %q", n, ev.Type)
		}
	}
	if complete {
		if open >= 0 || !m.stopped || m.starts != 1 {
			return m, fmt.Errorf("incomplete: open block %d, message_stop %v, %d starts", open, m.stopped, m.starts)
		}
	}
	return m, nil
}

// addUsage sets the counts of u in dst, as an SDK accumulator does.
func addUsage(dst map[string]int, u map[string]any) {
	for k, v := range u {
		if n, ok := v.(float64); ok {
			dst[k] = int(n)
		}
	}
}

// toolInputs returns the complete tool_use blocks' inputs, parsed.
func (m *clientMessage) toolInputs() []any {
	var ins []any
	for _, b := range m.blocks {
		if b.typ != "tool_use" {
			continue
		}
		var v any
		if b.input == "" {
			v = map[string]any{}
		} else if err := json.Unmarshal([]byte(b.input), &v); err != nil {
			v = "invalid: " + b.input
		}
		ins = append(ins, []any{b.name, v})
	}
	return ins
}

func msgReadRecording(t testing.TB, path string) []sse.Event {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rd := sse.NewReader(bytes.NewReader(b), 0)
	var evs []sse.Event
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		evs = append(evs, ev.Clone())
	}
	return evs
}

func messagesRecordings(t testing.TB) map[string][]sse.Event {
	paths, _ := filepath.Glob("../../testdata/recordings/anthropic/*.sse")
	if len(paths) < 5 {
		t.Fatalf("recordings: %v", paths)
	}
	recs := map[string][]sse.Event{}
	for _, p := range paths {
		recs[filepath.Base(p)] = msgReadRecording(t, p)
	}
	return recs
}

func TestMessagesPassForwardsAtOnce(t *testing.T) {
	evs := []sse.Event{mStart("msg_1", 5), mBlock(0, "thinking"), mThink(0, "hm"), mSig(0, "s"), mStop(0),
		mBlock(1, "text"), mPing(), mText(1, "Hello"), mText(1, " there"), mStop(1)}
	r := NewRecorder(Messages, 1<<20)
	for i, ev := range evs {
		out := r.Pass(ev)
		if len(out) != 1 || !bytes.Equal(out[0].Raw, ev.Raw) {
			t.Fatalf("event %d: got %d events, want it at once", i, len(out))
		}
	}
}

func TestMessagesHoldsFromToolUseToMessageStop(t *testing.T) {
	r := NewRecorder(Messages, 1<<20)
	pass(r, mStart("msg_1", 5), mBlock(0, "text"), mText(0, "I'll call."), mStop(0))
	held := []sse.Event{mBlock(1, "tool_use"), mJSON(1, `{"a":`), mJSON(1, `1}`), mStop(1), mBlock(2, "text"), mText(2, "x"), mStop(2), mMessageDelta("tool_use", 9)}
	for i, ev := range held {
		if out := r.Pass(ev); len(out) != 0 {
			t.Fatalf("held event %d forwarded", i)
		}
		if out := r.Pass(mPing()); len(out) != 0 {
			t.Fatalf("ping forwarded while events are held: it must wait behind them (the upstream's order)")
		}
	}
	out := r.Pass(mMessageStop())
	if len(out) != 2*len(held)+1 {
		t.Fatalf("released %d events, want %d", len(out), 2*len(held)+1)
	}
	for i := range held {
		if !bytes.Equal(out[2*i].Raw, held[i].Raw) || out[2*i+1].Type != "ping" {
			t.Fatalf("released event %d = %q, want %q then a ping", 2*i, out[2*i].Raw, held[i].Raw)
		}
	}
}

func TestMessagesHoldsMessageDelta(t *testing.T) {
	r := NewRecorder(Messages, 1<<20)
	pass(r, mStart("msg_1", 5), mBlock(0, "text"), mText(0, "Hi"), mStop(0))
	if out := r.Pass(mMessageDelta("end_turn", 3)); len(out) != 0 {
		t.Fatal("message_delta forwarded before message_stop")
	}
	s := r.Seam()
	if s.Discarded != 1 || s.Answer != "Hi" || s.InReasoning {
		t.Fatalf("seam %+v", s)
	}
}

func TestMessagesHoldsServerToolWithItsResult(t *testing.T) {
	r := NewRecorder(Messages, 1<<20)
	pass(r, mStart("msg_1", 5))
	group := []sse.Event{mBlock(0, "server_tool_use"), mJSON(0, `{"query":`), mJSON(0, `"x"}`), mStop(0), mBlock(1, "result")}
	for i, ev := range group {
		if out := r.Pass(ev); len(out) != 0 {
			t.Fatalf("group event %d forwarded", i)
		}
	}
	if out := r.Pass(mStop(1)); len(out) != len(group)+1 {
		t.Fatalf("the result's stop released %d events, want %d", len(out), len(group)+1)
	}
	for i, ev := range []sse.Event{mBlock(2, "text"), mText(2, "Found"), mStop(2)} {
		if out := r.Pass(ev); len(out) != 1 {
			t.Fatalf("text event %d after the group: %d events", i, len(out))
		}
	}
	// A break inside a group discards it.
	pass(r, mBlock(3, "server_tool_use"), mJSON(3, `{"q`))
	s := r.Seam()
	if s.Discarded != 2 || s.Answer != "Found" {
		t.Fatalf("seam %+v", s)
	}
}

func TestMessagesSeamDescribesWhatWasHanded(t *testing.T) {
	r := NewRecorder(Messages, 1<<20)
	pass(r, mStart("msg_1", 5), mBlock(0, "thinking"), mThink(0, "Let me "), mThink(0, "think \"é\" ✓"))
	s := r.Seam()
	if !s.InReasoning || s.Reasoning != `Let me think "é" ✓` || s.Answer != "" || s.OutputTokens == 0 {
		t.Fatalf("break in thinking: %+v", s)
	}
	r = NewRecorder(Messages, 1<<20)
	pass(r, mStart("msg_1", 5), mBlock(0, "thinking"), mThink(0, "T"), mStop(0), mBlock(1, "text"), mText(1, "A\n"), mStop(1),
		mBlock(2, "text"), mText(2, "B"), mBlock(3, "tool_use"), mJSON(3, "{"))
	s = r.Seam()
	if s.InReasoning || s.Reasoning != "T" || s.Answer != "A\nB" || s.Discarded != 2 || s.ToolCalls != 0 {
		t.Fatalf("break in a tool call: %+v", s)
	}
	want := usage.EstimateTokens([]byte("A\nB")) + usage.EstimateTokens([]byte("T"))
	if s.OutputTokens != want {
		t.Fatalf("OutputTokens %d, want %d", s.OutputTokens, want)
	}
}

func TestMessagesOverflow(t *testing.T) {
	r := NewRecorder(Messages, 600)
	pass(r, mStart("msg_1", 5), mBlock(0, "text"))
	for range 5 {
		pass(r, mText(0, strings.Repeat("x", 50)))
	}
	if r.Overflow() {
		t.Fatal("overflow at 250 bytes of text")
	}
	pass(r, mStop(0))
	// A tool call larger than the bound: held, then released when the
	// bound is passed (nothing can be continued any more).
	n := len(pass(r, mBlock(1, "tool_use")))
	for range 20 {
		n += len(pass(r, mJSON(1, strings.Repeat("y", 40))))
	}
	if !r.Overflow() {
		t.Fatal("no overflow")
	}
	if n != 21 {
		t.Fatalf("%d of 21 events forwarded after the overflow", n)
	}
	if out := r.Pass(mStop(1)); len(out) != 1 {
		t.Fatal("held after the overflow")
	}
}

// brokenText is a client that was handed a text block "Hello wor" when its
// stream broke.
func brokenText(t *testing.T) (Recorder, *Seam, []sse.Event) {
	r := NewRecorder(Messages, 1<<20)
	out := pass(r, mStart("msg_1", 10), mBlock(0, "text"), mText(0, "Hello "), mText(0, "wor"))
	return r, r.Seam(), out
}

func TestMessagesSpliceContinuesTheOpenTextBlock(t *testing.T) {
	r, s, client := brokenText(t)
	sp := s.Splicer(Options{MaxOverlap: -1})
	cont := []sse.Event{mStart("msg_2", 20), mPing(), mBlock(0, "text"), mText(0, "ld"), mText(0, "!"), mStop(0), mMessageDelta("end_turn", 4), mMessageStop()}
	out := msgSplice(r, sp, cont...)
	client = append(client, out...)
	m, err := reassemble(client, true)
	if err != nil {
		t.Fatal(err)
	}
	if m.text() != "Hello world!" || len(m.blocks) != 1 || m.id != "msg_1" {
		t.Fatalf("text %q, %d blocks, id %s", m.text(), len(m.blocks), m.id)
	}
	for _, ev := range out {
		if ev.Type == "message_start" || ev.Type == "content_block_start" || ev.Type == "ping" {
			t.Fatalf("continuation's %s forwarded", ev.Type)
		}
	}
}

func TestMessagesSpliceRenumbersAfterTheClientsBlocks(t *testing.T) {
	r, s, client := brokenText(t)
	sp := s.Splicer(Options{MaxOverlap: -1})
	// The continuation starts with a tool call: the open text block is
	// closed first.
	cont := []sse.Event{mStart("msg_2", 20), mBlock(0, "tool_use"), mJSON(0, `{"a":1}`), mStop(0), mBlock(1, "text"), mText(1, "after"), mStop(1), mMessageDelta("tool_use", 4), mMessageStop()}
	client = append(client, msgSplice(r, sp, cont...)...)
	m, err := reassemble(client, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.blocks) != 3 || m.blocks[1].typ != "tool_use" || m.blocks[1].input != `{"a":1}` || m.text() != "Hello worafter" {
		t.Fatalf("%+v", m.blocks)
	}
}

func TestMessagesSpliceClosesOpenBlockWithoutContent(t *testing.T) {
	r, s, client := brokenText(t)
	client = append(client, msgSplice(r, s.Splicer(Options{}), mStart("msg_2", 20), mMessageDelta("end_turn", 0), mMessageStop())...)
	if _, err := reassemble(client, true); err != nil {
		t.Fatal(err)
	}
}

func TestMessagesSpliceDropsThinkingAfterTheAnswer(t *testing.T) {
	for _, o := range []ReasoningRestart{Mark, Hide} {
		r, s, client := brokenText(t)
		cont := []sse.Event{mStart("msg_2", 20), mBlock(0, "thinking"), mThink(0, "again"), mSig(0, "sig"), mStop(0),
			mBlock(1, "text"), mText(1, "ld"), mStop(1), mMessageDelta("end_turn", 4), mMessageStop()}
		client = append(client, msgSplice(r, s.Splicer(Options{Reasoning: o}), cont...)...)
		m, err := reassemble(client, true)
		if err != nil {
			t.Fatal(err)
		}
		if m.thinking() != "" || m.text() != "Hello world" || len(m.blocks) != 1 {
			t.Fatalf("%v: thinking %q, text %q, %d blocks", o, m.thinking(), m.text(), len(m.blocks))
		}
	}
}

func brokenThinking(t *testing.T, closed bool) (Recorder, *Seam, []sse.Event) {
	r := NewRecorder(Messages, 1<<20)
	out := pass(r, mStart("msg_1", 10), mBlock(0, "thinking"), mThink(0, "First, "))
	if closed {
		out = append(out, pass(r, mThink(0, "done."), mSig(0, "sig1"), mStop(0))...)
	}
	s := r.Seam()
	if !s.InReasoning {
		t.Fatalf("seam %+v", s)
	}
	return r, s, out
}

var restart = []sse.Event{mStart("msg_2", 20), mBlock(0, "thinking"), mThink(0, "Again."), mSig(0, "sig2"), mStop(0),
	mBlock(1, "text"), mText(1, "Answer."), mStop(1), mMessageDelta("end_turn", 4), mMessageStop()}

func TestMessagesSpliceMarksRestartedReasoning(t *testing.T) {
	// The cut block gets the marker and is closed unsigned; the new one
	// keeps its signature.
	r, s, client := brokenThinking(t, false)
	client = append(client, msgSplice(r, s.Splicer(Options{Reasoning: Mark}), restart...)...)
	m, err := reassemble(client, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.blocks) != 3 || m.blocks[0].thinking != "First, "+Marker || m.blocks[0].signature != "" ||
		m.blocks[1].thinking != "Again." || m.blocks[1].signature != "sig2" || m.text() != "Answer." {
		t.Fatalf("%+v", m.blocks)
	}
	// A closed (signed) block is left as it is: the marker has a block of
	// its own.
	r, s, client = brokenThinking(t, true)
	client = append(client, msgSplice(r, s.Splicer(Options{Reasoning: Mark}), restart...)...)
	m, err = reassemble(client, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.blocks) != 4 || m.blocks[0].thinking != "First, done." || m.blocks[0].signature != "sig1" ||
		m.blocks[1].thinking != Marker || m.blocks[2].signature != "sig2" || m.thinking() != "First, done."+Marker+"Again." {
		t.Fatalf("%+v", m.blocks)
	}
}

func TestMessagesSpliceHidesRestartedReasoning(t *testing.T) {
	for _, closed := range []bool{false, true} {
		r, s, client := brokenThinking(t, closed)
		client = append(client, msgSplice(r, s.Splicer(Options{Reasoning: Hide}), restart...)...)
		m, err := reassemble(client, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.blocks) != 2 || strings.Contains(m.thinking(), "Again") || strings.Contains(m.thinking(), Marker) || m.text() != "Answer." {
			t.Fatalf("closed %v: %+v", closed, m.blocks)
		}
	}
}

func TestMessagesSpliceDropsTheRepeatedTail(t *testing.T) {
	r := NewRecorder(Messages, 1<<20)
	client := pass(r, mStart("msg_1", 10), mBlock(0, "text"), mText(0, "The quick brown fox "))
	s := r.Seam()
	sp := s.Splicer(Options{})
	// "brown fox " repeated, in pieces: held until decided.
	var out []sse.Event
	for i, ev := range []sse.Event{mStart("msg_2", 20), mBlock(0, "text"), mText(0, "brown"), mText(0, " fo")} {
		if got := msgSplice(r, sp, ev); len(got) != 0 {
			t.Fatalf("event %d forwarded while the overlap is undecided: %q", i, got[0].Raw)
		}
	}
	out = msgSplice(r, sp, mText(0, "x jumps"), mText(0, " over"), mStop(0), mMessageDelta("end_turn", 3), mMessageStop())
	client = append(client, out...)
	m, err := reassemble(client, true)
	if err != nil {
		t.Fatal(err)
	}
	if m.text() != "The quick brown fox jumps over" {
		t.Fatalf("text %q", m.text())
	}
	// The seam's space is sent once, decided at the first non-space.
	r = NewRecorder(Messages, 1<<20)
	client = pass(r, mStart("msg_1", 10), mBlock(0, "text"), mText(0, "Hi "))
	client = append(client, msgSplice(r, r.Seam().Splicer(Options{}), mStart("msg_2", 20), mBlock(0, "text"), mText(0, " "), mText(0, " there"), mStop(0), mMessageDelta("end_turn", 3), mMessageStop())...)
	if m, err = reassemble(client, true); err != nil || m.text() != "Hi there" {
		t.Fatalf("text %q, %v", m.text(), err)
	}
}

func TestMessagesSpliceComment(t *testing.T) {
	r, s, _ := brokenText(t)
	out := msgSplice(r, s.Splicer(Options{Comment: "continued on b"}), mStart("msg_2", 20), mPing(), mBlock(0, "text"), mText(0, "ld"))
	if len(out) == 0 || string(out[0].Raw) != ": continued on b\n\n" || !out[0].IsComment() {
		t.Fatalf("first event %q", out[0].Raw)
	}
	for _, ev := range out[1:] {
		if ev.IsComment() {
			t.Fatal("a second comment")
		}
	}
}

func TestMessagesSpliceUsage(t *testing.T) {
	r := NewRecorder(Messages, 1<<20)
	pass(r, mStart("msg_1", 10), mBlock(0, "text"), mText(0, "Hello"))
	s := r.Seam()
	cont := mev("message_start", `{"type":"message_start","message":{"id":"msg_2","usage":{"input_tokens":30,"cache_creation_input_tokens":4,"cache_read_input_tokens":6,"output_tokens":1}}}`)
	delta := mev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":25,"server_tool_use":{"web_search_requests":1}}}`)
	earlier := usage.Usage{Prompt: 100, Cached: 20, CacheWrite: 5, Completion: 40}
	sp := s.Splicer(Options{Earlier: earlier})
	out := msgSplice(r, sp, cont, delta, mMessageStop())
	var got struct {
		Usage map[string]any `json:"usage"`
	}
	for _, ev := range out {
		if ev.Type == "message_delta" {
			json.Unmarshal(ev.Data, &got)
		}
	}
	want := map[string]any{"input_tokens": 30.0 + 75, "cache_creation_input_tokens": 4.0 + 5, "cache_read_input_tokens": 6.0 + 20,
		"output_tokens": 25.0 + 40, "server_tool_use": map[string]any{"web_search_requests": 1.0}}
	if !reflect.DeepEqual(got.Usage, want) {
		t.Fatalf("usage %v, want %v", got.Usage, want)
	}
	// The message_delta's own input counts win over the message_start's.
	r = NewRecorder(Messages, 1<<20)
	pass(r, mStart("msg_1", 10), mBlock(0, "text"), mText(0, "Hello"))
	delta = mev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":31,"output_tokens":25}}`)
	out = msgSplice(r, r.Seam().Splicer(Options{Earlier: earlier}), cont, delta, mMessageStop())
	json.Unmarshal(out[len(out)-2].Data, &got)
	if got.Usage["input_tokens"] != 31.0+75 {
		t.Fatalf("usage %v", got.Usage)
	}
	// Without Earlier, the first message_start's counts stand in.
	r = NewRecorder(Messages, 1<<20)
	pass(r, mStart("msg_1", 10), mBlock(0, "text"), mText(0, "Hello"))
	s = r.Seam()
	out = msgSplice(r, s.Splicer(Options{}), cont, delta, mMessageStop())
	json.Unmarshal(out[len(out)-2].Data, &got)
	if got.Usage["input_tokens"] != 31.0+10 || got.Usage["output_tokens"] != 25.0+float64(max(1, s.OutputTokens)) {
		t.Fatalf("usage %v", got.Usage)
	}
}

func TestMessagesSplicePassesErrors(t *testing.T) {
	r, s, _ := brokenText(t)
	errEv := mev("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	out := msgSplice(r, s.Splicer(Options{}), mStart("msg_2", 20), errEv)
	if len(out) != 1 || !bytes.Equal(out[0].Raw, errEv.Raw) {
		t.Fatalf("%d events", len(out))
	}
}

func TestMessagesSpliceSecondBreak(t *testing.T) {
	r, s, client := brokenText(t)
	client = append(client, msgSplice(r, s.Splicer(Options{MaxOverlap: -1}), mStart("msg_2", 20), mBlock(0, "text"), mText(0, "ld, "),
		mStop(0), mBlock(1, "text"), mText(1, "and more"))...)
	s2 := r.Seam()
	if s2.Answer != "Hello world, and more" || s2.InReasoning {
		t.Fatalf("second seam %+v", s2)
	}
	client = append(client, msgSplice(r, s2.Splicer(Options{MaxOverlap: -1}), mStart("msg_3", 20), mBlock(0, "text"), mText(0, "!"),
		mStop(0), mMessageDelta("end_turn", 1), mMessageStop())...)
	m, err := reassemble(client, true)
	if err != nil {
		t.Fatal(err)
	}
	if m.text() != "Hello world, and more!" || len(m.blocks) != 2 {
		t.Fatalf("text %q, %d blocks", m.text(), len(m.blocks))
	}
}

// recordingOf is what a recording's client gets: its text, thinking and
// tool calls.
func recordingOf(t *testing.T, evs []sse.Event) *clientMessage {
	t.Helper()
	m, err := reassemble(evs, true)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// continuation is a synthetic Messages stream that continues m after
// seam s: a thinking block (dropped after the answer began), the text m
// has after s.Answer (with repeat prepended), m's tool calls, the end.
func continuation(t *testing.T, m *clientMessage, s *Seam, repeat string, id string) []sse.Event {
	t.Helper()
	full := m.text()
	if !strings.HasPrefix(full, s.Answer) {
		t.Fatalf("seam answer %q is not a prefix of %q", s.Answer, full)
	}
	rest := full[len(s.Answer):]
	evs := []sse.Event{mStart(id, 7), mPing(), mBlock(0, "thinking"), mThink(0, "Restarted."), mSig(0, "sig"), mStop(0)}
	i := 1
	if rest != "" || repeat != "" {
		evs = append(evs, mBlock(i, "text"))
		text := repeat + rest
		for len(text) > 0 { // in pieces of ~7 bytes, on rune boundaries
			n := min(7, len(text))
			for n < len(text) && !utf8.RuneStart(text[n]) {
				n++
			}
			evs = append(evs, mText(i, text[:n]))
			text = text[n:]
		}
		evs = append(evs, mStop(i))
		i++
	}
	for _, b := range m.blocks {
		if b.typ != "tool_use" {
			continue
		}
		cb := b.raw
		evs = append(evs, mev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":%s}`, i, cb)))
		for in := b.input; in != ""; {
			n := min(5, len(in))
			evs = append(evs, mJSON(i, in[:n]))
			in = in[n:]
		}
		evs = append(evs, mStop(i))
		i++
	}
	return append(evs, mMessageDelta(m.stop, 11), mMessageStop())
}

// TestMessagesSpliceRecordings breaks every recording at every event,
// continues it with a synthetic stream that has the rest of its text and
// its tool calls, and checks the client's message: the recording's text
// exactly, its tool calls, one message_start, blocks numbered from 0,
// each started and stopped once. Variants: the continuation repeats the
// last 20 runes of the answer (dropped as overlap); the continuation
// breaks in turn halfway and is continued again.
func TestMessagesSpliceRecordings(t *testing.T) {
	earlier := usage.Usage{Prompt: 50, Completion: 13}
	for name, evs := range messagesRecordings(t) {
		want := recordingOf(t, evs)
		stride := 1
		switch {
		case testing.Short() && len(evs) > 40:
			stride = 5
		case messagesRace && len(evs) > 40:
			stride = 3
		}
		for k := 0; k < len(evs); k += stride {
			for _, variant := range []string{"exact", "repeat", "twice"} {
				for _, o := range []ReasoningRestart{Mark, Hide} {
					where := fmt.Sprintf("%s, break at %d, %s, %v", name, k, variant, o)
					r := NewRecorder(Messages, 1<<20)
					client := pass(r, evs[:k]...)
					before, err := reassemble(client, false)
					if err != nil {
						t.Fatalf("%s: before the break: %v", where, err)
					}
					s := r.Seam()
					if o == Hide && !s.InReasoning {
						continue // as Mark
					}
					if s.Answer != before.text() || s.Reasoning != before.thinking() {
						t.Fatalf("%s: seam answer %q reasoning %q, client has %q, %q", where, s.Answer, s.Reasoning, before.text(), before.thinking())
					}
					opts := Options{MaxOverlap: -1, Reasoning: o, Earlier: earlier}
					repeat := ""
					if variant == "repeat" {
						if utf8.RuneCountInString(s.Answer) < 20 {
							continue
						}
						a := []rune(s.Answer)
						repeat, opts.MaxOverlap = string(a[len(a)-20:]), 0
					}
					cont := continuation(t, want, s, repeat, "msg_cont")
					sp := s.Splicer(opts)
					if variant == "twice" {
						half := len(cont) / 2
						client = append(client, msgSplice(r, sp, cont[:half]...)...)
						mid, err := reassemble(client, false)
						if err != nil {
							t.Fatalf("%s: at the second break: %v", where, err)
						}
						s2 := r.Seam()
						if s2.Answer != mid.text() || s2.Reasoning != mid.thinking() {
							t.Fatalf("%s: second seam answer %q reasoning %q, client has %q, %q", where, s2.Answer, s2.Reasoning, mid.text(), mid.thinking())
						}
						cont, sp = continuation(t, want, s2, "", "msg_cont2"), s2.Splicer(opts)
					}
					client = append(client, msgSplice(r, sp, cont...)...)
					got, err := reassemble(client, true)
					if err != nil {
						t.Fatalf("%s: %v", where, err)
					}
					if got.text() != want.text() {
						t.Fatalf("%s: text\n%q\nwant\n%q", where, got.text(), want.text())
					}
					if !reflect.DeepEqual(got.toolInputs(), want.toolInputs()) {
						t.Fatalf("%s: tool calls %v, want %v", where, got.toolInputs(), want.toolInputs())
					}
					if got.id != want.id && k > 0 {
						t.Fatalf("%s: id %s, want %s", where, got.id, want.id)
					}
					if got.usage["output_tokens"] < 11+13 {
						t.Fatalf("%s: usage %v", where, got.usage)
					}
					if variant != "twice" {
						checkThinking(t, where, before, s, o, got)
					}
				}
			}
		}
	}
}

// checkThinking: after the answer began the client's reasoning is what
// it had; a break in the reasoning gives Marker and the new reasoning
// (Mark) or nothing more (Hide); a break before any block, the new one.
func checkThinking(t *testing.T, where string, before *clientMessage, s *Seam, o ReasoningRestart, got *clientMessage) {
	t.Helper()
	answerBegan := false
	for _, b := range before.blocks {
		answerBegan = answerBegan || !isThinking(b.typ)
	}
	want := s.Reasoning
	switch {
	case answerBegan:
	case s.InReasoning && o == Mark:
		want += Marker + "Restarted."
	case s.InReasoning:
	default:
		want += "Restarted."
	}
	if got.thinking() != want {
		t.Fatalf("%s: thinking %q, want %q", where, got.thinking(), want)
	}
}

// BenchmarkMessagesPass is the cost of the recorder on a stream that
// never breaks: one text delta per op, in a long text block.
func BenchmarkMessagesPass(b *testing.B) {
	r := NewRecorder(Messages, 64<<20)
	pass(r, mStart("msg_1", 5), mBlock(0, "text"))
	ev := mText(0, " token")
	b.ReportAllocs()
	for b.Loop() {
		if len(r.Pass(ev)) != 1 {
			b.Fatal("held")
		}
	}
}

// TestMessagesPassAllocs: a forwarded delta costs no allocation but the
// journal's amortised growth.
func TestMessagesPassAllocs(t *testing.T) {
	r := NewRecorder(Messages, 64<<20)
	pass(r, mStart("msg_1", 5), mBlock(0, "text"))
	ev, ping := mText(0, " token"), mPing()
	if a := testing.AllocsPerRun(2000, func() { r.Pass(ev); r.Pass(ping) }); a > 0.05 {
		t.Fatalf("%v allocations per delta", a)
	}
}

// A break right after a held group was released (a server tool call and
// its result) discards nothing: those events were handed.
func TestMessagesSeamAfterRelease(t *testing.T) {
	r := NewRecorder(Messages, 1<<20)
	pass(r, mStart("msg_1", 5), mBlock(0, "server_tool_use"), mStop(0), mBlock(1, "web_search_tool_result"))
	if out := r.Pass(mStop(1)); len(out) != 4 {
		t.Fatalf("the group's end released %d events, want 4", len(out))
	}
	if s := r.Seam(); s.Discarded != 0 || s.InToolCall {
		t.Fatalf("seam after a release: %+v, want nothing discarded", s)
	}
}

// InToolCall tells a break in a held tool call from one after a held
// finish (message_delta).
func TestMessagesSeamInToolCall(t *testing.T) {
	r := NewRecorder(Messages, 1<<20)
	pass(r, mStart("msg_1", 5), mBlock(0, "text"), mText(0, "Hi"), mStop(0), mMessageDelta("end_turn", 3))
	if s := r.Seam(); s.Discarded != 1 || s.InToolCall {
		t.Fatalf("after a held finish: %+v", s)
	}
	r = NewRecorder(Messages, 1<<20)
	pass(r, mStart("msg_1", 5), mBlock(0, "tool_use"), mJSON(0, `{"a":`))
	if s := r.Seam(); s.Discarded != 2 || !s.InToolCall {
		t.Fatalf("inside a tool call: %+v", s)
	}
}
